/* draft_ctrl template and ref_draft_ctrl (the draft-length controller,
 * ALGORITHMS.txt 12). First the reference against an independent statement
 * of its rule: a double-precision model that keeps the counters as real
 * numbers and picks k by maximising E[tokens | k] / cost[k] over a brute
 * enumeration (checked where the best and the runner-up are not within
 * Q16 rounding of each other), plus closed forms: a flat cost table drafts
 * every proposed token once acceptance is above 0; a table where drafting
 * never pays drafts only the probes, one every PROBE matched iterations
 * (PROBE_MAX = PROBE), or after 5, 10, 20, 20.. while they fail and 5
 * again after an accepted one (PROBE_MAX 4 PROBE); one-token matches take
 * their own prior (PRIOR1: drafting at first sight or not by the prior
 * against cost[1]); an iteration that drafts none learns a quarter of an
 * outcome from whether its first proposal was the token emitted (drafting
 * resumes at the closed-form iteration without a probe);
 * no match or nothing proposed drafts nothing and leaves the counters.
 * With an EAGLE-3 head behind the lookup (one more class): the model's
 * head levels too, over requests where the head is mostly right (it drafts
 * most iterations), almost never right (probes only) or weak beside strong
 * matches (the lookup drafts); closed forms: a flat table drafts every
 * level, a dear head drafts one level every PROBE iterations, a failed
 * match class loses to the head's prior and the head's outcome lands in
 * its own rows. Then
 * the kernel in the emulator against the reference on awkward inputs
 * (random counters from 0 to large, a previous k or class out of range,
 * NOUT going backwards or jumping, a probe gap from 0 to past PROBE_MAX,
 * K0 from 0 to N_DRAFT, match lengths
 * past MAX_N, ties in the cost table, N_DRAFT 1, 6, 15, 33, classes 1, 3,
 * 16, heads of 1, 2 and 15 levels with their words out of range), exact equality of every output word with guard zones. Then NVRTC
 * (sm_80, sm_90): zero spills. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine_state.h"
#include "kernels/ref/ref.h"

#include "op_harness.h"
#include "testutil.h"

#define Q16 65536

static int rnd_int(int n) { return (int)(tu_rand(&rng_state) % (uint64_t)n); }
static double rnd01(void) { return (double)(tu_rand(&rng_state) >> 11) / 9007199254740992.0; }

typedef struct cfg {
	int nd, nc, min_n, probe, probe_max, block;
	double prior, prior_w, prior1, prior1_w, decay;
	int head; /* an EAGLE-3 head's levels behind the lookup, 0: none */
} cfg;

static int words(const cfg *c)
{
	return RT_CTRL_STATS + 2 * c->nc * c->nd + (c->head ? 2 * c->head + 1 : 0);
}

static void call_ref(const cfg *c, int32_t *ctrl, int32_t *tok, const int32_t *info, int32_t *st,
                     const int32_t *cost)
{
	ref_draft_ctrl(c->nd, c->nc, c->min_n, c->head, c->probe, c->probe_max,
	               (int32_t)lround(c->prior * c->prior_w * Q16), (int32_t)lround(c->prior_w * Q16),
	               (int32_t)lround(c->prior1 * c->prior1_w * Q16),
	               (int32_t)lround(c->prior1_w * Q16), (int32_t)lround(c->decay * Q16), ctrl, tok,
	               info, st, cost);
}

/* The independent model: counters as doubles, the same rule in real
 * arithmetic. Returns the chosen k, or -1 when two candidates are within
 * tol of each other (a Q16 near-tie the test skips). */
typedef struct model {
	double T[16][40], A[16][40];
	int prev_nout, prev_k, prev_class, idle, gap;
	int prev_tok; /* an iteration that drafted none with a match: its first proposal, else -1 */
	/* the head's class: counters by level, the levels it drafted last
	 * iteration, its idle count and probe interval */
	double TH[40], AH[40];
	int hk, hidle, hgap;
} model;

/* root: the token the previous iteration emitted last; tok0: this one's first proposal */
static int model_step(model *m, const cfg *c, int nout, int root, int K0, int tok0, int mlen,
                      const double *cost)
{
	if (m->prev_k > 0 && m->prev_class >= 0) {
		int a = nout - m->prev_nout - 1;
		a = a < 0 ? 0 : a > m->prev_k ? m->prev_k : a;
		for (int j = 0; j < c->nd; j++) {
			m->T[m->prev_class][j] *= c->decay;
			m->A[m->prev_class][j] *= c->decay;
		}
		for (int j = 1; j <= m->prev_k && j <= a + 1; j++) {
			m->T[m->prev_class][j - 1] += 1;
			m->A[m->prev_class][j - 1] += j <= a;
		}
		const int g = m->gap ? m->gap : c->probe;
		m->gap = a > 0 ? c->probe : 2 * g < c->probe_max ? 2 * g : c->probe_max;
	}
	/* drafted none on a match and emitted one token: a quarter of an outcome
	 * at depth 1, no decay, accepted if that token was the first proposal
	 * (the reference's saturation at 2^14 is never reached here) */
	if (m->prev_k == 0 && m->prev_class >= 0 && m->prev_tok >= 0 && nout == m->prev_nout + 1) {
		m->T[m->prev_class][0] += 0.25;
		m->A[m->prev_class][0] += (root == m->prev_tok) * 0.25;
	}
	if (m->hk > 0) { /* the head drafted hk levels: its class learns */
		int a = nout - m->prev_nout - 1;
		a = a < 0 ? 0 : a > m->hk ? m->hk : a;
		for (int j = 0; j < c->head; j++) {
			m->TH[j] *= c->decay;
			m->AH[j] *= c->decay;
		}
		for (int j = 1; j <= m->hk && j <= a + 1; j++) {
			m->TH[j - 1] += 1;
			m->AH[j - 1] += j <= a;
		}
		const int g = m->hgap ? m->hgap : c->probe;
		m->hgap = a > 0 ? c->probe : 2 * g < c->probe_max ? 2 * g : c->probe_max;
	}
	int cl = -1, k = 0, hk = 0;
	if (mlen > 0 && K0 > 0) {
		cl = mlen - c->min_n;
		cl = cl < 0 ? 0 : cl >= c->nc ? c->nc - 1 : cl;
	}
	bool tie = false;
	double best = 1.0 / cost[0];
	if (cl >= 0) {
		double prod = 1, E = 1;
		const bool one = c->min_n == 1 && cl == 0;
		const double pr = one ? c->prior1 : c->prior, pw = one ? c->prior1_w : c->prior_w;
		for (int i = 1; i <= K0; i++) {
			double al = (m->A[cl][i - 1] + pr * pw) / (m->T[cl][i - 1] + pw);
			prod *= al > 1 ? 1 : al;
			E += prod;
			const double r = E / cost[i];
			if (fabs(r - best) < 1e-3 * best)
				tie = true;
			if (r > best) {
				best = r;
				k = i;
			}
		}
	}
	/* the head's levels against the best of the above, its iteration
	 * costing cost[nd + i] */
	double prod = 1, E = 1;
	for (int i = 1; i <= c->head; i++) {
		double al = (m->AH[i - 1] + c->prior * c->prior_w) / (m->TH[i - 1] + c->prior_w);
		prod *= al > 1 ? 1 : al;
		E += prod;
		const double r = E / cost[c->nd + i];
		if (fabs(r - best) < 1e-3 * best)
			tie = true;
		if (r > best) {
			best = r;
			hk = i;
			k = 0;
		}
	}
	if (cl >= 0) {
		if (k == 0 && hk == 0 && c->probe > 0 && m->idle + 1 >= (m->gap ? m->gap : c->probe))
			k = 1;
		m->idle = k > 0 ? 0 : m->idle + 1;
	}
	if (c->head) {
		if (k == 0 && hk == 0 && c->probe > 0 && m->hidle + 1 >= (m->hgap ? m->hgap : c->probe))
			hk = 1;
		m->hidle = hk > 0 ? 0 : k > 0 ? m->hidle : m->hidle + 1;
	}
	m->prev_nout = nout;
	m->prev_k = k;
	m->prev_class = cl;
	m->hk = hk;
	m->prev_tok = k == 0 && hk == 0 && cl >= 0 ? tok0 : -1;
	return tie ? -1 : k;
}

/* One simulated request: each iteration proposes K0 tokens with match
 * length mlen; of the k kept, the first `a` are accepted where a follows a
 * geometric law of the class's true acceptance (the head's levels: of
 * truth_h). The reference's k, its head levels and its counters must
 * follow the model's (counters within the Q16 rounding of the decays:
 * 2^-16 per update, summed). */
/* n_k: iterations with a proposal and a match, those that drafted none,
 * those that drafted all K0; then iterations the head drafted, and
 * iterations where nobody drafted */
static void simulate(const cfg *c, const double *cost, const double *truth, double truth_h,
                     int iters, int *n_k)
{
	int32_t *ctrl = calloc((size_t)words(c), 4), tok[64], info[2], st[RT_ST_WORDS] = {0};
	int32_t qc[80];
	model m;
	memset(&m, 0, sizeof(m));
	for (int i = 0; i <= c->nd + c->head; i++)
		qc[i] = (int32_t)lround(cost[i] * Q16);
	int nout = 0, skipped = 0, root = 0;
	for (int it = 0; it < iters; it++) {
		const int K0 = rnd_int(4) ? 1 + rnd_int(c->nd) : 0;
		const int mlen = rnd_int(8) ? c->min_n + rnd_int(c->nc + 2) : 0;
		const int base = 100 + 10 * rnd_int(3); /* the proposal: base, base + 1, .. */
		for (int i = 0; i < c->nd; i++)
			tok[i] = i < K0 ? base + i : -1;
		info[0] = mlen;
		info[1] = mlen ? 5 : -1;
		st[RT_ST_NOUT] = nout;
		st[RT_ST_ROOT] = root;
		const int mk = model_step(&m, c, nout, root, K0, base, mlen, cost);
		const int mhk = m.hk;
		call_ref(c, ctrl, tok, info, st, qc);
		const int k = st[RT_ST_DRAFTED], hk = c->head ? ctrl[RT_CTRL_HEAD_K] : 0;
		if (mk < 0) {
			skipped++;
			m.prev_k = k; /* follow the reference through a near-tie */
			m.hk = hk;
			m.idle = ctrl[RT_CTRL_IDLE];
			m.hidle = c->head ? ctrl[RT_CTRL_HEAD_IDLE] : 0;
			m.prev_tok = k == 0 && hk == 0 && m.prev_class >= 0 ? base : -1;
		} else if (mk != k || mhk != hk) {
			fail_msg("iteration %d: K0 %d match %d: reference drafts %d (head %d), the model %d "
			         "(head %d)", it, K0, mlen, k, hk, mk, mhk);
		}
		assert_true(k >= 0 && k <= K0);
		assert_true(hk >= 0 && hk <= c->head && (hk == 0 || k == 0));
		for (int i = 0; i < c->nd; i++)
			assert_int_equal(tok[i], i < k ? base + i : -1);
		if (K0 > 0 && mlen > 0) { /* eligible: none, all, or some of K0 */
			n_k[0]++;
			n_k[1] += k == 0;
			n_k[2] += k == K0;
		}
		n_k[3] += hk > 0;
		n_k[4] += k == 0 && hk == 0;
		for (int cl = 0; cl < c->nc; cl++)
			for (int j = 0; j < c->nd; j++) {
				const int32_t *T = ctrl + RT_CTRL_STATS + 2 * cl * c->nd, *A = T + c->nd;
				if (fabs(T[j] / (double)Q16 - m.T[cl][j]) > 1e-3 + 1e-4 * it ||
				    fabs(A[j] / (double)Q16 - m.A[cl][j]) > 1e-3 + 1e-4 * it)
					fail_msg("iteration %d class %d depth %d: counters %g %g, model %g %g", it,
					         cl, j + 1, T[j] / (double)Q16, A[j] / (double)Q16, m.T[cl][j],
					         m.A[cl][j]);
			}
		for (int j = 0; j < c->head; j++) {
			const int32_t *T = ctrl + RT_CTRL_STATS + 2 * c->nc * c->nd, *A = T + c->head;
			if (fabs(T[j] / (double)Q16 - m.TH[j]) > 1e-3 + 1e-4 * it ||
			    fabs(A[j] / (double)Q16 - m.AH[j]) > 1e-3 + 1e-4 * it)
				fail_msg("iteration %d, the head's level %d: counters %g %g, model %g %g", it,
				         j + 1, T[j] / (double)Q16, A[j] / (double)Q16, m.TH[j], m.AH[j]);
		}
		/* the target's verdict: accepted a of the k (or hk) drafted */
		int a = 0;
		const int cl = mlen > 0 && K0 > 0 ? (mlen - c->min_n >= c->nc ? c->nc - 1 : mlen - c->min_n) : 0;
		while (a < k && rnd01() < truth[cl])
			a++;
		while (a < hk && rnd01() < truth_h)
			a++;
		/* the last emitted token: after a draft of none, the first proposal
		 * with the class's acceptance, else another token */
		root = k == 0 && rnd01() < truth[cl] ? base : 7 + rnd_int(3);
		nout += a + 1;
	}
	assert_true(skipped < iters / 10);
	free(ctrl);
}

static void test_ref_vs_model(void **state)
{
	(void)state;
	const cfg c = {.nd = 6, .nc = 3, .min_n = 1, .probe = 8, .probe_max = 256, .block = 32,
	               .prior = 0.5, .prior_w = 1, .prior1 = 0.1, .prior1_w = 4, .decay = 0.9};
	/* the host's measured shape: 2-3 rows ~1.16x, 4-7 rows ~1.5x */
	const double host[] = {1, 1.16, 1.16, 1.47, 1.47, 1.47, 1.47};
	const double truth_lo[] = {0.05, 0.1, 0.15}, truth_hi[] = {0.6, 0.85, 0.95};
	int nk[5] = {0};
	simulate(&c, host, truth_lo, 0, 400, nk);
	print_message("low acceptance: %d eligible, %d drafted none, %d all\n", nk[0], nk[1], nk[2]);
	/* low acceptance on a costly device: mostly plain target steps */
	assert_true(nk[1] > nk[0] * 3 / 5);
	memset(nk, 0, sizeof(nk));
	/* (one-token matches at prior 0.5 too: at 0.1 of weight 4 their class
	 * waits for probes to learn its 0.6) */
	cfg ch = c;
	ch.prior1 = 0.5;
	ch.prior1_w = 1;
	simulate(&ch, host, truth_hi, 0, 400, nk);
	print_message("high acceptance: %d eligible, %d drafted none, %d all\n", nk[0], nk[1], nk[2]);
	/* high acceptance: mostly every proposed token */
	assert_true(nk[2] > nk[0] * 3 / 5 && nk[1] < nk[0] / 10);
	const cfg c2 = {.nd = 15, .nc = 16, .min_n = 2, .probe = 3, .probe_max = 20, .block = 64,
	                .prior = 0.3, .prior_w = 4, .prior1 = 0.9, .prior1_w = 2, .decay = 0.75};
	double lin[16], truth[16];
	for (int i = 0; i <= 15; i++)
		lin[i] = 1 + 0.1 * i;
	for (int i = 0; i < 16; i++)
		truth[i] = 0.05 * i;
	memset(nk, 0, sizeof(nk));
	simulate(&c2, lin, truth, 0, 600, nk);
}

/* Closed forms of the rule. */
static void test_ref_closed_forms(void **state)
{
	(void)state;
	const cfg c = {.nd = 6, .nc = 3, .min_n = 1, .probe = 5, .probe_max = 5, .block = 32,
	               .prior = 0.5, .prior_w = 1, .prior1 = 0.5, .prior1_w = 1, .decay = 0.9};
	int32_t ctrl[RT_CTRL_STATS + 36], tok[6], info[2] = {2, 9}, st[RT_ST_WORDS] = {0};
	int32_t flat[7], dear[7];
	for (int i = 0; i <= 6; i++) {
		flat[i] = Q16;
		dear[i] = i ? 1000 * Q16 : Q16;
	}
	/* flat: any alpha > 0 makes every longer draft pay, all K0 drafted */
	memset(ctrl, 0, sizeof(ctrl));
	for (int K0 = 0; K0 <= 6; K0++) {
		for (int i = 0; i < 6; i++)
			tok[i] = i < K0 ? 7 : -1;
		st[RT_ST_NOUT] += 1;
		call_ref(&c, ctrl, tok, info, st, flat);
		assert_int_equal(st[RT_ST_DRAFTED], K0);
	}
	/* drafting never pays: k = 1 exactly every probe-th matched iteration;
	 * unmatched ones (info 0) neither draft nor count */
	memset(ctrl, 0, sizeof(ctrl));
	int drafted = 0;
	for (int it = 0; it < 40; it++) {
		const bool matched = it % 3 != 2;
		int32_t inf[2] = {matched ? 3 : 0, matched ? 4 : -1};
		for (int i = 0; i < 6; i++)
			tok[i] = matched ? 7 : -1;
		int32_t before[RT_CTRL_STATS + 36];
		memcpy(before, ctrl, sizeof(ctrl));
		st[RT_ST_NOUT] += 1; /* nothing accepted */
		call_ref(&c, ctrl, tok, inf, st, dear);
		if (!matched) {
			assert_int_equal(st[RT_ST_DRAFTED], 0);
			assert_int_equal(ctrl[RT_CTRL_IDLE], before[RT_CTRL_IDLE]);
			assert_int_equal(ctrl[RT_CTRL_PREV_CLASS], -1);
		}
		drafted += st[RT_ST_DRAFTED];
		assert_true(st[RT_ST_DRAFTED] <= 1);
	}
	/* 27 matched iterations, one probe each 5 */
	assert_int_equal(drafted, 27 / 5);

	/* the interval doubling up to probe_max 20 while probes fail: probes
	 * at the 5th, 15th, 35th, 55th matched iteration; an accepted one
	 * resets it (the next after 5 more) */
	cfg cg = c;
	cg.probe_max = 20;
	memset(ctrl, 0, sizeof(ctrl));
	int at[8], n_at = 0;
	for (int it = 1; it <= 60; it++) {
		for (int i = 0; i < 6; i++)
			tok[i] = 7;
		st[RT_ST_NOUT] += 1;
		call_ref(&cg, ctrl, tok, info, st, dear);
		if (st[RT_ST_DRAFTED] && n_at < 8)
			at[n_at++] = it;
	}
	assert_int_equal(n_at, 4);
	assert_int_equal(at[0], 5);
	assert_int_equal(at[1], 15);
	assert_int_equal(at[2], 35);
	assert_int_equal(at[3], 55);
	int prevk = 0;
	n_at = 0;
	for (int it = 61; it <= 90; it++) {
		for (int i = 0; i < 6; i++)
			tok[i] = 7;
		st[RT_ST_NOUT] += 1 + prevk; /* from here every probe accepted */
		call_ref(&cg, ctrl, tok, info, st, dear);
		prevk = st[RT_ST_DRAFTED];
		if (prevk && n_at < 8)
			at[n_at++] = it;
	}
	assert_int_equal(n_at, 4); /* 75 (55 + 20), then every 5 */
	assert_int_equal(at[0], 75);
	assert_int_equal(at[1], 80);
	assert_int_equal(at[3], 90);

	/* one-token matches (match 1, class 0 at min_n 1): prior 0.1 drafts at
	 * first sight where cost[1] < 1.1, not where it is 1.2; a two-token
	 * match keeps prior 0.5 (drafts at 1.2) */
	cfg c1 = c;
	c1.probe = 0;
	c1.prior1 = 0.1;
	c1.prior1_w = 4;
	int32_t cheap[7], costly[7];
	for (int i = 0; i <= 6; i++) {
		cheap[i] = (int32_t)lround((1 + 0.09 * i) * Q16);
		costly[i] = (int32_t)lround((1 + 0.2 * i) * Q16);
	}
	for (int m1 = 1; m1 <= 2; m1++)
		for (int ci = 0; ci < 2; ci++) {
			int32_t inf[2] = {m1, 4};
			memset(ctrl, 0, sizeof(ctrl));
			for (int i = 0; i < 6; i++)
				tok[i] = i < 1 ? 7 : -1;
			st[RT_ST_NOUT] += 1;
			call_ref(&c1, ctrl, tok, inf, st, ci ? costly : cheap);
			assert_int_equal(st[RT_ST_DRAFTED], m1 == 2 || !ci ? 1 : 0);
		}

	/* the k = 0 evidence, no probes, one-token matches at prior 0.1 of
	 * weight 4, cost[1] 1.19: drafting pays once alpha_1 = (A + 0.4) / (T +
	 * 4) > 0.19. Every first proposal right (the emitted root = it): after
	 * n such iterations T = A = n / 4: alpha 0.153 at n = 1, 0.2 at n = 2,
	 * so the 3rd iteration drafts. Every one
	 * wrong, or two tokens emitted (not one), or the word cleared by a new
	 * request (PREV_TOK 0): never. */
	int32_t c119[7];
	for (int i = 0; i <= 6; i++)
		c119[i] = (int32_t)lround((1 + 0.19 * i) * Q16);
	for (int sc = 0; sc < 4; sc++) {
		int32_t inf[2] = {1, 4};
		int first = 0;
		memset(ctrl, 0, sizeof(ctrl));
		for (int it = 1; it <= 20 && !first; it++) {
			for (int i = 0; i < 6; i++)
				tok[i] = i < 1 ? 7 : -1;
			st[RT_ST_ROOT] = sc == 1 ? 8 : 7;
			st[RT_ST_NOUT] += sc == 2 ? 2 : 1;
			if (sc == 3)
				ctrl[RT_CTRL_PREV_TOK] = 0;
			call_ref(&c1, ctrl, tok, inf, st, c119);
			if (st[RT_ST_DRAFTED])
				first = it;
		}
		assert_int_equal(first, sc == 0 ? 3 : 0);
	}
}

/* The head as one more class (an n-gram-first engine's EAGLE-3 head): the
 * reference against the model, and closed forms. */
static void test_ref_head(void **state)
{
	(void)state;
	const cfg c = {.nd = 6, .nc = 3, .min_n = 2, .probe = 8, .probe_max = 256, .block = 32,
	               .prior = 0.9, .prior_w = 1, .prior1 = 0.1, .prior1_w = 4, .decay = 0.9,
	               .head = 2};
	/* the host's gguf_a8 shape: the lookup's 1 .. 6 tokens, then the head's
	 * 1 and 2 levels (the verify of 2 and 3 rows and 0.07 a level) */
	const double host[] = {1, 1.16, 1.30, 1.47, 1.47, 1.6, 1.7, 1.23, 1.44};
	const double lo[] = {0.05, 0.1, 0.15}, hi[] = {0.6, 0.85, 0.95};
	int nk[5] = {0};
	/* a head that is right 60% of the time beside weak matches: it drafts
	 * in most iterations, and few are plain steps */
	simulate(&c, host, lo, 0.6, 500, nk);
	print_message("head 0.6, lookup low: head %d, plain %d of 500\n", nk[3], nk[4]);
	assert_true(nk[3] > 250 && nk[4] < 100);
	/* a head that is almost never right: probes only (at most one in 8
	 * iterations without a lookup draft) */
	memset(nk, 0, sizeof(nk));
	simulate(&c, host, lo, 0.02, 500, nk);
	print_message("head 0.02, lookup low: head %d, plain %d of 500\n", nk[3], nk[4]);
	assert_true(nk[3] <= 500 / 8 + 2 && nk[4] > 300);
	/* strong matches beside a weak head: the lookup drafts */
	memset(nk, 0, sizeof(nk));
	simulate(&c, host, hi, 0.05, 500, nk);
	print_message("head 0.05, lookup high: head %d, eligible %d, all %d\n", nk[3], nk[0], nk[2]);
	assert_true(nk[2] > nk[0] / 2 && nk[3] < 60);
	/* more classes, levels and a linear table, at random truths */
	const cfg c3 = {.nd = 15, .nc = 16, .min_n = 1, .probe = 3, .probe_max = 20, .block = 64,
	                .prior = 0.3, .prior_w = 4, .prior1 = 0.9, .prior1_w = 2, .decay = 0.75,
	                .head = 5};
	double lin[21], truth[16];
	for (int i = 0; i <= 15; i++)
		lin[i] = 1 + 0.1 * i;
	for (int i = 1; i <= 5; i++)
		lin[15 + i] = 1.05 + 0.12 * i;
	for (int i = 0; i < 16; i++)
		truth[i] = 0.05 * i;
	for (int r = 0; r < 3; r++) {
		memset(nk, 0, sizeof(nk));
		simulate(&c3, lin, truth, 0.2 + 0.3 * r, 600, nk);
	}

	/* closed forms, no probes: a flat table and no match: the head drafts
	 * every level (each adds alpha > 0 at cost 1); the head's costs dear:
	 * a plain step */
	cfg c0 = c;
	c0.probe = 0;
	int32_t ctrl[RT_CTRL_STATS + 36 + 5], tok[6], st[RT_ST_WORDS] = {0}, none[2] = {0, -1};
	int32_t flat[9], dear[9];
	for (int i = 0; i <= 8; i++) {
		flat[i] = Q16;
		dear[i] = i > 6 ? 1000 * Q16 : Q16 + i * Q16 / 10;
	}
	for (int sc = 0; sc < 2; sc++) {
		memset(ctrl, 0, sizeof(ctrl));
		for (int it = 0; it < 5; it++) {
			for (int i = 0; i < 6; i++)
				tok[i] = -1;
			st[RT_ST_NOUT] += 1;
			st[RT_ST_DRAFTED] = 77;
			call_ref(&c0, ctrl, tok, none, st, sc ? dear : flat);
			assert_int_equal(ctrl[RT_CTRL_HEAD_K], sc ? 0 : 2);
			assert_int_equal(st[RT_ST_DRAFTED], 0);
			assert_int_equal(ctrl[RT_CTRL_PREV_TOK], 0);
		}
	}
	/* dear head, probes every 5 iterations without a lookup draft
	 * (PROBE_MAX = PROBE), none accepted: 40 such iterations, 8 probes */
	cfg cp = c;
	cp.probe = 5;
	cp.probe_max = 5;
	memset(ctrl, 0, sizeof(ctrl));
	int probes = 0;
	for (int it = 0; it < 40; it++) {
		for (int i = 0; i < 6; i++)
			tok[i] = -1;
		st[RT_ST_NOUT] += 1;
		call_ref(&cp, ctrl, tok, none, st, dear);
		probes += ctrl[RT_CTRL_HEAD_K];
		assert_true(ctrl[RT_CTRL_HEAD_K] <= 1);
	}
	assert_int_equal(probes, 8);
	/* a two-token match whose class has failed at depth 1 (T 20, A 0:
	 * alpha (0 + 0.9) / 21) beside the head's prior 0.9: the head drafts,
	 * the lookup's tokens are dropped and PREV_TOK stays 0; the head's
	 * outcome (one of two accepted: NOUT + 2) lands in its own rows, not
	 * the class's */
	memset(ctrl, 0, sizeof(ctrl));
	int32_t two[2] = {2, 5};
	ctrl[RT_CTRL_STATS] = 20 * Q16; /* class 0 (match 2), depth 1 tried 20 times */
	for (int i = 0; i < 6; i++)
		tok[i] = i < 3 ? 40 + i : -1;
	st[RT_ST_NOUT] = 100;
	int32_t host_q[9];
	for (int i = 0; i <= 8; i++)
		host_q[i] = (int32_t)lround(host[i] * Q16);
	call_ref(&c0, ctrl, tok, two, st, host_q);
	assert_int_equal(st[RT_ST_DRAFTED], 0);
	/* E 1.9 / 1.23 at one level, 2.71 / 1.44 at two */
	assert_int_equal(ctrl[RT_CTRL_HEAD_K], 2);
	assert_int_equal(ctrl[RT_CTRL_PREV_TOK], 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(tok[i], -1);
	const int32_t *TH = ctrl + RT_CTRL_STATS + 2 * c0.nc * c0.nd, *AH = TH + 2;
	st[RT_ST_NOUT] = 102;
	for (int i = 0; i < 6; i++)
		tok[i] = -1;
	call_ref(&c0, ctrl, tok, none, st, host_q);
	assert_int_equal(TH[0], Q16);
	assert_int_equal(AH[0], Q16);
	assert_int_equal(TH[1], Q16);
	assert_int_equal(AH[1], 0);
	assert_int_equal(ctrl[RT_CTRL_STATS], 20 * Q16);
	assert_int_equal(ctrl[RT_CTRL_STATS + c0.nd], 0);
}

/* ---- the kernel against the reference ---- */

static const emu_kernel *kern(const cfg *c)
{
	gen_param p[] = {OH_NAME, OH_I("N_DRAFT", c->nd), OH_I("N_CLASS", c->nc),
	                 OH_I("MIN_N", c->min_n), OH_I("HEAD", c->head), OH_I("PROBE", c->probe),
	                 OH_I("PROBE_MAX", c->probe_max),
	                 OH_I("PRIOR_A", lround(c->prior * c->prior_w * Q16)),
	                 OH_I("PRIOR_W", lround(c->prior_w * Q16)),
	                 OH_I("PRIOR1_A", lround(c->prior1 * c->prior1_w * Q16)),
	                 OH_I("PRIOR1_W", lround(c->prior1_w * Q16)),
	                 OH_I("DECAY", lround(c->decay * Q16)), OH_I("BLOCK", c->block)};
	return oh_load(SW_OP_draft_ctrl, p, 13);
}

static void check_case(const cfg *c, int rep)
{
	const emu_kernel *k = kern(c);
	const int W = words(c);
	int32_t *ctrl = emu_alloc((size_t)W * 4, "ctrl"), *tok = emu_alloc((size_t)c->nd * 4, "tok");
	int32_t *info = emu_alloc(8, "info"), *st = emu_alloc(RT_ST_WORDS * 4, "state");
	int32_t *cost = emu_alloc((size_t)(c->nd + 1 + c->head) * 4, "cost");
	int32_t *rc = malloc((size_t)W * 4), rt[64], rs[RT_ST_WORDS];

	for (int i = 0; i < W; i++) /* counters: zero, small, large */
		ctrl[i] = rnd_int(3) == 0 ? 0 : rnd_int(2) ? rnd_int(4 * Q16) : rnd_int(40 * Q16);
	ctrl[RT_CTRL_PREV_NOUT] = rnd_int(1000);
	ctrl[RT_CTRL_PREV_K] = rnd_int(5) == 0 ? 0 : rnd_int(c->nd + 3) - 1; /* may exceed */
	ctrl[RT_CTRL_PREV_CLASS] = rnd_int(c->nc + 3) - 1;                  /* -1 .. NC + 1 */
	ctrl[RT_CTRL_IDLE] = rnd_int(c->probe_max + 3);
	ctrl[RT_CTRL_GAP] = rnd_int(4) == 0 ? 0 : rnd_int(c->probe_max + 3);
	/* the k = 0 evidence: none, the root (a hit), another token (a miss) */
	ctrl[RT_CTRL_PREV_TOK] = rnd_int(3) == 0 ? 0 : rnd_int(2) ? 31337 + RT_ST_ROOT + 1
	                                                          : 1 + rnd_int(50000);
	if (c->head) { /* the head's levels last iteration (may exceed, or be negative), its
	                * idle count and probe interval */
		ctrl[RT_CTRL_HEAD_K] = rnd_int(3) == 0 ? 0 : rnd_int(c->head + 3) - 1;
		ctrl[RT_CTRL_HEAD_IDLE] = rnd_int(c->probe_max + 3);
		ctrl[W - 1] = rnd_int(4) == 0 ? 0 : rnd_int(c->probe_max + 3);
		if (ctrl[RT_CTRL_HEAD_K] > 0)
			ctrl[RT_CTRL_PREV_K] = 0;
	}
	const int K0 = rep % 7 == 0 ? 0 : rep % 7 == 1 ? c->nd : rnd_int(c->nd + 1);
	for (int i = 0; i < c->nd; i++)
		tok[i] = i < K0 ? rnd_int(50000) : -1;
	info[0] = rep % 5 == 0 ? 0 : 1 + rnd_int(c->min_n + c->nc + 3);
	info[1] = info[0] ? rnd_int(900) : -1;
	for (int i = 0; i < RT_ST_WORDS; i++)
		st[i] = 31337 + i;
	st[RT_ST_NOUT] = ctrl[RT_CTRL_PREV_NOUT] + (rep % 4 == 0 ? 1 : rnd_int(c->nd + 4) - 2);
	/* (backwards, jumps; one token in a quarter of the cases) */
	cost[0] = Q16;
	for (int i = 1; i <= c->nd + c->head; i++) /* non-decreasing with ties, or any */
		cost[i] = rep % 3 ? cost[i - 1] + (rnd_int(2) ? 0 : rnd_int(Q16 / 2))
		                  : Q16 + rnd_int(3 * Q16);
	if (c->head && rep % 3 == 1) /* the head's levels near the lookup's */
		for (int i = 1; i <= c->head; i++)
			cost[c->nd + i] = cost[i] + rnd_int(Q16 / 8);
	memcpy(rc, ctrl, (size_t)W * 4);
	memcpy(rt, tok, (size_t)c->nd * 4);
	memcpy(rs, st, sizeof(rs));
	call_ref(c, rc, rt, info, rs, cost);

	void *args[] = {&ctrl, &tok, &info, &st, &cost};
	char what[128];
	snprintf(what, sizeof(what), "%s rep %d K0 %d match %d (ref drafts %d)", k->name, rep, K0,
	         info[0], rs[RT_ST_DRAFTED]);
	kern_out o[3] = {{.name = "ctrl", .type = KERN_I32, .got = ctrl, .want = rc, .n = (size_t)W},
	                 {.name = "tokens", .type = KERN_I32, .got = tok, .want = rt, .n = (size_t)c->nd},
	                 {.name = "state", .type = KERN_I32, .got = st, .want = rs, .n = RT_ST_WORDS}};
	kern_launch_expect(what, k, d3(1, 1, 1), d3((unsigned)c->block, 1, 1), args, o, 3);
	emu_free(ctrl);
	emu_free(tok);
	emu_free(info);
	emu_free(st);
	emu_free(cost);
	free(rc);
}

static const cfg kcfgs[] = {
	{.nd = 6, .nc = 3, .min_n = 1, .probe = 8, .probe_max = 256, .block = 32, .prior = 0.5,
	 .prior_w = 1, .prior1 = 0.1, .prior1_w = 4, .decay = 0.9},
	{.nd = 1, .nc = 1, .min_n = 3, .probe = 0, .probe_max = 0, .block = 32, .prior = 0.0,
	 .prior_w = 0.01, .prior1 = 0.7, .prior1_w = 2, .decay = 1.0},
	{.nd = 15, .nc = 16, .min_n = 1, .probe = 1, .probe_max = 7, .block = 64, .prior = 1.0,
	 .prior_w = 1000, .prior1 = 0.0, .prior1_w = 0.01, .decay = 0.5},
	{.nd = 33, .nc = 2, .min_n = 2, .probe = 3, .probe_max = 3, .block = 32, .prior = 0.25,
	 .prior_w = 3, .prior1 = 0.05, .prior1_w = 9, .decay = 0.97},
	/* with a head behind the lookup */
	{.nd = 6, .nc = 3, .min_n = 2, .probe = 8, .probe_max = 256, .block = 32, .prior = 0.9,
	 .prior_w = 1, .prior1 = 0.1, .prior1_w = 4, .decay = 0.9, .head = 2},
	{.nd = 1, .nc = 1, .min_n = 1, .probe = 0, .probe_max = 0, .block = 32, .prior = 0.5,
	 .prior_w = 0.01, .prior1 = 0.7, .prior1_w = 2, .decay = 1.0, .head = 1},
	{.nd = 15, .nc = 4, .min_n = 1, .probe = 1, .probe_max = 7, .block = 64, .prior = 0.2,
	 .prior_w = 5, .prior1 = 0.0, .prior1_w = 0.01, .decay = 0.5, .head = 15},
};

static void test_kernel(void **state)
{
	(void)state;
	for (size_t ci = 0; ci < sizeof(kcfgs) / sizeof(kcfgs[0]); ci++)
		for (int rep = 0; rep < 60; rep++)
			check_case(&kcfgs[ci], rep);
}

static void test_nvrtc(void **state)
{
	(void)state;
	for (size_t ci = 0; ci < sizeof(kcfgs) / sizeof(kcfgs[0]); ci++) {
		const cfg *c = &kcfgs[ci];
		gen_param p[] = {OH_NAME, OH_I("N_DRAFT", c->nd), OH_I("N_CLASS", c->nc),
		                 OH_I("MIN_N", c->min_n), OH_I("HEAD", c->head),
		                 OH_I("PROBE", c->probe), OH_I("PROBE_MAX", c->probe_max),
		                 OH_I("PRIOR_A", lround(c->prior * c->prior_w * Q16)),
		                 OH_I("PRIOR_W", lround(c->prior_w * Q16)),
		                 OH_I("PRIOR1_A", lround(c->prior1 * c->prior1_w * Q16)),
		                 OH_I("PRIOR1_W", lround(c->prior1_w * Q16)),
		                 OH_I("DECAY", lround(c->decay * Q16)), OH_I("BLOCK", c->block)};
		oh_nvrtc_p(SW_OP_draft_ctrl, p, 13);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ref_vs_model),
		cmocka_unit_test(test_ref_closed_forms),
		cmocka_unit_test(test_ref_head),
		cmocka_unit_test(test_kernel),
		cmocka_unit_test(test_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

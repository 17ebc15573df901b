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
 * no match or nothing proposed drafts nothing and leaves the counters. Then
 * the kernel in the emulator against the reference on awkward inputs
 * (random counters from 0 to large, a previous k or class out of range,
 * NOUT going backwards or jumping, a probe gap from 0 to past PROBE_MAX,
 * K0 from 0 to N_DRAFT, match lengths
 * past MAX_N, ties in the cost table, N_DRAFT 1, 6, 15, 33, classes 1, 3,
 * 16), exact equality of every output word with guard zones. Then NVRTC
 * (sm_80, sm_90): zero spills. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/emu.h"
#include "kernels/engine_state.h"
#include "kernels/ref/ref.h"
#include "gen/render.h"

#include "kern_util.h"
#include "testutil.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}
#define Q16 65536

static int rnd_int(int n) { return (int)(tu_rand(&rng_state) % (uint64_t)n); }
static double rnd01(void) { return (double)(tu_rand(&rng_state) >> 11) / 9007199254740992.0; }

typedef struct cfg {
	int nd, nc, min_n, probe, probe_max, block;
	double prior, prior_w, prior1, prior1_w, decay;
} cfg;

static int words(const cfg *c) { return RT_CTRL_STATS + 2 * c->nc * c->nd; }

static void call_ref(const cfg *c, int32_t *ctrl, int32_t *tok, const int32_t *info, int32_t *st,
                     const int32_t *cost)
{
	ref_draft_ctrl(c->nd, c->nc, c->min_n, c->probe, c->probe_max,
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
	int cl = -1, k = 0;
	if (mlen > 0 && K0 > 0) {
		cl = mlen - c->min_n;
		cl = cl < 0 ? 0 : cl >= c->nc ? c->nc - 1 : cl;
	}
	bool tie = false;
	if (cl >= 0) {
		double prod = 1, E = 1, best = 1.0 / cost[0];
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
		if (k == 0 && c->probe > 0 && m->idle + 1 >= (m->gap ? m->gap : c->probe))
			k = 1;
		m->idle = k > 0 ? 0 : m->idle + 1;
	}
	m->prev_nout = nout;
	m->prev_k = k;
	m->prev_class = cl;
	m->prev_tok = k == 0 && cl >= 0 ? tok0 : -1;
	return tie ? -1 : k;
}

/* One simulated request: each iteration proposes K0 tokens with match
 * length mlen; of the k kept, the first `a` are accepted where a follows a
 * geometric law of the class's true acceptance. The reference's k and its
 * counters must follow the model's (counters within the Q16 rounding of
 * the decays: 2^-16 per update, summed). */
/* n_k: iterations with a proposal and a match, those that drafted none,
 * those that drafted all K0 */
static void simulate(const cfg *c, const double *cost, const double *truth, int iters, int *n_k)
{
	int32_t *ctrl = calloc((size_t)words(c), 4), tok[64], info[2], st[RT_ST_WORDS] = {0};
	int32_t qc[65];
	model m;
	memset(&m, 0, sizeof(m));
	for (int i = 0; i <= c->nd; i++)
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
		call_ref(c, ctrl, tok, info, st, qc);
		const int k = st[RT_ST_DRAFTED];
		if (mk < 0) {
			skipped++;
			m.prev_k = k; /* follow the reference through a near-tie */
			m.idle = ctrl[RT_CTRL_IDLE];
			m.prev_tok = k == 0 && m.prev_class >= 0 ? base : -1;
		} else if (mk != k) {
			fail_msg("iteration %d: K0 %d match %d: reference drafts %d, the model %d", it, K0,
			         mlen, k, mk);
		}
		assert_true(k >= 0 && k <= K0);
		for (int i = 0; i < c->nd; i++)
			assert_int_equal(tok[i], i < k ? base + i : -1);
		if (K0 > 0 && mlen > 0) { /* eligible: none, all, or some of K0 */
			n_k[0]++;
			n_k[1] += k == 0;
			n_k[2] += k == K0;
		}
		for (int cl = 0; cl < c->nc; cl++)
			for (int j = 0; j < c->nd; j++) {
				const int32_t *T = ctrl + RT_CTRL_STATS + 2 * cl * c->nd, *A = T + c->nd;
				if (fabs(T[j] / (double)Q16 - m.T[cl][j]) > 1e-3 + 1e-4 * it ||
				    fabs(A[j] / (double)Q16 - m.A[cl][j]) > 1e-3 + 1e-4 * it)
					fail_msg("iteration %d class %d depth %d: counters %g %g, model %g %g", it,
					         cl, j + 1, T[j] / (double)Q16, A[j] / (double)Q16, m.T[cl][j],
					         m.A[cl][j]);
			}
		/* the target's verdict: accepted a of the k drafted */
		int a = 0;
		const int cl = mlen > 0 && K0 > 0 ? (mlen - c->min_n >= c->nc ? c->nc - 1 : mlen - c->min_n) : 0;
		while (a < k && rnd01() < truth[cl])
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
	int nk[3] = {0};
	simulate(&c, host, truth_lo, 400, nk);
	print_message("low acceptance: %d eligible, %d drafted none, %d all\n", nk[0], nk[1], nk[2]);
	/* low acceptance on a costly device: mostly plain target steps */
	assert_true(nk[1] > nk[0] * 3 / 5);
	memset(nk, 0, sizeof(nk));
	/* (one-token matches at prior 0.5 too: at 0.1 of weight 4 their class
	 * waits for probes to learn its 0.6) */
	cfg ch = c;
	ch.prior1 = 0.5;
	ch.prior1_w = 1;
	simulate(&ch, host, truth_hi, 400, nk);
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
	simulate(&c2, lin, truth, 600, nk);
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

/* ---- the kernel against the reference ---- */

static const emu_kernel *kern(const cfg *c)
{
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("N_DRAFT", c->nd),
	                 I("N_CLASS", c->nc), I("MIN_N", c->min_n), I("PROBE", c->probe),
	                 I("PROBE_MAX", c->probe_max), I("PRIOR_A", lround(c->prior * c->prior_w * Q16)),
	                 I("PRIOR_W", lround(c->prior_w * Q16)),
	                 I("PRIOR1_A", lround(c->prior1 * c->prior1_w * Q16)),
	                 I("PRIOR1_W", lround(c->prior1_w * Q16)), I("DECAY", lround(c->decay * Q16)),
	                 I("BLOCK", c->block)};
	return load_kernel("draft_ctrl.cu.tmpl", "draft_ctrl", p, 12);
}

static void check_case(const cfg *c, int rep)
{
	const emu_kernel *k = kern(c);
	const int W = words(c);
	int32_t *ctrl = emu_alloc((size_t)W * 4, "ctrl"), *tok = emu_alloc((size_t)c->nd * 4, "tok");
	int32_t *info = emu_alloc(8, "info"), *st = emu_alloc(RT_ST_WORDS * 4, "state");
	int32_t *cost = emu_alloc((size_t)(c->nd + 1) * 4, "cost");
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
	for (int i = 1; i <= c->nd; i++) /* non-decreasing with ties, or any */
		cost[i] = rep % 3 ? cost[i - 1] + (rnd_int(2) ? 0 : rnd_int(Q16 / 2))
		                  : Q16 + rnd_int(3 * Q16);
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
		gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("N_DRAFT", c->nd),
		                 I("N_CLASS", c->nc), I("MIN_N", c->min_n), I("PROBE", c->probe),
		                 I("PROBE_MAX", c->probe_max),
		                 I("PRIOR_A", lround(c->prior * c->prior_w * Q16)),
		                 I("PRIOR_W", lround(c->prior_w * Q16)),
		                 I("PRIOR1_A", lround(c->prior1 * c->prior1_w * Q16)),
		                 I("PRIOR1_W", lround(c->prior1_w * Q16)), I("DECAY", lround(c->decay * Q16)),
		                 I("BLOCK", c->block)};
		nvrtc_check_ex("draft_ctrl.cu.tmpl", "draft_ctrl", p, 12, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ref_vs_model),
		cmocka_unit_test(test_ref_closed_forms),
		cmocka_unit_test(test_kernel),
		cmocka_unit_test(test_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

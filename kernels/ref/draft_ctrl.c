/* The draft-length controller as one op: the specification of
 * templates/draft_ctrl.cu.tmpl (ALGORITHMS.txt 12). Runs after a chain
 * drafter proposed its tokens (ngram_lookup) and before the verify forward;
 * keeps the first k of them and marks the rest absent (-1), k chosen from
 * what is known before this iteration's verification: the acceptance so
 * far, by depth and by the drafter's own signal (the n-gram match length),
 * and the cost table. Never from the target's p of this iteration's drafts,
 * so every verification method stays exact. In an engine that falls back on
 * an EAGLE-3 head (head > 0 levels, gen/drafter_eagle3.c) the head is one more
 * class: the controller picks among drafting none, the lookup's first k and
 * the head's first k levels (ctrl word RT_CTRL_HEAD_K, which draft_pick
 * reads), by the same E / cost rule.
 *
 * Integer arithmetic only (Q16 fixed point), so the device, the emulator
 * and this reference decide bit for bit alike. Not the lookup itself
 * (ngram_lookup.c) and not the cost measurement (runtime/engine/ctrl.c). */
#include <stdbool.h>

#include "kernels/engine_state.h"
#include "ref.h"

/* A class's outcome: k tokens drafted, NOUT grew by a_raw + 1 (a, clamped to
 * [0, k], accepted); depth j was tried when j <= k and j - 1 were accepted.
 * The class's n counters decay, then T_j += 1 for j <= min(k, a + 1), A_j
 * += 1 for j <= a; its probe interval *gap goes back to probe after an
 * accepted token, doubles (up to probe_max) after a draft that got none. */
static void learn(int32_t *T, int32_t *A, int n, int k, int a_raw, int32_t decay, int32_t *gap,
                  int probe, int probe_max)
{
	const int a = a_raw < 0 ? 0 : a_raw > k ? k : a_raw;
	for (int j = 0; j < n; j++) { /* forget old outcomes of this class */
		T[j] = (int32_t)(((int64_t)T[j] * decay) >> 16);
		A[j] = (int32_t)(((int64_t)A[j] * decay) >> 16);
	}
	for (int j = 1; j <= k && j <= a + 1; j++) {
		T[j - 1] += 65536;
		A[j - 1] += j <= a ? 65536 : 0;
	}
	const int g = *gap > 0 ? *gap : probe;
	*gap = a > 0 ? probe : 2 * g < probe_max ? 2 * g : probe_max;
}

/* The class's best i in 1 .. kmax against the best so far (*best_e /
 * *best_c, E and cost in Q16): E_i = 1 + sum_{l<=i} prod_{j<=l} alpha_j,
 * alpha_j = (A_j + pa) / (T_j + pw) capped at 1, taken when E_i / cost[i]
 * beats the best (compared by cross-multiplication: E < 2^20, cost < 2^24
 * in Q16; ties keep the earlier); 0 when none does. */
static int pick(const int32_t *T, const int32_t *A, int64_t pa, int64_t pw, int kmax,
                const int32_t *cost, int64_t *best_e, int64_t *best_c)
{
	int64_t prod = 65536, E = 65536;
	int k = 0;
	for (int i = 1; i <= kmax; i++) {
		const int64_t den = (int64_t)T[i - 1] + pw;
		const int64_t alpha = den > 0 ? (((int64_t)A[i - 1] + pa) << 16) / den : 0;
		prod = (prod * (alpha > 65536 ? 65536 : alpha)) >> 16;
		E += prod;
		if (E * *best_c > *best_e * (int64_t)cost[i]) {
			*best_e = E;
			*best_c = cost[i];
			k = i;
		}
	}
	return k;
}

/* One step of the controller; the layout of ctrl is rt_ctrl_word
 * (kernels/engine_state.h). */
void ref_draft_ctrl(int n_draft, int n_class, int min_n, int head, int probe, int probe_max,
                    int32_t prior_a, int32_t prior_w, int32_t prior1_a, int32_t prior1_w,
                    int32_t decay, int32_t *ctrl, int32_t *tokens, const int32_t *info,
                    int32_t *state, const int32_t *cost)
{
	const int D = n_draft;
	/* 1. the previous iteration's outcome, into the class that drafted
	 * (learn) */
	const int nout = state[RT_ST_NOUT];
	const int pk = ctrl[RT_CTRL_PREV_K], pc = ctrl[RT_CTRL_PREV_CLASS];
	/* the head's class: T and A rows of `head` words after the lookup's
	 * classes, then its probe interval */
	int32_t *TH = ctrl + RT_CTRL_STATS + 2 * n_class * D, *AH = TH + head, *hgap = AH + head;
	const int hk = head > 0 ? ctrl[RT_CTRL_HEAD_K] : 0;
	if (pk > 0 && pc >= 0 && pc < n_class) {
		int32_t *T = ctrl + RT_CTRL_STATS + 2 * pc * D;
		learn(T, T + D, D, pk, nout - ctrl[RT_CTRL_PREV_NOUT] - 1, decay, ctrl + RT_CTRL_GAP, probe,
		      probe_max);
	}
	/* 1b. an iteration that drafted none with a match still tells whether
	 * its first proposed token was right: the one token it emitted (the root
	 * now) against that proposal (PREV_TOK - 1): depth 1 of its class
	 * learns (tried, accepted if equal) at a quarter of a drafted outcome's
	 * weight and without decay (decayed, a stream of these washed out the
	 * outcomes of real drafts, and depth 2's prior then drafted two tokens
	 * where one-token acceptance was low: test_kern_draft_ctrl's low-
	 * acceptance simulation), saturating at 2^14 outcomes, so a class whose one-token guesses come right starts
	 * drafting again without waiting for a probe (the quarter: tuned by
	 * tests/tools/ctrl_replay.py on the tuning prompts, where a whole one
	 * let streaks of guesses start drafts that then failed on the dearer
	 * cost tables). Nothing here touches which tokens are accepted. */
	if (pk == 0 && pc >= 0 && pc < n_class && ctrl[RT_CTRL_PREV_TOK] > 0 &&
	    nout == ctrl[RT_CTRL_PREV_NOUT] + 1) {
		int32_t *T = ctrl + RT_CTRL_STATS + 2 * pc * D, *A = T + D;
		if (T[0] < (1 << 30)) {
			T[0] += 16384;
			A[0] += state[RT_ST_ROOT] == ctrl[RT_CTRL_PREV_TOK] - 1 ? 16384 : 0;
		}
	}

	/* 1c. the head drafted hk levels last iteration: its class learns as
	 * a lookup class does, and its own probe interval */
	if (hk > 0)
		learn(TH, AH, head, hk, nout - ctrl[RT_CTRL_PREV_NOUT] - 1, decay, hgap, probe, probe_max);

	/* 2. this iteration: the class of the drafter's signal, the drafted
	 * length K0 (leading present tokens) */
	int K0 = 0;
	while (K0 < D && tokens[K0] >= 0)
		K0++;
	const int m = info[0];
	int c = -1;
	if (m > 0 && K0 > 0) {
		c = m - min_n;
		c = c < 0 ? 0 : c >= n_class ? n_class - 1 : c;
	}
	int k = 0;
	int64_t best_e = 65536, best_c = cost[0];
	if (c >= 0) { /* argmax over k of E[tokens | k] / cost[k] */
		const int32_t *T = ctrl + RT_CTRL_STATS + 2 * c * D;
		/* one-token matches (min_n 1, class 0) are weak evidence: their
		 * own, pessimistic prior */
		const bool one = min_n == 1 && c == 0;
		k = pick(T, T + D, one ? prior1_a : prior_a, one ? prior1_w : prior_w, K0, cost, &best_e,
		         &best_c);
	}
	/* 3. with a head: its k = 1 .. head levels against the best so far
	 * (drafting none, or the lookup's k), E and cost alike (the head's
	 * iteration cost[n_draft + k]: its k levels and a verify of 1 + k
	 * rows), the class prior PRIOR; ties keep the earlier choice */
	int hkn = head > 0 ? pick(TH, AH, prior_a, prior_w, head, cost + D, &best_e, &best_c) : 0;
	if (hkn > 0)
		k = 0;
	/* not paying: draft one token after `gap` such iterations (probe,
	 * doubling while probes fail), so a request whose text starts copying
	 * later finds out; the lookup's probe first, then the head's (its
	 * iterations with no lookup draft counted) */
	if (c >= 0) {
		const int gap = ctrl[RT_CTRL_GAP] > 0 ? ctrl[RT_CTRL_GAP] : probe;
		if (k == 0 && hkn == 0 && probe > 0 && ctrl[RT_CTRL_IDLE] + 1 >= gap)
			k = 1;
		ctrl[RT_CTRL_IDLE] = k > 0 ? 0 : ctrl[RT_CTRL_IDLE] + 1;
	}
	if (head > 0) {
		const int gap = *hgap > 0 ? *hgap : probe;
		if (k == 0 && hkn == 0 && probe > 0 && ctrl[RT_CTRL_HEAD_IDLE] + 1 >= gap)
			hkn = 1;
		ctrl[RT_CTRL_HEAD_IDLE] = hkn > 0 ? 0 : k > 0 ? ctrl[RT_CTRL_HEAD_IDLE]
		                          : ctrl[RT_CTRL_HEAD_IDLE] + 1;
		ctrl[RT_CTRL_HEAD_K] = hkn;
	}
	ctrl[RT_CTRL_PREV_TOK] = k == 0 && hkn == 0 && c >= 0 ? tokens[0] + 1 : 0;
	for (int i = k; i < D; i++)
		tokens[i] = -1;
	ctrl[RT_CTRL_PREV_NOUT] = nout;
	ctrl[RT_CTRL_PREV_K] = k;
	ctrl[RT_CTRL_PREV_CLASS] = c;
	state[RT_ST_DRAFTED] = k;
}

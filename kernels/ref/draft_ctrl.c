/* The draft-length controller as one op: the specification of
 * templates/draft_ctrl.cu.tmpl (ALGORITHMS.txt 12). Runs after a chain
 * drafter proposed its tokens (ngram_lookup) and before the verify forward;
 * keeps the first k of them and marks the rest absent (-1), k chosen from
 * what is known before this iteration's verification: the acceptance so
 * far, by depth and by the drafter's own signal (the n-gram match length),
 * and the cost table. Never from the target's p of this iteration's drafts,
 * so every verification method stays exact. In an engine that falls back on
 * an EAGLE-3 head (head > 0 levels, gen/plan_eagle3.c) the head is one more
 * class: the controller picks among drafting none, the lookup's first k and
 * the head's first k levels (ctrl word RT_CTRL_HEAD_K, which draft_pick
 * reads), by the same E / cost rule.
 *
 * Integer arithmetic only (Q16 fixed point), so the device, the emulator
 * and this reference decide bit for bit alike. Not the lookup itself
 * (ngram_lookup.c) and not the cost measurement (runtime/engine/ctrl.c). */
#include "kernels/engine_state.h"
#include "ref.h"

/* One step of the controller; the layout of ctrl is rt_ctrl_word
 * (kernels/engine_state.h). */
void ref_draft_ctrl(int n_draft, int n_class, int min_n, int head, int probe, int probe_max,
                    int32_t prior_a, int32_t prior_w, int32_t prior1_a, int32_t prior1_w,
                    int32_t decay, int32_t *ctrl, int32_t *tokens, const int32_t *info,
                    int32_t *state, const int32_t *cost)
{
	const int D = n_draft;
	/* 1. the previous iteration's outcome: a = tokens accepted of pk drafted
	 * (NOUT grew by a + 1); depth j was tried when j <= pk and j - 1 were
	 * accepted */
	const int nout = state[RT_ST_NOUT];
	const int pk = ctrl[RT_CTRL_PREV_K], pc = ctrl[RT_CTRL_PREV_CLASS];
	/* the head's class: T and A rows of `head` words after the lookup's
	 * classes, then its probe interval */
	int32_t *TH = ctrl + RT_CTRL_STATS + 2 * n_class * D, *AH = TH + head, *hgap = AH + head;
	const int hk = head > 0 ? ctrl[RT_CTRL_HEAD_K] : 0;
	if (pk > 0 && pc >= 0 && pc < n_class) {
		int a = nout - ctrl[RT_CTRL_PREV_NOUT] - 1;
		a = a < 0 ? 0 : a > pk ? pk : a;
		int32_t *T = ctrl + RT_CTRL_STATS + 2 * pc * D, *A = T + D;
		for (int j = 0; j < D; j++) { /* forget old outcomes of this class */
			T[j] = (int32_t)(((int64_t)T[j] * decay) >> 16);
			A[j] = (int32_t)(((int64_t)A[j] * decay) >> 16);
		}
		for (int j = 1; j <= pk && j <= a + 1; j++) {
			T[j - 1] += 65536;
			A[j - 1] += j <= a ? 65536 : 0;
		}
		/* the probe interval: back to probe after an accepted token,
		 * doubled (up to probe_max) after a draft that got none */
		const int gap = ctrl[RT_CTRL_GAP] > 0 ? ctrl[RT_CTRL_GAP] : probe;
		ctrl[RT_CTRL_GAP] = a > 0 ? probe : 2 * gap < probe_max ? 2 * gap : probe_max;
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
	if (hk > 0) {
		int a = nout - ctrl[RT_CTRL_PREV_NOUT] - 1;
		a = a < 0 ? 0 : a > hk ? hk : a;
		for (int j = 0; j < head; j++) {
			TH[j] = (int32_t)(((int64_t)TH[j] * decay) >> 16);
			AH[j] = (int32_t)(((int64_t)AH[j] * decay) >> 16);
		}
		for (int j = 1; j <= hk && j <= a + 1; j++) {
			TH[j - 1] += 65536;
			AH[j - 1] += j <= a ? 65536 : 0;
		}
		const int gap = *hgap > 0 ? *hgap : probe;
		*hgap = a > 0 ? probe : 2 * gap < probe_max ? 2 * gap : probe_max;
	}

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
	if (c >= 0) {
		/* argmax over k of E[tokens | k] / cost[k], E = 1 + sum_i prod_{j<=i}
		 * alpha_j, alpha_j = (A_j + prior_a) / (T_j + prior_w): compared by
		 * cross-multiplication (E < 2^20, cost < 2^24 in Q16) */
		const int32_t *T = ctrl + RT_CTRL_STATS + 2 * c * D, *A = T + D;
		/* one-token matches (min_n 1, class 0) are weak evidence: their
		 * own, pessimistic prior */
		const int64_t pa = min_n == 1 && c == 0 ? prior1_a : prior_a;
		const int64_t pw = min_n == 1 && c == 0 ? prior1_w : prior_w;
		int64_t prod = 65536, E = 65536;
		for (int i = 1; i <= K0; i++) {
			const int64_t den = (int64_t)T[i - 1] + pw;
			const int64_t alpha = den > 0 ? (((int64_t)A[i - 1] + pa) << 16) / den : 0;
			prod = (prod * (alpha > 65536 ? 65536 : alpha)) >> 16;
			E += prod;
			if (E * best_c > best_e * (int64_t)cost[i]) {
				best_e = E;
				best_c = cost[i];
				k = i;
			}
		}
	}
	/* 3. with a head: its k = 1 .. head levels against the best so far
	 * (drafting none, or the lookup's k), E and cost alike (the head's
	 * iteration cost[n_draft + k]: its k levels and a verify of 1 + k
	 * rows), the class prior PRIOR; ties keep the earlier choice */
	int hkn = 0;
	if (head > 0) {
		int64_t prod = 65536, E = 65536;
		for (int i = 1; i <= head; i++) {
			const int64_t den = (int64_t)TH[i - 1] + prior_w;
			const int64_t alpha = den > 0 ? (((int64_t)AH[i - 1] + prior_a) << 16) / den : 0;
			prod = (prod * (alpha > 65536 ? 65536 : alpha)) >> 16;
			E += prod;
			if (E * best_c > best_e * (int64_t)cost[D + i]) {
				best_e = E;
				best_c = cost[D + i];
				hkn = i;
			}
		}
		if (hkn > 0)
			k = 0;
	}
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

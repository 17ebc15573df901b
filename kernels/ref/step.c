/* The engine's bookkeeping step, plain C: the specification of
 * templates/step.cu.tmpl. Everything the host loop (runtime/decode/chain.c,
 * tree_decode.c) does between the big ops of one iteration, on device-resident
 * state (kernels/engine_state.h) so the captured graph needs no host input:
 *   mode 0 tree_prep: the root into node 0, node positions, draft length;
 *   mode 1 catchup_prep: the draft re-forwards the last committed token;
 *   mode 2 iter_end: emitted tokens into the ring, stop conditions, the next
 *          root, the last accepted node (RT_ST_HROW); once stopped it zeroes counts[1], so the KV commits that
 *          follow move nothing and advance nothing. */
#include "kernels/engine_state.h"
#include "ref.h"

void ref_step(int mode, int n_nodes, int ring, int max_ctx, int has_hist, int32_t *state,
              int32_t *iter, int32_t *tree_tokens, int32_t *pos, int32_t *tokens,
              const int32_t *tree_table, int32_t *counts, const int32_t *accept_path,
              const int32_t *emitted, int32_t *hist)
{
	const int L = state[RT_ST_TLEN];

	if (mode == 0) {
		const int32_t *depth = tree_table + 4 * n_nodes;
		tree_tokens[0] = state[RT_ST_ROOT];
		for (int i = 0; i < n_nodes; i++)
			pos[i] = L + depth[i];
		state[RT_ST_DLEN] = L;
		return;
	}
	if (mode == 1) {
		tokens[0] = L > 0 ? state[RT_ST_LAST] : state[RT_ST_ROOT];
		pos[0] = L > 0 ? L - 1 : 0;
		state[RT_ST_DLEN] = pos[0];
		return;
	}

	/* mode 2 */
	if (state[RT_ST_STOP] != RT_STOP_NONE) {
		counts[1] = 0;
		return;
	}
	const int n = counts[1], fin = counts[2];
	int32_t *rg = state + RT_ST_WORDS;
	for (int i = 0; i < n; i++) {
		const int32_t t = emitted[i];
		rg[state[RT_ST_NOUT] % ring] = t;
		state[RT_ST_NOUT] += 1;
		if (state[RT_ST_EOS] >= 0 && t == state[RT_ST_EOS]) {
			state[RT_ST_STOP] = RT_STOP_EOS;
			break;
		}
		if (state[RT_ST_NOUT] >= state[RT_ST_MAXNEW]) {
			state[RT_ST_STOP] = RT_STOP_MAXNEW;
			break;
		}
	}
	if (state[RT_ST_STOP] == RT_STOP_NONE && L + n + n_nodes > max_ctx)
		state[RT_ST_STOP] = RT_STOP_CTX;
	if (n > 0) { /* the verifier always emits >= 1; a 0 keeps the last token */
		state[RT_ST_LAST] = tree_tokens[accept_path[n - 1]];
		state[RT_ST_HROW] = accept_path[n - 1];
	}
	state[RT_ST_ROOT] = fin;
	state[RT_ST_ITER] += 1;
	iter[0] += 1;
	/* The n-gram history mirrors the committed sequence plus the next root:
	 * positions L..L+n-1 are the path (the old root first), L+n the root.
	 * Positions past the cache are not kept (hist has max_ctx entries). */
	if (has_hist) {
		for (int i = 0; i < n && L + i < max_ctx; i++)
			hist[L + i] = tree_tokens[accept_path[i]];
		if (L + n < max_ctx)
			hist[L + n] = fin;
	}
}

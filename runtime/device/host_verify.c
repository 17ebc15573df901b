/* Greedy tree verification on the host (host_verify.h). kernels/ref's
 * verify_greedy scans a vocabulary row with ref_argmax_row for every node
 * whose parent's path matches and once more for the final token: a scalar
 * loop whose every step loads x[best], so the loads wait on each other
 * (~150 us a 49152-entry row here, twice a target-only decode step).
 * hg_argmax_row returns ref_argmax_row's index on every path
 * (tests/test_host_argmax.c); the rest is ref_verify_q's greedy case line
 * for line (tests/test_host_verify.c holds the two to identical outputs and
 * refusals). */
#include "host_verify.h"

#include <stdbool.h>
#include <stddef.h>

#include "host_argmax.h"
#include "kernels/ref/ref.h"


int hv_verify_greedy(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *tree,
                     const int32_t *tok, const float *p, const float *q, int n, int V, int Vq,
                     int path, const char **why)
{
	if (ref_verify_check(REF_VERIFY_GREEDY, tree, n, tok, q, V, Vq, why))
		return REF_EINVAL; /* ref_verify_tree_vqd's checks */
	/* verify_greedy: the deepest node whose whole path is the argmax chain
	 * (ties: the lowest id), final = the argmax of its p */
	const int32_t *par = tree, *dep = tree + 4 * n;
	bool ok[REF_TREE_MAX_NODES];
	int32_t pth[REF_TREE_MAX_DEPTH + 1];
	int best = 0;
	ok[0] = true;
	for (int u = 1; u < n; u++) {
		ok[u] = ok[par[u]] && tok[u] == hg_argmax_row(p + (size_t)par[u] * V, V, path);
		if (ok[u] && dep[u] > dep[best])
			best = u;
	}
	pth[0] = 0;
	for (int u = best; u > 0; u = par[u])
		pth[dep[u]] = u;
	const int32_t fin = hg_argmax_row(p + (size_t)best * V, V, path);
	ref_verify_emit(out_path, out_tok, counts, pth, dep[best] + 1, tok, fin); /* ref_verify_q's */
	return 0;
}

/* SpecDec++ adaptive draft length on a chain tree, plain C: the
 * specification of templates/adapt.cu.tmpl. It is the host's stop rule,
 * rt_adaptive_stop (runtime/decode/acchead.c) with the proxy predictor, driven as
 * md_propose_adaptive (runtime/decode/drafter.c) drives it, restated over the
 * engine's buffers: one call per draft level, right after that level drew
 * its token, instead of one loop per round. */
#include <stdbool.h>

#include "ref.h"

void ref_adapt(int level, int n_nodes, int depth, int V, int min_steps, int max_steps, float h,
               int32_t *go, float *cum, int32_t *tree_tokens, const float *draft_probs)
{
	const int step = level + 1; /* tokens drafted so far: nodes 1..level+1 */
	const int max = max_steps < depth ? max_steps : depth;

	if (level == 0) {
		for (int j = 0; j < depth; j++)
			go[j] = 1;
		*cum = 1.0f;
	}
	/* The host's running product, step by step in double: step 1 multiplies
	 * by 1, step s >= 2 by p_hat(Y_{s-1}) = the probability of node s-1's
	 * token under draft_probs row s-2, the distribution it was drawn from.
	 * Recomputed from the chain at every level because *cum is only a
	 * float; the same multiplications in the same order give the host's
	 * double exactly. An absent node (-1, no candidate left) has p_hat 0. */
	double c = 1.0;
	for (int i = 1; i <= level; i++)
		c *= tree_tokens[i] < 0 ? 0.0 : (double)draft_probs[(size_t)(i - 1) * V + tree_tokens[i]];
	*cum = (float)c;
	bool stop = (1.0 - c) > (double)h; /* P(at least one rejection) > h */
	if (step >= max)
		stop = true;
	else if (step < min_steps)
		stop = false;
	if (!stop)
		return;
	/* node level+1 (Y_step) is submitted; the levels after it do not run */
	for (int j = level; j < depth; j++)
		go[j] = 0;
	for (int j = level + 2; j < n_nodes; j++)
		tree_tokens[j] = -1;
}

/* Token-tree expansion rules and exact tree verification on the host
 * (ALGORITHMS.txt 1c, 2, 3, 4, 5). The specification the GPU expansion and
 * fused-verification kernels reproduce lives in kernels/ref (tree_expand.c,
 * verify.c); rt_expand_node and rt_verify_tree are its host-decoder names,
 * over an rt_tree instead of the kernels' tree table. The lossy chain rule
 * (host only) is here; the rules' names, parsing and exact pairs are
 * runtime/core/tree_rules.h's.
 * Convention: p = target, q = draft, both already warped. */
#include "tree_verify.h"

#include <math.h>

#include "core/err.h"
#include "kernels/philox.h"
#include "kernels/ref/ref.h"
#include "chain.h"

_Static_assert(RT_TREE_MAX_NODES == REF_TREE_MAX_NODES && RT_TREE_MAX_DEPTH == REF_TREE_MAX_DEPTH,
               "kernels/ref's tree limits are the host tree's");

int rt_expand_node(int rule, const float *q, int V, int k, uint64_t seed, uint32_t iter, uint32_t node,
                   int32_t *tok, float *fscratch, int *iscratch)
{
	return ref_expand_node(rule, q, V, k, seed, iter, node, tok, NULL) ? SW_EINVAL : 0;
}

int rt_verify_tree(const rt_tree *t, int method, const int32_t *tok, const float *p, const float *q,
                   int V, uint64_t seed, uint32_t iter, rt_tree_result *res, float *scratch)
{
	int32_t tb[5 * RT_TREE_MAX_NODES], path[RT_TREE_MAX_DEPTH + 1], acc[RT_TREE_MAX_DEPTH + 1];
	int32_t fin;

	/* the methods this API names (ref_verify_tree's chain mode is the
	 * kernels'; the host decoder's chain is rt_verify_chain) */
	if (method < 0 || method >= RT_VERIFY_METHODS || t->n < 1 || t->n > RT_TREE_MAX_NODES)
		return SW_EINVAL;
	rt_tree_table(t, tb);
	const int n = ref_verify_tree(method, tb, t->n, tok, p, q, V, seed, iter, scratch, path, acc,
	                              &fin, NULL);
	if (n < 0)
		return SW_EINVAL;
	for (int i = 0; i < n; i++)
		res->path[i] = path[i];
	res->n_path = n;
	res->final = fin;
	for (int d = 0; d <= RT_TREE_MAX_DEPTH; d++)
		res->accepted_sibling[d] = d < n - 1 ? acc[d] : -1;
	return 0;
}

int rt_verify_chain_lossy(const float *logits, const rt_sampling *s, const float *q, const int32_t *xd,
                          int g, int V, float eps, uint64_t seed, uint32_t iter, int32_t *final, float *p,
                          float *tmp, int *idx)
{
	if (rt_sampling_greedy(s) || !(eps > 0.0f))
		return rt_verify_chain(logits, s, q, xd, g, V, seed, iter, final, p, tmp, idx);
	for (int j = 0; j < g; j++) {
		rt_probs(p, logits + (size_t)j * V, V, s, idx);
		float px = p[xd[j]];
		float qx = q ? q[(size_t)j * V + xd[j]] : 1.0f;
		if (qx > 0.0f &&
		    sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_ACCEPT) * qx <= (double)px + eps)
			continue;
		/* Theorem 4 for the eps rule: P* = [p - q]_+ normalised (the SD
		 * residual) is the TV-optimal resampling distribution. */
		double ur = sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_RESIDUAL);
		*final = rt_sample_residual(p, q ? q + (size_t)j * V : NULL, xd[j], V, ur, tmp);
		return j;
	}
	rt_probs(p, logits + (size_t)g * V, V, s, idx);
	*final = rt_sample_cdf(p, V, sw_uniform_double(seed, iter, (uint32_t)g, SW_RNG_BONUS));
	return g;
}

/* Yin et al. write p = draft, q = target; here p = target, q = draft. Their
 * P_A(x) = min(p, q + eps) + P(reject) P*(x) becomes, in our letters,
 *   O(x) = min(q(x), p(x) + eps) + P_rej * norm(relu(p - q))(x),
 *   P_rej = 1 - sum_x min(q(x), p(x) + eps),
 * and the returned value is TV(O, p) = 1/2 sum_x |O(x) - p(x)|, computed from
 * O directly (Theorem 4 says it equals sum_x min(eps, relu(q - p)); the test
 * checks the two agree). */
double rt_lossy_tv_bound(const float *p, const float *q, int V, float eps)
{
	double acc = 0, z = 0, tv = 0;
	for (int x = 0; x < V; x++) {
		acc += fmin((double)q[x], (double)p[x] + eps);
		z += fmax(0.0, (double)p[x] - q[x]);
	}
	double rej = fmax(0.0, 1.0 - acc);
	for (int x = 0; x < V; x++) {
		double o = fmin((double)q[x], (double)p[x] + eps);
		o += z > 0 ? rej * fmax(0.0, (double)p[x] - q[x]) / z : rej * p[x];
		tv += fabs(o - p[x]);
	}
	return 0.5 * tv;
}

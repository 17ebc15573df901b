/* Draft-tree expansion, plain C: the specification of
 * templates/tree_expand.cu.tmpl (one level of a tree, each node's children
 * drawn from its draft distribution by one of four rules) and of the host
 * decoder's expansion (rt_expand_node wraps ref_expand_node). Plain loops
 * over speed; the keying is the kernel's, bit for bit. The _map forms (the
 * template's MAPPED 1) take q over a mapped draft vocabulary, entry v
 * standing for id ids[v]: they draw what the plain forms draw from q
 * scattered onto the ids (ALGORITHMS.txt 11), lanes and ties by id, except
 * SAMPLE, whose inverse CDF runs in entry order (the same draw when ids
 * ascend). The kernel splits each node's row over many blocks and merges
 * their candidates: the same keys and order, the same children. */
#include <math.h>

#include "kernels/philox.h"
#include "ref.h"

#define FAIL(msg) (why ? (void)(*why = (msg)) : (void)0, REF_EINVAL)

/* The uniform for (node, lane) of one expansion purpose: words 0 (high) and
 * 1 (low) of Philox(ctr = {iter, node, purpose, lane}). For lane 0 this is
 * exactly sw_uniform_double(seed, iter, node, purpose). */
static double expand_uniform(uint64_t seed, uint32_t iter, uint32_t node, uint32_t purpose,
                             uint32_t lane)
{
	uint32_t w[4];
	sw_rand_u32x4(seed, iter, node, purpose, lane, w);
	return sw_u64_to_uniform_double(w[0], w[1]);
}

/* Exponential-race key of token v: log(u_v)/q(v) (< 0; larger wins). In
 * double: the GPU's log is within 1 ulp of glibc's, so the two can order two
 * keys differently only when they are within an ulp (doubt admitted; the
 * probability is ~1e-16 per pair). */
static double race_key(uint64_t seed, uint32_t iter, uint32_t node, uint32_t purpose, int v,
                       float qv)
{
	return log(expand_uniform(seed, iter, node, purpose, (uint32_t)v)) / (double)qv;
}

/* (k1, i1) before (k2, i2): the larger key, ties to the lower id. */
static int better(double k1, int32_t i1, double k2, int32_t i2)
{
	return k1 > k2 || (k1 == k2 && i1 < i2);
}

/* Inserts (key, id) into the list (keys, tok) of length *n <= k, kept in
 * that order. Ids arriving in increasing order (no map) never tie-break
 * here: the earlier entry already has the lower id. */
static void topk_insert(double *keys, int32_t *tok, int *n, int k, double key, int32_t id)
{
	int i = *n < k ? (*n)++ : k;
	if (i == k) {
		if (!better(key, id, keys[k - 1], tok[k - 1]))
			return;
		i = k - 1;
	}
	while (i > 0 && better(key, id, keys[i - 1], tok[i - 1])) {
		keys[i] = keys[i - 1];
		tok[i] = tok[i - 1];
		i--;
	}
	keys[i] = key;
	tok[i] = id;
}

/* The id of entry v: ids[v] through a map, else v. */
static int32_t id_of(const int32_t *ids, int v)
{
	return ids ? ids[v] : (int32_t)v;
}

int ref_expand_node(int rule, const float *q, int V, int k, uint64_t seed, uint32_t iter,
                    uint32_t node, int32_t *tok, const char **why)
{
	return ref_expand_node_map(rule, q, NULL, V, k, seed, iter, node, tok, why);
}

int ref_expand_node_map(int rule, const float *q, const int32_t *ids, int V, int k, uint64_t seed,
                        uint32_t iter, uint32_t node, int32_t *tok, const char **why)
{
	double keys[REF_TREE_MAX_NODES];
	int n = 0;

	if (k < 0 || k >= REF_TREE_MAX_NODES || V < 1)
		return FAIL("child count or vocabulary size out of range");
	if (rule == REF_EXPAND_SPECHUB && k > 2)
		return FAIL("a SpecHub node has at most 2 children");
	if (rule < REF_EXPAND_TOPK || rule > REF_EXPAND_SPECHUB)
		return FAIL("unknown expansion rule");
	for (int v = 0; ids && v < V; v++)
		if (ids[v] < 0)
			return FAIL("a mapped id is negative");
	if (k == 0)
		return 0;
	/* A child for which no candidate is left (q has fewer tokens with q > 0
	 * than the node has children, or none) is absent: token -1, after the
	 * present ones (draw order). Drawing without replacement from an
	 * exhausted support just yields fewer children, which verification
	 * takes exactly (ref_verify_tree's absent children). */
	for (int i = 0; i < k; i++)
		tok[i] = -1;
	switch (rule) {
	case REF_EXPAND_TOPK:
		for (int v = 0; v < V; v++)
			if (q[v] > 0.0f)
				topk_insert(keys, tok, &n, k, (double)q[v], id_of(ids, v));
		return 0;
	case REF_EXPAND_SAMPLE: /* -1 only where q has no mass at all */
		for (int i = 0; i < k; i++) {
			const int y = ref_sample_cdf(q, V, expand_uniform(seed, iter, node, SW_RNG_EXPAND,
			                                                  (uint32_t)i));
			tok[i] = y < 0 ? -1 : id_of(ids, y);
		}
		return 0;
	case REF_EXPAND_SAMPLE_WOR:
		/* Gumbel top-k as an exponential race: the k largest log(u_v)/q(v)
		 * in descending order have the law of k sequential draws without
		 * replacement, in draw order (ALGORITHMS.txt 3). */
		for (int v = 0; v < V; v++)
			if (q[v] > 0.0f)
				topk_insert(keys, tok, &n, k,
				            race_key(seed, iter, node, SW_RNG_EXPAND, id_of(ids, v), q[v]),
				            id_of(ids, v));
		return 0;
	default: { /* REF_EXPAND_SPECHUB */
		/* first ~ q by the race; if it is the hub a, the second is the
		 * race's runner-up among x != a (the same uniforms: memorylessness
		 * makes it ~ q(x)/(1-q(a))); otherwise the second is a. A q whose
		 * only positive token is a gives (a, absent): plain RS on a. With
		 * ids the hub is the largest q with ties to the lower id, the
		 * keys' lanes are the ids and their ties go to the lower id. */
		int a = 0, first = -1, second = -1;
		double kf = -INFINITY, ks = -INFINITY;
		for (int v = 1; v < V; v++)
			if (q[v] > q[a] || (q[v] == q[a] && id_of(ids, v) < id_of(ids, a)))
				a = v;
		for (int v = 0; v < V; v++) {
			if (!(q[v] > 0.0f))
				continue;
			const int32_t id = id_of(ids, v);
			double key = race_key(seed, iter, node, SW_RNG_SPECHUB2, id, q[v]);
			if (first < 0 || better(key, id, kf, id_of(ids, first))) {
				first = v;
				kf = key;
			}
			if (v != a && (second < 0 || better(key, id, ks, id_of(ids, second)))) {
				second = v;
				ks = key;
			}
		}
		if (k > 0 && first >= 0) {
			tok[0] = id_of(ids, first);
			if (k == 2)
				tok[1] = first == a ? (second < 0 ? -1 : id_of(ids, second)) : id_of(ids, a);
		}
		return 0;
	}
	}
}

int ref_tree_expand(int32_t *tok, const float *q, const int32_t *tree, uint64_t seed, uint32_t iter,
                    int n_nodes, int V, int rule, int level_begin, int n_level, const char **why)
{
	return ref_tree_expand_q(tok, q, tree, seed, iter, n_nodes, V, rule, level_begin, n_level, 0,
	                         why);
}

int ref_tree_expand_q(int32_t *tok, const float *q, const int32_t *tree, uint64_t seed,
                      uint32_t iter, int n_nodes, int V, int rule, int level_begin, int n_level,
                      int q_by_depth, const char **why)
{
	return ref_tree_expand_map(tok, q, NULL, tree, seed, iter, n_nodes, V, rule, level_begin,
	                           n_level, q_by_depth, why);
}

int ref_tree_expand_map(int32_t *tok, const float *q, const int32_t *ids, const int32_t *tree,
                        uint64_t seed, uint32_t iter, int n_nodes, int V, int rule,
                        int level_begin, int n_level, int q_by_depth, const char **why)
{
	int32_t ch[REF_TREE_MAX_NODES];
	if (ref_tree_table_check(tree, n_nodes, why))
		return REF_EINVAL;
	if (level_begin < 0 || n_level < 0 || level_begin + n_level > n_nodes)
		return FAIL("level range outside the tree");
	const int32_t *nch = tree + n_nodes, *cst = tree + 2 * n_nodes, *cl = tree + 3 * n_nodes;
	for (int u = level_begin; u < level_begin + n_level; u++) {
		const int k = nch[u];
		if (!k)
			continue;
		if (u > 0 && tok[u] < 0) { /* an absent node has absent children */
			for (int i = 0; i < k; i++)
				tok[cl[cst[u] + i]] = -1;
			continue;
		}
		const int qi = q_by_depth ? tree[4 * n_nodes + u] : u; /* the level's q, or the node's */
		int rc = ref_expand_node_map(rule, q + (size_t)qi * V, ids, V, k, seed, iter, (uint32_t)u,
		                             ch, why);
		if (rc)
			return rc;
		for (int i = 0; i < k; i++)
			tok[cl[cst[u] + i]] = ch[i];
	}
	return 0;
}

/* Exact tree verification, plain C: the specification of
 * templates/verify.cu.tmpl (ALGORITHMS.txt 1c, 2, 3, 4; every method, the
 * chain mode included) and of the host decoder's verification
 * (rt_verify_tree wraps ref_verify_tree). It favours plain loops over speed;
 * formulas, precision, Philox keys and the order of floating-point
 * operations are the kernel's (the emulated kernel is tested to make the
 * same decisions exactly). Convention: p = target, q = draft, both already
 * processed. The tree is the kernel's table (ref.h: ref_tree_table_check). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/philox.h"
#include "ref.h"

#define FAIL(msg) (why ? (void)(*why = (msg)) : (void)0, REF_EINVAL)

int ref_tree_table_check(const int32_t *tree, int n, const char **why)
{
	if (n < 1 || n > REF_TREE_MAX_NODES)
		return FAIL("tree table: node count outside 1..256");
	const int32_t *par = tree, *nch = tree + n, *cst = tree + 2 * n, *cl = tree + 3 * n,
	              *dep = tree + 4 * n;
	int listed = 0;
	if (dep[0] != 0)
		return FAIL("tree table: the root's depth is not 0");
	for (int u = 0; u < n; u++) {
		if (nch[u] < 0 || cst[u] < 0 || nch[u] > n - 1 || cst[u] > n - nch[u])
			return FAIL("tree table: a child list outside the table");
		for (int i = 0; i < nch[u]; i++) {
			const int c = cl[cst[u] + i];
			if (c < 1 || c >= n || par[c] != u)
				return FAIL("tree table: a listed child does not name the node as its parent");
		}
		listed += nch[u];
	}
	if (listed != n - 1)
		return FAIL("tree table: children listed more than once");
	for (int u = 1; u < n; u++) {
		const int p = par[u];
		if (p < 0 || p >= u)
			return FAIL("tree table: a node's parent is not an earlier node");
		if (dep[u] != dep[p] + 1 || dep[u] > REF_TREE_MAX_DEPTH)
			return FAIL("tree table: a node's depth is not its parent's + 1 (or too deep)");
		int found = 0;
		for (int i = 0; i < nch[p]; i++)
			found += cl[cst[p] + i] == u;
		if (found != 1)
			return FAIL("tree table: a node not among its parent's children");
	}
	return 0;
}

/* r <- norm(relu(r - q)) in place; q == NULL means one-hot at y. When the
 * residual has no mass (r == q up to rounding: the rejection was itself a
 * rounding artefact) r is left unchanged, the "fall back to p" of 1a. */
static void residual_update(float *r, const float *q, int y, int V)
{
	double sum = 0;
	for (int x = 0; x < V; x++) {
		float d = r[x] - (q ? q[x] : (x == y ? 1.0f : 0.0f));
		sum += d > 0.0f ? d : 0.0f;
	}
	if (!(sum > 0))
		return;
	for (int x = 0; x < V; x++) {
		float d = r[x] - (q ? q[x] : (x == y ? 1.0f : 0.0f));
		r[x] = d > 0.0f ? (float)(d / sum) : 0.0f;
	}
}

/* qq(y) <- 0 then renormalise (RRSw's draft update). All mass gone leaves
 * qq all zero: every later child is then rejected with certainty and leaves
 * the residual unchanged, which is exact. */
static void remove_token(float *qq, int y, int V)
{
	qq[y] = 0.0f;
	double sum = 0;
	for (int x = 0; x < V; x++)
		sum += qq[x];
	if (!(sum > 0))
		return;
	for (int x = 0; x < V; x++)
		qq[x] = (float)(qq[x] / sum);
}

/* The accept coin of child c: u <= p/q written as u*q <= p, with q == 0
 * rejecting (u*0 <= 0 would accept a token the draft cannot produce). */
static bool coin(uint64_t seed, uint32_t iter, int c, double num, double den)
{
	return den > 0 && sw_uniform_double(seed, iter, (uint32_t)c, SW_RNG_ACCEPT) * den <= num;
}

/* SpecHub at a node with children (child0, child1): hub a = argmax q; the
 * pair is (i, a) or (a, i). Returns the accepted rank or -1, writing the
 * residual R into r on rejection (ALGORITHMS.txt 4, names as there). */
static int spechub_pair(const float *p, const float *q, int V, const int32_t *ch,
                        const int32_t *tok, uint64_t seed, uint32_t iter, float *r)
{
	int a = ref_argmax_row(q, V);
	/* 1 - q(a) as the other tokens' mass: the normaliser the pair sampler
	 * really draws the second child with, and nonzero where 1.0 - q(a)
	 * rounds to 0 for a peaked q */
	double qa = q[a], S_ia = 0, S_ai = 0, oma = 0;
	for (int x = 0; x < V; x++)
		oma += x == a ? 0.0 : (double)q[x];
	for (int x = 0; x < V; x++) {
		if (x == a)
			continue;
		double Qai = qa * q[x] / oma;
		double r1 = fmax(0.0, (double)p[x] - q[x]);
		S_ia += fmax(0.0, (double)q[x] - p[x]);
		S_ai += fmax(0.0, Qai - r1);
		r[x] = (float)fmax(0.0, r1 - Qai); /* r2 */
	}
	double ra = fmax(0.0, (double)p[a] - S_ai);
	int y0 = tok[ch[0]], y1 = tok[ch[1]];
	if (y1 == a) { /* pair (i, a) */
		if (coin(seed, iter, ch[0], p[y0], q[y0]))
			return 0;
		if (coin(seed, iter, ch[1], ra, S_ia))
			return 1;
	} else { /* pair (a, i): checked by spechub_valid */
		double Qai = qa * q[y1] / oma;
		if (coin(seed, iter, ch[1], fmax(0.0, (double)p[y1] - q[y1]), Qai))
			return 1;
		if (coin(seed, iter, ch[0], p[a], S_ai))
			return 0;
	}
	r[a] = (float)fmax(0.0, ra - S_ia); /* 0 in exact arithmetic */
	double sum = 0;
	for (int x = 0; x < V; x++)
		sum += r[x];
	if (sum > 0)
		for (int x = 0; x < V; x++)
			r[x] = (float)(r[x] / sum);
	else
		memcpy(r, p, (size_t)V * sizeof(*r));
	return -1;
}

/* The q row node u's children were drawn from: row u, or with q_by_depth
 * row depth(u) (a block drafter's Cartesian tree: one q per level). */
static int q_index(const int32_t *tree, int n, int u, int q_by_depth)
{
	return q_by_depth ? tree[4 * n + u] : u;
}

/* A SpecHub tree must be made of pairs the SpecHub sampler can produce:
 * nodes with <= 2 children, and at 2 children exactly one of them the hub
 * and some mass on the other tokens. A pair with an absent child is plain
 * RS on the present one, so only its shape is checked. Checked for every
 * node up front so that an incompatible tree fails whatever path the walk
 * would take. */
static bool spechub_valid(const int32_t *tree, int n, const int32_t *tok, const float *q, int V,
                          int Vq, int q_by_depth)
{
	const int32_t *nch = tree + n, *cst = tree + 2 * n, *cl = tree + 3 * n;
	for (int u = 0; u < n; u++) {
		if (nch[u] > 2)
			return false;
		if (nch[u] < 2)
			continue;
		const float *qu = q + (size_t)q_index(tree, n, u, q_by_depth) * Vq;
		const int32_t *ch = cl + cst[u];
		if (tok[ch[0]] < 0 || tok[ch[1]] < 0)
			continue;
		/* q = 0 beyond Vq: the zeros never beat the row's maximum */
		int a = ref_argmax_row(qu, Vq), other = tok[ch[0]] == a ? tok[ch[1]] : tok[ch[0]];
		if ((tok[ch[0]] == a) == (tok[ch[1]] == a) || other < 0 || other >= Vq ||
		    !(qu[other] > 0.0f))
			return false;
	}
	return true;
}

/* Node u's q row over V entries: the row itself when the draft has the
 * target's vocabulary (Vq == V), else padded with zeros into buf (a draft
 * whose vocabulary is a prefix of the target's: q = 0 beyond it). */
static const float *q_row(const float *q, int u, int V, int Vq, float *buf)
{
	const float *qu = q + (size_t)u * Vq;
	if (Vq == V)
		return qu;
	memcpy(buf, qu, (size_t)Vq * sizeof(*buf));
	memset(buf + Vq, 0, (size_t)(V - Vq) * sizeof(*buf));
	return buf;
}

/* The rank of node u >= 1 among its parent's children. */
static int rank_of(const int32_t *tree, int n, int u)
{
	const int32_t *nch = tree + n, *cst = tree + 2 * n, *cl = tree + 3 * n;
	const int p = tree[u];
	for (int i = 0; i < nch[p]; i++)
		if (cl[cst[p] + i] == u)
			return i;
	return -1; /* not reached for a checked table */
}

/* Greedy: the deepest node whose whole path matches the target argmax
 * (EAGLE/Medusa evaluate_posterior), ties to the lowest node id. With
 * distinct siblings this is the walk "move to the matching child"; with
 * duplicate siblings it also looks past the first matching one. One pass in
 * BFS order, the shape the GPU kernel uses. An absent node (token < 0)
 * never matches an argmax, so the path ends at its parent. */
static int verify_greedy(const int32_t *tree, int n, const int32_t *tok, const float *p, int V,
                         int32_t *path, int32_t *acc_rank, int32_t *final)
{
	const int32_t *par = tree, *dep = tree + 4 * n;
	bool ok[REF_TREE_MAX_NODES];
	int best = 0;
	ok[0] = true;
	for (int u = 1; u < n; u++) {
		ok[u] = ok[par[u]] && tok[u] == ref_argmax_row(p + (size_t)par[u] * V, V);
		if (ok[u] && dep[u] > dep[best])
			best = u;
	}
	for (int u = best; u > 0; u = par[u]) {
		path[dep[u]] = u;
		if (acc_rank)
			acc_rank[dep[u] - 1] = rank_of(tree, n, u);
	}
	*final = ref_argmax_row(p + (size_t)best * V, V);
	return dep[best] + 1;
}

/* The chain mode (METHOD 5): rt_verify_chain's rule and keys on the tree's
 * first children, position = the node being left. */
static int verify_chain(const int32_t *tree, int n, const int32_t *tok, const float *p,
                        const float *q, int V, int Vq, int q_by_depth, uint64_t seed, uint32_t iter,
                        float *tmp, float *qbuf, int32_t *path, int32_t *acc_rank, int32_t *final)
{
	const int32_t *nch = tree + n, *cst = tree + 2 * n, *cl = tree + 3 * n;
	int n_path = 1, u = 0;
	for (;;) {
		const float *pu = p + (size_t)u * V;
		if (nch[u] == 0 || tok[cl[cst[u]]] < 0) { /* leaf, or the next level absent */
			*final = ref_sample_cdf(pu, V, sw_uniform_double(seed, iter, (uint32_t)u, SW_RNG_BONUS));
			return n_path;
		}
		const int c = cl[cst[u]], y = tok[c], qi = q_index(tree, n, u, q_by_depth);
		const float px = pu[y], qx = q ? (y < Vq ? q[(size_t)qi * Vq + y] : 0.0f) : 1.0f;
		if (qx > 0.0f && sw_uniform_double(seed, iter, (uint32_t)u, SW_RNG_ACCEPT) * qx <= px) {
			if (acc_rank)
				acc_rank[n_path - 1] = 0;
			path[n_path++] = c;
			u = c;
			continue;
		}
		const double ur = sw_uniform_double(seed, iter, (uint32_t)u, SW_RNG_RESIDUAL);
		*final = ref_sample_residual(pu, q ? q_row(q, qi, V, Vq, qbuf) : NULL, y, V, ur, tmp);
		return n_path;
	}
}

int ref_verify_tree(int method, const int32_t *tree, int n, const int32_t *tok, const float *p,
                    const float *q, int V, uint64_t seed, uint32_t iter, float *scratch,
                    int32_t *path, int32_t *acc_rank, int32_t *final, const char **why)
{
	return ref_verify_tree_vq(method, tree, n, tok, p, q, V, V, seed, iter, scratch, path, acc_rank,
	                          final, why);
}

int ref_verify_tree_vq(int method, const int32_t *tree, int n, const int32_t *tok, const float *p,
                       const float *q, int V, int Vq, uint64_t seed, uint32_t iter, float *scratch,
                       int32_t *path, int32_t *acc_rank, int32_t *final, const char **why)
{
	return ref_verify_tree_vqd(method, tree, n, tok, p, q, V, Vq, 0, seed, iter, scratch, path,
	                           acc_rank, final, why);
}

int ref_verify_tree_vqd(int method, const int32_t *tree, int n, const int32_t *tok, const float *p,
                        const float *q, int V, int Vq, int q_by_depth, uint64_t seed, uint32_t iter,
                        float *scratch, int32_t *path, int32_t *acc_rank, int32_t *final,
                        const char **why)
{
	float *r = scratch, *qq = scratch + V;
	const int32_t *nch = tree + n, *cst = tree + 2 * n, *cl = tree + 3 * n;

	if (method < REF_VERIFY_GREEDY || method > REF_VERIFY_CHAIN)
		return FAIL("unknown verification method");
	if (V < 1)
		return FAIL("empty vocabulary");
	if (q && (Vq < 1 || Vq > V))
		return FAIL("a draft vocabulary that is not a non-empty prefix of the target's");
	if (ref_tree_table_check(tree, n, why))
		return REF_EINVAL;
	if (!q && method != REF_VERIFY_GREEDY && method != REF_VERIFY_ONEHOT &&
	    method != REF_VERIFY_CHAIN)
		return FAIL("the method needs the draft distributions q");
	for (int u = 1; u < n; u++)
		if (tok[u] >= V) /* < 0: absent, never tested */
			return FAIL("a drafted token outside the vocabulary");
	if (method == REF_VERIFY_SPECHUB && !spechub_valid(tree, n, tok, q, V, Vq, q_by_depth))
		return FAIL("a node that is not a SpecHub pair");
	path[0] = 0;
	*final = -1;
	int n_path = 1;
	if (method == REF_VERIFY_GREEDY)
		return verify_greedy(tree, n, tok, p, V, path, acc_rank, final);
	if (method == REF_VERIFY_CHAIN) {
		n_path = verify_chain(tree, n, tok, p, q, V, Vq, q_by_depth, seed, iter, r, qq, path,
		                      acc_rank, final);
		return *final < 0 ? FAIL("no mass to draw the final token from") : n_path;
	}
	int u = 0;
	for (;;) {
		/* qu padded into qq where Vq < V: RRSw copies it there anyway, the
		 * other methods do not use qq */
		/* a leaf's q is never read (with q_by_depth its row may not exist) */
		const float *pu = p + (size_t)u * V;
		const float *qu = q && nch[u] > 0 ? q_row(q, q_index(tree, n, u, q_by_depth), V, Vq, qq)
		                                  : NULL;
		const int32_t *ch = cl + cst[u];
		int k = nch[u], acc = -1, present = 0;
		const float *dist = r;
		/* Absent children (token < 0: levels SpecDec++ stopped before) are
		 * skipped everywhere below: no coin, no residual or q update. */
		for (int i = 0; i < k; i++)
			present += tok[ch[i]] >= 0;
		memcpy(r, pu, (size_t)V * sizeof(*r));
		if (present == 0) {
			dist = pu; /* bonus from the leaf's own p */
		} else if (method == REF_VERIFY_RRS || (method == REF_VERIFY_SPECHUB && present == 1)) {
			/* q never changes; a duplicate sibling is still tested (it
			 * fails: r(y) = 0 after its first rejection) and still applies
			 * the update: skipping it biases the output (2, PITFALL). */
			for (int i = 0; i < k && acc < 0; i++) {
				int y = tok[ch[i]];
				if (y < 0)
					continue;
				if (coin(seed, iter, ch[i], r[y], qu[y]))
					acc = i;
				else
					residual_update(r, qu, y, V);
			}
		} else if (method == REF_VERIFY_RRSW) {
			if (qq != qu)
				memcpy(qq, qu, (size_t)V * sizeof(*qq));
			for (int i = 0; i < k && acc < 0; i++) {
				int y = tok[ch[i]];
				if (y < 0)
					continue;
				if (coin(seed, iter, ch[i], r[y], qq[y])) {
					acc = i;
				} else {
					residual_update(r, qq, y, V); /* q_i before removing y_i */
					remove_token(qq, y, V);
				}
			}
		} else if (method == REF_VERIFY_ONEHOT) {
			for (int i = 0; i < k && acc < 0; i++) {
				int y = tok[ch[i]];
				if (y < 0)
					continue;
				if (coin(seed, iter, ch[i], r[y], 1.0))
					acc = i;
				else
					residual_update(r, NULL, y, V);
			}
		} else { /* SpecHub pair, both present */
			acc = spechub_pair(pu, qu, V, ch, tok, seed, iter, r);
		}
		if (acc >= 0) {
			if (acc_rank)
				acc_rank[n_path - 1] = acc;
			u = ch[acc];
			path[n_path++] = u;
			continue;
		}
		const double ur = sw_uniform_double(seed, iter, (uint32_t)u, SW_RNG_RESIDUAL);
		*final = ref_sample_cdf(dist, V, ur);
		if (*final < 0)
			*final = ref_sample_cdf(pu, V, ur);
		return *final < 0 ? FAIL("no mass to draw the final token from") : n_path;
	}
}

int ref_verify(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *tree,
               const int32_t *tok, const float *p, const float *q, float *scratch, uint64_t seed,
               uint32_t iter, int n_nodes, int V, int Vq, int method, const char **why)
{
	return ref_verify_q(out_path, out_tok, counts, tree, tok, p, q, scratch, seed, iter, n_nodes, V,
	                    Vq, method, 0, why);
}

int ref_verify_q(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *tree,
                 const int32_t *tok, const float *p, const float *q, float *scratch, uint64_t seed,
                 uint32_t iter, int n_nodes, int V, int Vq, int method, int q_by_depth,
                 const char **why)
{
	int32_t path[REF_TREE_MAX_DEPTH + 1], fin;
	const int n = ref_verify_tree_vqd(method, tree, n_nodes, tok, p, q, V, Vq, q_by_depth, seed,
	                                  iter, scratch, path, NULL, &fin, why);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		out_path[i] = path[i];
	for (int i = 1; i < n; i++)
		out_tok[i - 1] = tok[path[i]];
	out_tok[n - 1] = fin;
	counts[0] = n - 1;
	counts[1] = n;
	counts[2] = fin;
	counts[3] += n - 1;
	counts[4] += n - 1;
	return 0;
}

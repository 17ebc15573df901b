/* Exact tree verification, plain C: the specification of
 * templates/verify.cu.tmpl (ALGORITHMS.txt 1c, 2, 3, 4; every method, the
 * chain mode included) and of the host decoder's verification
 * (rt_verify_tree wraps ref_verify_tree). It favours plain loops over speed;
 * formulas, precision and Philox keys are the kernel's, and so is the
 * order of floating-point operations except that the kernel groups its
 * double sums by chunk and vocabulary slice where this file sums in index
 * order (the emulated kernel is tested to make the same decisions
 * exactly). The tree methods' residual chain is kept in the one-parameter
 * form below (resid), which the kernel walks over scalars. Convention: p = target, q = draft, both already
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

/* A node's residual after some of its children were rejected, in the
 * one-parameter form the kernel walks (ALGORITHMS.txt 2, 3; 1c for
 * one-hot): r(x) = w(x) / Z with
 *   w(x) = relu(p(x) - c q(x))   (one-hot: p(x)),  0 for x in R,
 *   Z = sum_x w(x),  and for RRSw the draft q_j(x) = q(x) / D off R, D =
 *   sum_{x not in R} q(x).
 * Start: c = 0, R = {}, Z = D = 1 (r = p, q_0 = q as given). Rejecting
 * child y with draft q_j (RRS: q, D = 1; RRSw: q off R over D; one-hot: the
 * point mass at y): for x with p(x) > c q(x),
 *   relu(r(x) - q_j(x)) = relu(p(x) - (c + Z/D) q(x)) / Z,
 * and both sides are 0 elsewhere, so c += Z/D (one-hot: c stays 0); y
 * itself joins R when q_j(y) > 0, since the rejection means r(y) < q_j(y)
 * (u * q_j(y) > r(y) with u < 1), so its new residual is 0 exactly (which
 * also makes a duplicate sibling fail with certainty, as ALGORITHMS.txt 2
 * requires). RRSw's removal of y from q is the same R: a token with q_j(y)
 * = 0 adds nothing to D. RRSw with D = 0 (every token of q drawn): q_j = 0,
 * so the child is rejected (den 0) and relu(r - 0) = r: c unchanged.
 * Then Z and D are recomputed over x not in R. If the new Z has no mass
 * (r = q_j up to rounding: a rejection only rounding allows) the state is
 * left as it was, the "fall back to p" of 1a at this step. Only scalars
 * move between children: each rejection costs one sum over the
 * vocabulary, and the final draw one more. */
typedef struct resid {
	double c, Z, D;
	int n_r;
	int32_t R[REF_TREE_MAX_NODES];
} resid;

static bool in_r(const resid *s, int x)
{
	for (int i = 0; i < s->n_r; i++)
		if (s->R[i] == x)
			return true;
	return false;
}

/* w(x); q == NULL: one-hot (w = p off R) */
static double resid_w(const resid *s, const float *p, const float *q, int x)
{
	if (in_r(s, x))
		return 0.0;
	return q ? fmax(0.0, (double)p[x] - s->c * (double)q[x]) : (double)p[x];
}

/* After rejecting y with coin denominator den: the next state into *n
 * (Z and D summed in index order); false when it has no mass. */
static bool resid_next(const resid *s, int method, const float *p, const float *q, int y,
                       double den, int V, resid *n)
{
	*n = *s;
	if (method == REF_VERIFY_RRSW)
		n->c = s->D > 0 ? s->c + s->Z / s->D : s->c;
	else if (method != REF_VERIFY_ONEHOT)
		n->c = s->c + s->Z;
	if (den > 0 && !in_r(s, y))
		n->R[n->n_r++] = y;
	double Z = 0, D = 0;
	for (int x = 0; x < V; x++) {
		Z += resid_w(n, p, method == REF_VERIFY_ONEHOT ? NULL : q, x);
		if (method == REF_VERIFY_RRSW && !in_r(n, x))
			D += q[x];
	}
	n->Z = Z;
	n->D = D;
	return Z > 0;
}

/* rt_sample_cdf over weights w in double: the first x with cumsum(w)[x] >
 * u * sum(w) and w(x) > 0, the last positive x when rounding selects
 * nothing, -1 without mass. wf(x) gives w(x). */
typedef double (*weight_fn)(const void *ctx, int x);

static int sample_weights(weight_fn wf, const void *ctx, int V, double u)
{
	double sum = 0;
	int last = -1;
	for (int x = 0; x < V; x++) {
		const double w = wf(ctx, x);
		if (w > 0) {
			sum += w;
			last = x;
		}
	}
	if (last < 0)
		return -1;
	const double target = u * sum;
	double cum = 0;
	for (int x = 0; x <= last; x++) {
		const double w = wf(ctx, x);
		cum += w;
		if (cum > target && w > 0)
			return x;
	}
	return last;
}

typedef struct resid_ctx {
	const resid *s;
	const float *p, *q;
} resid_ctx;

static double resid_wf(const void *ctx, int x)
{
	const resid_ctx *c = ctx;
	return resid_w(c->s, c->p, c->q, x);
}

/* The accept coin of child c: u <= p/q written as u*q <= p, with q == 0
 * rejecting (u*0 <= 0 would accept a token the draft cannot produce). */
static bool coin(uint64_t seed, uint32_t iter, int c, double num, double den)
{
	return den > 0 && sw_uniform_double(seed, iter, (uint32_t)c, SW_RNG_ACCEPT) * den <= num;
}

/* SpecHub's rejection residual R (ALGORITHMS.txt 4) as weights:
 * relu(r1(x) - Qai(x)) off the hub, relu(ra - S_ia) at it (0 in exact
 * arithmetic). */
typedef struct hub_ctx {
	const float *p, *q;
	int a;
	double qa, oma, wa;
} hub_ctx;

static double hub_wf(const void *ctx, int x)
{
	const hub_ctx *h = ctx;
	if (x == h->a)
		return h->wa;
	const double Qai = h->qa * h->q[x] / h->oma, r1 = fmax(0.0, (double)h->p[x] - h->q[x]);
	return fmax(0.0, r1 - Qai);
}

/* SpecHub at a node with children (child0, child1): hub a = argmax q; the
 * pair is (i, a) or (a, i). Returns the accepted rank, or -1 with the
 * final token drawn from R (p where R has no mass) with uniform ur in *fin
 * (ALGORITHMS.txt 4, names as there). */
static int spechub_pair(const float *p, const float *q, int V, const int32_t *ch,
                        const int32_t *tok, uint64_t seed, uint32_t iter, double ur, int32_t *fin)
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
	const hub_ctx h = {.p = p, .q = q, .a = a, .qa = qa, .oma = oma, .wa = fmax(0.0, ra - S_ia)};
	*fin = sample_weights(hub_wf, &h, V, ur);
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

int ref_verify_check(int method, const int32_t *tree, int n, const int32_t *tok, const float *q,
                     int V, int Vq, const char **why)
{
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
	return 0;
}

int ref_verify_tree_vqd(int method, const int32_t *tree, int n, const int32_t *tok, const float *p,
                        const float *q, int V, int Vq, int q_by_depth, uint64_t seed, uint32_t iter,
                        float *scratch, int32_t *path, int32_t *acc_rank, int32_t *final,
                        const char **why)
{
	float *r = scratch, *qq = scratch + V;
	const int32_t *nch = tree + n, *cst = tree + 2 * n, *cl = tree + 3 * n;

	if (ref_verify_check(method, tree, n, tok, q, V, Vq, why))
		return REF_EINVAL;
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
		/* qu padded into qq where Vq < V (scratch); a leaf's q is never read
		 * (with q_by_depth its row may not exist); one-hot reads none */
		const float *pu = p + (size_t)u * V;
		const float *qu = q && nch[u] > 0 && method != REF_VERIFY_ONEHOT
		                      ? q_row(q, q_index(tree, n, u, q_by_depth), V, Vq, qq)
		                      : NULL;
		const int32_t *ch = cl + cst[u];
		const double ur = sw_uniform_double(seed, iter, (uint32_t)u, SW_RNG_RESIDUAL);
		int k = nch[u], acc = -1, present = 0;
		/* Absent children (token < 0: levels SpecDec++ stopped before) are
		 * skipped everywhere below: no coin, no residual or q update. */
		for (int i = 0; i < k; i++)
			present += tok[ch[i]] >= 0;
		resid s = {.c = 0, .Z = 1, .D = 1, .n_r = 0}, nx;
		*final = -1;
		if (method == REF_VERIFY_SPECHUB && present == 2) {
			acc = spechub_pair(pu, qu, V, ch, tok, seed, iter, ur, final);
		} else if (present > 0) {
			/* RRS (and SpecHub's plain RS on one child): q never changes; a
			 * duplicate sibling is still tested (it fails: y is in R) and
			 * still applies the update: skipping it biases the output (2,
			 * PITFALL). RRSw: q_j = q off R over D, taken before y_j is
			 * removed. One-hot: q_j = the point mass at y_j. */
			for (int i = 0; i < k && acc < 0; i++) {
				const int y = tok[ch[i]];
				if (y < 0)
					continue;
				const double num = resid_w(&s, pu, qu, y) / s.Z;
				const double den = method == REF_VERIFY_ONEHOT ? 1.0
				                   : method != REF_VERIFY_RRSW ? (double)qu[y]
				                   : in_r(&s, y) || !(s.D > 0) ? 0.0
				                                                : qu[y] / s.D;
				if (coin(seed, iter, ch[i], num, den))
					acc = i;
				else if (resid_next(&s, method, pu, qu, y, den, V, &nx))
					s = nx;
			}
			if (acc < 0) {
				const resid_ctx rc = {.s = &s, .p = pu, .q = qu};
				*final = sample_weights(resid_wf, &rc, V, ur);
			}
		}
		if (acc >= 0) {
			if (acc_rank)
				acc_rank[n_path - 1] = acc;
			u = ch[acc];
			path[n_path++] = u;
			continue;
		}
		/* no mass left (or a leaf): the node's own p */
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
	ref_verify_emit(out_path, out_tok, counts, path, n, tok, fin);
	return 0;
}

void ref_verify_emit(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *path,
                     int n, const int32_t *tok, int32_t fin)
{
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
}

/* Token-tree expansion rules and exact tree verification on the host
 * (ALGORITHMS.txt 1c, 2, 3, 4, 5). This is the specification the GPU
 * expansion and fused-verification kernels reproduce; it favours plain loops
 * over speed. Convention: p = target, q = draft, both already warped. */
#include "tree_verify.h"

#include <math.h>
#include <string.h>

#include "core/err.h"
#include "kernels/philox.h"
#include "chain.h"

static const char *const RULE_NAMES[] = { "topk", "sample", "sample-wor", "spechub" };
static const char *const METHOD_NAMES[] = { "greedy", "rrs", "rrsw", "spechub", "onehot" };
#define N_RULES ((int)(sizeof(RULE_NAMES) / sizeof(RULE_NAMES[0])))
#define N_METHODS ((int)(sizeof(METHOD_NAMES) / sizeof(METHOD_NAMES[0])))

int rt_expand_rule_parse(const char *s)
{
	for (int i = 0; s && i < N_RULES; i++)
		if (!strcmp(s, RULE_NAMES[i]))
			return i;
	return -1;
}

int rt_verify_method_parse(const char *s)
{
	for (int i = 0; s && i < N_METHODS; i++)
		if (!strcmp(s, METHOD_NAMES[i]))
			return i;
	return -1;
}

const char *rt_expand_rule_name(int rule)
{
	return rule >= 0 && rule < N_RULES ? RULE_NAMES[rule] : "?";
}

const char *rt_verify_method_name(int method)
{
	return method >= 0 && method < N_METHODS ? METHOD_NAMES[method] : "?";
}

bool rt_verify_compatible(int rule, int method, bool greedy)
{
	if (rule < 0 || rule >= N_RULES || method < 0 || method >= N_METHODS)
		return false;
	if (method == RT_VERIFY_GREEDY)
		return greedy;
	/* The one-hot rule is exact for any fixed set of children, hence for
	 * children drawn by any rule whose randomness is independent of the
	 * verification uniforms (ALGORITHMS.txt 8, option b). */
	if (method == RT_VERIFY_ONEHOT)
		return true;
	return (rule == RT_EXPAND_SAMPLE && method == RT_VERIFY_RRS) ||
	       (rule == RT_EXPAND_SAMPLE_WOR && method == RT_VERIFY_RRSW) ||
	       (rule == RT_EXPAND_SPECHUB && method == RT_VERIFY_SPECHUB);
}

/* The uniform for (node, lane) of one expansion purpose: words 0 (high) and
 * 1 (low) of Philox(ctr = {iter, node, purpose, lane}). For lane 0 this is
 * exactly sw_uniform_double(seed, iter, node, purpose). */
static double expand_uniform(uint64_t seed, uint32_t iter, uint32_t node, uint32_t purpose, uint32_t lane)
{
	uint32_t w[4];
	sw_rand_u32x4(seed, iter, node, purpose, lane, w);
	return sw_u64_to_uniform_double(w[0], w[1]);
}

/* Exponential-race key of token v: log(u_v)/q(v) (< 0; larger wins). In
 * double: the GPU's log is within 1 ulp of glibc's, so the two can order two
 * keys differently only when they are within an ulp (doubt admitted; the
 * probability is ~1e-16 per pair). */
static double race_key(uint64_t seed, uint32_t iter, uint32_t node, uint32_t purpose, int v, float qv)
{
	return log(expand_uniform(seed, iter, node, purpose, (uint32_t)v)) / (double)qv;
}

/* Inserts (key, v) into the descending list (keys, tok) of length *n <= k;
 * strict comparison keeps the lower id first on ties because ids arrive in
 * increasing order. */
static void topk_insert(double *keys, int32_t *tok, int *n, int k, double key, int v)
{
	int i = *n < k ? (*n)++ : k;
	if (i == k) {
		if (!(key > keys[k - 1]))
			return;
		i = k - 1;
	}
	while (i > 0 && key > keys[i - 1]) {
		keys[i] = keys[i - 1];
		tok[i] = tok[i - 1];
		i--;
	}
	keys[i] = key;
	tok[i] = v;
}

int rt_expand_node(int rule, const float *q, int V, int k, uint64_t seed, uint32_t iter, uint32_t node,
                   int32_t *tok, float *fscratch, int *iscratch)
{
	double keys[GEN_TREE_MAX_NODES];
	int support = 0, n = 0;

	if (k < 0 || k >= GEN_TREE_MAX_NODES || V < 1)
		return SW_EINVAL;
	if (k == 0)
		return 0;
	for (int v = 0; v < V; v++)
		support += q[v] > 0.0f;
	if (support == 0)
		return SW_EINVAL;
	switch (rule) {
	case RT_EXPAND_TOPK:
		if (k > support)
			return SW_EINVAL;
		for (int v = 0; v < V; v++)
			if (q[v] > 0.0f)
				topk_insert(keys, tok, &n, k, (double)q[v], v);
		return 0;
	case RT_EXPAND_SAMPLE:
		for (int i = 0; i < k; i++)
			tok[i] = rt_sample_cdf(q, V, expand_uniform(seed, iter, node, SW_RNG_EXPAND, (uint32_t)i));
		return 0;
	case RT_EXPAND_SAMPLE_WOR:
		/* Gumbel top-k as an exponential race: the k largest log(u_v)/q(v)
		 * in descending order have the law of k sequential draws without
		 * replacement, in draw order (ALGORITHMS.txt 3). */
		if (k > support)
			return SW_EINVAL;
		for (int v = 0; v < V; v++)
			if (q[v] > 0.0f)
				topk_insert(keys, tok, &n, k, race_key(seed, iter, node, SW_RNG_EXPAND, v, q[v]), v);
		return 0;
	case RT_EXPAND_SPECHUB: {
		/* first ~ q by the race; if it is the hub a, the second is the
		 * race's runner-up among x != a (the same uniforms: memorylessness
		 * makes it ~ q(x)/(1-q(a))); otherwise the second is a. */
		if (k > 2 || k > support)
			return SW_EINVAL;
		int a = rt_argmax(q, V), first = -1, second = -1;
		double kf = -INFINITY, ks = -INFINITY;
		for (int v = 0; v < V; v++) {
			if (!(q[v] > 0.0f))
				continue;
			double key = race_key(seed, iter, node, SW_RNG_SPECHUB2, v, q[v]);
			if (first < 0 || key > kf) {
				first = v;
				kf = key;
			}
			if (v != a && (second < 0 || key > ks)) {
				second = v;
				ks = key;
			}
		}
		tok[0] = first;
		if (k == 2)
			tok[1] = first == a ? second : a;
		return 0;
	}
	default:
		return SW_EINVAL;
	}
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
static int spechub_pair(const float *p, const float *q, int V, const int *ch, const int32_t *tok,
                        uint64_t seed, uint32_t iter, float *r)
{
	int a = rt_argmax(q, V);
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

/* A SpecHub tree must be made of pairs the SpecHub sampler can produce:
 * nodes with <= 2 children, and at 2 children exactly one of them the hub
 * and some mass on the other tokens. A pair with an absent child is plain
 * RS on the present one, so only its shape is checked. Checked for every
 * node up front so that an incompatible tree fails whatever path the walk
 * would take. */
static bool spechub_valid(const gen_tree *t, const int32_t *tok, const float *q, int V)
{
	for (int u = 0; u < t->n; u++) {
		if (t->n_children[u] > 2)
			return false;
		if (t->n_children[u] < 2)
			continue;
		const float *qu = q + (size_t)u * V;
		const int *ch = t->child_list + t->child_start[u];
		if (tok[ch[0]] < 0 || tok[ch[1]] < 0)
			continue;
		int a = rt_argmax(qu, V), other = tok[ch[0]] == a ? tok[ch[1]] : tok[ch[0]];
		if ((tok[ch[0]] == a) == (tok[ch[1]] == a) || other < 0 || other >= V ||
		    !(qu[other] > 0.0f))
			return false;
	}
	return true;
}

/* Greedy: the deepest node whose whole path matches the target argmax
 * (EAGLE/Medusa evaluate_posterior), ties to the lowest node id. With
 * distinct siblings this is the walk "move to the matching child"; with
 * duplicate siblings it also looks past the first matching one. One pass in
 * BFS order, the shape the GPU kernel uses. An absent node (token < 0)
 * never matches an argmax, so the path ends at its parent. */
static void verify_greedy(const gen_tree *t, const int32_t *tok, const float *p, int V, rt_tree_result *res)
{
	bool ok[GEN_TREE_MAX_NODES];
	int best = 0;
	ok[0] = true;
	for (int u = 1; u < t->n; u++) {
		int par = t->parent[u];
		ok[u] = ok[par] && tok[u] == rt_argmax(p + (size_t)par * V, V);
		if (ok[u] && t->depth[u] > t->depth[best])
			best = u;
	}
	int d = t->depth[best];
	for (int u = best; u > 0; u = t->parent[u]) {
		res->path[t->depth[u]] = u;
		res->accepted_sibling[t->depth[u] - 1] = t->rank[u];
	}
	res->n_path = d + 1;
	res->final = rt_argmax(p + (size_t)best * V, V);
}

int rt_verify_tree(const gen_tree *t, int method, const int32_t *tok, const float *p, const float *q,
                   int V, uint64_t seed, uint32_t iter, rt_tree_result *res, float *scratch)
{
	float *r = scratch, *qq = scratch + V;

	if (method < 0 || method >= N_METHODS || t->n < 1 || t->n > GEN_TREE_MAX_NODES || V < 1)
		return SW_EINVAL;
	if (!q && method != RT_VERIFY_GREEDY && method != RT_VERIFY_ONEHOT)
		return SW_EINVAL;
	for (int u = 1; u < t->n; u++)
		if (tok[u] >= V) /* < 0: absent, never tested */
			return SW_EINVAL;
	if (method == RT_VERIFY_SPECHUB && !spechub_valid(t, tok, q, V))
		return SW_EINVAL;
	res->path[0] = 0;
	res->n_path = 1;
	res->final = -1;
	for (int d = 0; d <= GEN_TREE_MAX_DEPTH; d++)
		res->accepted_sibling[d] = -1;
	if (method == RT_VERIFY_GREEDY) {
		verify_greedy(t, tok, p, V, res);
		return 0;
	}
	int u = 0;
	for (;;) {
		const float *pu = p + (size_t)u * V, *qu = q ? q + (size_t)u * V : NULL;
		const int *ch = t->child_list + t->child_start[u];
		int k = t->n_children[u], acc = -1, present = 0;
		const float *dist = r;
		/* Absent children (token < 0: levels SpecDec++ stopped before) are
		 * skipped everywhere below: no coin, no residual or q update. */
		for (int i = 0; i < k; i++)
			present += tok[ch[i]] >= 0;
		memcpy(r, pu, (size_t)V * sizeof(*r));
		if (present == 0) {
			dist = pu; /* bonus from the leaf's own p */
		} else if (method == RT_VERIFY_RRS || (method == RT_VERIFY_SPECHUB && present == 1)) {
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
		} else if (method == RT_VERIFY_RRSW) {
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
		} else if (method == RT_VERIFY_ONEHOT) {
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
			res->accepted_sibling[res->n_path - 1] = acc;
			u = ch[acc];
			res->path[res->n_path++] = u;
			continue;
		}
		res->final = rt_sample_cdf(dist, V, sw_uniform_double(seed, iter, (uint32_t)u, SW_RNG_RESIDUAL));
		if (res->final < 0)
			res->final = rt_sample_cdf(pu, V, sw_uniform_double(seed, iter, (uint32_t)u, SW_RNG_RESIDUAL));
		return res->final < 0 ? SW_EINVAL : 0;
	}
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

/* Per-node laws of the expansion rules and acceptance rates of the
 * verification methods against closed forms computed here: the SpecHub pair
 * distribution, the without-replacement draw order (chi-square at 1e-4,
 * Wilson-Hilferty critical value), and P(accept) / P(second child accepted)
 * per method (two-sided z-test at 1e-4), plus SpecHub vs RRS vs RRSw second-
 * draft acceptance on random logits at T = 0.6 and 1.0. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "kernels/philox.h"
#include "testutil.h"
#include "decode/tree_verify.h"

#define ALPHA 1e-4
#define VMAX 32
#define KMAX 4

static double gauss(uint64_t *s)
{
	return sqrt(-2 * log(tu_uniform(s))) * cos(6.283185307179586 * tu_uniform(s));
}

/* Correlated target/draft pair from logits: z_t ~ N(0, 2), z_d = z_t + N(0, 1),
 * p = softmax(z_t / T), q = softmax(z_d / T). */
static void random_pq(float *p, float *q, int V, float T, uint64_t *g)
{
	float zt[VMAX], zd[VMAX];
	int idx[VMAX];
	rt_sampling s = { .temperature = T, .top_k = 0, .top_p = 1.0f };
	for (int v = 0; v < V; v++) {
		zt[v] = (float)(2 * gauss(g));
		zd[v] = zt[v] + (float)gauss(g);
	}
	rt_probs(p, zt, V, &s, idx);
	rt_probs(q, zd, V, &s, idx);
}

/* Draw i of a node test: spread over node ids and iterations so that both
 * counter words vary. */
#define NODE_OF(i) ((uint32_t)(i) % 251u)
#define ITER_OF(i) ((uint32_t)(i) / 251u)

static void chi2_check(const uint64_t *counts, const double *probs, int K, uint64_t N, const char *label)
{
	int df;
	double chi = tu_chi2(counts, probs, K, N, &df), crit = tu_chi2_crit(df, ALPHA);
	printf("  %-46s chi2 %7.2f df %3d crit %6.2f\n", label, chi, df, crit);
	assert_true(chi < crit);
}

/* SpecHub pairs: Q(x, a) = q(x), Q(a, x) = q(a) q(x) / (1 - q(a)) for
 * x != a, nothing else; every pair holds the hub a = argmax q. */
static void test_spechub_pairs(void **state)
{
	enum { V = 6, N = 300000 };
	float p[V], q[V];
	uint64_t g = 3, counts[V * V] = { 0 }, counts1[V] = { 0 };
	double Q[V * V] = { 0 }, q1[V];
	random_pq(p, q, V, 1.0f, &g);
	int a = rt_argmax(q, V);
	for (int x = 0; x < V; x++) {
		q1[x] = q[x];
		if (x == a)
			continue;
		Q[x * V + a] = q[x];
		Q[a * V + x] = (double)q[a] * q[x] / (1.0 - q[a]);
	}
	for (int i = 0; i < N; i++) {
		int32_t t[2];
		assert_int_equal(rt_expand_node(RT_EXPAND_SPECHUB, q, V, 2, 17, ITER_OF(i), NODE_OF(i), t, NULL, NULL), 0);
		assert_true(t[0] != t[1] && (t[0] == a || t[1] == a));
		counts[t[0] * V + t[1]]++;
		/* k = 1 is the first draw alone: ~ q. */
		assert_int_equal(rt_expand_node(RT_EXPAND_SPECHUB, q, V, 1, 18, ITER_OF(i), NODE_OF(i), t, NULL, NULL), 0);
		counts1[t[0]]++;
	}
	printf("  q(hub) = %.3f\n", q[a]);
	chi2_check(counts, Q, V * V, N, "spechub ordered pairs vs Q");
	chi2_check(counts1, q1, V, N, "spechub k=1 vs q");
}

/* Without replacement: ordered (y1, y2) ~ q(y1) q(y2) / (1 - q(y1)), and
 * triples likewise (the race order is the sequential sampling order). With
 * replacement: independent pairs q(y1) q(y2). Top-k: ties to the lower id. */
static void test_wor_order(void **state)
{
	enum { V = 5, N = 300000 };
	float p[V], q[V];
	uint64_t g = 4;
	random_pq(p, q, V, 1.0f, &g);
	static uint64_t c2[V * V], c3[V * V * V], ci[V * V];
	static double e2[V * V], e3[V * V * V], ei[V * V];
	for (int x = 0; x < V; x++)
		for (int y = 0; y < V; y++) {
			ei[x * V + y] = (double)q[x] * q[y];
			if (y == x)
				continue;
			e2[x * V + y] = (double)q[x] * q[y] / (1.0 - q[x]);
			for (int z = 0; z < V; z++)
				if (z != x && z != y)
					e3[(x * V + y) * V + z] = e2[x * V + y] * q[z] / (1.0 - q[x] - q[y]);
		}
	for (int i = 0; i < N; i++) {
		int32_t t[3];
		assert_int_equal(rt_expand_node(RT_EXPAND_SAMPLE_WOR, q, V, 2, 21, ITER_OF(i), NODE_OF(i), t, NULL, NULL), 0);
		c2[t[0] * V + t[1]]++;
		assert_int_equal(rt_expand_node(RT_EXPAND_SAMPLE_WOR, q, V, 3, 22, ITER_OF(i), NODE_OF(i), t, NULL, NULL), 0);
		c3[(t[0] * V + t[1]) * V + t[2]]++;
		assert_int_equal(rt_expand_node(RT_EXPAND_SAMPLE, q, V, 2, 23, ITER_OF(i), NODE_OF(i), t, NULL, NULL), 0);
		ci[t[0] * V + t[1]]++;
	}
	chi2_check(c2, e2, V * V, N, "sample-wor ordered pairs");
	chi2_check(c3, e3, V * V * V, N, "sample-wor ordered triples");
	chi2_check(ci, ei, V * V, N, "sample (iid) ordered pairs");

	static const float tie[6] = { 0.1f, 0.3f, 0.1f, 0.3f, 0.2f, 0.0f };
	int32_t t[4];
	assert_int_equal(rt_expand_node(RT_EXPAND_TOPK, tie, 6, 4, 0, 0, 0, t, NULL, NULL), 0);
	assert_int_equal(t[0], 1);
	assert_int_equal(t[1], 3);
	assert_int_equal(t[2], 4);
	assert_int_equal(t[3], 0);
}

/* ---- closed forms, per rank of the accepted child ---- */

/* float -> double, renormalised: the float rows sum to 1 only to ~1e-7,
 * which would leak into identities checked here to 1e-12. */
static void to_double(double *d, const float *f, int V)
{
	double s = 0;
	for (int x = 0; x < V; x++)
		s += f[x];
	for (int x = 0; x < V; x++)
		d[x] = f[x] / s;
}

static double sum_min(const double *p, const double *q, int V)
{
	double s = 0;
	for (int x = 0; x < V; x++)
		s += fmin(p[x], q[x]);
	return s;
}

/* p <- norm(relu(p - q)); unchanged if it has no mass. */
static void resid(double *p, const double *q, int V)
{
	double s = 0, r[VMAX];
	for (int x = 0; x < V; x++)
		s += r[x] = fmax(0.0, p[x] - q[x]);
	if (s > 0)
		for (int x = 0; x < V; x++)
			p[x] = r[x] / s;
}

/* RRS: child i ~ q independently and p_{i+1} = norm(relu(p_i - q)) does
 * not depend on which token was rejected, so P(reach i+1) = P(reach i) (1 -
 * sum min(p_i, q)). */
static void cf_rrs(const double *p0, const double *q, int V, int k, double *rank)
{
	double p[VMAX], reach = 1;
	memcpy(p, p0, V * sizeof(*p));
	for (int i = 0; i < k; i++) {
		double a = sum_min(p, q, V);
		rank[i] = reach * a;
		reach *= 1 - a;
		resid(p, q, V);
	}
}

/* RRSw: enumerate the rejected tokens; y is drawn and rejected with mass
 * relu(q_i(y) - p_i(y)), then p_{i+1} = norm(relu(p_i - q_i)) and q_{i+1}
 * = q_i without y, renormalised. */
static void cf_rrsw(const double *p, const double *q, int V, int i, int k, double w, double *rank)
{
	rank[i] += w * sum_min(p, q, V);
	if (i + 1 == k)
		return;
	double pn[VMAX], qn[VMAX];
	memcpy(pn, p, V * sizeof(*p));
	resid(pn, q, V);
	for (int y = 0; y < V; y++) {
		double wy = fmax(0.0, q[y] - p[y]);
		if (wy <= 0 || q[y] >= 1)
			continue;
		for (int x = 0; x < V; x++)
			qn[x] = x == y ? 0.0 : q[x] / (1 - q[y]);
		cf_rrsw(pn, qn, V, i + 1, k, w * wy, rank);
	}
}

/* SpecHub by cases: pair (i, a) has mass q(i): child0 = i accepted with
 * min(p(i), q(i)), then child1 = a with total min(S_ia, ra); pair (a, i) has
 * mass Qai(i): child1 = i with min(Qai(i), r1(i)), then child0 = a with total
 * min(S_ai, p(a)). Returns the paper's total p(a) + sum min(p, q/(1-q(a))). */
static double cf_spechub(const double *p, const double *q, int V, double *rank)
{
	int a = 0;
	for (int x = 1; x < V; x++)
		if (q[x] > q[a])
			a = x;
	double S_ia = 0, S_ai = 0, acc_i = 0, acc_ai = 0, total = p[a];
	for (int x = 0; x < V; x++) {
		if (x == a)
			continue;
		double Qai = q[a] * q[x] / (1 - q[a]), r1 = fmax(0.0, p[x] - q[x]);
		S_ia += fmax(0.0, q[x] - p[x]);
		S_ai += fmax(0.0, Qai - r1);
		acc_i += fmin(p[x], q[x]);
		acc_ai += fmin(Qai, r1);
		total += fmin(p[x], q[x] / (1 - q[a]));
	}
	double ra = fmax(0.0, p[a] - S_ai);
	rank[0] = acc_i + fmin(S_ai, p[a]);
	rank[1] = fmin(S_ia, ra) + acc_ai;
	return total;
}

/* One-hot on the top-k of q: child i accepted with p(y_i) overall. */
static void cf_onehot(const double *p, const float *qf, int V, int k, double *rank)
{
	int32_t t[KMAX];
	assert_int_equal(rt_expand_node(RT_EXPAND_TOPK, qf, V, k, 0, 0, 0, t, NULL, NULL), 0);
	for (int i = 0; i < k; i++)
		rank[i] = p[t[i]];
}

/* A root with k leaf children: empirical rate of acceptance at rank 0, 1
 * and any rank, z-tested against rank[]. */
static void check_node(int rule, int method, int k, const float *p, const float *q, int V, const double *rank,
                       const char *label)
{
	enum { N = 200000 };
	rt_tree t;
	memset(&t, 0, sizeof(t));
	t.n = k + 1;
	t.parent[0] = -1;
	t.n_children[0] = k;
	for (int i = 1; i <= k; i++) {
		t.parent[i] = 0, t.depth[i] = 1, t.rank[i] = i - 1;
		t.child_list[i - 1] = i;
		t.child_start[i] = k;
	}
	static float P[(KMAX + 1) * VMAX], Q[(KMAX + 1) * VMAX];
	for (int u = 0; u <= k; u++) {
		memcpy(P + u * V, p, V * sizeof(float));
		memcpy(Q + u * V, q, V * sizeof(float));
	}
	uint64_t cnt[KMAX + 1] = { 0 };
	float scratch[4 * VMAX];
	for (uint32_t i = 0; i < N; i++) {
		int32_t tok[KMAX + 1] = { 0 };
		rt_tree_result res;
		assert_int_equal(rt_expand_node(rule, q, V, k, 31, i, 0, tok + 1, NULL, NULL), 0);
		assert_int_equal(rt_verify_tree(&t, method, tok, P, Q, V, 31, i, &res, scratch), 0);
		if (res.accepted_sibling[0] >= 0)
			cnt[res.accepted_sibling[0]]++, cnt[KMAX]++;
	}
	double any = 0;
	for (int i = 0; i < k; i++)
		any += rank[i];
	double zc = tu_norm_quantile(ALPHA / 2);
	struct { const char *what; double pr; uint64_t c; } rows[3] = {
		{ "P(accept)", any, cnt[KMAX] }, { "P(child 0)", rank[0], cnt[0] }, { "P(child 1)", k > 1 ? rank[1] : 0, cnt[1] },
	};
	for (int r = 0; r < (k > 1 ? 3 : 2); r++) {
		double pr = rows[r].pr, z = ((double)rows[r].c - N * pr) / sqrt(N * pr * (1 - pr) + 1e-300);
		printf("  %-30s %-10s closed %.5f observed %.5f z %+.2f (|z| < %.2f)\n", label, rows[r].what, pr,
		       (double)rows[r].c / N, z, zc);
		assert_true(fabs(z) < zc);
	}
}

static void test_acceptance_closed_forms(void **state)
{
	enum { V = 6 };
	uint64_t g = 51;
	static const float TS[] = { 1.0f, 0.6f };
	for (int ti = 0; ti < 2; ti++)
		for (int inst = 0; inst < 2; inst++) {
			float p[V], q[V];
			double pd[V], qd[V], rank[KMAX];
			char label[64];
			/* Instance 0: correlated logits at temperature T; 1: independent
			 * random tables (low overlap, so no rate is near 0 or 1). */
			if (inst == 0) {
				random_pq(p, q, V, TS[ti], &g);
				snprintf(label, sizeof(label), "logits T%.1f", TS[ti]);
			} else {
				tu_random_table(p, 1, V, 0.0, tu_rand(&g));
				tu_random_table(q, 1, V, 0.0, tu_rand(&g));
				snprintf(label, sizeof(label), "random tables #%d", ti);
			}
			to_double(pd, p, V);
			to_double(qd, q, V);
			printf(" %s: 1 - TV(p, q) = %.5f\n", label, sum_min(pd, qd, V));

			memset(rank, 0, sizeof(rank));
			cf_rrs(pd, qd, V, 1, rank);
			assert_true(fabs(rank[0] - sum_min(pd, qd, V)) < 1e-12);
			check_node(RT_EXPAND_SAMPLE, RT_VERIFY_RRS, 1, p, q, V, rank, "one draft (RS)");
			check_node(RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, 1, p, q, V, rank, "spechub, one child");

			memset(rank, 0, sizeof(rank));
			cf_rrs(pd, qd, V, 3, rank);
			check_node(RT_EXPAND_SAMPLE, RT_VERIFY_RRS, 3, p, q, V, rank, "rrs k=3");

			memset(rank, 0, sizeof(rank));
			cf_rrsw(pd, qd, V, 0, 3, 1.0, rank);
			check_node(RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, 3, p, q, V, rank, "rrsw k=3");

			memset(rank, 0, sizeof(rank));
			double total = cf_spechub(pd, qd, V, rank);
			/* ALGORITHMS.txt 4's total vs the case-by-case sum. */
			assert_true(fabs(total - rank[0] - rank[1]) < 1e-12);
			check_node(RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, 2, p, q, V, rank, "spechub pair");

			memset(rank, 0, sizeof(rank));
			cf_onehot(pd, q, V, 3, rank);
			check_node(RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, 3, p, q, V, rank, "top-3 one-hot");
		}
}

/* Two drafts per node, closed forms averaged over random logit pairs:
 * SpecHub's second draft is accepted more often than RRS's (RRS retests a
 * fresh sample of q against a residual that q already covers). */
static void test_second_draft(void **state)
{
	enum { V = 32, INST = 500 };
	static const float TS[] = { 0.6f, 1.0f };
	uint64_t g = 61;
	for (int ti = 0; ti < 2; ti++) {
		double sum[3][2] = { { 0 } };
		for (int inst = 0; inst < INST; inst++) {
			float p[V], q[V];
			double pd[V], qd[V], r[3][KMAX];
			random_pq(p, q, V, TS[ti], &g);
			to_double(pd, p, V);
			to_double(qd, q, V);
			memset(r, 0, sizeof(r));
			cf_spechub(pd, qd, V, r[0]);
			cf_rrs(pd, qd, V, 2, r[1]);
			cf_rrsw(pd, qd, V, 0, 2, 1.0, r[2]);
			for (int m = 0; m < 3; m++) {
				sum[m][0] += r[m][0] + r[m][1];
				sum[m][1] += r[m][1];
			}
		}
		static const char *names[3] = { "spechub", "rrs", "rrsw" };
		for (int m = 0; m < 3; m++)
			printf("  T%.1f V%d %-8s P(accept) %.4f  P(second child accepted) %.4f\n", TS[ti], V, names[m],
			       sum[m][0] / INST, sum[m][1] / INST);
		assert_true(sum[0][1] >= sum[1][1]);
		assert_true(sum[0][0] >= sum[1][0]);
		assert_true(sum[2][0] >= sum[1][0]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spechub_pairs),
		cmocka_unit_test(test_wor_order),
		cmocka_unit_test(test_acceptance_closed_forms),
		cmocka_unit_test(test_second_draft),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

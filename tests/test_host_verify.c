/* The host greedy verification (runtime/device/host_verify.c, the native
 * verify op's METHOD greedy) against kernels/ref's ref_verify_q with
 * REF_VERIFY_GREEDY on the same inputs, on every argmax path the CPU has:
 * chain, k-ary, branch, batch, binary-Sequoia, EAGLE and Medusa trees;
 * vocabularies of 1, 2, 3, 37 and 49152 (SmolLM2's) entries; p rows drawn
 * from a small set of values (ties common, -0 and +0, NaN, NaN at index 0,
 * one-hot rows as the greedy target_probs writes them); tokens that are
 * their parent's argmax (accepted paths of every depth), other ids, and
 * absent (-1, whole levels cut as target-only decoding cuts them); q NULL
 * and not. Every output word (path, tokens, all five counts, two of them
 * accumulating, and the words past them) and the return code must be
 * identical; refusals (a bad tree table, a token >= V, V = 0, a draft
 * vocabulary outside 1..V) with the same reason and nothing written. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/tree.h"
#include "device/host_gemm.h"
#include "device/host_verify.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

static const char *const TREES[] = {"chain:1", "chain:6", "kary:2:3", "branch:3,2,1", "batch:3:2",
                                    "biseq8", "eagle25", "medusa63"};
#define N_TREES ((int)(sizeof(TREES) / sizeof(TREES[0])))
#define OUT_WORDS (REF_TREE_MAX_DEPTH + 4)

static void parse_tree(const char *spec, rt_tree *t)
{
	sw_err err;
	if (rt_tree_parse(spec, NULL, t, &err))
		fail_msg("%s: %s", spec, err.msg);
}

/* p rows from {-inf, -1, -0, +0, 0.25, 1, NaN}: ties in most rows; kind 1:
 * one-hot rows (target_probs at T = 0); kind 2: NaN at index 0 too */
static void fill_rows(float *p, int rows, int V, int kind, uint64_t *g)
{
	static const float VALS[] = {-INFINITY, -1.0f, -0.0f, 0.0f, 0.25f, 1.0f, NAN};
	for (int r = 0; r < rows; r++) {
		float *x = p + (size_t)r * V;
		if (kind == 1) {
			memset(x, 0, sizeof(*x) * (size_t)V);
			x[tu_rand(g) % (uint64_t)V] = 1.0f;
			continue;
		}
		for (int i = 0; i < V; i++)
			x[i] = VALS[tu_rand(g) % 7];
		if (kind == 2)
			x[0] = NAN;
	}
}

/* one comparison: every output word, the return code and the reason;
 * returns the reference's code */
static int same(const int32_t *tb, int n, const int32_t *tok, const float *p, const float *q,
                 int V, int Vq, int path, const char *what)
{
	int32_t rp[OUT_WORDS], rt[OUT_WORDS], rc5[8], hp[OUT_WORDS], ht[OUT_WORDS], hc5[8];
	const char *rwhy = NULL, *hwhy = NULL;
	for (int i = 0; i < OUT_WORDS; i++)
		rp[i] = hp[i] = rt[i] = ht[i] = 0x5a5a0000 + i;
	for (int i = 0; i < 8; i++)
		rc5[i] = hc5[i] = 1000 + 7 * i;
	float scratch[2 * 64];
	const int r1 = ref_verify_q(rp, rt, rc5, tb, tok, p, q, V <= 64 ? scratch : NULL, 1, 2, n, V,
	                            Vq, REF_VERIFY_GREEDY, 0, &rwhy);
	const int r2 = hv_verify_greedy(hp, ht, hc5, tb, tok, p, q, n, V, Vq, path, &hwhy);
	if (r1 != r2 || memcmp(rp, hp, sizeof(rp)) || memcmp(rt, ht, sizeof(rt)) ||
	    memcmp(rc5, hc5, sizeof(rc5)) || (r1 && (!rwhy || !hwhy || strcmp(rwhy, hwhy))))
		fail_msg("%s (%s): ref %d (%s), host %d (%s); path %d/%d tok %d/%d final %d/%d", what,
		         hg_path_name(path), r1, rwhy ? rwhy : "-", r2, hwhy ? hwhy : "-", rp[1], hp[1],
		         rt[0], ht[0], rc5[2], hc5[2]);
	return r1;
}

static void test_greedy_same(void **state)
{
	(void)state;
	static const int VS[] = {1, 2, 3, 37, 49152};
	uint64_t g = 0x5eed0024;
	int checked = 0, deep = 0, cut = 0;
	for (int path = HG_PATH_PORTABLE; path <= HG_PATH_AVX512; path++) {
		if (!hg_path_available(path))
			continue;
		for (int ti = 0; ti < N_TREES; ti++) {
			rt_tree t;
			parse_tree(TREES[ti], &t);
			const int n = t.n;
			int32_t *tb = malloc(sizeof(int32_t) * 5 * (size_t)n), *tok = malloc(4 * (size_t)n);
			assert_true(tb && tok);
			rt_tree_table(&t, tb);
			const int32_t *par = tb, *dep = tb + 4 * n;
			for (int vi = 0; vi < 5; vi++) {
				const int V = VS[vi], reps = V > 1000 ? 4 : 40;
				float *p = malloc(sizeof(float) * (size_t)n * (size_t)V);
				assert_non_null(p);
				for (int it = 0; it < reps; it++) {
					fill_rows(p, n, V, it % 3, &g);
					/* tokens: mostly the parent's argmax, so paths go deep */
					const int cut_at = it % 4 == 3 ? 1 + (int)(tu_rand(&g) % 3) : 1 << 20;
					tok[0] = (int32_t)(tu_rand(&g) % (uint64_t)V);
					for (int u = 1; u < n; u++) {
						const uint64_t c = tu_rand(&g) % 8;
						tok[u] = dep[u] >= cut_at ? -1
						         : c < 5 ? ref_argmax_row(p + (size_t)par[u] * V, V)
						         : c < 7 ? (int32_t)(tu_rand(&g) % (uint64_t)V) : -1;
					}
					cut += cut_at < (1 << 20);
					const float *q = it % 2 ? p : NULL;
					char what[96];
					snprintf(what, sizeof(what), "%s V %d it %d", TREES[ti], V, it);
					same(tb, n, tok, p, q, V, q ? V : 0, path, what);
					int32_t hp[OUT_WORDS], ht[OUT_WORDS], hc[5] = {0};
					if (hv_verify_greedy(hp, ht, hc, tb, tok, p, q, n, V, V, path, NULL) == 0)
						deep += hc[0] >= 2;
					checked++;
				}
				free(p);
			}
			free(tb);
			free(tok);
		}
	}
	print_message("greedy verify: %d cases identical to ref_verify_q, %d with 2+ accepted, %d "
	              "with levels cut\n", checked, deep, cut);
	assert_true(deep > 50 && cut > 50);
}

static void test_refusals_same(void **state)
{
	(void)state;
	rt_tree t;
	parse_tree("eagle25", &t);
	const int n = t.n, V = 37;
	int32_t tb[5 * 64], bad[5 * 64], tok[64];
	float p[64 * 37];
	uint64_t g = 7;
	rt_tree_table(&t, tb);
	fill_rows(p, n, V, 0, &g);
	for (int u = 0; u < n; u++)
		tok[u] = (int32_t)(tu_rand(&g) % V);
	for (int path = HG_PATH_PORTABLE; path <= HG_PATH_AVX512; path++) {
		if (!hg_path_available(path))
			continue;
		/* host and reference share ref_verify_check: each case's verdict is
		 * also stated here, so a check both lose is caught */
		assert_int_equal(same(tb, n, tok, p, NULL, V, V, path, "valid"), 0);
		assert_int_equal(same(tb, n, tok, p, p, 0, 0, path, "V 0"), REF_EINVAL);
		assert_int_equal(same(tb, n, tok, p, p, V, 0, path, "Vq 0"), REF_EINVAL);
		assert_int_equal(same(tb, n, tok, p, p, V, V + 1, path, "Vq > V"), REF_EINVAL);
		assert_int_equal(same(tb, n, tok, p, NULL, V, V + 1, path, "Vq > V, no q (unread)"), 0);
		tok[5] = V;
		assert_int_equal(same(tb, n, tok, p, NULL, V, V, path, "a token >= V"), REF_EINVAL);
		tok[5] = V - 1;
		assert_int_equal(same(tb, n, tok, p, NULL, V, V, path, "the token V - 1"), 0);
		tok[5] = 3;
		memcpy(bad, tb, sizeof(int32_t) * 5 * (size_t)n);
		bad[4] = 9; /* node 4's parent after it */
		assert_int_equal(same(bad, n, tok, p, NULL, V, V, path, "parent after the node"), REF_EINVAL);
		memcpy(bad, tb, sizeof(int32_t) * 5 * (size_t)n);
		bad[4 * n + 3] += 1; /* a wrong depth */
		assert_int_equal(same(bad, n, tok, p, NULL, V, V, path, "a wrong depth"), REF_EINVAL);
		assert_int_equal(same(tb, 0, tok, p, NULL, V, V, path, "no nodes"), REF_EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_greedy_same),
		cmocka_unit_test(test_refusals_same),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The context's block machinery on a tiny random Llama and on a Markov
 * table: a tree evaluated in one block with its ancestor mask gives each node
 * the logits of its path evaluated alone (a causal sequence); evaluating the
 * tree level by level with rt_ctx_eval_append gives the same; committing an
 * accepted path (KV compaction) and rolling back the rest leaves the cache as
 * if the path had been fed directly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/ctx.h"
#include "testutil.h"

enum { V = 11, NODES = 9 };
/* A tree in BFS order, node 0 = root (the pending token). */
static const int PARENT[NODES] = { -1, 0, 0, 0, 1, 1, 3, 4, 6 };
static const int32_t TOK[NODES] = { 4, 1, 7, 1, 9, 0, 3, 10, 5 };

static void tree_mask(uint64_t *mask, int n)
{
	memset(mask, 0, (size_t)n * sizeof(*mask));
	for (int i = 0; i < n; i++)
		for (int j = i; j >= 0; j = PARENT[j])
			mask[i] |= 1ull << j;
}

static int path_of(int u, int32_t *toks)
{
	int n = 0, tmp[NODES];
	for (int j = u; j >= 0; j = PARENT[j])
		tmp[n++] = j;
	for (int i = 0; i < n; i++)
		toks[i] = TOK[tmp[n - 1 - i]];
	return n;
}

static int depth_of(int u)
{
	int d = 0;
	for (int j = PARENT[u]; j >= 0; j = PARENT[j])
		d++;
	return d;
}

/* Tolerance: the same fp32 ops in a different row grouping of the GEMMs
 * (BLAS blocks differently for T = 9 than for T = 1..4); logits are O(1..10)
 * sums over dim 24, so 1e-4 absolute is ~100x the fp32 rounding of those
 * sums and far below any real masking error (O(0.1)). */
#define TOL 1e-4f

/* Equal within TOL; -inf (a zero table entry) must match exactly. */
static int close_to(float a, float b)
{
	if (isinf(a) || isinf(b))
		return a == b;
	return fabsf(a - b) <= TOL * (1 + fabsf(b));
}

static void check_model(const rt_model *m)
{
	sw_err err;
	const int32_t prompt[5] = { 2, 8, 8, 3, 6 };
	rt_ctx *c = rt_ctx_new(m, 64, 16, &err);
	rt_ctx *r = rt_ctx_new(m, 64, 16, &err);
	assert_non_null(c);
	assert_non_null(r);
	float tree_logits[NODES * V], lvl_logits[NODES * V], ref[V];
	uint64_t mask[NODES];
	int32_t pos[NODES];
	tree_mask(mask, NODES);
	assert_int_equal(rt_ctx_feed(c, prompt, 5, NULL, &err), 0);
	for (int i = 0; i < NODES; i++)
		pos[i] = 5 + depth_of(i);
	assert_int_equal(rt_ctx_eval(c, TOK, pos, NODES, mask, tree_logits, NULL, &err), 0);
	/* level by level: levels are [0], [1..3], [4..6], [7..8] */
	static const int LV[5] = { 0, 1, 4, 7, 9 };
	c->blk_T = 0;
	for (int l = 0; l < 4; l++) {
		int a = LV[l], b = LV[l + 1];
		assert_int_equal(rt_ctx_eval_append(c, TOK + a, pos + a, b - a, mask + a, lvl_logits + a * V, NULL, &err), 0);
	}
	for (int u = 0; u < NODES; u++) {
		int32_t seq[16];
		int n = path_of(u, seq);
		rt_ctx_truncate(r, 0);
		assert_int_equal(rt_ctx_feed(r, prompt, 5, NULL, &err), 0);
		assert_int_equal(rt_ctx_feed(r, seq, n, ref, &err), 0);
		for (int v = 0; v < V; v++) {
			assert_true(close_to(tree_logits[u * V + v], ref[v]));
			assert_true(close_to(lvl_logits[u * V + v], ref[v]));
		}
	}
	/* Commit the path root -> 3 -> 6 -> 8, then continue with a token: the
	 * logits must equal feeding prompt + path + token from scratch. */
	int keep[4] = { 0, 3, 6, 8 };
	rt_ctx_commit(c, keep, 4);
	assert_int_equal(c->len, 9);
	float a[V], b[V];
	int32_t next = 2;
	assert_int_equal(rt_ctx_feed(c, &next, 1, a, &err), 0);
	int32_t full[10] = { 2, 8, 8, 3, 6, TOK[0], TOK[3], TOK[6], TOK[8], 2 };
	rt_ctx_truncate(r, 0);
	assert_int_equal(rt_ctx_feed(r, full, 10, b, &err), 0);
	for (int v = 0; v < V; v++)
		assert_true(close_to(a[v], b[v]));
	assert_memory_equal(c->tokens, full, sizeof(full));
	/* Rollback: truncating to the prompt and feeding the other branch
	 * 0 -> 1 -> 4 -> 7 also matches. */
	rt_ctx_truncate(c, 5);
	int32_t br[4] = { TOK[0], TOK[1], TOK[4], TOK[7] };
	assert_int_equal(rt_ctx_feed(c, br, 4, a, &err), 0);
	int32_t full2[9] = { 2, 8, 8, 3, 6, TOK[0], TOK[1], TOK[4], TOK[7] };
	rt_ctx_truncate(r, 0);
	assert_int_equal(rt_ctx_feed(r, full2, 9, b, &err), 0);
	for (int v = 0; v < V; v++)
		assert_true(close_to(a[v], b[v]));
	/* Errors: block too large, context overflow, bad token. */
	int32_t big[20] = { 0 }, pbig[20] = { 0 };
	assert_int_equal(rt_ctx_eval(c, big, pbig, 17, NULL, NULL, NULL, &err), SW_ERANGE);
	int32_t badt = V;
	int32_t p0 = 0;
	assert_int_equal(rt_ctx_eval(c, &badt, &p0, 1, NULL, NULL, NULL, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "outside the vocabulary"));
	rt_ctx_free(c);
	rt_ctx_free(r);
}

static void test_tiny_llama_tree_block(void **state)
{
	rt_model *m = tu_tiny_llama(V, 24, 2, 6, 2, 40, 77);
	assert_non_null(m);
	check_model(m);
	rt_model_free(m);
}

static void test_table_tree_block(void **state)
{
	float P[V * V * V];
	tu_random_table(P, V * V, V, 0.2, 5);
	sw_err err;
	rt_model *m = rt_model_table(V, 2, P, "t2", &err);
	assert_non_null(m);
	check_model(m);
	rt_model_free(m);
}

static void test_table_file_roundtrip(void **state)
{
	float P[V * V];
	tu_random_table(P, V, V, 0.3, 9);
	sw_err err;
	char path[] = "/tmp/sw_table_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rt_table_save(path, V, 1, P, &err), 0);
	rt_model *m = rt_model_load(path, &err);
	assert_non_null(m);
	assert_int_equal(m->kind, RT_MODEL_TABLE);
	assert_memory_equal(m->table, P, sizeof(P));
	rt_model_free(m);
	/* a row that does not sum to 1 is refused, naming the row */
	P[3 * V] += 0.5f;
	assert_null(rt_model_table(V, 1, P, "bad", &err));
	assert_non_null(strstr(err.msg, "row 3 sums to"));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny_llama_tree_block),
		cmocka_unit_test(test_table_tree_block),
		cmocka_unit_test(test_table_file_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

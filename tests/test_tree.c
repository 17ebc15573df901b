/* Tests for gen/tree.c: every preset and generated form is checked against
 * an independent recomputation here (paths read straight from the JSON or
 * enumerated by the test, parents walked for masks, BFS order re-derived),
 * shuffled listings give the same tree, and every error names its cause. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/json.h"
#include "core/tree.h"

#define TP_MAX 512 /* more than the builder accepts, for the too-many case */
#define TP_LEN (RT_TREE_MAX_DEPTH + 2)

/* A list of paths as the test sees it, independent of the builder. */
typedef struct tpaths {
	int n;
	int len[TP_MAX];
	int p[TP_MAX][TP_LEN];
} tpaths;

static tpaths *tp_new(void)
{
	tpaths *tp = calloc(1, sizeof(*tp));
	assert_non_null(tp);
	return tp;
}

static void tp_add(tpaths *tp, const int *p, int len)
{
	assert_true(tp->n < TP_MAX && len <= TP_LEN);
	tp->len[tp->n] = len;
	memcpy(tp->p[tp->n], p, (size_t)len * sizeof(int));
	tp->n++;
}

/* Paths from a JSON array of arrays of integers (negative ranks allowed,
 * so error cases can be written the same way). */
static void tp_from_json(tpaths *tp, const json_value *arr)
{
	assert_int_equal(arr->type, JSON_ARRAY);
	for (size_t i = 0; i < arr->n; i++) {
		const json_value *q = arr->items[i];
		int p[TP_LEN];
		assert_int_equal(q->type, JSON_ARRAY);
		for (size_t j = 0; j < q->n; j++) {
			assert_true(q->items[j]->is_int);
			p[j] = (int)q->items[j]->integer;
		}
		tp_add(tp, p, (int)q->n);
	}
}

static void tp_from_literal(tpaths *tp, const char *lit)
{
	sw_err err = { 0 };
	json_value *v = json_parse(lit, strlen(lit), "literal", &err);
	if (!v)
		fail_msg("bad literal %s: %s", lit, err.msg);
	tp_from_json(tp, v);
	json_free(v);
}

static void tp_from_preset(tpaths *tp, const char *name)
{
	char path[256], *text;
	sw_err err = { 0 };
	FILE *f;
	long sz;
	json_value *v;

	snprintf(path, sizeof(path), "models/trees/%s.json", name);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s (tests run from the repo root)", path);
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = malloc((size_t)sz);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)sz, f), (size_t)sz);
	fclose(f);
	v = json_parse(text, (size_t)sz, path, &err);
	if (!v)
		fail_msg("%s", err.msg);
	tp_from_json(tp, json_get(v, "paths"));
	const json_value *src = json_get(v, "source");
	assert_non_null(src);
	assert_int_equal(src->type, JSON_STRING);
	assert_true(src->str_len > 20);
	json_free(v);
	free(text);
}

static int tp_max_len(const tpaths *tp)
{
	int m = 0;
	for (int i = 0; i < tp->n; i++)
		if (tp->len[i] > m)
			m = tp->len[i];
	return m;
}

static int tp_find(const tpaths *tp, const int *p, int len)
{
	for (int i = 0; i < tp->n; i++)
		if (tp->len[i] == len && !memcmp(tp->p[i], p, (size_t)len * sizeof(int)))
			return i;
	return -1;
}

/* ---- independent enumerations of the generated forms ---- */

/* All sequences x_0..x_{l-1} with x_d < fan[d], for l = 1..D, in odometer
 * order (the builder must not care about order). */
static void tp_fanout(tpaths *tp, const int *fan, int D)
{
	for (int l = 1; l <= D; l++) {
		int x[TP_LEN] = { 0 };
		for (;;) {
			tp_add(tp, x, l);
			int d = l - 1;
			while (d >= 0 && ++x[d] == fan[d])
				x[d--] = 0;
			if (d < 0)
				break;
		}
	}
}

static void tp_chain(tpaths *tp, int K)
{
	int zeros[TP_LEN] = { 0 };
	for (int l = K; l >= 1; l--) /* deepest first, on purpose */
		tp_add(tp, zeros, l);
}

static void tp_kary(tpaths *tp, int K, int D)
{
	int fan[TP_LEN];
	for (int d = 0; d < D; d++)
		fan[d] = K;
	tp_fanout(tp, fan, D);
}

static void tp_batch(tpaths *tp, int M, int L)
{
	for (int m = M - 1; m >= 0; m--)
		for (int l = 1; l <= L; l++) {
			int p[TP_LEN] = { 0 };
			p[0] = m;
			tp_add(tp, p, l);
		}
}

/* ---- the invariant checker ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void build_from_tp(const tpaths *tp, const int *perm, const char *name, rt_tree *t)
{
	const int **ptrs = calloc((size_t)tp->n + 1, sizeof(*ptrs));
	int *lens = calloc((size_t)tp->n + 1, sizeof(*lens));
	sw_err err = { 0 };

	assert_non_null(ptrs);
	assert_non_null(lens);
	for (int i = 0; i < tp->n; i++) {
		int k = perm ? perm[i] : i;
		ptrs[i] = tp->p[k];
		lens[i] = tp->len[k];
	}
	if (rt_tree_from_paths(ptrs, lens, tp->n, name, t, &err))
		fail_msg("%s: %s", name, err.msg);
	free(lens);
	free(ptrs);
}

static void check_tree(const rt_tree *t, const tpaths *tp)
{
	int n = t->n, found[RT_TREE_MAX_NODES] = { 0 };
	uint64_t row[RT_TREE_WORDS];

	assert_int_equal(n, tp->n + 1);
	assert_int_equal(t->depth_max, tp_max_len(tp));
	assert_int_equal(t->words, (n + 63) / 64);
	assert_int_equal(t->parent[0], -1);
	assert_int_equal(t->depth[0], 0);
	assert_int_equal(t->rank[0], 0);

	/* the parent chain of each node spells a listed path, each path once */
	for (int i = 1; i < n; i++) {
		int p[RT_TREE_MAX_DEPTH + 1], len = 0;
		assert_true(t->parent[i] >= 0 && t->parent[i] < i);
		for (int j = i; j != 0; j = t->parent[j]) {
			assert_true(len < RT_TREE_MAX_DEPTH);
			p[len++] = t->rank[j];
		}
		for (int a = 0, b = len - 1; a < b; a++, b--) {
			int x = p[a];
			p[a] = p[b];
			p[b] = x;
		}
		assert_int_equal(len, t->depth[i]);
		assert_int_equal(t->depth[i], t->depth[t->parent[i]] + 1);
		int k = tp_find(tp, p, len);
		if (k < 0)
			fail_msg("%s: node %d spells a path that was not listed", t->name, i);
		assert_int_equal(found[k], 0);
		found[k] = 1;
	}

	/* mask rows: exactly self + ancestors (walking parents), no bit >= n */
	for (int i = 0; i < n; i++) {
		memset(row, 0, sizeof(row));
		for (int j = i; j >= 0; j = t->parent[j])
			row[j / 64] |= (uint64_t)1 << (j % 64);
		assert_true(row[0] & 1); /* the root is visible to all */
		for (int w = 0; w < t->words; w++)
			assert_int_equal(t->mask[(size_t)i * t->words + w], row[w]);
		for (int j = 0; j < t->words * 64; j++)
			assert_int_equal(rt_tree_visible(t, i, j),
					 j < n && (int)(row[j / 64] >> (j % 64) & 1));
		for (int j = n; j < t->words * 64; j++)
			assert_int_equal(rt_tree_visible(t, i, j), 0);
	}
	for (size_t k = (size_t)n * t->words; k < RT_TREE_MAX_NODES * RT_TREE_WORDS; k++)
		assert_int_equal(t->mask[k], 0);

	/* children lists: each child's parent and rank, in rank order */
	int total = 0;
	for (int u = 0; u < n; u++) {
		int cnt = 0;
		for (int v = 1; v < n; v++)
			cnt += t->parent[v] == u;
		assert_int_equal(t->n_children[u], cnt);
		assert_true(t->child_start[u] >= 0 && t->child_start[u] + cnt <= n - 1);
		for (int r = 0; r < cnt; r++) {
			int c = t->child_list[t->child_start[u] + r];
			assert_true(c > u && c < n);
			assert_int_equal(t->parent[c], u);
			assert_int_equal(t->rank[c], r);
		}
		total += cnt;
	}
	assert_int_equal(total, n - 1);

	/* levels are contiguous ranges covering every node */
	assert_int_equal(t->level_start[0], 0);
	assert_int_equal(t->level_start[1], 1);
	assert_int_equal(t->level_start[t->depth_max + 1], n);
	for (int d = 0; d <= t->depth_max; d++) {
		assert_true(t->level_start[d] < t->level_start[d + 1]);
		for (int i = t->level_start[d]; i < t->level_start[d + 1]; i++)
			assert_int_equal(t->depth[i], d);
	}

	/* BFS: (depth, parent, rank) strictly increasing with the node number */
	for (int i = 2; i < n; i++) {
		int a[3] = { t->depth[i - 1], t->parent[i - 1], t->rank[i - 1] };
		int b[3] = { t->depth[i], t->parent[i], t->rank[i] };
		int k = 0;
		while (k < 3 && a[k] == b[k])
			k++;
		assert_true(k < 3 && a[k] < b[k]);
	}

	/* the listing order must not matter: shuffles give the same bytes */
	uint64_t seed = 12345u + (uint64_t)n;
	int perm[TP_MAX];
	rt_tree *u = malloc(sizeof(*u));
	assert_non_null(u);
	for (int i = 0; i < tp->n; i++)
		perm[i] = i;
	for (int rep = 0; rep < 4; rep++) {
		for (int i = tp->n - 1; i > 0; i--) {
			int j = (int)(rng_next(&seed) % (uint64_t)(i + 1)), x = perm[i];
			perm[i] = perm[j];
			perm[j] = x;
		}
		if (rep == 3) /* and reversed */
			for (int i = 0; i < tp->n; i++)
				perm[i] = tp->n - 1 - i;
		build_from_tp(tp, perm, t->name, u);
		assert_memory_equal(u, t, sizeof(*t));
	}
	free(u);
}

/* ---- presets ---- */

static void check_preset(const char *name, int nodes, int depth)
{
	tpaths *tp = tp_new();
	rt_tree *t = malloc(sizeof(*t)), *u = malloc(sizeof(*u));
	sw_err err = { 0 };

	assert_non_null(t);
	assert_non_null(u);
	tp_from_preset(tp, name);
	/* the counts the sources state, against the lists themselves */
	assert_int_equal(tp->n, nodes);
	assert_int_equal(tp_max_len(tp), depth);
	if (rt_tree_parse(name, NULL, t, &err))
		fail_msg("%s: %s", name, err.msg);
	assert_string_equal(t->name, name);
	assert_int_equal(t->n, tp->n + 1);
	assert_int_equal(t->depth_max, tp_max_len(tp));
	check_tree(t, tp);
	/* from the paths directly: the same tree */
	build_from_tp(tp, NULL, name, u);
	assert_memory_equal(u, t, sizeof(*t));
	free(u);
	free(t);
	free(tp);
}

static void test_preset_medusa63(void **state)
{
	check_preset("medusa63", 63, 4);
	rt_tree *t = malloc(sizeof(*t));
	assert_non_null(t);
	assert_int_equal(rt_tree_parse("medusa63", "models/trees", t, NULL), 0);
	/* 64 nodes with the root: one mask word exactly, all bits in use */
	assert_int_equal(t->n, 64);
	assert_int_equal(t->words, 1);
	assert_true(t->mask[63] >> 63 & 1);
	/* Medusa's first head has top-10 candidates */
	assert_int_equal(t->n_children[0], 10);
	free(t);
}

static void test_preset_eagle25(void **state)
{
	check_preset("eagle25", 25, 5);
}

static void test_preset_sequoia63(void **state)
{
	check_preset("sequoia63", 63, 5);
}

/* Trees fitted to the GPU-trained EAGLE-3 head's ranks on the tuning prompts
 * (models/drafters/train/tree_fit.py): loadable as presets, and the fitting's
 * search equals an exhaustive one over every valid tree of up to 6 nodes. */
static void test_preset_fitted(void **state)
{
	(void)state;
	check_preset("smollm2-e3gpu-63", 63, 7);
	check_preset("smollm2-e3gpu-127", 127, 8);
	check_preset("smollm2-e3gpu-255", 255, 8);
}

static void test_fit_exhaustive(void **state)
{
	(void)state;
	char out[4096];
	FILE *p = popen("/usr/bin/python3 models/drafters/train/tree_fit.py --self-test 2>&1", "r");
	assert_non_null(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	int st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !strstr(out, "240 of 240 exhaustive comparisons agree"))
		fail_msg("tree_fit.py --self-test: %s", out);
}

static void test_preset_biseq(void **state)
{
	check_preset("biseq8", 7, 4);
	check_preset("biseq16", 15, 5);
	/* binary trees: no node has more than 2 children */
	rt_tree *t = malloc(sizeof(*t));
	assert_non_null(t);
	assert_int_equal(rt_tree_parse("biseq16", NULL, t, NULL), 0);
	for (int i = 0; i < t->n; i++)
		assert_true(t->n_children[i] <= 2);
	free(t);
}

/* ---- generated forms ---- */

static void check_spec(const char *spec, const tpaths *tp)
{
	rt_tree *t = malloc(sizeof(*t));
	sw_err err = { 0 };

	assert_non_null(t);
	if (rt_tree_parse(spec, NULL, t, &err))
		fail_msg("%s: %s", spec, err.msg);
	assert_string_equal(t->name, spec);
	check_tree(t, tp);
	free(t);
}

static void test_generated_chain(void **state)
{
	static const int ks[] = { 1, 2, 7, 33, RT_TREE_MAX_DEPTH };
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		char spec[32];
		tpaths *tp = tp_new();
		tp_chain(tp, ks[i]);
		snprintf(spec, sizeof(spec), "chain:%d", ks[i]);
		check_spec(spec, tp);
		free(tp);
	}
}

static void test_generated_kary(void **state)
{
	static const int kd[][2] = { { 1, 1 }, { 3, 3 }, { 2, 6 }, { 3, 4 }, { 5, 3 }, { 255, 1 }, { 1, 64 } };
	for (size_t i = 0; i < sizeof(kd) / sizeof(kd[0]); i++) {
		char spec[32];
		tpaths *tp = tp_new();
		tp_kary(tp, kd[i][0], kd[i][1]);
		snprintf(spec, sizeof(spec), "kary:%d:%d", kd[i][0], kd[i][1]);
		check_spec(spec, tp);
		free(tp);
	}
	/* kary:2:6 = 126 nodes + root: two mask words, the second partly used */
	rt_tree *t = malloc(sizeof(*t));
	assert_non_null(t);
	assert_int_equal(rt_tree_parse("kary:2:6", NULL, t, NULL), 0);
	assert_int_equal(t->n, 127);
	assert_int_equal(t->words, 2);
	/* the last leaf (node 126) sees nodes 62, 30, 14, 6, 2 and the root */
	for (int j = 0; j < 127; j++)
		assert_int_equal(rt_tree_visible(t, 126, j),
				 j == 126 || j == 62 || j == 30 || j == 14 || j == 6 || j == 2 || j == 0);
	free(t);
}

static void test_generated_branch(void **state)
{
	static const struct {
		const char *spec;
		int D, fan[6];
	} cases[] = {
		{ "branch:4,2,1", 3, { 4, 2, 1 } },
		{ "branch:1", 1, { 1 } },
		{ "branch:255", 1, { 255 } },
		{ "branch:1,3,1,2", 4, { 1, 3, 1, 2 } },
		{ "branch:10,2,2,2", 4, { 10, 2, 2, 2 } }, /* 150 nodes: 3 words */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tpaths *tp = tp_new();
		tp_fanout(tp, cases[i].fan, cases[i].D);
		check_spec(cases[i].spec, tp);
		free(tp);
	}
}

static void test_generated_batch(void **state)
{
	static const int ml[][2] = { { 3, 4 }, { 1, 1 }, { 1, 5 }, { 7, 1 }, { 5, 51 }, { 3, 64 } };
	for (size_t i = 0; i < sizeof(ml) / sizeof(ml[0]); i++) {
		char spec[32];
		tpaths *tp = tp_new();
		tp_batch(tp, ml[i][0], ml[i][1]);
		snprintf(spec, sizeof(spec), "batch:%d:%d", ml[i][0], ml[i][1]);
		check_spec(spec, tp);
		free(tp);
	}
	/* every branch has L nodes: M * L nodes besides the root */
	rt_tree *t = malloc(sizeof(*t));
	assert_non_null(t);
	assert_int_equal(rt_tree_parse("batch:3:4", NULL, t, NULL), 0);
	assert_int_equal(t->n, 13);
	assert_int_equal(t->depth_max, 4);
	assert_int_equal(t->n_children[0], 3);
	free(t);
}

/* A file tree, listed in scrambled order, with the maximum node count. */
static void test_literal_trees(void **state)
{
	tpaths *tp = tp_new();
	rt_tree *t = malloc(sizeof(*t));
	assert_non_null(t);
	tp_from_literal(tp, "[[2,1,0],[0],[2,0],[1],[2],[2,1],[0,0]]");
	build_from_tp(tp, NULL, "scrambled", t);
	assert_string_equal(t->name, "scrambled");
	check_tree(t, tp);
	/* BFS numbers spelled out: [0] 1, [1] 2, [2] 3, [0,0] 4, [2,0] 5, [2,1] 6, [2,1,0] 7 */
	static const int parent[] = { -1, 0, 0, 0, 1, 3, 3, 6 };
	for (int i = 0; i < 8; i++)
		assert_int_equal(t->parent[i], parent[i]);
	free(tp);

	/* 255 paths: 256 nodes, 4 full mask words */
	tp = tp_new();
	int fan[2] = { 15, 16 }; /* 15 + 240 = 255 */
	tp_fanout(tp, fan, 2);
	build_from_tp(tp, NULL, NULL, t);
	assert_int_equal(t->n, RT_TREE_MAX_NODES);
	assert_int_equal(t->words, RT_TREE_WORDS);
	assert_string_equal(t->name, "");
	check_tree(t, tp);
	free(tp);
	free(t);
}

/* ---- errors ---- */

static void expect_msg(const sw_err *err, va_list ap)
{
	for (const char *frag; (frag = va_arg(ap, const char *));)
		if (!strstr(err->msg, frag))
			fail_msg("message lacks \"%s\": %s", frag, err->msg);
}

static void paths_bad_(const char *lit, int code, ...)
{
	tpaths *tp = tp_new();
	const int *ptrs[TP_MAX];
	rt_tree *t = malloc(sizeof(*t));
	sw_err err = { 0 };
	va_list ap;

	assert_non_null(t);
	tp_from_literal(tp, lit);
	for (int i = 0; i < tp->n; i++)
		ptrs[i] = tp->p[i];
	int rc = rt_tree_from_paths(ptrs, tp->len, tp->n, "mytree", t, &err);
	if (rc == 0)
		fail_msg("accepted %s", lit);
	assert_int_equal(rc, code);
	assert_int_equal(err.code, code);
	assert_int_equal(t->n, 0);
	assert_non_null(strstr(err.msg, "tree mytree: "));
	va_start(ap, code);
	expect_msg(&err, ap);
	va_end(ap);
	free(t);
	free(tp);
}
#define paths_bad(lit, code, ...) paths_bad_(lit, code, __VA_ARGS__, NULL)

static void test_errors_paths(void **state)
{
	/* a missing prefix, whatever the listing order */
	paths_bad("[[0],[1],[0,5,1]]", SW_EINVAL, "path [0, 5, 1] needs its prefix [0, 5]");
	paths_bad("[[0,5,1],[1],[0]]", SW_EINVAL, "path [0, 5, 1] needs its prefix [0, 5]");
	paths_bad("[[0,0]]", SW_EINVAL, "path [0, 0] needs its prefix [0]");
	paths_bad("[[0],[0,0,0]]", SW_EINVAL, "path [0, 0, 0] needs its prefix [0, 0]");
	paths_bad("[[0],[1],[0,0],[1]]", SW_EINVAL, "path [1] is listed twice", "entries 1 and 3");
	paths_bad("[[0],[0,-2]]", SW_EINVAL, "path [0, -2] has a negative rank -2");
	paths_bad("[[0],[0,0],[0,1],[0,2],[0,3],[0,5]]", SW_EINVAL,
		  "path [0, 5] has rank 5 but its siblings stop at rank 3");
	paths_bad("[[1]]", SW_EINVAL, "path [1] has rank 1 but no sibling has rank 0");
	paths_bad("[[0],[1],[0,1]]", SW_EINVAL, "path [0, 1] has rank 1 but no sibling has rank 0");
	paths_bad("[]", SW_EINVAL, "empty tree");
	paths_bad("[[0],[]]", SW_EINVAL, "path [] (entry 1) is empty", "root is implicit");

	/* too many nodes: 256 paths make 257 nodes */
	char lit[8192];
	size_t k = 0;
	lit[k++] = '[';
	for (int i = 0; i < RT_TREE_MAX_NODES; i++)
		k += (size_t)snprintf(lit + k, sizeof(lit) - k, "%s[%d]", i ? "," : "", i);
	lit[k++] = ']';
	lit[k] = '\0';
	paths_bad(lit, SW_ERANGE, "too many nodes", "257 nodes", "at most 256");

	/* too deep: a properly prefixed chain of 65 */
	k = 0;
	lit[k++] = '[';
	for (int l = 1; l <= RT_TREE_MAX_DEPTH + 1; l++) {
		k += (size_t)snprintf(lit + k, sizeof(lit) - k, "%s[0", l > 1 ? "," : "");
		for (int j = 1; j < l; j++)
			k += (size_t)snprintf(lit + k, sizeof(lit) - k, ",0");
		lit[k++] = ']';
	}
	lit[k++] = ']';
	lit[k] = '\0';
	paths_bad(lit, SW_ERANGE, "path [0, 0, 0", "...]", "too deep: depth 65", "at most 64");

	/* no sw_err: still a failure code, no crash */
	rt_tree *t = malloc(sizeof(*t));
	assert_non_null(t);
	assert_int_equal(rt_tree_from_paths(NULL, NULL, 0, NULL, t, NULL), SW_EINVAL);
	free(t);
}

static void spec_bad_(const char *spec, const char *dir, ...)
{
	rt_tree *t = malloc(sizeof(*t));
	sw_err err = { 0 };
	va_list ap;

	assert_non_null(t);
	int rc = rt_tree_parse(spec, dir, t, &err);
	if (rc == 0)
		fail_msg("accepted spec %s", spec);
	assert_true(rc < 0);
	assert_int_equal(err.code, rc);
	assert_int_equal(t->n, 0);
	va_start(ap, dir);
	expect_msg(&err, ap);
	va_end(ap);
	free(t);
}
#define spec_bad(spec, ...) spec_bad_(spec, NULL, __VA_ARGS__, NULL)

static void test_errors_specs(void **state)
{
	spec_bad("chain:0", "tree spec \"chain:0\"", "expected an integer in [1, 64]", "found \"0\"");
	spec_bad("chain:65", "tree spec \"chain:65\"", "found \"65\"");
	spec_bad("chain:", "tree spec \"chain:\"", "found nothing");
	spec_bad("chain:-1", "found \"-1\"");
	spec_bad("chain:3x", "tree spec \"chain:3x\"", "expected the end after K, found \"x\"");
	spec_bad("chain:99999999999999999999", "found \"99999999999999999999\"");
	spec_bad("kary:2", "tree spec \"kary:2\"", "expected ':' after K, found the end");
	spec_bad("kary:0:3", "K (children per node)", "found \"0\"");
	spec_bad("kary:2:0", "D (depth)", "found \"0\"");
	spec_bad("kary:2:8", "tree spec \"kary:2:8\"", "too many nodes: 510 besides the root",
		 "at most 255");
	spec_bad("kary:255:64", "tree spec \"kary:255:64\"", "too many nodes: over 10^9");
	spec_bad("kary:3:3:3", "expected the end after D, found \":3\"");
	spec_bad("branch:", "tree spec \"branch:\"", "b1", "found nothing");
	spec_bad("branch:4,0", "tree spec \"branch:4,0\"", "b2", "found \"0\"");
	spec_bad("branch:4,,2", "b2", "found nothing");
	spec_bad("branch:4,2,", "b3", "found nothing");
	spec_bad("branch:4;2", "expected ',' after b1, found \";2\"");
	spec_bad("branch:16,16", "too many nodes: 272 besides the root");
	char deep[256] = "branch:1";
	for (int i = 0; i < RT_TREE_MAX_DEPTH; i++)
		strcat(deep, ",1");
	spec_bad(deep, "too deep", "at most 64");
	spec_bad("batch:0:3", "tree spec \"batch:0:3\"", "M (branches)", "found \"0\"");
	spec_bad("batch:3:65", "L (nodes per branch)", "found \"65\"");
	spec_bad("batch:16:16", "too many nodes: 256 besides the root");
	spec_bad("", "empty tree spec", "chain:K");
	spec_bad("foo", "unknown tree spec \"foo\"", "chain:K", "kary:K:D", "branch:b1,b2,...",
		 "batch:M:L", "PATH.json", "biseq16, biseq8, eagle25, medusa63, sequoia63");
	spec_bad("../models/trees/medusa63", "unknown tree spec \"../models/trees/medusa63\"");
	spec_bad("Chain:3", "unknown tree spec \"Chain:3\"");
	spec_bad("medusa63 ", "unknown tree spec \"medusa63 \"");
	spec_bad_("medusa63", "/nonexistent-dir", "unknown tree spec \"medusa63\"",
		  "presets in /nonexistent-dir: (none found)", NULL);

	rt_tree *t = malloc(sizeof(*t));
	assert_non_null(t);
	assert_true(rt_tree_parse("chain:0", NULL, t, NULL) < 0);
	assert_true(rt_tree_parse(NULL, NULL, t, NULL) < 0);
	free(t);
}

/* ---- files ---- */

static char tmpdir[64];

static const char *write_tmp(const char *fname, const char *text)
{
	static char path[160];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", tmpdir, fname);
	f = fopen(path, "wb");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static int setup_tmp(void **state)
{
	strcpy(tmpdir, "/tmp/test_tree_XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_files(void **state)
{
	rt_tree *t = malloc(sizeof(*t));
	sw_err err = { 0 };
	const char *p;
	char path[160];

	assert_non_null(t);
	/* a file without "name" is named after the file */
	p = write_tmp("small.json", "{\"paths\": [[1], [0], [0, 0]]}");
	if (rt_tree_parse(p, NULL, t, &err))
		fail_msg("%s", err.msg);
	assert_string_equal(t->name, "small");
	assert_int_equal(t->n, 4);
	assert_int_equal(t->parent[3], 1);

	/* a preset folder of one's own */
	write_tmp("mine.json", "{\"name\": \"my tree\", \"source\": \"test\", \"paths\": [[0], [0, 0], [1]]}");
	if (rt_tree_parse("mine", tmpdir, t, &err))
		fail_msg("%s", err.msg);
	assert_string_equal(t->name, "my tree");
	spec_bad_("medusa63", tmpdir, "unknown tree spec \"medusa63\"", "mine, small", NULL);

	snprintf(path, sizeof(path), "%s/none.json", tmpdir);
	spec_bad_(path, NULL, "cannot open tree file", path, NULL);
	snprintf(path, sizeof(path), "%s/dir.json", tmpdir);
	assert_int_equal(mkdir(path, 0700), 0);
	spec_bad_(path, NULL, path, "is a directory, not a regular file", NULL);

	static const struct {
		const char *text;
		const char *frag[3];
	} bad[] = {
		{ "{\"paths\": [[0], [1],", { "bad.json:1:", "expected", NULL } },
		{ "[]", { "bad.json:1:1", "$: expected an object, found", NULL } },
		{ "{\"name\": \"x\"}", { "bad.json", "missing required field \"paths\"", NULL } },
		{ "{\"pahts\": [[0]]}", { "bad.json", "unknown field \"pahts\"", NULL } },
		{ "{\"paths\": 3}", { "bad.json:1:11", "$.paths: expected an array of 1 to 255", NULL } },
		{ "{\"paths\": []}", { "$.paths: expected an array of 1 to 255", "found", NULL } },
		{ "{\"paths\": [[0], [1], [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [0, \"x\"]]}",
		  { "bad.json:1:", "$.paths[7][1]: expected an integer in [0, 254]", "found" } },
		{ "{\"paths\": [[0], 5]}", { "$.paths[1]: expected an array of 1 to 64", "found", NULL } },
		{ "{\"paths\": [[0], [0, -1]]}", { "$.paths[1][1]: expected an integer in [0, 254]", NULL, NULL } },
		{ "{\"paths\": [[0], [0.5]]}", { "$.paths[1][0]", NULL, NULL } },
		{ "{\"paths\": [[0],\n [1],\n [0, 0],\n [2, 0]]}",
		  { "bad.json:4:2: $.paths[3]", "path [2, 0] needs its prefix [2]", NULL } },
		{ "{\"paths\": [[0], [1], [0, 0], [1]]}",
		  { "$.paths[3]", "path [1] is listed twice (entries 1 and 3)", NULL } },
		{ "{\"paths\": [[0], [0, 0], [0, 2]]}",
		  { "$.paths[2]", "path [0, 2] has rank 2 but its siblings stop at rank 0", NULL } },
		{ "{\"name\": \"\", \"paths\": [[0]]}", { "$.name: expected 1 to 63 bytes", NULL, NULL } },
		{ "{\"name\": 3, \"paths\": [[0]]}", { "$.name: expected a string", NULL, NULL } },
		{ "{\"source\": [], \"paths\": [[0]]}", { "$.source: expected a string", NULL, NULL } },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = write_tmp("bad.json", bad[i].text);
		memset(&err, 0, sizeof(err));
		if (rt_tree_parse(p, NULL, t, &err) == 0)
			fail_msg("accepted %s", bad[i].text);
		for (int k = 0; k < 3 && bad[i].frag[k]; k++)
			if (!strstr(err.msg, bad[i].frag[k]))
				fail_msg("for %s: message lacks \"%s\": %s", bad[i].text, bad[i].frag[k],
					 err.msg);
		/* the same through the from-memory entry point */
		memset(&err, 0, sizeof(err));
		assert_true(rt_tree_from_json_text(bad[i].text, strlen(bad[i].text), "bad.json", t,
						    &err) < 0);
		assert_int_equal(t->n, 0);
	}

	/* from memory: the buffer need not be NUL-terminated */
	char buf[32];
	memcpy(buf, "{\"paths\": [[0], [1]]}XXXXXXXX", 29);
	memset(&err, 0, sizeof(err));
	if (rt_tree_from_json_text(buf, 21, "dir/mem.json", t, &err))
		fail_msg("%s", err.msg);
	assert_string_equal(t->name, "mem");
	assert_int_equal(t->n, 3);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preset_medusa63),
		cmocka_unit_test(test_preset_eagle25),
		cmocka_unit_test(test_preset_sequoia63),
		cmocka_unit_test(test_preset_biseq),
		cmocka_unit_test(test_preset_fitted),
		cmocka_unit_test(test_fit_exhaustive),
		cmocka_unit_test(test_generated_chain),
		cmocka_unit_test(test_generated_kary),
		cmocka_unit_test(test_generated_branch),
		cmocka_unit_test(test_generated_batch),
		cmocka_unit_test(test_literal_trees),
		cmocka_unit_test(test_errors_paths),
		cmocka_unit_test(test_errors_specs),
		cmocka_unit_test_setup_teardown(test_files, setup_tmp, teardown_tmp),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

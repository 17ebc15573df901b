/* step template (the engine's bookkeeping kernel) in the emulator vs
 * ref_step, every mode: tree_prep on trees of 1, 5 (chain), 25 and 63 nodes
 * (blocks smaller than the tree, so threads stride), catchup_prep with and
 * without committed tokens, and iter_end on accepted paths of real trees:
 * plain iterations, ring wrap-around (a ring of 8 and of 256), EOS inside the
 * path and as the final token, MAXNEW reached mid-path, EOS and MAXNEW on the
 * same token, the context stop, an engine already stopped, the n-gram
 * history with and without room for the next root. Every buffer the kernel
 * may touch starts random (state header, ring, spare words, counts) and is
 * compared whole, word for word, so a stray write shows; guard zones from
 * emu_alloc. The expected stop, NOUT and ring contents of each iter_end case
 * are also derived here by hand, so the reference itself is checked. Then
 * NVRTC (sm_80, sm_90) per mode: zero spills. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine_state.h"
#include "kernels/ref/ref.h"
#include "core/tree.h"

#include "op_harness.h"
#include "testutil.h"

#define MAX_CTX 300

static uint64_t rnd64(void) /* splitmix64 (tu_rand) on the shared state */
{
	return tu_rand(&rng_state);
}

static int rnd_int(int n) { return (int)(rnd64() % (uint64_t)n); }

static void tree_get(const char *spec, rt_tree *t)
{
	sw_err err = {0};
	char dir[512];
	if (!spec) { /* the root alone */
		memset(t, 0, sizeof(*t));
		t->n = 1;
		t->parent[0] = -1;
		return;
	}
	snprintf(dir, sizeof(dir), "%s/models/trees", src_root());
	if (rt_tree_parse(spec, dir, t, &err))
		fail_msg("%s", err.msg);
}

/* The ten buffers, device (emu_alloc) and host twins. */
enum { B_STATE, B_ITER, B_TT, B_POS, B_TOK, B_TABLE, B_COUNTS, B_PATH, B_EMIT, B_HIST, NB };
static const char *bname[NB] = {"state", "iter", "tree_tokens", "pos", "tokens",
                                "tree_table", "counts", "accept_path", "emitted", "hist"};

typedef struct bufs {
	int n[NB];
	int32_t *d[NB], *h[NB];
} bufs;

static void bufs_init(bufs *b, const rt_tree *t, int ring)
{
	const int sz[NB] = {RT_ST_WORDS + ring, 1, t->n, t->n, 1, 5 * t->n, 5,
	                    RT_TREE_MAX_DEPTH + 1, RT_TREE_MAX_DEPTH + 1, MAX_CTX};
	for (int i = 0; i < NB; i++) {
		b->n[i] = sz[i];
		b->d[i] = emu_alloc((size_t)sz[i] * 4, bname[i]);
		b->h[i] = malloc((size_t)sz[i] * 4);
		for (int j = 0; j < sz[i]; j++)
			b->h[i][j] = (int32_t)(rnd64() % 100000);
	}
	rt_tree_table(t, b->h[B_TABLE]);
}

static void bufs_free(bufs *b)
{
	for (int i = 0; i < NB; i++) {
		emu_free(b->d[i]);
		free(b->h[i]);
	}
}

static const emu_kernel *kern(int mode, int n_nodes, int ring, int has_hist, int block)
{
	gen_param p[] = {OH_NAME, OH_I("MODE", mode), OH_I("N_NODES", n_nodes),
	                 OH_I("RING", ring), OH_I("MAX_CTX", MAX_CTX), OH_I("HAS_HIST", has_hist),
	                 OH_I("BLOCK", block)};
	return oh_load(SW_OP_step, p, 7);
}

/* Runs mode on the device copies and ref_step on the host ones (both start
 * from the host values), then compares every buffer. Unused arguments are
 * NULL, as the signature allows; hist aliases state when has_hist is 0, as
 * the planner passes it. */
static void run(bufs *b, int mode, int n_nodes, int ring, int has_hist, int block, const char *what)
{
	const emu_kernel *k = kern(mode, n_nodes, ring, has_hist, block);
	int32_t *a[NB];
	for (int i = 0; i < NB; i++) {
		memcpy(b->d[i], b->h[i], (size_t)b->n[i] * 4);
		a[i] = b->d[i];
	}
	if (mode == 0)
		a[B_TOK] = a[B_COUNTS] = a[B_PATH] = a[B_EMIT] = a[B_ITER] = NULL;
	if (mode == 1)
		a[B_TT] = a[B_TABLE] = a[B_COUNTS] = a[B_PATH] = a[B_EMIT] = a[B_ITER] = NULL;
	if (mode == 2)
		a[B_POS] = a[B_TOK] = a[B_TABLE] = NULL;
	if (!has_hist)
		a[B_HIST] = a[B_STATE];
	void *args[NB];
	for (int i = 0; i < NB; i++)
		args[i] = &a[i];
	launch(k, d3(1, 1, 1), d3((unsigned)block, 1, 1), args);
	ref_step(mode, n_nodes, ring, MAX_CTX, has_hist, b->h[B_STATE], b->h[B_ITER], b->h[B_TT],
	         b->h[B_POS], b->h[B_TOK], b->h[B_TABLE], b->h[B_COUNTS], b->h[B_PATH], b->h[B_EMIT],
	         has_hist ? b->h[B_HIST] : b->h[B_STATE]);
	char label[320];
	snprintf(label, sizeof(label), "%s: %s", what, k->name);
	for (int i = 0; i < NB; i++) {
		kern_out o = {.name = bname[i], .type = KERN_I32, .got = b->d[i], .want = b->h[i],
		              .n = (size_t)b->n[i]};
		kern_expect(label, &o);
	}
}

static void test_step_tree_prep(void **state)
{
	static const char *trees[] = {NULL, "chain:4", "branch:4,5", "kary:2:5"};
	static const int want_n[] = {1, 5, 25, 63};
	(void)state;
	rt_tree *t = malloc(sizeof(*t));
	for (int ti = 0; ti < 4; ti++) {
		tree_get(trees[ti], t);
		assert_int_equal(t->n, want_n[ti]);
		for (int blk = 32; blk <= 64; blk += 32)
			for (int rep = 0; rep < 3; rep++) {
				bufs b;
				char what[64];
				bufs_init(&b, t, 16);
				b.h[B_STATE][RT_ST_TLEN] = rep == 0 ? 0 : rnd_int(MAX_CTX - t->n);
				snprintf(what, sizeof(what), "tree_prep N %d TLEN %d", t->n, b.h[B_STATE][RT_ST_TLEN]);
				const int L = b.h[B_STATE][RT_ST_TLEN], root = b.h[B_STATE][RT_ST_ROOT];
				run(&b, 0, t->n, 16, 0, blk, what);
				/* independent: positions are TLEN + depth, the root token in node 0 */
				for (int i = 0; i < t->n; i++)
					assert_int_equal(b.d[B_POS][i], L + t->depth[i]);
				assert_int_equal(b.d[B_TT][0], root);
				assert_int_equal(b.d[B_STATE][RT_ST_DLEN], L);
				bufs_free(&b);
			}
	}
	free(t);
}

static void test_step_catchup_prep(void **state)
{
	static const int lens[] = {0, 1, 2, 117, MAX_CTX - 1};
	(void)state;
	rt_tree *t = malloc(sizeof(*t));
	tree_get("chain:4", t);
	for (int i = 0; i < 5; i++) {
		bufs b;
		char what[64];
		bufs_init(&b, t, 16);
		const int L = lens[i];
		b.h[B_STATE][RT_ST_TLEN] = L;
		b.h[B_STATE][RT_ST_LAST] = L > 0 ? 4242 : -1;
		const int root = b.h[B_STATE][RT_ST_ROOT];
		snprintf(what, sizeof(what), "catchup_prep TLEN %d", L);
		run(&b, 1, t->n, 16, 0, 64, what);
		assert_int_equal(b.d[B_TOK][0], L > 0 ? 4242 : root);
		assert_int_equal(b.d[B_POS][0], L > 0 ? L - 1 : 0);
		assert_int_equal(b.d[B_STATE][RT_ST_DLEN], L > 0 ? L - 1 : 0);
		bufs_free(&b);
	}
	free(t);
}

/* A random root-to-node path of t, as node ids. */
static int tree_path(const rt_tree *t, int32_t *path)
{
	int u = 0, n = 0;
	path[n++] = 0;
	while (t->n_children[u] && rnd_int(6)) {
		u = t->child_list[t->child_start[u] + rnd_int(t->n_children[u])];
		path[n++] = u;
	}
	return n;
}

typedef struct iter_case {
	const char *what;
	int L, nout, maxnew, stop0;
	int eos_at;      /* the emitted index made EOS, -1: EOS set but absent, -2: EOS = -1 */
	int min_path;    /* the path has at least this many nodes (chain trees) */
	int want_stop;   /* derived by hand below (-1: derive from the fields) */
} iter_case;

/* One iter_end: an accepted path as the verifier writes it (accept_path from
 * the root, emitted = the accepted draft tokens then the final token,
 * counts[1] = nodes, counts[2] = final), the state as the case says. */
static void iter_end(const rt_tree *t, int ring, int has_hist, const iter_case *c)
{
	bufs b;
	char what[160];
	bufs_init(&b, t, ring);
	int32_t *st = b.h[B_STATE], *path = b.h[B_PATH], *em = b.h[B_EMIT];
	int n;
	do
		n = tree_path(t, path);
	while (n < c->min_path);
	for (int i = 0; i < t->n; i++)
		b.h[B_TT][i] = 10 + rnd_int(5); /* small tokens: EOS must be placed, not found by luck */
	for (int i = 0; i + 1 < n; i++)
		em[i] = b.h[B_TT][path[i + 1]];
	const int fin = 10 + rnd_int(5);
	em[n - 1] = fin;
	b.h[B_COUNTS][0] = n - 1;
	b.h[B_COUNTS][1] = n;
	b.h[B_COUNTS][2] = fin;
	st[RT_ST_TLEN] = c->L;
	st[RT_ST_NOUT] = c->nout;
	st[RT_ST_MAXNEW] = c->maxnew;
	st[RT_ST_STOP] = c->stop0;
	st[RT_ST_EOS] = c->eos_at == -2 ? -1 : 99;
	if (c->eos_at >= 0) {
		assert_true(c->eos_at < n);
		em[c->eos_at] = 99;
		if (c->eos_at == n - 1)
			b.h[B_COUNTS][2] = 99;
	}
	/* hand-derived outcome */
	int emit = n, stop = 0;
	if (c->stop0) {
		emit = 0;
		stop = c->stop0;
	} else {
		/* the EOS ends the path at eos_at + 1 tokens, MAXNEW at m tokens;
		 * on the same token EOS is tested first */
		const int e_lim = c->eos_at >= 0 ? c->eos_at + 1 : n + 1, m = c->maxnew - c->nout;
		if (e_lim <= n && e_lim <= m) {
			emit = e_lim;
			stop = RT_STOP_EOS;
		} else if (m <= n) {
			emit = m;
			stop = RT_STOP_MAXNEW;
		}
		if (!stop && c->L + n + t->n > MAX_CTX)
			stop = RT_STOP_CTX;
	}
	if (c->want_stop >= 0)
		assert_int_equal(stop, c->want_stop); /* the case means what it says */
	int32_t ring0[512];
	memcpy(ring0, st + RT_ST_WORDS, (size_t)ring * 4);
	const int iter0 = b.h[B_ITER][0], siter0 = st[RT_ST_ITER], last0 = st[RT_ST_LAST];
	const int hrow0 = st[RT_ST_HROW];
	snprintf(what, sizeof(what), "%s (N %d, ring %d, path %d, L %d, NOUT %d, MAXNEW %d)", c->what,
	         t->n, ring, n, c->L, c->nout, c->maxnew);
	run(&b, 2, t->n, ring, has_hist, 64, what);

	const int32_t *ds = b.d[B_STATE];
	if (ds[RT_ST_STOP] != stop || ds[RT_ST_NOUT] != c->nout + emit)
		fail_msg("%s: stop %d NOUT %d, want %d and %d", what, ds[RT_ST_STOP], ds[RT_ST_NOUT], stop,
		         c->nout + emit);
	int32_t want_ring[512]; /* as ring0 */
	for (int j = 0; j < ring; j++) { /* the ring: exactly emitted[0..emit) from NOUT on */
		int i = ((j - c->nout) % ring + ring) % ring;
		want_ring[j] = i < emit ? em[i] : ring0[j];
	}
	kern_expect_equal(what, "ring", KERN_I32, ds + RT_ST_WORDS, want_ring, (size_t)ring);
	if (c->stop0) {
		assert_int_equal(b.d[B_COUNTS][1], 0);
		assert_int_equal(b.d[B_ITER][0], iter0);
		assert_int_equal(ds[RT_ST_ITER], siter0);
		assert_int_equal(ds[RT_ST_LAST], last0);
		assert_int_equal(ds[RT_ST_HROW], hrow0);
	} else {
		assert_int_equal(b.d[B_COUNTS][1], n);
		assert_int_equal(b.d[B_ITER][0], iter0 + 1);
		assert_int_equal(ds[RT_ST_ITER], siter0 + 1);
		assert_int_equal(ds[RT_ST_ROOT], b.h[B_COUNTS][2]);
		assert_int_equal(ds[RT_ST_LAST], b.h[B_TT][path[n - 1]]);
		assert_int_equal(ds[RT_ST_HROW], path[n - 1]); /* the last accepted node */
		if (has_hist) {
			for (int i = 0; i < n && c->L + i < MAX_CTX; i++)
				assert_int_equal(b.d[B_HIST][c->L + i], b.h[B_TT][path[i]]);
			if (c->L + n < MAX_CTX)
				assert_int_equal(b.d[B_HIST][c->L + n], b.h[B_COUNTS][2]);
		}
	}
	bufs_free(&b);
}

static void test_step_iter_end(void **state)
{
	static const char *trees[] = {NULL, "chain:4", "branch:4,5", "kary:2:5"};
	const iter_case plain[] = {
		{"plain", 0, 0, 1000, 0, -2, 1, RT_STOP_NONE},
		{"plain, EOS absent", 37, 12, 1000, 0, -1, 1, RT_STOP_NONE},
	};
	(void)state;
	rt_tree *t = malloc(sizeof(*t));
	for (int ti = 0; ti < 4; ti++) {
		tree_get(trees[ti], t);
		for (int hh = 0; hh < 2; hh++)
			for (int rep = 0; rep < 4; rep++) {
				iter_end(t, 256, hh, &plain[rep % 2]);
				iter_case ring_wrap = {"ring wrap", 50, 254 - rep, 1000, 0, -1, 1, RT_STOP_NONE};
				iter_end(t, 256, hh, &ring_wrap);
				iter_case at_end = {"at the context end", MAX_CTX - t->n - rnd_int(2) * 3, 5, 1000, 0,
				                    -1, 1, -1};
				iter_end(t, 256, hh, &at_end);
				iter_case stopped = {"already stopped", 40, 7, 1000, 1 + rep % 3, -1, 1, -1};
				iter_end(t, 256, hh, &stopped);
			}
	}
	/* chains of 5 (paths of up to 5 nodes) and 63-node trees, a ring of 8 */
	tree_get("chain:4", t);
	const iter_case chain[] = {
		{"ring of 8 wraps", 10, 6, 1000, 0, -1, 5, RT_STOP_NONE},
		{"ring of 8 wraps twice over NOUT", 10, 8 * 7 + 5, 1000, 0, -2, 5, RT_STOP_NONE},
		{"EOS at path index 1", 10, 3, 1000, 0, 1, 5, RT_STOP_EOS},
		{"EOS is the first emitted token", 10, 3, 1000, 0, 0, 5, RT_STOP_EOS},
		{"EOS is the final token", 10, 3, 1000, 0, 4, 5, RT_STOP_EOS},
		{"MAXNEW mid-path", 10, 3, 5, 0, -1, 5, RT_STOP_MAXNEW},
		{"MAXNEW at the first token", 10, 3, 4, 0, -1, 5, RT_STOP_MAXNEW},
		{"MAXNEW at the last token", 10, 3, 8, 0, -1, 5, RT_STOP_MAXNEW},
		{"MAXNEW one past the path", 10, 3, 9, 0, -1, 5, RT_STOP_NONE},
		{"EOS and MAXNEW on one token", 10, 3, 6, 0, 2, 5, RT_STOP_EOS},
		{"MAXNEW before EOS", 10, 3, 5, 0, 3, 5, RT_STOP_MAXNEW},
		{"EOS before MAXNEW", 10, 3, 7, 0, 1, 5, RT_STOP_EOS},
		{"EOS wins over the context", MAX_CTX - 5, 3, 1000, 0, 2, 5, RT_STOP_EOS},
		{"context stop", MAX_CTX - 9, 3, 1000, 0, -1, 5, RT_STOP_CTX},
		{"context: just fits", MAX_CTX - 10, 3, 1000, 0, -1, 5, RT_STOP_NONE},
		{"hist: the root is the last entry", MAX_CTX - 6, 3, 1000, 0, -1, 5, RT_STOP_CTX},
		{"hist: no room for the root", MAX_CTX - 5, 3, 1000, 0, -1, 5, RT_STOP_CTX},
		{"hist: path past the end", MAX_CTX - 2, 3, 1000, 0, -1, 5, RT_STOP_CTX},
		{"stopped by EOS before", 10, 3, 1000, RT_STOP_EOS, 1, 5, RT_STOP_EOS},
		{"stopped by MAXNEW before", 10, 3, 3, RT_STOP_MAXNEW, -1, 5, RT_STOP_MAXNEW},
		{"stopped by the context before", MAX_CTX - 1, 3, 1000, RT_STOP_CTX, -1, 5, RT_STOP_CTX},
	};
	for (size_t i = 0; i < sizeof(chain) / sizeof(chain[0]); i++)
		for (int hh = 0; hh < 2; hh++) {
			iter_end(t, 8, hh, &chain[i]);
			iter_end(t, 256, hh, &chain[i]);
		}
	tree_get("kary:2:5", t);
	iter_case deep_eos = {"EOS in a 63-node tree's path", 100, 200, 1000, 0, 2, 4, RT_STOP_EOS};
	iter_case deep_max = {"MAXNEW in a 63-node tree's path", 100, 200, 203, 0, -1, 4, RT_STOP_MAXNEW};
	for (int rep = 0; rep < 4; rep++) {
		iter_end(t, 256, rep % 2, &deep_eos);
		iter_end(t, 256, rep % 2, &deep_max);
	}
	free(t);
}

static void test_step_nvrtc(void **state)
{
	static const int cfg[][3] = {{0, 64, 0}, {1, 64, 0}, {2, 64, 0}, {2, 64, 1}, {0, 26, 0}}; /* MODE N HIST */
	(void)state;
	for (int i = 0; i < 5; i++) {
		gen_param p[] = {OH_NAME, OH_I("MODE", cfg[i][0]), OH_I("N_NODES", cfg[i][1]),
		                 OH_I("RING", 256), OH_I("MAX_CTX", 8192),
		                 OH_I("HAS_HIST", cfg[i][2]), OH_I("BLOCK", 64)};
		oh_nvrtc_p(SW_OP_step, p, 7);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step_tree_prep),
		cmocka_unit_test(test_step_catchup_prep),
		cmocka_unit_test(test_step_iter_end),
		cmocka_unit_test(test_step_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

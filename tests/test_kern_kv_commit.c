/* kv_commit template in the emulator vs the llama_commit_kv loop of
 * runtime/llama.c (sequential, increasing i, memcpy per slot) on random
 * caches: accepted paths of real trees (sequoia63, kary:2:6, chain:12),
 * count 1 (the root alone), overlapping moves (keep 0 2 3 ...), paths longer
 * than the 8-move staging chunk, lengths 0 and mid-cache, target and draft
 * caches of different shapes committed one after the other, the same cache
 * committed twice (the done ticket must have been reset). Byte-exact over
 * whole buffers, so a stray write anywhere shows; guard zones from
 * emu_alloc. Then NVRTC (sm_80, sm_90) at Llama-3-8B and draft shapes: zero
 * spills, resources printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/jit/nvrtc.h"
#include "core/tree.h"

#include "core/fileio.h"
#include "op_harness.h"

static uint64_t rnd64(void) /* splitmix64 bits, from the shared state */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

typedef struct cache {
	int n_layers, max_ctx, row_vec, block;
	const emu_kernel *k;
	unsigned char *kc, *vc;         /* device (emu_alloc) */
	unsigned char *hk, *hv;         /* host copies the reference loop moves */
	int32_t *len, *done;
} cache;

static void cache_init(cache *c, int n_layers, int max_ctx, int row_vec, int block)
{
	gen_param p[] = {OH_NAME, OH_I("N_LAYERS", n_layers),
	                 OH_I("MAX_CTX", max_ctx), OH_I("ROW_VEC", row_vec), OH_I("BLOCK", block)};
	size_t n = (size_t)n_layers * max_ctx * row_vec * 16;
	c->n_layers = n_layers;
	c->max_ctx = max_ctx;
	c->row_vec = row_vec;
	c->block = block;
	c->k = oh_load(SW_OP_kv_commit, p, 5);
	c->kc = emu_alloc(n, "k_cache");
	c->vc = emu_alloc(n, "v_cache");
	c->hk = malloc(n);
	c->hv = malloc(n);
	for (size_t i = 0; i < n; i++) {
		c->kc[i] = c->hk[i] = (unsigned char)rnd64();
		c->vc[i] = c->hv[i] = (unsigned char)rnd64();
	}
	c->len = emu_alloc(sizeof(int32_t), "len");
	c->done = emu_alloc(sizeof(int32_t), "done");
	*c->len = 0;
	*c->done = 0;
}

static void cache_free(cache *c)
{
	emu_free(c->kc);
	emu_free(c->vc);
	emu_free(c->len);
	emu_free(c->done);
	free(c->hk);
	free(c->hv);
}

/* llama_commit_kv, bytes instead of floats. */
static void ref_commit(cache *c, int len, const int *keep, int n)
{
	size_t row = (size_t)c->row_vec * 16;
	for (int l = 0; l < c->n_layers; l++) {
		unsigned char *kc = c->hk + ((size_t)l * c->max_ctx + len) * row;
		unsigned char *vc = c->hv + ((size_t)l * c->max_ctx + len) * row;
		for (int i = 0; i < n; i++) {
			if (keep[i] == i)
				continue;
			memcpy(kc + (size_t)i * row, kc + (size_t)keep[i] * row, row);
			memcpy(vc + (size_t)i * row, vc + (size_t)keep[i] * row, row);
		}
	}
}

static void commit(cache *c, int len, const int *keep, int n, const char *what)
{
	int32_t *dkeep = emu_alloc((size_t)n * sizeof(int32_t), "keep");
	int32_t *dn = emu_alloc(sizeof(int32_t), "n_acc");
	size_t bytes = (size_t)c->n_layers * c->max_ctx * c->row_vec * 16;
	unsigned grid = (unsigned)((2 * c->n_layers * c->row_vec + c->block - 1) / c->block);
	emu_report rep;

	memcpy(dkeep, keep, (size_t)n * sizeof(int32_t));
	*dn = n;
	*c->len = len;
	void *args[] = {&c->kc, &c->vc, &dkeep, &dn, &c->len, &c->done};
	if (emu_launch(c->k, d3(grid, 1, 1), d3((unsigned)c->block, 1, 1), 0, args, &rep))
		fail_msg("%s: %s: %s", what, c->k->name, rep.msg);
	ref_commit(c, len, keep, n);
	if (*c->len != len + n)
		fail_msg("%s: len %d, want %d + %d", what, *c->len, len, n);
	if (*c->done != 0)
		fail_msg("%s: done ticket left at %d (grid %u)", what, *c->done, grid);
	const kern_out outs[] = { /* [layer][slot][byte of the row] */
		{.name = "k_cache", .type = KERN_U8, .got = c->kc, .want = c->hk, .n = bytes,
		 .dims = {c->n_layers, c->max_ctx, c->row_vec * 16}},
		{.name = "v_cache", .type = KERN_U8, .got = c->vc, .want = c->hv, .n = bytes,
		 .dims = {c->n_layers, c->max_ctx, c->row_vec * 16}},
	};
	for (int i = 0; i < 2; i++)
		kern_expect(what, &outs[i]);
	emu_free(dkeep);
	emu_free(dn);
}

/* A random root-to-node path of t of at least min_len nodes, as node ids. */
static int tree_path(const rt_tree *t, int *keep)
{
	int u = 0, n = 0;
	keep[n++] = 0;
	while (t->n_children[u] && (rnd64() % 8)) {
		u = t->child_list[t->child_start[u] + (int)(rnd64() % (uint64_t)t->n_children[u])];
		keep[n++] = u;
	}
	return n;
}

static void test_kv_commit_trees(void **state)
{
	static const char *trees[] = {"sequoia63", "kary:2:6", "chain:12", "eagle25"};
	(void)state;
	cache tgt, drf;
	/* target: 3 layers, a 200-slot cache of 256-byte rows; draft: 1 layer of
	 * 48-byte rows (3 vectors: a width that is no power of two) */
	cache_init(&tgt, 3, 200, 16, 64);
	cache_init(&drf, 1, 200, 3, 32);
	rt_tree *t = malloc(sizeof(*t));
	int keep[RT_TREE_MAX_DEPTH + 1];
	char what[128];
	int len = 0;
	for (int ti = 0; ti < 4; ti++) {
		sw_err err = {0};
		char dir[512];
		snprintf(dir, sizeof(dir), "%s/models/trees", src_root());
		if (rt_tree_parse(trees[ti], dir, t, &err))
			fail_msg("%s", err.msg);
		for (int rep = 0; rep < 6; rep++) {
			int n = tree_path(t, keep);
			if (len + t->n > tgt.max_ctx)
				len = (int)(rnd64() % 7);
			snprintf(what, sizeof(what), "%s path of %d at len %d", trees[ti], n, len);
			commit(&tgt, len, keep, n, what);
			commit(&drf, len, keep, n, what);
			len += n;
		}
	}
	free(t);
	cache_free(&tgt);
	cache_free(&drf);
}

static void test_kv_commit_edges(void **state)
{
	(void)state;
	cache c;
	cache_init(&c, 2, 64, 5, 32);
	static const int root[] = {0};
	static const int overlap[] = {0, 2, 3, 4, 5};       /* each source is the next destination */
	static const int gap[] = {0, 1, 5};                 /* leading no-ops, then a far move */
	int long_keep[20];
	for (int i = 0; i < 20; i++)
		long_keep[i] = i + (i + 1) / 2;                 /* 0 1 3 4 6 7 ...: spans 3 chunks */
	commit(&c, 0, root, 1, "root only at 0");
	commit(&c, 9, root, 1, "root only at 9");
	commit(&c, 0, overlap, 5, "overlap at 0");
	commit(&c, 17, overlap, 5, "overlap at 17");
	commit(&c, 3, gap, 3, "gap at 3");
	commit(&c, 0, long_keep, 20, "20 moves at 0");
	commit(&c, 31, long_keep, 20, "20 moves at 31");
	cache_free(&c);
}

static void test_kv_commit_nvrtc(void **state)
{
	static const char *archs[] = {"sm_80", "sm_90"};
	/* Llama-3-8B (32 layers, 8 KV heads x 128 x bf16 = 128 vectors), its
	 * one-layer EAGLE draft, Llama-2-7B (32 x 128 x bf16 = 512 vectors) */
	static const int shapes[][3] = {{32, 8192, 128}, {1, 8192, 128}, {32, 4096, 512}};
	sw_err err = {0};
	(void)state;
	gen_nvrtc *nv = nvrtc_or_skip("test_kern_kv_commit");
	char key[256];
	char *prelude = load_prelude_cuda();
	for (int s = 0; s < 3; s++) {
		gen_param p[] = {OH_NAME, OH_I("N_LAYERS", shapes[s][0]),
		                 OH_I("MAX_CTX", shapes[s][1]), OH_I("ROW_VEC", shapes[s][2]),
		                 OH_I("BLOCK", 128)};
		char *src = render_kernel(sw_op_get(SW_OP_kv_commit)->tmpl, "kv_commit", p, 5, false, key,
		                          sizeof(key));
		for (int a = 0; a < 2; a++) {
			gen_kernel_res res[2];
			int n = 0;
			if (gen_nvrtc_compile(nv, prelude, src, key, archs[a], NULL, NULL, res, 2, &n, NULL, &err))
				fail_msg("%s", err.msg);
			assert_int_equal(n, 1);
			print_message("  %-5s %-50s %3d regs %4d B stack %5d B smem, spills %d/%d\n", archs[a],
			              res[0].name, res[0].regs, res[0].stack, res[0].smem, res[0].spill_stores,
			              res[0].spill_loads);
			if (res[0].spill_stores || res[0].spill_loads)
				fail_msg("%s %s: spills", res[0].name, archs[a]);
		}
		free(src);
	}
	free(prelude);
	gen_nvrtc_close(nv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv_commit_edges),
		cmocka_unit_test(test_kv_commit_trees),
		cmocka_unit_test(test_kv_commit_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

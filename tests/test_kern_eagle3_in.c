/* eagle3_in template (an EAGLE-3 head's layer input: [input_norm(embed) ;
 * hidden_norm(feature)] in 16 bits, and the residual) in the emulator vs
 * ref_eagle3_in, and ref_eagle3_in vs runtime/model/eagle3.c's row_in
 * written out here from ref_rmsnorm (the host decoder's own expression).
 * Shapes: DIM 37, 99, 256, 576 (not multiples of the block, and the
 * vector-friendly ones); ROWS 1, 3, 26; fp16 and bf16 tables;
 * NORM_BEFORE_RES 0 and 1; FEAT_TREE 0 (row r's feature) and 1 (a draft
 * level: node LEVEL_BEGIN + r's parent's row of the previous level, parents
 * shuffled) with absent nodes (token -1: a zero embedding half) and tokens
 * past N_IDS. Bounds, derived: the kernel sums squares in fp32 (block
 * order), the reference in double, so a normalised value differs by at most
 * (gamma_DIM / 2 + 5u) relative (test_ops.c rmsnorm_residual's derivation),
 * then both round to 16 bits: one 16-bit ulp of the value (2^-10 fp16,
 * 2^-7 bf16, relative; fp16 subnormals: 2^-24 absolute) on top. The
 * residual without the norm is f itself, bit for bit. Guard zones by the
 * emulator. Then NVRTC (sm_80, sm_90), zero spills. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"
#include "kernels/ref/ref.h"
#include "device/device.h"
#include "device/host_ops.h"
#include "engine/extent.h"

#include "op_harness.h"
#include "testutil.h"

#define EPS 1e-5f

#define PARAMS(rows, dim, n_ids, f16, nbr, tree, lb, pb, nf, block)                         \
	{OH_NAME, OH_I("ROWS", rows), OH_I("DIM", dim), OH_I("N_IDS", n_ids), OH_I("IS_F16", f16),  \
	 OH_I("NORM_BEFORE_RES", nbr), OH_I("FEAT_TREE", tree), OH_I("LEVEL_BEGIN", lb),            \
	 OH_I("PREV_BEGIN", pb), OH_I("N_FEAT", nf), OH_F("EPS", EPS), OH_I("BLOCK", block)}
enum { NP_ = 12 };

static const emu_kernel *kern(int rows, int dim, int n_ids, int f16, int nbr, int tree, int lb,
                              int pb, int nf, int block)
{
	gen_param p[] = PARAMS(rows, dim, n_ids, f16, nbr, tree, lb, pb, nf, block);
	return oh_load(SW_OP_eagle3_in, p, NP_);
}

/* The native host backend's op (runtime/device/host_ops.c) on the same
 * buffers: what an engine's host run does; bit for bit the reference. */
static void host_op(gen_param *p, void **args, int n_args)
{
	rt_kernel_info ki = {.n_params = 0};
	snprintf(ki.tmpl, sizeof(ki.tmpl), "eagle3_in.cu.tmpl");
	for (int i = 1; i < NP_; i++) {
		snprintf(ki.params[ki.n_params].name, sizeof(ki.params[0].name), "%s", p[i].name);
		ki.params[ki.n_params].i = p[i].type == GEN_PARAM_INT ? p[i].i : 0;
		ki.params[ki.n_params].f = p[i].type == GEN_PARAM_INT ? (double)p[i].i : (double)p[i].f;
		ki.n_params++;
	}
	rt_op op = {.kind = RT_OP_KERNEL, .kinfo = &ki, .layer = -1, .n_args = n_args};
	snprintf(op.op, sizeof(op.op), "eagle3_in");
	for (int a = 0; a < n_args; a++)
		op.argval[a] = (rt_dptr)(uintptr_t)*(void **)args[a];
	rt_op_fix_argv(&op);
	sw_err err = {0};
	if (rt_host_native_run(&op, &err))
		fail_msg("host op: %s", err.msg);
}

static long g_absent;

static void check(int rows, int dim, int f16, int nbr, int tree, int block)
{
	enum { N_IDS = 50 };
	const int PB = 1, NP = 3, LB = tree ? PB + NP : 0, N = LB + rows; /* tree nodes */
	const int n_feat = tree ? NP : rows;
	uint16_t *x2 = emu_alloc((size_t)rows * 2 * dim * sizeof(*x2), "x2");
	float *res = emu_alloc((size_t)rows * dim * sizeof(*res), "res");
	uint16_t *embd = emu_alloc((size_t)N_IDS * dim * sizeof(*embd), "embd");
	int32_t *tok = emu_alloc((size_t)N * sizeof(*tok), "tok");
	float *feat = emu_alloc((size_t)n_feat * dim * sizeof(*feat), "feat");
	int32_t *tt = emu_alloc((size_t)5 * N * sizeof(*tt), "tree");
	float *w_in = emu_alloc((size_t)dim * sizeof(float), "w_in");
	float *w_hid = emu_alloc((size_t)dim * sizeof(float), "w_hid");
	uint16_t *wx2 = malloc((size_t)rows * 2 * dim * sizeof(*wx2));
	float *wres = malloc((size_t)rows * dim * sizeof(*wres)), *tmp = malloc(4 * (size_t)dim * sizeof(float));
	int32_t *frow = malloc((size_t)rows * sizeof(*frow)), *rtok = malloc((size_t)rows * sizeof(*rtok));

	for (size_t i = 0; i < (size_t)N_IDS * dim; i++)
		embd[i] = sw_f32_to_half((float)(rnd() * 2.0), f16);
	for (size_t i = 0; i < (size_t)n_feat * dim; i++)
		feat[i] = (float)(rnd() * (i % 7 == 0 ? 30.0 : 3.0));
	for (int i = 0; i < dim; i++) {
		w_in[i] = (float)(1.0 + 0.5 * rnd());
		w_hid[i] = (float)(1.0 + 0.5 * rnd());
	}
	memset(tt, 0, (size_t)5 * N * sizeof(*tt));
	for (int u = 0; u < N; u++) {
		tt[u] = u == 0 ? -1 : u <= PB + NP - 1 ? 0 : PB + (int)(tu_rand(&rng_state) % NP);
		tok[u] = (int32_t)(tu_rand(&rng_state) % N_IDS);
		if (u % 5 == 2)
			tok[u] = u % 2 ? -1 : N_IDS + 3; /* absent, and past the table */
	}
	for (int r = 0; r < rows; r++) {
		frow[r] = tree ? tt[LB + r] - PB : r;
		rtok[r] = tok[tree ? LB + r : r];
		g_absent += rtok[r] < 0 || rtok[r] >= N_IDS;
	}
	assert_int_equal(ref_eagle3_in(wx2, wres, embd, rtok, feat, frow, w_in, w_hid, rows, dim, N_IDS,
	                               n_feat, f16, nbr, EPS, tmp), 0);
	/* the reference vs row_in's expression, independently: ref_rmsnorm of
	 * the widened embedding row (or zeros) and of the feature row */
	for (int r = 0; r < rows; r++) {
		const bool in = rtok[r] >= 0 && rtok[r] < N_IDS;
		for (int i = 0; i < dim; i++)
			tmp[i] = in ? sw_half_to_f32(embd[(size_t)rtok[r] * dim + i], f16) : 0.0f;
		ref_rmsnorm(tmp + dim, tmp, w_in, 1, dim, EPS);
		ref_rmsnorm(tmp + 2 * dim, feat + (size_t)frow[r] * dim, w_hid, 1, dim, EPS);
		for (int i = 0; i < dim; i++) {
			assert_int_equal(wx2[(size_t)r * 2 * dim + i], sw_f32_to_half(tmp[dim + i], f16));
			assert_int_equal(wx2[(size_t)r * 2 * dim + dim + i], sw_f32_to_half(tmp[2 * dim + i], f16));
			const float want = nbr ? tmp[2 * dim + i] : feat[(size_t)frow[r] * dim + i];
			assert_memory_equal(&wres[(size_t)r * dim + i], &want, sizeof(want));
		}
	}
	void *args[] = {&x2, &res, &embd, &tok, &feat, &tt, &w_in, &w_hid};
	/* the host backend's op first, into the kernel's buffers: the reference */
	host_op((gen_param[])PARAMS(rows, dim, N_IDS, f16, nbr, tree, LB, PB, n_feat, block), args, 8);
	assert_memory_equal(x2, wx2, (size_t)rows * 2 * dim * sizeof(*x2));
	assert_memory_equal(res, wres, (size_t)rows * dim * sizeof(*res));
	memset(x2, 0, (size_t)rows * 2 * dim * sizeof(*x2));
	memset(res, 0, (size_t)rows * dim * sizeof(*res));
	const emu_kernel *k = kern(rows, dim, N_IDS, f16, nbr, tree, LB, PB, n_feat, block);
	char what[128];
	snprintf(what, sizeof(what), "%s ROWS%d DIM%d f16 %d nbr %d tree %d", k->name, rows, dim, f16,
	         nbr, tree);
	launch(k, d3((unsigned)rows, 1, 1), d3((unsigned)block, 1, 1), args);
	const double u = 0x1p-24, rel = (dim / 2.0 + 5.0) * u / (1.0 - dim * u) + u;
	const double ulp16 = f16 ? 0x1p-10 : 0x1p-7;
	for (size_t e = 0; e < (size_t)rows * 2 * dim; e++) {
		const double g = sw_half_to_f32(x2[e], f16), w = sw_half_to_f32(wx2[e], f16);
		const double bound = fabs(w) * (rel + ulp16) + (f16 ? 0x1p-24 : 0.0);
		if (!(fabs(g - w) <= bound))
			fail_msg("%s: x2[%zu] = %.9g, the reference's %.9g (bound %.3g)", what, e, g, w, bound);
	}
	for (size_t e = 0; e < (size_t)rows * dim; e++) {
		const double g = res[e], w = wres[e];
		if (!nbr) {
			assert_memory_equal(&res[e], &wres[e], sizeof(float));
			continue;
		}
		/* the kernel's fp32 value before its 16-bit rounding: rel only */
		if (!(fabs(g - w) <= fabs(w) * rel * 1.0001 + 1e-30))
			fail_msg("%s: res[%zu] = %.9g, the reference's %.9g", what, e, g, w);
	}
	emu_free(x2);
	emu_free(res);
	emu_free(embd);
	emu_free(tok);
	emu_free(feat);
	emu_free(tt);
	emu_free(w_in);
	emu_free(w_hid);
	free(wx2);
	free(wres);
	free(tmp);
	free(frow);
	free(rtok);
}

static void test_eagle3_in_shapes(void **state)
{
	static const int dims[] = {37, 99, 256, 576}, rows[] = {1, 3, 26};
	(void)state;
	for (int d = 0; d < 4; d++)
		for (int r = 0; r < 3; r++)
			for (int v = 0; v < 4; v++)
				check(rows[r], dims[d], v & 1, v >> 1, (d + r + v) % 2, dims[d] < 100 ? 32 : 128);
	print_message("  %ld rows with an absent or out-of-table token\n", g_absent);
	assert_true(g_absent > 5);
}

static void test_eagle3_in_refused(void **state)
{
	uint16_t x2[8] = {0}, embd[8] = {0};
	float res[4] = {0}, feat[4] = {0}, w[2] = {1, 1}, tmp[8];
	int32_t tok[2] = {0, 1}, frow[2] = {0, 2};
	(void)state;
	assert_int_equal(ref_eagle3_in(x2, res, embd, tok, feat, frow, w, w, 2, 2, 4, 2, 1, 0, EPS, tmp),
	                 REF_EINVAL); /* feature row 2 of 2 */
	frow[1] = -1;
	assert_int_equal(ref_eagle3_in(x2, res, embd, tok, feat, frow, w, w, 2, 2, 4, 2, 1, 0, EPS, tmp),
	                 REF_EINVAL);
	assert_int_equal(ref_eagle3_in(x2, res, embd, tok, feat, NULL, w, w, 0, 2, 4, 2, 1, 0, EPS, tmp),
	                 REF_EINVAL);
}

/* The loader's bound (runtime/engine/extent.c's rule) against the sizes
 * this file derives for the kernel on its own (check()'s buffers: x2 ROWS x
 * 2 DIM, res ROWS x DIM, the table N_IDS rows, tok and the parent row to the
 * level's last node, feat N_FEAT rows, the tree unread by FEAT_TREE 0); the
 * kernel then runs in buffers of exactly those extents (the guard zones
 * catch a write past them); and the launches the rule must refuse. A tree
 * of 1 root, 3 children, 6 grandchildren (depths 0, 1, 2); the root row
 * (LEVEL_BEGIN 0: one row whose feature row is a run-time word). */
enum { XN = 10 };
static rt_manifest *ext_manifest(void)
{
	static const int par[XN] = {-1, 0, 0, 0, 1, 1, 2, 2, 3, 3};
	rt_manifest *m = calloc(1, sizeof(*m));
	assert_non_null(m);
	m->n_nodes = XN;
	for (int u = 0; u < XN; u++) {
		m->tree_table[u] = par[u];
		m->tree_table[4 * XN + u] = u == 0 ? 0 : u < 4 ? 1 : 2;
	}
	return m;
}

static int ext_run(rt_manifest *m, gen_param *p, unsigned gx, unsigned bx, rt_extent *e, char *why,
                   size_t n)
{
	static rt_kernel_info ki;
	memset(&ki, 0, sizeof(ki));
	snprintf(ki.tmpl, sizeof(ki.tmpl), "eagle3_in.cu.tmpl");
	snprintf(ki.uri, sizeof(ki.uri), "eagle3_in_test");
	for (int i = 1; i < NP_; i++) {
		snprintf(ki.params[ki.n_params].name, sizeof(ki.params[0].name), "%s", p[i].name);
		ki.params[ki.n_params].i = p[i].type == GEN_PARAM_INT ? p[i].i : 0;
		ki.params[ki.n_params].f = p[i].type == GEN_PARAM_INT ? (double)p[i].i : (double)p[i].f;
		ki.n_params++;
	}
	m->kernels = &ki;
	m->n_kernels = 1;
	rt_engine_pop x = {.exec = RT_EXEC_KERNEL, .kernel = 0, .grid = {gx, 1, 1},
	                   .block = {bx, 1, 1}, .n_args = 8};
	snprintf(x.op, sizeof(x.op), "eagle3_in");
	snprintf(x.entry, sizeof(x.entry), "eagle3_in_test");
	for (int a = 0; a < 8; a++)
		x.arg_buf[a] = a;
	return rt_extent_op(m, &x, e, why, n);
}

static void test_eagle3_in_extent(void **state)
{
	/* rows, dim, f16, tree, level begin, prev begin, n_feat */
	static const int cfg[][7] = {{1, 37, 1, 0, 0, 0, 1},  {26, 99, 0, 0, 0, 0, 26},
	                             {3, 64, 1, 1, 1, 0, 1},  {6, 37, 0, 1, 4, 1, 3},
	                             {6, 128, 1, 1, 4, 1, 3}, {1, 64, 1, 1, 0, 0, 7}};
	enum { N_IDS = 50 };
	(void)state;
	rt_manifest *m = ext_manifest();
	char why[512];
	for (int c = 0; c < 6; c++) {
		const int R = cfg[c][0], D = cfg[c][1], f16 = cfg[c][2], T = cfg[c][3];
		const int LB = cfg[c][4], PB = cfg[c][5], NF = cfg[c][6];
		gen_param p[] = PARAMS(R, D, N_IDS, f16, 1, T, LB, PB, NF, 32);
		rt_extent e;
		if (ext_run(m, p, (unsigned)R, 32, &e, why, sizeof(why)))
			fail_msg("config %d refused: %s", c, why);
		const int64_t want[8] = {(int64_t)R * 2 * D * 2, (int64_t)R * D * 4, (int64_t)N_IDS * D * 2,
		                         (int64_t)(T ? LB + R : R) * 4, (int64_t)NF * D * 4,
		                         T ? (int64_t)(LB + R) * 4 : 0, (int64_t)D * 4, (int64_t)D * 4};
		for (int a = 0; a < 8; a++)
			if (e.bytes[a] != want[a])
				fail_msg("config %d args[%d]: extent %lld (%s), derived %lld", c, a,
				         (long long)e.bytes[a], e.what[a], (long long)want[a]);
		assert_int_equal(e.writes, 3u);
		/* the kernel in buffers of exactly those extents */
		void *b[8];
		for (int a = 0; a < 8; a++) {
			b[a] = emu_alloc(e.bytes[a] ? (size_t)e.bytes[a] : 1, "extent");
			memset(b[a], 0, e.bytes[a] ? (size_t)e.bytes[a] : 1);
		}
		for (int i = 0; i < D; i++)
			((float *)b[6])[i] = ((float *)b[7])[i] = 1.0f;
		for (int i = 0; i < (T ? LB + R : R); i++)
			((int32_t *)b[3])[i] = (i * 7) % (N_IDS + 5) - 2; /* absent and past-the-table ids */
		for (int u = 0; T && u < LB + R; u++) /* the root row: a row id, here the last */
			((int32_t *)b[5])[u] = LB ? m->tree_table[u] : NF - 1;
		for (int64_t i = 0; i < e.bytes[4] / 4; i++)
			((float *)b[4])[i] = (float)(i % 13) - 6.0f;
		void *args[] = {&b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7]};
		launch(kern(R, D, N_IDS, f16, 1, T, LB, PB, NF, 32), d3((unsigned)R, 1, 1), d3(32, 1, 1),
		       args);
		for (int a = 0; a < 8; a++)
			emu_free(b[a]);
	}
	/* refused: each names what it expected */
	static const struct {
		int rows, tree, lb, pb, nf, gx, bx;
		const char *expect;
	} bad[] = {
		{3, 1, 1, 0, 1, 4, 32, "expected [3, 1, 1] (a block per row: ROWS)"},
		{3, 1, 1, 0, 1, 3, 64, "expected [32, 1, 1] (the kernel's BLOCK)"},
		{6, 1, 5, 1, 3, 6, 32, "expected at most the tree's 10"},
		{6, 1, 4, 1, 2, 6, 32, "and a parent in [PREV_BEGIN 1, + N_FEAT 2)"},
		{5, 1, 3, 0, 1, 5, 32, "expected depth 1 (node LEVEL_BEGIN 3's"},
		{3, 1, 1, 0, 2, 3, 32, "expected at most LEVEL_BEGIN 1"},
		{6, 1, 4, 0, 4, 6, 32, "tree node 0 (feature row 0) of depth 0, expected 1"},
		{2, 1, 0, 0, 1, 2, 32, "a root row (FEAT_TREE 1, LEVEL_BEGIN 0) with ROWS 2 and "
		 "PREV_BEGIN 0, expected 1 and 0"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		gen_param p[] = PARAMS(bad[i].rows, 64, N_IDS, 1, 1, bad[i].tree, bad[i].lb, bad[i].pb,
		                       bad[i].nf, 32);
		rt_extent e;
		if (!ext_run(m, p, (unsigned)bad[i].gx, (unsigned)bad[i].bx, &e, why, sizeof(why)))
			fail_msg("bad launch %zu accepted", i);
		if (!strstr(why, bad[i].expect))
			fail_msg("bad launch %zu: \"%s\" lacks \"%s\"", i, why, bad[i].expect);
		print_message("  refused: %s\n", why);
	}
	free(m);
}

static void test_eagle3_in_nvrtc(void **state)
{
	/* SmolLM2 (576) and Llama-3-8B (4096): committed rows and a draft level */
	static const int shapes[][4] = {{16, 576, 49152, 0}, {10, 576, 49152, 1}, {64, 4096, 128256, 0},
	                                {16, 4096, 128256, 1}};
	(void)state;
	for (int s = 0; s < 4; s++) {
		gen_param p[] = PARAMS(shapes[s][0], shapes[s][1], shapes[s][2], s & 1, 0, shapes[s][3],
		                       shapes[s][3] ? 5 : 0, shapes[s][3], shapes[s][3] ? 4 : shapes[s][0], 256);
		oh_nvrtc_p(SW_OP_eagle3_in, p, NP_);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eagle3_in_shapes),
		cmocka_unit_test(test_eagle3_in_refused),
		cmocka_unit_test(test_eagle3_in_extent),
		cmocka_unit_test(test_eagle3_in_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

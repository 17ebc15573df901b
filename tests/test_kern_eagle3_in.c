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
 * (gamma_DIM / 2 + 5u) relative (test_kern_rmsnorm_residual's derivation),
 * then both round to 16 bits: one 16-bit ulp of the value (2^-10 fp16,
 * 2^-7 bf16, relative; fp16 subnormals: 2^-24 absolute) on top. The
 * residual without the norm is f itself, bit for bit. Guard zones by the
 * emulator. Then NVRTC (sm_80, sm_90), zero spills. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/emu.h"
#include "kernels/half.h"
#include "kernels/ref/ref.h"
#include "gen/render.h"
#include "device/device.h"
#include "device/host_ops.h"

#include "kern_util.h"
#include "testutil.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}
#define EPS 1e-5f

#define PARAMS(rows, dim, n_ids, f16, nbr, tree, lb, pb, nf, block)                                  \
	{{.name = "NAME", .type = GEN_PARAM_IDENT}, I("ROWS", rows), I("DIM", dim),                \
	 I("N_IDS", n_ids), I("IS_F16", f16), I("NORM_BEFORE_RES", nbr), I("FEAT_TREE", tree),      \
	 I("LEVEL_BEGIN", lb), I("PREV_BEGIN", pb), I("N_FEAT", nf),                                \
	 {.name = "EPS", .type = GEN_PARAM_FLOAT, .f = EPS}, I("BLOCK", block)}
enum { NP_ = 12 };

static const emu_kernel *kern(int rows, int dim, int n_ids, int f16, int nbr, int tree, int lb,
                              int pb, int nf, int block)
{
	gen_param p[] = PARAMS(rows, dim, n_ids, f16, nbr, tree, lb, pb, nf, block);
	return load_kernel("eagle3_in.cu.tmpl", "eagle3_in", p, NP_);
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

static void test_eagle3_in_nvrtc(void **state)
{
	/* SmolLM2 (576) and Llama-3-8B (4096): committed rows and a draft level */
	static const int shapes[][4] = {{16, 576, 49152, 0}, {10, 576, 49152, 1}, {64, 4096, 128256, 0},
	                                {16, 4096, 128256, 1}};
	(void)state;
	for (int s = 0; s < 4; s++) {
		gen_param p[] = PARAMS(shapes[s][0], shapes[s][1], shapes[s][2], s & 1, 0, shapes[s][3],
		                       shapes[s][3] ? 5 : 0, shapes[s][3], shapes[s][3] ? 4 : shapes[s][0], 256);
		nvrtc_check_ex("eagle3_in.cu.tmpl", "eagle3_in", p, NP_, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eagle3_in_shapes),
		cmocka_unit_test(test_eagle3_in_refused),
		cmocka_unit_test(test_eagle3_in_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

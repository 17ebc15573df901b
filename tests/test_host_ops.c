/* The native host ops' own implementations (runtime/device/host_ops.c) where
 * they are not a plain kernels/ref call, run as the host backend runs them
 * (rt_host_native_run on an op record with its template constants), against
 * the kernels/ref function the op specifies, bit for bit:
 *  - kv_store: rows converted with the vectorised cast (hg_from_f32) against
 *    ref_kv_store (sw_f32_to_half per element): fp16 and bf16; values with
 *    NaN (both signs, payloads), +-inf, +-0, fp16 subnormals and overflow,
 *    bf16 rounding ties; KVD 192 (SmolLM2), 20 and 5 (vector tails); ROW0 0
 *    and 2; rows past MAX_CTX dropped (none, some, all); rows regions (the
 *    live rows of the planned ones); the whole cache compared, so nothing
 *    outside the rows is written;
 *  - rope: each position's cos and sin kept across calls (host_ops.c
 *    rope_angles) against ref_rope: the same position again (a hit), another
 *    position, the same position with other inv_freq values (a miss by
 *    content), rows with repeated positions; head_dim 64 / rot 64, head_dim
 *    20 / rot 16 (partial rotation), rot 258 (past the cache: ref_rope
 *    itself); rows regions;
 *  - swiglu: SwiGLU (ACT 0) is host_rowops.c's hr_swiglu (host_exp.h's exp;
 *    tests/test_host_rowops.c holds it to ref_swiglu's derived bound and its
 *    paths to each other bit for bit): the op against it on the live rows
 *    only, GeGLU (ACT 1, still ref_geglu_tanh) against kernels/ref: FFN 1536
 *    (SmolLM2), 900, 5 and 263 (vector tails); NaN, +-inf, +-0, large |g|
 *    (exp overflow and underflow); in place (y = gate); rows regions;
 *  - rmsnorm_residual (hr_rmsnorm_residual, rows as independent chains)
 *    against ref_rmsnorm_residual bit for bit: rows 1-9 and rows regions
 *    (1, 4, 7 of 9 live), dim 576 and 67; nothing past the live rows
 *    written;
 *  - the fused layer ops (issue 37), against their kernels/ref
 *    compositions bit for bit, rows regions included: rmsnorm_cast
 *    (ref_rmsnorm_cast; fp16 and bf16; A8's int8 blocks at dim 576 and 64;
 *    dim 67), swiglu_cast (GeGLU: ref_swiglu_cast; SwiGLU: hr_swiglu then
 *    ref_cast, as the swiglu op above; LD = FFN and 2 FFN; A8), qkv_rope
 *    (ref_qkv_rope: Llama's adjacent pairs (the cached angles), Qwen2's
 *    biases with NeoX pairs, Qwen3's norms, Gemma's scale, none; fused
 *    q|k|v rows or their own; rows past MAX_CTX; the whole caches). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/host_gemm.h"
#include "device/host_ops.h"
#include "device/host_rowops.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

static uint64_t rs = 0x243f6a8885a308d3ull;

static uint32_t rnd(void)
{
	return tu_xs32(&rs);
}

typedef struct kp {
	const char *name;
	long long v;
} kp;

/* op type `type` with the constants kps, arguments args, grid.x gx, in a
 * rows region of live of full rows (0, 0: none); run natively */
static void run_op(const char *type, const kp *kps, int nk, uint64_t *args, int na, int gx,
                   int full, int live)
{
	static rt_kernel_info ki;
	memset(&ki, 0, sizeof(ki));
	snprintf(ki.tmpl, sizeof(ki.tmpl), "%s.cu.tmpl", type);
	for (int i = 0; i < nk; i++) {
		snprintf(ki.params[i].name, sizeof(ki.params[i].name), "%s", kps[i].name);
		ki.params[i].i = kps[i].v;
		ki.params[i].f = (double)kps[i].v;
	}
	ki.n_params = nk;
	rt_op op = {.kind = RT_OP_KERNEL, .kinfo = &ki, .layer = -1, .n_args = na};
	snprintf(op.op, sizeof(op.op), "%s", type);
	snprintf(op.entry, sizeof(op.entry), "%s_test", type);
	for (int a = 0; a < na; a++)
		op.argval[a] = args[a];
	op.grid[0] = (unsigned)gx;
	op.grid[1] = op.grid[2] = 1;
	op.rows_full = full;
	op.rows_live = live;
	rt_op_fix_argv(&op);
	sw_err err = {0};
	assert_non_null(rt_host_native_find(&op));
	if (rt_host_native_run(&op, &err))
		fail_msg("%s: %s", type, err.msg);
}

/* awkward floats: specials, fp16 subnormals and overflow, bf16 ties */
static float awkward(void)
{
	static const uint32_t SPECIAL[] = {0x7fc00000, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000,
	                                   0x00000000, 0x80000000, 0x33800000, 0x387fc000, 0x477ff000,
	                                   0x47800000, 0x3f808000, 0x3f818000, 0xc7000000};
	const uint32_t c = rnd() % 4;
	float f;
	if (c == 0) {
		const uint32_t b = SPECIAL[rnd() % (sizeof(SPECIAL) / sizeof(SPECIAL[0]))];
		memcpy(&f, &b, 4);
	} else if (c == 1) {
		f = ldexpf((float)(rnd() % 2048) - 1024.0f, -(int)(rnd() % 30)) * 1e-4f;
	} else {
		f = ((float)(rnd() % 200001) - 100000.0f) / 997.0f;
	}
	return f;
}

static void kv_case(int rows, int live, int kvd, int row0, int max_ctx, int len, int f16)
{
	const size_t cache = (size_t)max_ctx * kvd + 64, in = (size_t)rows * kvd;
	uint16_t *kc = malloc(2 * cache), *vc = malloc(2 * cache), *rk = malloc(2 * cache),
	         *rv = malloc(2 * cache);
	float *k = malloc(4 * in), *v = malloc(4 * in);
	int32_t lenv = len;
	assert_true(kc && vc && rk && rv && k && v);
	for (size_t i = 0; i < cache; i++)
		kc[i] = rk[i] = (uint16_t)rnd(), vc[i] = rv[i] = (uint16_t)rnd();
	for (size_t i = 0; i < in; i++)
		k[i] = awkward(), v[i] = awkward();
	const kp kps[] = {{"ROWS", rows}, {"KVD", kvd}, {"ROW0", row0}, {"MAX_CTX", max_ctx},
	                  {"IS_F16", f16}};
	uint64_t args[] = {(uintptr_t)kc, (uintptr_t)vc, (uintptr_t)k, (uintptr_t)v, (uintptr_t)&lenv};
	run_op("kv_store", kps, 5, args, 5, 1, live ? rows : 0, live);
	ref_kv_store(rk, rv, k, v, len, live ? live : rows, kvd, row0, max_ctx, f16);
	if (memcmp(kc, rk, 2 * cache) || memcmp(vc, rv, 2 * cache))
		fail_msg("kv_store rows %d live %d kvd %d row0 %d max_ctx %d len %d %s: differs from "
		         "ref_kv_store", rows, live, kvd, row0, max_ctx, len, f16 ? "fp16" : "bf16");
	free(kc), free(vc), free(rk), free(rv), free(k), free(v);
}

static void test_kv_store(void **state)
{
	(void)state;
	static const int KVD[] = {192, 20, 5};
	int n = 0;
	for (int f16 = 0; f16 < 2; f16++)
		for (int ki = 0; ki < 3; ki++)
			for (int row0 = 0; row0 <= 2; row0 += 2) {
				const int kvd = KVD[ki];
				kv_case(1, 0, kvd, row0, 64, 10, f16);   /* a decode row */
				kv_case(7, 0, kvd, row0, 64, 30, f16);   /* a tree's rows */
				kv_case(7, 1, kvd, row0, 64, 30, f16);   /* rows region: 1 of 7 */
				kv_case(7, 4, kvd, row0, 64, 30, f16);   /* 4 of 7 */
				kv_case(7, 0, kvd, row0, 40, 35, f16);   /* some rows past MAX_CTX */
				kv_case(7, 0, kvd, row0, 40, 40, f16);   /* all of them */
				kv_case(3, 0, kvd, row0, 40, 37, f16);   /* exactly to the end (row0 0) */
				n += 7;
			}
	print_message("kv_store: %d cases identical to ref_kv_store\n", n);
}

static void rope_case(int T, int live, int H, int hd, int rot, const int32_t *pos,
                      const float *inv_freq)
{
	const size_t nx = (size_t)T * H * hd;
	float *x = malloc(4 * nx), *r = malloc(4 * nx);
	assert_true(x && r);
	for (size_t i = 0; i < nx; i++)
		x[i] = r[i] = ((float)(rnd() % 20001) - 10000.0f) / 1234.5f;
	const kp kps[] = {{"N_HEADS", H}, {"HEAD_DIM", hd}, {"ROT_DIM", rot}};
	uint64_t args[] = {(uintptr_t)x, (uintptr_t)pos, (uintptr_t)inv_freq};
	run_op("rope", kps, 3, args, 3, T, live ? T : 0, live);
	ref_rope(r, pos, live ? live : T, H, hd, rot, inv_freq);
	if (memcmp(x, r, 4 * nx))
		fail_msg("rope T %d live %d H %d hd %d rot %d pos[0] %d: differs from ref_rope", T, live,
		         H, hd, rot, pos[0]);
	free(x), free(r);
}

static void test_rope(void **state)
{
	(void)state;
	float f1[129], f2[129], f3[8];
	ref_rope_freqs(f1, 258, 10000.0f, 0, 1.0f, 0, 0, 0);
	ref_rope_freqs(f2, 258, 100000.0f, 0, 1.0f, 0, 0, 0);
	ref_rope_freqs(f3, 16, 10000.0f, 0, 1.0f, 0, 0, 0);
	const int32_t p1[] = {17}, p2[] = {18}, p7[] = {40, 41, 41, 42, 40, 1000, 0};
	int n = 0;
	for (int rep = 0; rep < 2; rep++) {
		rope_case(1, 0, 9, 64, 64, p1, f1);    /* a miss, then */
		rope_case(1, 0, 3, 64, 64, p1, f1);    /* a hit (rope_k after rope_q) */
		rope_case(1, 0, 9, 64, 64, p1, f2);    /* same position, other frequencies */
		rope_case(1, 0, 9, 64, 64, p2, f2);    /* the next position */
		rope_case(7, 0, 9, 64, 64, p7, f1);    /* tree rows, repeated positions */
		rope_case(7, 1, 9, 64, 64, p7, f1);    /* rows region */
		rope_case(7, 3, 3, 64, 64, p7, f2);
		rope_case(7, 0, 4, 20, 16, p7, f3);    /* partial rotation */
		rope_case(2, 0, 2, 258, 258, p7, f1);  /* past the cache: ref_rope */
		rope_case(1, 0, 9, 64, 64, p1, f1);
		n += 10;
	}
	print_message("rope: %d cases identical to ref_rope\n", n);
}

static void swiglu_case(int ffn, int rows, int live, int act, int alias)
{
	const size_t n = (size_t)ffn * rows;
	float *g = malloc(4 * n), *u = malloc(4 * n), *y = malloc(4 * n), *rg = malloc(4 * n),
	      *ru = malloc(4 * n), *ry = malloc(4 * n);
	assert_true(g && u && y && rg && ru && ry);
	for (size_t i = 0; i < n; i++) {
		g[i] = rg[i] = rnd() % 3 ? ((float)(rnd() % 40001) - 20000.0f) / 997.0f : awkward();
		u[i] = ru[i] = rnd() % 5 ? ((float)(rnd() % 2001) - 1000.0f) / 333.0f : awkward();
		y[i] = ry[i] = -7.0f;
	}
	/* alias 1: y is gate (in place), as ref_swiglu allows */
	float *yo = alias ? g : y, *ryo = alias ? rg : ry;
	const kp kps[] = {{"FFN", ffn}, {"ACT", act}};
	uint64_t args[] = {(uintptr_t)yo, (uintptr_t)g, (uintptr_t)u};
	/* rows = grid.y (run_op sets grid.x): the op record built here */
	static rt_kernel_info ki;
	memset(&ki, 0, sizeof(ki));
	for (int i = 0; i < 2; i++) {
		snprintf(ki.params[i].name, sizeof(ki.params[i].name), "%s", kps[i].name);
		ki.params[i].i = kps[i].v;
		ki.params[i].f = (double)kps[i].v;
	}
	ki.n_params = 2;
	rt_op op = {.kind = RT_OP_KERNEL, .kinfo = &ki, .layer = -1, .n_args = 3};
	snprintf(op.op, sizeof(op.op), "swiglu");
	for (int a = 0; a < 3; a++)
		op.argval[a] = args[a];
	op.grid[0] = 1;
	op.grid[1] = (unsigned)rows;
	op.grid[2] = 1;
	op.rows_full = live ? rows : 0;
	op.rows_live = live;
	rt_op_fix_argv(&op);
	sw_err err = {0};
	if (rt_host_native_run(&op, &err))
		fail_msg("swiglu: %s", err.msg);
	const size_t nl = (size_t)ffn * (live ? live : rows);
	if (act)
		ref_geglu_tanh(ryo, rg, ru, nl);
	else
		hr_swiglu(ryo, rg, ru, nl, HG_PATH_AUTO);
	if (memcmp(yo, ryo, 4 * n) || memcmp(g, rg, 4 * n) || memcmp(u, ru, 4 * n))
		fail_msg("swiglu ffn %d rows %d live %d act %d alias %d: differs from kernels/ref", ffn,
		         rows, live, act, alias);
	free(g), free(u), free(y), free(rg), free(ru), free(ry);
}

static void test_swiglu(void **state)
{
	(void)state;
	int n = 0;
	for (int act = 0; act < 2; act++)
		for (int alias = 0; alias < 2; alias++) {
			swiglu_case(1536, 1, 0, act, alias); /* SmolLM2's FFN, one row */
			swiglu_case(1536, 7, 3, act, alias); /* rows region */
			swiglu_case(300, 3, 0, act, alias);  /* 900: chunks, a vector tail */
			swiglu_case(5, 1, 0, act, alias);    /* below one vector */
			swiglu_case(263, 2, 1, act, alias);
			n += 5;
		}
	print_message("swiglu: %d cases identical to hr_swiglu / ref_geglu_tanh\n", n);
}

static void rms_op_case(int T, int live, int dim)
{
	const size_t n = (size_t)T * dim;
	float *x = malloc(4 * n), *r = malloc(4 * n), *w = malloc(4 * (size_t)dim), *y = malloc(4 * n),
	      *s = malloc(4 * n), *ry = malloc(4 * n), *rsum = malloc(4 * n);
	assert_true(x && r && w && y && s && ry && rsum);
	for (size_t i = 0; i < n; i++) {
		x[i] = ((float)(rnd() % 200001) - 100000.0f) / 997.0f;
		r[i] = ((float)(rnd() % 2001) - 1000.0f) / 333.0f;
		y[i] = ry[i] = s[i] = rsum[i] = -7.0f;
	}
	for (int i = 0; i < dim; i++)
		w[i] = ((float)(rnd() % 2001) - 1000.0f) / 500.0f;
	const kp kps[] = {{"DIM", dim}};
	uint64_t args[] = {(uintptr_t)y, (uintptr_t)s, (uintptr_t)x, (uintptr_t)r, (uintptr_t)w};
	run_op("rmsnorm_residual", kps, 1, args, 5, T, live ? T : 0, live);
	ref_rmsnorm_residual(ry, rsum, x, r, w, live ? live : T, dim, 1e-5f);
	if (memcmp(y, ry, 4 * n) || memcmp(s, rsum, 4 * n))
		fail_msg("rmsnorm_residual T %d live %d dim %d: differs from ref_rmsnorm_residual", T,
		         live, dim);
	free(x), free(r), free(w), free(y), free(s), free(ry), free(rsum);
}

static void test_rmsnorm(void **state)
{
	(void)state;
	int n = 0;
	for (int dim = 67; dim <= 576; dim += 509) {
		for (int T = 1; T <= 9; T++, n++)
			rms_op_case(T, 0, dim);
		for (int live = 1; live <= 7; live += 3, n++)
			rms_op_case(9, live, dim);
	}
	print_message("rmsnorm_residual: %d cases identical to ref_rmsnorm_residual\n", n);
}

/* ---- the fused layer ops ---- */

/* an op record over the constants kps with grid (gx, gy), rows region
 * (full, live), run natively */
static void run_op2(const char *type, const kp *kps, int nk, uint64_t *args, int na, int gx,
                    int gy, int full, int live)
{
	static rt_kernel_info ki;
	memset(&ki, 0, sizeof(ki));
	snprintf(ki.tmpl, sizeof(ki.tmpl), "%s.cu.tmpl", type);
	for (int i = 0; i < nk; i++) {
		snprintf(ki.params[i].name, sizeof(ki.params[i].name), "%s", kps[i].name);
		ki.params[i].i = kps[i].v;
		ki.params[i].f = (double)kps[i].v;
	}
	ki.n_params = nk;
	rt_op op = {.kind = RT_OP_KERNEL, .kinfo = &ki, .layer = -1, .n_args = na};
	snprintf(op.op, sizeof(op.op), "%s", type);
	snprintf(op.entry, sizeof(op.entry), "%s_test", type);
	for (int a = 0; a < na; a++)
		op.argval[a] = args[a];
	op.grid[0] = (unsigned)gx;
	op.grid[1] = (unsigned)gy;
	op.grid[2] = 1;
	op.rows_full = full;
	op.rows_live = live;
	rt_op_fix_argv(&op);
	sw_err err = {0};
	assert_non_null(rt_host_native_find(&op));
	if (rt_host_native_run(&op, &err))
		fail_msg("%s: %s", type, err.msg);
}

static size_t a8_bytes(int M, int K)
{
	return (size_t)M * K + (size_t)M * (K / 32) * 8;
}

static void rms_cast_case(int T, int live, int dim, int f16, int a8)
{
	const size_t n = (size_t)T * dim, nq = a8 ? a8_bytes(T, dim) : 1;
	float *x = malloc(4 * n), *r = malloc(4 * n), *w = malloc(4 * (size_t)dim);
	float *s = malloc(4 * n), *rs_ = malloc(4 * n), *tmp = malloc(4 * (size_t)dim);
	uint16_t *y = malloc(2 * n), *ry = malloc(2 * n);
	uint8_t *q = malloc(nq), *rq = malloc(nq);
	assert_true(x && r && w && s && rs_ && tmp && y && ry && q && rq);
	for (size_t i = 0; i < n; i++) {
		x[i] = ((float)(rnd() % 200001) - 100000.0f) / 997.0f;
		r[i] = ((float)(rnd() % 2001) - 1000.0f) / 333.0f;
		s[i] = rs_[i] = -7.0f;
		y[i] = ry[i] = 0x5555;
	}
	memset(q, 0xa5, nq);
	memset(rq, 0xa5, nq);
	for (int i = 0; i < dim; i++)
		w[i] = ((float)(rnd() % 2001) - 1000.0f) / 500.0f;
	const int rows = live ? live : T;
	const kp kps[] = {{"DIM", dim}, {"IS_F16", f16}, {"A8", a8}};
	uint64_t args[] = {(uintptr_t)y, (uintptr_t)s, (uintptr_t)x, (uintptr_t)r, (uintptr_t)w,
	                   (uintptr_t)(a8 ? (void *)q : (void *)y)};
	run_op2("rmsnorm_cast", kps, 3, args, 6, T, 1, live ? T : 0, live);
	assert_int_equal(ref_rmsnorm_cast(ry, rs_, x, r, w, a8 ? rq : NULL, rows, dim, 1e-5f, f16,
	                                  tmp), 0);
	/* a8: the live rows' blocks (quant_a8 of M = live rows) */
	if (memcmp(y, ry, 2 * n) || memcmp(s, rs_, 4 * n) ||
	    (a8 && memcmp(q, rq, a8_bytes(rows, dim))))
		fail_msg("rmsnorm_cast T %d live %d dim %d f16 %d a8 %d: differs from ref_rmsnorm_cast",
		         T, live, dim, f16, a8);
	free(x), free(r), free(w), free(s), free(rs_), free(tmp), free(y), free(ry), free(q), free(rq);
}

static void test_rmsnorm_cast(void **state)
{
	(void)state;
	int n = 0;
	for (int f16 = 0; f16 < 2; f16++) {
		rms_cast_case(1, 0, 576, f16, 0);
		rms_cast_case(5, 0, 67, f16, 0);
		rms_cast_case(9, 4, 576, f16, 0);
		n += 3;
	}
	rms_cast_case(3, 0, 576, 1, 1);
	rms_cast_case(7, 2, 64, 1, 1);
	print_message("rmsnorm_cast: %d cases identical to ref_rmsnorm_cast\n", n + 2);
}

static void swiglu_cast_case(int ffn, int rows, int live, int act, int fused, int f16, int a8)
{
	const int ld = fused ? 2 * ffn : ffn;
	const size_t n = (size_t)ld * rows, ny = (size_t)ffn * rows, nq = a8 ? a8_bytes(rows, ffn) : 1;
	float *g = malloc(4 * n), *u = malloc(4 * n), *tmp = malloc(4 * (size_t)ffn);
	uint16_t *y = malloc(2 * ny), *ry = malloc(2 * ny);
	uint8_t *q = malloc(nq), *rq = malloc(nq);
	assert_true(g && u && tmp && y && ry && q && rq);
	for (size_t i = 0; i < n; i++) {
		g[i] = ((float)(rnd() % 40001) - 20000.0f) / 997.0f;
		u[i] = ((float)(rnd() % 2001) - 1000.0f) / 333.0f;
	}
	for (size_t i = 0; i < ny; i++)
		y[i] = ry[i] = 0x5555;
	memset(q, 0xa5, nq);
	memset(rq, 0xa5, nq);
	/* one GEMM's rows: up follows gate in each row */
	const float *up = fused ? g + ffn : u;
	const int lr = live ? live : rows;
	const kp kps[] = {{"FFN", ffn}, {"LD", ld}, {"ACT", act}, {"IS_F16", f16}, {"A8", a8}};
	uint64_t args[] = {(uintptr_t)y, (uintptr_t)g, (uintptr_t)up,
	                   (uintptr_t)(a8 ? (void *)q : (void *)y)};
	run_op2("swiglu_cast", kps, 5, args, 4, 1, rows, live ? rows : 0, live);
	if (act) {
		assert_int_equal(ref_swiglu_cast(ry, g, up, a8 ? rq : NULL, lr, ffn, ld, act, f16, tmp),
		                 0);
	} else {
		/* the swiglu op's SwiGLU (hr_swiglu, test_swiglu above), then
		 * ref_cast and ref_quant_a8: ref_swiglu_cast's steps */
		for (int t = 0; t < lr; t++) {
			hr_swiglu(tmp, g + (size_t)t * ld, up + (size_t)t * ld, (size_t)ffn, HG_PATH_AUTO);
			ref_cast(ry + (size_t)t * ffn, tmp, (size_t)ffn, f16);
		}
		if (a8)
			assert_int_equal(ref_quant_a8(rq, ry, lr, ffn), 0);
	}
	if (memcmp(y, ry, 2 * ny) || (a8 && memcmp(q, rq, a8_bytes(lr, ffn))))
		fail_msg("swiglu_cast ffn %d rows %d live %d act %d fused %d f16 %d a8 %d: differs from "
		         "kernels/ref", ffn, rows, live, act, fused, f16, a8);
	free(g), free(u), free(tmp), free(y), free(ry), free(q), free(rq);
}

static void test_swiglu_cast(void **state)
{
	(void)state;
	int n = 0;
	for (int act = 0; act < 2; act++)
		for (int fused = 0; fused < 2; fused++) {
			swiglu_cast_case(1536, 1, 0, act, fused, 1, 0);
			swiglu_cast_case(263, 3, 0, act, fused, 0, 0);
			swiglu_cast_case(1536, 7, 3, act, fused, 1, 1);
			swiglu_cast_case(64, 2, 0, act, fused, 1, 1);
			n += 4;
		}
	print_message("swiglu_cast: %d cases identical to kernels/ref\n", n);
}

/* A q/k/v case: family steps (rope 0/1/2, bias, norm, scale as 1000ths) */
static void qkv_case(int T, int live, int H, int KH, int hd, int fused, int rope, int bias,
                     int norm, int scale_milli, int row0, int max_ctx, int len, int f16)
{
	const int64_t qd = (int64_t)H * hd, kvd = (int64_t)KH * hd, wd = qd + 2 * kvd;
	const size_t cache = (size_t)max_ctx * kvd + 64;
	const size_t nin = (size_t)T * (size_t)(fused ? wd : qd > kvd ? qd : kvd);
	float *q = malloc(4 * nin), *k = malloc(4 * nin), *v = malloc(4 * nin);
	float *inv = malloc(4 * (size_t)hd), *bq = malloc(4 * (size_t)qd), *bk = malloc(4 * (size_t)kvd);
	float *bv = malloc(4 * (size_t)kvd), *tmp = malloc(4 * (size_t)(qd + kvd));
	uint16_t *q16 = malloc(2 * (size_t)(T * qd)), *rq16 = malloc(2 * (size_t)(T * qd));
	uint16_t *kc = malloc(2 * cache), *vc = malloc(2 * cache), *rk = malloc(2 * cache),
	         *rv = malloc(2 * cache);
	int32_t *pos = malloc(4 * (size_t)T);
	int32_t lenv = len;
	assert_true(q && k && v && inv && bq && bk && bv && tmp && q16 && rq16 && kc && vc && rk &&
	            rv && pos);
	for (size_t i = 0; i < nin; i++) {
		q[i] = ((float)(rnd() % 2001) - 1000.0f) / 333.0f;
		k[i] = ((float)(rnd() % 2001) - 1000.0f) / 333.0f;
		v[i] = ((float)(rnd() % 2001) - 1000.0f) / 333.0f;
	}
	for (int i = 0; i < hd; i++)
		inv[i] = powf(10000.0f, -2.0f * (float)(i % (hd / 2 ? hd / 2 : 1)) / (float)hd);
	for (int64_t i = 0; i < qd; i++)
		bq[i] = ((float)(rnd() % 2001) - 1000.0f) / 1000.0f;
	for (int64_t i = 0; i < kvd; i++)
		bk[i] = ((float)(rnd() % 2001) - 1000.0f) / 1000.0f,
		bv[i] = ((float)(rnd() % 2001) - 1000.0f) / 1000.0f;
	for (int t = 0; t < T; t++)
		pos[t] = len + row0 + t + (int)(rnd() % 3);
	for (size_t i = 0; i < cache; i++)
		kc[i] = rk[i] = (uint16_t)rnd(), vc[i] = rv[i] = (uint16_t)rnd();
	for (int64_t i = 0; i < T * qd; i++)
		q16[i] = rq16[i] = 0x5555;
	/* fused: one GEMM's rows, k and v after q in each */
	const float *kk = fused ? q + qd : k, *vv = fused ? q + qd + kvd : v;
	/* the weights: norm weights (head_dim each) in the bias buffers' room */
	const float *wq = bias || norm ? bq : inv, *wk = bias || norm ? bk : inv, *wv = bias ? bv : inv;
	const float scale = (float)scale_milli / 1000.0f;
	const int rows = live ? live : T;
	const kp kps[] = {{"N_HEADS", H}, {"N_KV_HEADS", KH}, {"HEAD_DIM", hd}, {"FUSED", fused},
	                  {"ROWS", T}, {"ROW0", row0}, {"MAX_CTX", max_ctx}, {"IS_F16", f16},
	                  {"BIAS", bias}, {"NORM", norm}, {"ROPE", rope}};
	/* SCALE (a float constant) and EPS: kp carries integers, so the
	 * record's floats are set below */
	static rt_kernel_info ki;
	memset(&ki, 0, sizeof(ki));
	snprintf(ki.tmpl, sizeof(ki.tmpl), "qkv_rope.cu.tmpl");
	const int nk = (int)(sizeof(kps) / sizeof(kps[0]));
	for (int i = 0; i < nk; i++) {
		snprintf(ki.params[i].name, sizeof(ki.params[i].name), "%s", kps[i].name);
		ki.params[i].i = kps[i].v;
		ki.params[i].f = (double)kps[i].v;
	}
	snprintf(ki.params[nk].name, sizeof(ki.params[nk].name), "SCALE");
	ki.params[nk].f = (double)scale;
	snprintf(ki.params[nk + 1].name, sizeof(ki.params[nk + 1].name), "EPS");
	ki.params[nk + 1].f = 1e-6;
	ki.n_params = nk + 2;
	uint64_t args[] = {(uintptr_t)q16, (uintptr_t)(kc + (size_t)row0 * kvd),
	                   (uintptr_t)(vc + (size_t)row0 * kvd), (uintptr_t)q, (uintptr_t)kk,
	                   (uintptr_t)vv, (uintptr_t)pos, (uintptr_t)inv, (uintptr_t)&lenv,
	                   (uintptr_t)wq, (uintptr_t)wk, (uintptr_t)wv};
	rt_op op = {.kind = RT_OP_KERNEL, .kinfo = &ki, .layer = -1, .n_args = 12};
	snprintf(op.op, sizeof(op.op), "qkv_rope");
	snprintf(op.entry, sizeof(op.entry), "qkv_rope_test");
	for (int a = 0; a < 12; a++)
		op.argval[a] = args[a];
	op.grid[0] = (unsigned)T;
	op.grid[1] = op.grid[2] = 1;
	op.rows_full = live ? T : 0;
	op.rows_live = live;
	rt_op_fix_argv(&op);
	sw_err err = {0};
	assert_non_null(rt_host_native_find(&op));
	if (rt_host_native_run(&op, &err))
		fail_msg("qkv_rope: %s", err.msg);
	const ref_qkv_shape sh = {.T = rows, .n_heads = H, .n_kv_heads = KH, .head_dim = hd,
	                          .ldq = fused ? wd : qd, .ldkv = fused ? wd : kvd, .row0 = row0,
	                          .max_ctx = max_ctx, .is_f16 = f16, .bias = bias, .norm = norm,
	                          .rope = rope, .eps = 1e-6f, .scale = scale};
	assert_int_equal(ref_qkv_rope(&sh, rq16, rk + (size_t)row0 * kvd, rv + (size_t)row0 * kvd,
	                              q, kk, vv, pos, inv, len, bq, bk, bv, bq, bk, tmp), 0);
	if (memcmp(q16, rq16, 2 * (size_t)(T * qd)) || memcmp(kc, rk, 2 * cache) ||
	    memcmp(vc, rv, 2 * cache))
		fail_msg("qkv_rope T %d live %d H %d KH %d hd %d fused %d rope %d bias %d norm %d scale "
		         "%g row0 %d max_ctx %d len %d f16 %d: differs from ref_qkv_rope", T, live, H, KH,
		         hd, fused, rope, bias, norm, (double)scale, row0, max_ctx, len, f16);
	free(q), free(k), free(v), free(inv), free(bq), free(bk), free(bv), free(tmp), free(q16);
	free(rq16), free(kc), free(vc), free(rk), free(rv), free(pos);
}

static void test_qkv_rope(void **state)
{
	(void)state;
	int n = 0;
	for (int fused = 0; fused < 2; fused++) {
		/* Llama (adjacent pairs; the cached angles), SmolLM2's heads */
		qkv_case(7, 0, 9, 3, 64, fused, 1, 0, 0, 1000, 0, 64, 5, 1);
		qkv_case(7, 3, 9, 3, 64, fused, 1, 0, 0, 1000, 2, 64, 5, 0);
		/* Qwen2: biases, NeoX pairs; Qwen3: norms; Gemma 3: norms and scale */
		qkv_case(3, 0, 14, 2, 64, fused, 2, 1, 0, 1000, 0, 32, 3, 0);
		qkv_case(3, 0, 4, 2, 10, fused, 2, 0, 1, 1000, 0, 32, 3, 1);
		qkv_case(2, 0, 4, 1, 6, fused, 2, 0, 1, 62, 1, 32, 0, 0);
		/* no steps (v and k copied, q cast); odd head_dim */
		qkv_case(3, 0, 3, 1, 7, fused, 0, 0, 0, 1000, 0, 16, 2, 1);
		/* rows past MAX_CTX: not stored */
		qkv_case(6, 0, 4, 2, 16, fused, 1, 0, 0, 1000, 1, 12, 8, 1);
		qkv_case(6, 0, 4, 2, 16, fused, 2, 1, 0, 1000, 1, 12, 8, 0);
		n += 8;
	}
	print_message("qkv_rope: %d cases identical to ref_qkv_rope\n", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv_store),
		cmocka_unit_test(test_rope),
		cmocka_unit_test(test_swiglu),
		cmocka_unit_test(test_rmsnorm),
		cmocka_unit_test(test_rmsnorm_cast),
		cmocka_unit_test(test_swiglu_cast),
		cmocka_unit_test(test_qkv_rope),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

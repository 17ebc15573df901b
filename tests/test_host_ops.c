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
 *    written. */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv_store),
		cmocka_unit_test(test_rope),
		cmocka_unit_test(test_swiglu),
		cmocka_unit_test(test_rmsnorm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

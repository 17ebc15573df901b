/* Every op of kernels/ops.def, table-driven (tests/util/op_harness.h): one
 * CMocka test per row, named like the op, runs its template in the SIMT
 * emulator at each awkward size of oh_shapes where the op has a free size,
 * then its own cases (special values, aliasing, bad ids, the edges its
 * specification names) and NVRTC at real shapes (sm_80, sm_90, zero
 * spills; skipped without NVRTC), every output compared with its kernels/ref
 * specification or an independent statement of it: exactly where the op is
 * exact, else within a per-element bound derived from the dtype (said at
 * each case), NaN and inf explicitly, with guard zones around every buffer.
 * An op whose test needs more than a case (trees, iterations, the host
 * decoder's rule) keeps a file of its own, named in the table below, which
 * this test checks exists and tests that template. Also: every template is
 * a row and every row has its template and reference file.
 * OPS=NAME runs one op's test (a CMocka filter pattern). */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "core/fileio.h"
#include "formats/gguf.h"
#include "kernels/engine_state.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "kernels/philox.h"
#include "kernels/ref/ref.h"

#include "op_harness.h"
#include "testutil.h"

/* ---- rmsnorm_residual ------------------------------------------------- */

/* vs ref_add + ref_rmsnorm, out of place and s aliasing x. s = x + r is one
 * correctly rounded fp32 add on both sides: bit-equal. y: the bound of
 * test_ref_rmsnorm.c against an exact (double) value: the fp32 sum of
 * squares carries gamma_dim (any order, the block tree too); / dim and +
 * eps one rounding each; sqrt halves the relative error of its argument and
 * adds one; 1/sqrt one; s * scale * w two. First order gamma_dim / 2 + 5u;
 * one more u for second-order terms. */
static void rmsnorm_residual_check(int T, int dim, unsigned block, int alias)
{
	oh_case c;
	oh_begin(&c, SW_OP_rmsnorm_residual, "T%d DIM%d BLOCK%u%s", T, dim, block, alias ? " s=x" : "");
	oh_pi(&c, "DIM", dim);
	oh_pi(&c, "BLOCK", block);
	oh_pf(&c, "EPS", 1e-5f);
	const size_t n = (size_t)T * dim;
	float *y = oh_buf(&c, "y", n, sizeof(float));
	float *x = oh_alloc(&c, "x", n, sizeof(float));
	float *s = alias ? x : oh_alloc(&c, "s", n, sizeof(float));
	oh_arg(&c, s);
	oh_arg(&c, x);
	float *r = oh_buf(&c, "r", n, sizeof(float));
	float *w = oh_buf(&c, "w", (size_t)dim, sizeof(float));
	float *sref = oh_host(&c, n * sizeof(float));
	double *ref = oh_host(&c, n * sizeof(double)), *bound = oh_host(&c, n * sizeof(double));

	for (size_t i = 0; i < n; i++) {
		x[i] = (float)(rnd() * 2.0);
		r[i] = (float)rnd();
	}
	for (int i = 0; i < dim; i++)
		w[i] = (float)(1.0 + 0.9 * rnd());
	ref_add(sref, x, r, n);
	for (int t = 0; t < T; t++) {
		double ss = 0.0;
		for (int i = 0; i < dim; i++)
			ss += (double)sref[(size_t)t * dim + i] * sref[(size_t)t * dim + i];
		double sc = 1.0 / sqrt(ss / dim + 1e-5);
		for (int i = 0; i < dim; i++) {
			size_t j = (size_t)t * dim + i;
			ref[j] = sref[j] * sc * w[i];
			bound[j] = (gamma_n(dim) / 2 + 6.0 * U32) * fabs(ref[j]);
		}
	}
	oh_expect(&c, "s = x + r", KERN_F32, s, sref, n, T, dim, 0);
	oh_expect_close(&c, "y", y, ref, bound, n, T, dim, 0);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3(block, 1, 1));
	/* The float ref itself must sit inside the same bound. */
	ref_rmsnorm(sref, sref, w, T, dim, 1e-5f);
	check_close("ref_rmsnorm", sref, ref, bound, n);
	oh_end(&c);
}

static const int rms_Ts[] = {1, 3, 7};

/* rows 1, 3 and 7, a block of 256 */
static void rmsnorm_residual_shape(int dim)
{
	for (int b = 0; b < 3; b++)
		rmsnorm_residual_check(rms_Ts[b], dim, 256, 0);
}

/* the same rows at dims 33, 111, 260, 576 with a block of 32; s aliasing x */
static void rmsnorm_residual_cases(void)
{
	static const int dims[] = {33, 111, 260, 576};
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 3; b++)
			rmsnorm_residual_check(rms_Ts[b], dims[a], 32, 0);
	rmsnorm_residual_check(5, 576, 128, 1);
	rmsnorm_residual_check(3, 111, 64, 1);
}

/* ---- swiglu ----------------------------------------------------------- */

/* vs an exact (double) silu(g) * u, then bit for bit vs ref_swiglu; its
 * GeGLU form (ACT 1, Gemma: gelu_tanh(g) * u) vs the double expression and
 * ref_geglu_tanh. Bound, relative to |y|: expf within 2 ulp (CUDA's
 * documented maximum; glibc is within 1), so e = exp(-g) carries 2u; 1 + e
 * then carries at most 2u e / (1 + e) + u <= 3u; the division and the
 * product one u each: 5u, one more for second-order terms. Plus 2^-140
 * absolute for results in the subnormal range (none here: |g| <= 16).
 * GeGLU's bound: t = tanhf(z) within 2 ulp, z = k (g + 0.044715 g^3) within
 * 4 u of itself and tanh' = 1 - t^2 <= 1, |z| (1 - t^2) < 0.5: 1 + t errs
 * by at most (2 + 2 + 1) u absolute; the three products 3 u relative of 0.5
 * |g| (1 + |t|) |u| <= |g u|. So 0.5 |g u| 5 u + 3 u |g u| < 6 u |g u|,
 * taken as 8 u |g u| (|g u|, not |y|: 1 + t cancels for very negative g). */
static double geglu_d(double g, double u)
{
	return 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u;
}

static void swiglu_begin(oh_case *c, int F, int block, int act, const char *what)
{
	oh_begin(c, SW_OP_swiglu, "FFN%d BLOCK%d ACT %d%s", F, block, act, what);
	oh_pi(c, "FFN", F);
	oh_pi(c, "ACT", act);
	oh_pi(c, "BLOCK", block);
}

static void swiglu_check(int T, int F, int block, double gscale, int act)
{
	oh_case c;
	char what[32];
	snprintf(what, sizeof(what), " T%d", T);
	swiglu_begin(&c, F, block, act, what);
	const size_t n = (size_t)T * F;
	float *y = oh_buf(&c, "y", n, sizeof(float));
	float *g = oh_buf(&c, "gate", n, sizeof(float)), *u = oh_buf(&c, "up", n, sizeof(float));
	double *r = oh_host(&c, n * sizeof(double)), *bound = oh_host(&c, n * sizeof(double));
	float *yr = oh_host(&c, n * sizeof(float));

	for (size_t i = 0; i < n; i++) {
		g[i] = (float)(rnd() * gscale);
		u[i] = (float)rnd();
		if (act) {
			r[i] = geglu_d(g[i], u[i]);
			bound[i] = 8 * U32 * fabs((double)g[i] * u[i]) + 0x1p-140;
		} else {
			r[i] = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
			bound[i] = 6 * U32 * fabs(r[i]) + 0x1p-140;
		}
	}
	/* In the emulator the kernel's expression and libm are ref_swiglu's
	 * (ref_geglu_tanh's). */
	(act ? ref_geglu_tanh : ref_swiglu)(yr, g, u, n);
	oh_expect_close(&c, "y", y, r, bound, n, T, F, 0);
	oh_expect(&c, act ? "y vs ref_geglu_tanh" : "y vs ref_swiglu", KERN_F32, y, yr, n, 0, 0, 0);
	const int v = F % 4 == 0 ? 4 : 1;
	const unsigned gx = (unsigned)((F / v + block - 1) / block);
	oh_launch(&c, d3(gx, (unsigned)T, 1), d3((unsigned)block, 1, 1));
	oh_end(&c);
}

/* Gates of +-100: exp(100) overflows fp32 to inf and silu gives -0 (GeGLU:
 * tanhf saturates, gelu_tanh(+-100) is 100 and -0), times 2. */
static void swiglu_limits(int act)
{
	oh_case c;
	swiglu_begin(&c, 8, 32, act, " gates +-100");
	float *y = oh_buf(&c, "y", 8, sizeof(float));
	float *g = oh_buf(&c, "gate", 8, sizeof(float)), *u = oh_buf(&c, "up", 8, sizeof(float));
	for (int i = 0; i < 8; i++) {
		g[i] = i % 2 ? -100.0f : 100.0f;
		u[i] = 2.0f;
	}
	oh_launch(&c, d3(1, 1, 1), d3(32, 1, 1));
	for (int i = 0; i < 8; i++) {
		assert_true(isfinite(y[i]));
		assert_true(i % 2 ? y[i] == 0.0f : y[i] == 200.0f);
	}
	oh_end(&c);
}

/* rows 1 and 3 (the vector path where F % 4 == 0), a block of 256 */
static void swiglu_shape(int F)
{
	swiglu_check(1, F, 256, 4.0, 0);
	swiglu_check(3, F, 256, 4.0, 0);
}

/* FFN 33, 111, 260, 576, 1536: rows 1 and 3 in blocks of 64 (and 256 for
 * 1536); GeGLU at one row of 64 and three of 256 */
static void swiglu_cases(void)
{
	static const int Fs[] = {33, 111, 260, 576, 1536};
	for (int a = 0; a < 5; a++) {
		swiglu_check(1, Fs[a], 64, 4.0, 0);
		swiglu_check(3, Fs[a], 64, 4.0, 0);
		swiglu_check(1, Fs[a], 64, 4.0, 1);
		swiglu_check(3, Fs[a], 256, 4.0, 1);
	}
	swiglu_shape(1536);
	/* gates to +-16: tanh saturates both ways; for g << 0 the product is a
	 * tiny negative, for g >> 0 g u */
	swiglu_check(3, 111, 32, 16.0, 0);
	swiglu_check(3, 111, 32, 16.0, 1);
	swiglu_limits(0);
	swiglu_limits(1);
}

/* Both forms at Gemma 3 270M's FFN (2048) and the scalar path (2047). */
static void swiglu_nvrtc(void)
{
	for (int act = 0; act < 2; act++)
		for (int v = 0; v < 2; v++) {
			oh_case c;
			swiglu_begin(&c, v ? 2047 : 2048, 256, act, "");
			oh_nvrtc(&c);
			oh_end(&c);
		}
}

/* ---- rope ------------------------------------------------------------- */

/* vs ref_rope (adjacent pairs, inv_freq table from ref_rope_freqs): two-pair
 * (16-byte) and one-pair paths, partial rotation, positions up to 5000.
 * Bound per rotated pair, against ref_rope (double inside, rounded once):
 * the kernel's angle p * f is one fp32 rounding, |da| <= |a| u; sincosf is
 * within 2 ulp on the GPU (1 in glibc), so cos and sin each err by at most
 * |a| u + 2u; the rotation x0 c - x1 s costs 3 roundings of terms bounded by
 * |x0| + |x1|; the reference's final rounding adds u |y| <= u (|x0| + |x1|).
 * Total (|a| u + 6u) (|x0| + |x1|), one more u for second-order terms. */
static void rope_check(int T, int H, int HD, int ROT, int block)
{
	oh_case c;
	oh_begin(&c, SW_OP_rope, "T%d H%d HD%d ROT%d BLOCK%d", T, H, HD, ROT, block);
	oh_pi(&c, "N_HEADS", H);
	oh_pi(&c, "HEAD_DIM", HD);
	oh_pi(&c, "ROT_DIM", ROT);
	oh_pi(&c, "BLOCK", block);
	const size_t n = (size_t)T * H * HD;
	float *x = oh_buf(&c, "x", n, sizeof(float));
	int32_t *pos = oh_buf(&c, "pos", (size_t)T, sizeof(int32_t));
	float *freq = oh_buf(&c, "inv_freq", (size_t)(ROT / 2), sizeof(float));
	double *r = oh_host(&c, n * sizeof(double)), *bound = oh_host(&c, n * sizeof(double));

	ref_rope_freqs(freq, ROT, 10000.0f, 0, 1.0f, 0, 0, 0);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)rnd();
	for (int t = 0; t < T; t++)
		pos[t] = t == 0 ? 0 : (int32_t)((t * 1237) % 5001);
	const float *x0 = oh_copy(&c, x, n * sizeof(float));
	float *ref = oh_copy(&c, x, n * sizeof(float));
	ref_rope(ref, pos, T, H, HD, ROT, freq);
	for (int t = 0; t < T; t++)
		for (int h = 0; h < H; h++)
			for (int i = 0; i < HD; i++) {
				size_t j = ((size_t)t * H + h) * HD + i;
				size_t j0 = j - (i & 1);
				double a = (double)pos[t] * freq[i / 2 < ROT / 2 ? i / 2 : 0];
				r[j] = ref[j];
				bound[j] = i < ROT ? (fabs(a) * U32 + 7 * U32) * (fabs(x0[j0]) + fabs(x0[j0 + 1]))
				                   : 0.0;
			}
	oh_expect_close(&c, "x", x, r, bound, n, T, H, HD);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1));
	oh_end(&c);
}

static void rope_cases(void)
{
	static const int Ts[] = {1, 3, 7};
	for (int b = 0; b < 3; b++) {
		rope_check(Ts[b], 9, 64, 64, 128); /* SmolLM2-135M heads, two-pair path */
		rope_check(Ts[b], 3, 64, 32, 32);  /* partial rotation */
		rope_check(Ts[b], 5, 36, 36, 64);  /* 36 % 4 == 0 but 9 quads: ragged */
		rope_check(Ts[b], 3, 10, 8, 32);   /* head_dim % 4 != 0: one-pair path */
		rope_check(Ts[b], 1, 6, 6, 32);
		rope_check(Ts[b], 4, 12, 6, 32);   /* rot % 4 != 0 */
	}
}

/* ---- argmax ----------------------------------------------------------- */

/* vs a scalar loop with rt_argmax's rule (first index of the maximum):
 * heavy ties, -inf entries, all -inf rows. Exact. */
static int loop_argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static void argmax_check(int T, int N, int block, int mode)
{
	oh_case c;
	oh_begin(&c, SW_OP_argmax, "T%d N%d BLOCK%d mode %d", T, N, block, mode);
	oh_pi(&c, "N", N);
	oh_pi(&c, "BLOCK", block);
	int32_t *out = oh_buf(&c, "out", (size_t)T, sizeof(int32_t));
	float *x = oh_buf(&c, "x", (size_t)T * N, sizeof(float));
	int32_t *want = oh_host(&c, (size_t)T * sizeof(*want));

	for (size_t i = 0; i < (size_t)T * N; i++) {
		double r = rnd();
		if (mode == 0)
			x[i] = (float)r;
		else if (mode == 1) /* five values: ties everywhere, the max repeated */
			x[i] = (float)floor((r + 1.0) * 2.5);
		else                /* mostly -inf */
			x[i] = r < 0.8 ? -INFINITY : (float)r;
	}
	if (mode == 2)
		for (int i = 0; i < N; i++)
			x[i] = -INFINITY; /* row 0 all -inf: index 0 */
	for (int t = 0; t < T; t++)
		want[t] = loop_argmax(x + (size_t)t * N, N);
	oh_expect(&c, "argmax", KERN_I32, out, want, (size_t)T, 0, 0, 0);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1));
	oh_end(&c);
}

static const int argmax_Ts[] = {1, 3, 7};

/* rows 1, 3, 7; random, tied and mostly -inf rows; a block of 256 */
static void argmax_shape(int N)
{
	for (int b = 0; b < 3; b++)
		for (int m = 0; m < 3; m++)
			argmax_check(argmax_Ts[b], N, 256, m);
}

/* the same rows at N 1, 3, 33, 111, 260, 576 in blocks of 32 (and 256 for
 * 3); vocabulary-sized rows */
static void argmax_cases(void)
{
	static const int Ns[] = {1, 3, 33, 111, 260, 576};
	for (int a = 0; a < 6; a++)
		for (int b = 0; b < 3; b++)
			for (int m = 0; m < 3; m++)
				argmax_check(argmax_Ts[b], Ns[a], 32, m);
	argmax_shape(3);
	argmax_check(2, 49152, 256, 0);
	argmax_check(2, 49152, 256, 1);
	argmax_check(3, 32001, 512, 1);
}

/* ---- embedding -------------------------------------------------------- */

/* vs ref_embedding: vector and scalar paths, out-of-range ids. A copy is
 * exact, so the bound is zero: bit equality. */
static void embedding_check(int T, int dim, int block, int bad_at)
{
	const int n_rows = 50;
	oh_case c;
	oh_begin(&c, SW_OP_embedding, "T%d DIM%d BLOCK%d bad id at %d", T, dim, block, bad_at);
	oh_pi(&c, "DIM", dim);
	oh_pi(&c, "N_ROWS", n_rows);
	oh_pi(&c, "BLOCK", block);
	float *y = oh_buf(&c, "y", (size_t)T * dim, sizeof(float));
	float *table = oh_buf(&c, "table", (size_t)n_rows * dim, sizeof(float));
	int32_t *tok = oh_buf(&c, "tok", (size_t)T, sizeof(int32_t));
	int32_t *err = oh_buf(&c, "err", 1, sizeof(int32_t));
	float *ref = oh_host(&c, (size_t)T * dim * sizeof(float));

	for (size_t i = 0; i < (size_t)n_rows * dim; i++)
		table[i] = (float)rnd();
	for (int t = 0; t < T; t++)
		tok[t] = (int32_t)((t * 37 + 11) % n_rows);
	*err = 0;
	assert_int_equal(ref_embedding(ref, table, tok, T, dim, n_rows), 0);
	if (bad_at >= 0) {
		tok[bad_at] = bad_at % 2 ? n_rows : -1;
		/* a bad id's row stays untouched: still emu_alloc's 0xff poison */
		memset(ref + (size_t)bad_at * dim, 0xff, (size_t)dim * sizeof(float));
	}
	oh_expect(&c, "y", KERN_F32, y, ref, (size_t)T * dim, T, dim, 0);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1));
	assert_int_equal(*err, bad_at >= 0);
	oh_end(&c);
}

static const int emb_Ts[] = {1, 3, 7};

/* rows 1, 3, 7; a block of 128 */
static void embedding_shape(int dim)
{
	for (int b = 0; b < 3; b++)
		embedding_check(emb_Ts[b], dim, 128, -1);
}

/* the same rows at dims 33, 111, 260, 576 in blocks of 32; bad ids */
static void embedding_cases(void)
{
	static const int dims[] = {33, 111, 260, 576};
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 3; b++)
			embedding_check(emb_Ts[b], dims[a], 32, -1);
	embedding_check(5, 111, 64, 2);
	embedding_check(5, 576, 64, 3);
	embedding_check(1, 260, 32, 0);
}

/* ---- cast ------------------------------------------------------------- */

/* f32 -> bf16/f16 against gguf's round-to-nearest-even conversions (special
 * values, ties, the f16 overflow edge, subnormals, random), bf16/f16 -> f32
 * over all 65536 bit patterns; NaN -> 0x7fff as CUDA's
 * __float2bfloat16_rn / __float2half_rn (gguf keeps a payload, so NaN is
 * checked separately). Exact: bound zero. */
static void cast_begin(oh_case *c, int N, int mode)
{
	oh_begin(c, SW_OP_cast, "N%d MODE %d", N, mode);
	oh_pi(c, "N", N);
	oh_pi(c, "MODE", mode);
	oh_pi(c, "BLOCK", 128);
}

static void cast_launch(oh_case *c, int N)
{
	const int v = N % 8 == 0 ? 8 : 1;
	oh_launch(c, d3((unsigned)((N / v + 127) / 128), 1, 1), d3(128, 1, 1));
	oh_end(c);
}

static float f32_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static void cast_down(int N, int mode)
{
	static const uint32_t special[] = {
		0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
		0x477fe000u, /* 65504, f16 max */
		0x477fefffu, /* just below the f16 overflow tie: 65504 */
		0x477ff000u, /* 65520: tie, rounds to even = inf */
		0x33000000u, /* 2^-25: f16 tie to 0 */
		0x33000001u, /* just above: smallest f16 subnormal */
		0x387fc000u, /* f16 subnormal range */
		0x3f808000u, /* bf16 tie, even stays */
		0x3f818000u, /* bf16 tie, odd rounds up */
		0x7f7fffffu, /* FLT_MAX: bf16 rounds to inf */
		0x00000001u, /* fp32 denormal */
	};
	const int ns = (int)(sizeof(special) / sizeof(special[0]));
	oh_case c;
	cast_begin(&c, N, mode);
	uint16_t *y = oh_buf(&c, "y", (size_t)N, sizeof(uint16_t));
	float *x = oh_buf(&c, "x", (size_t)N, sizeof(float));
	uint16_t *want = oh_host(&c, (size_t)N * sizeof(*want));
	for (int i = 0; i < N; i++) {
		if (i < ns)
			x[i] = f32_bits(special[i]);
		else if (i % 3 == 0)
			x[i] = (float)(rnd() * 70000.0);
		else if (i % 3 == 1)
			x[i] = (float)(rnd() * 1e-6);
		else
			x[i] = (float)rnd();
	}
	for (int i = 0; i < N; i++)
		want[i] = isnan(x[i]) ? 0x7fffu : mode == 0 ? gguf_f32_to_bf16(x[i]) : gguf_f32_to_f16(x[i]);
	oh_expect(&c, "y", KERN_U16, y, want, (size_t)N, 0, 0, 0);
	cast_launch(&c, N);
}

static void cast_up(int N, int mode)
{
	oh_case c;
	cast_begin(&c, N, mode);
	float *y = oh_buf(&c, "y", (size_t)N, sizeof(float));
	uint16_t *x = oh_buf(&c, "x", (size_t)N, sizeof(uint16_t));
	float *want = oh_host(&c, (size_t)N * sizeof(*want));
	for (int i = 0; i < N; i++)
		x[i] = (uint16_t)(N == 65536 ? (unsigned)i : ((unsigned)i * 40503u) & 0xffffu);
	for (int i = 0; i < N; i++)
		want[i] = mode == 2 ? gguf_bf16_to_f32(x[i]) : gguf_f16_to_f32(x[i]);
	oh_expect(&c, "y", KERN_F32, y, want, (size_t)N, 0, 0, 0);
	cast_launch(&c, N);
}

/* f32 to bf16 (MODE 0) and bf16 to f32 (2) */
static void cast_shape(int N)
{
	cast_down(N, 0);
	cast_up(N, 2);
}

/* f32 to bf16 and fp16 (MODE 0, 1) at N 1, 17, 33, 111, 260, 576, 4096;
 * bf16 and fp16 to f32 (2, 3) at 1, 33, 111, 260, 576 and every pattern */
static void cast_cases(void)
{
	static const int down[] = {1, 17, 33, 111, 260, 576, 4096};
	static const int up[] = {1, 33, 111, 260, 576, 65536};
	for (int a = 0; a < 7; a++) {
		cast_down(down[a], 0);
		cast_down(down[a], 1);
	}
	for (int a = 0; a < 6; a++) {
		cast_up(up[a], 2);
		cast_up(up[a], 3);
	}
}

/* ---- q_target --------------------------------------------------------- */

/* A mapped draft vocabulary's q gathered onto the target's ids through t2d,
 * vs ref_q_target, and the reference vs the host decoder's own rule
 * (runtime/decode/block_decode.c scatter_q: q[d2t[i]] = q_draft[i], 0
 * elsewhere) written out here independently. The map a shuffled choice of
 * VD target ids (not sorted); the output buffer starts with garbage, so
 * every element must be written. Exact. */
static void q_target_check(int rows, int VD, int V, int block)
{
	oh_case c;
	oh_begin(&c, SW_OP_q_target, "DEPTHS%d VD%d V%d BLOCK%d", rows, VD, V, block);
	oh_pi(&c, "DEPTHS", rows);
	oh_pi(&c, "VD", VD);
	oh_pi(&c, "V", V);
	oh_pi(&c, "BLOCK", block);
	float *out = oh_buf(&c, "out", (size_t)rows * V, sizeof(float));
	float *q = oh_buf(&c, "q", (size_t)rows * VD, sizeof(float));
	int32_t *t2d = oh_buf(&c, "t2d", (size_t)V, sizeof(int32_t));
	int32_t *ids = oh_host(&c, (size_t)V * sizeof(*ids));
	float *want = oh_host(&c, (size_t)rows * V * sizeof(*want));
	float *host = oh_host(&c, (size_t)rows * V * sizeof(*host));

	/* d2t: the first VD of a shuffle of [0, V) */
	for (int v = 0; v < V; v++)
		ids[v] = v;
	for (int v = V - 1; v > 0; v--) {
		const int w = (int)(tu_rand(&rng_state) % (uint64_t)(v + 1)), x = ids[v];
		ids[v] = ids[w];
		ids[w] = x;
	}
	int sorted = 1;
	for (int i = 1; i < VD; i++)
		sorted &= ids[i] > ids[i - 1];
	if (VD >= 8) /* a few ids may happen to come out in order */
		assert_false(sorted);
	for (int v = 0; v < V; v++)
		t2d[v] = -1;
	for (int i = 0; i < VD; i++)
		t2d[ids[i]] = i;
	for (size_t e = 0; e < (size_t)rows * VD; e++)
		q[e] = (float)(rnd() * 0.5 + 0.5);
	for (size_t e = 0; e < (size_t)rows * V; e++)
		out[e] = want[e] = 12345.0f; /* garbage the kernel must overwrite */
	assert_int_equal(ref_q_target(want, q, t2d, rows, VD, V), 0);
	/* the host decoder's scatter through d2t, independently */
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < VD; i++)
			host[(size_t)r * V + ids[i]] = q[(size_t)r * VD + i];
	assert_memory_equal(want, host, (size_t)rows * V * sizeof(*want));
	oh_expect(&c, "out", KERN_F32, out, want, (size_t)rows * V, rows, V, 0);
	oh_launch(&c, d3((unsigned)((V + block - 1) / block), (unsigned)rows, 1),
	          d3((unsigned)block, 1, 1));
	oh_end(&c);
}

/* DEPTHS 3, V = VD + 13 (VD and V not multiples of the block) */
static void q_target_shape(int VD)
{
	q_target_check(3, VD, VD + 13, 32);
}

/* DEPTHS 1, 3, 8 by VD 37, 100, 1000 of V = VD + 13 and 2 VD + 1; V 1037
 * over VD 37. Refused (nothing written): a t2d entry outside [-1, VD), V <
 * VD. */
static void q_target_cases(void)
{
	static const int rows[] = {1, 3, 8}, vds[] = {37, 100, 1000};
	for (int r = 0; r < 3; r++)
		for (int d = 0; d < 3; d++) {
			q_target_check(rows[r], vds[d], vds[d] + 13, 32);
			q_target_check(rows[r], vds[d], 2 * vds[d] + 1, 64);
		}
	q_target_check(2, 37, 1037, 256);
	int32_t t2d[6] = {-1, 0, 2, 1, -1, -1};
	float q[3] = {0.1f, 0.2f, 0.7f}, out[6] = {9, 9, 9, 9, 9, 9};
	t2d[5] = 3; /* >= VD */
	assert_int_equal(ref_q_target(out, q, t2d, 1, 3, 6), REF_EINVAL);
	t2d[5] = -2;
	assert_int_equal(ref_q_target(out, q, t2d, 1, 3, 6), REF_EINVAL);
	t2d[5] = -1;
	assert_int_equal(ref_q_target(out, q, t2d, 1, 7, 6), REF_EINVAL); /* V < VD */
	assert_int_equal(ref_q_target(out, q, t2d, 0, 3, 6), REF_EINVAL);
	for (int i = 0; i < 6; i++)
		assert_true(out[i] == 9.0f);
	assert_int_equal(ref_q_target(out, q, t2d, 1, 3, 6), 0);
	assert_true(out[0] == 0.0f && out[1] == 0.1f && out[2] == 0.7f && out[3] == 0.2f &&
	            out[5] == 0.0f);
}

/* SmolLM2 (V 49152, Vd 8192, depth 8), Llama-3-8B (V 128256, Vd 32000,
 * depth 16) */
static void q_target_nvrtc(void)
{
	static const int shapes[][3] = {{8, 8192, 49152}, {16, 32000, 128256}};
	for (int s = 0; s < 2; s++) {
		oh_case c;
		oh_begin(&c, SW_OP_q_target, "nvrtc");
		oh_pi(&c, "DEPTHS", shapes[s][0]);
		oh_pi(&c, "VD", shapes[s][1]);
		oh_pi(&c, "V", shapes[s][2]);
		oh_pi(&c, "BLOCK", 256);
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- head_prep -------------------------------------------------------- */

/* The Qwen family's bias, per-head RMSNorm and NeoX RoPE on one projection
 * vs ref_head_prep: more heads than warps and more warps than heads,
 * HEAD_DIM / 2 not a multiple of 32 (ragged lanes), 6, 64, 80, 128 and
 * 256, every combination of the steps the planner emits (Qwen2 q/k: bias +
 * rope; Qwen2 v: bias; Qwen3 q/k: norm + rope), positions up to 5000 with
 * theta 1e6; Gemma 3's q and k (norm + rope, the query times SCALE).
 * Bound per element, against ref_head_prep (double sums and angles,
 * rounded once per step). The bias add is the same fp32 add on both sides
 * (exact agreement). The kernel's sum of squares: a lane's 2 PPL terms in
 * order, then 5 butterfly levels, relative error <= (2 PPL + 5) u
 * (gamma); the mean, + eps, sqrtf and the reciprocal add 4 u, the square
 * root halves the sum's; the two products a * scale * w 2 u more: a normed
 * value errs by at most (PPL + 9) u of its magnitude. The rotation then as
 * rope's case derives it: (|angle| u + 7 u) (|a| + |c|) of the pair's
 * (normed) inputs, plus the inputs' own error carried through the
 * rotation (<= (PPL + 9) u (|a| + |c|)). A scale s != 1 multiplies the
 * result once more: the bound times s, plus u of the result. */
static void head_prep_begin(oh_case *c, int H, int HD, int bias, int norm, int rope, int block,
                            float scale, const char *what)
{
	oh_begin(c, SW_OP_head_prep, "H%d HD%d bias %d norm %d rope %d BLOCK%d scale %g%s", H, HD,
	         bias, norm, rope, block, (double)scale, what);
	oh_pi(c, "N_HEADS", H);
	oh_pi(c, "HEAD_DIM", HD);
	oh_pi(c, "BIAS", bias);
	oh_pi(c, "NORM", norm);
	oh_pi(c, "ROPE", rope);
	oh_pf(c, "EPS", 1e-6f);
	oh_pf(c, "SCALE", scale);
	oh_pi(c, "BLOCK", block);
}

static void head_prep_check(int T, int H, int HD, int bias, int norm, int rope, int block,
                            float scale)
{
	oh_case c;
	char what[16];
	snprintf(what, sizeof(what), " T%d", T);
	head_prep_begin(&c, H, HD, bias, norm, rope, block, scale, what);
	const size_t n = (size_t)T * H * HD;
	const int half = HD / 2, ppl = (half + 31) / 32;
	float *x = oh_buf(&c, "x", n, sizeof(float));
	int32_t *pos = oh_buf(&c, "pos", (size_t)T, sizeof(int32_t));
	float *freq = oh_buf(&c, "inv_freq", (size_t)half, sizeof(float));
	float *b = oh_alloc(&c, "b", (size_t)H * HD, sizeof(float));
	float *w = oh_alloc(&c, "w", (size_t)HD, sizeof(float));
	/* unused steps get a buffer that is there, as the planner passes */
	oh_arg(&c, bias ? b : freq);
	oh_arg(&c, norm ? w : freq);
	double *r = oh_host(&c, n * sizeof(double)), *bound = oh_host(&c, n * sizeof(double));

	ref_rope_freqs(freq, HD, 1e6f, 0, 1.0f, 0, 0, 0);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(4.0 * rnd());
	for (int i = 0; i < H * HD; i++)
		b[i] = (float)rnd();
	for (int i = 0; i < HD; i++)
		w[i] = (float)(1.0 + 0.5 * rnd());
	for (int t = 0; t < T; t++)
		pos[t] = t == 0 ? 0 : (int32_t)((t * 1237) % 5001);
	float *pre = oh_copy(&c, x, n * sizeof(float)), *ref = oh_copy(&c, x, n * sizeof(float));
	ref_head_prep(pre, pos, T, H, HD, bias ? b : NULL, norm ? w : NULL, 1e-6f, 0, freq, 1.0f);
	ref_head_prep(ref, pos, T, H, HD, bias ? b : NULL, norm ? w : NULL, 1e-6f, rope, freq, scale);
	const double en = norm ? (ppl + 9) * U32 : 0.0;
	for (int t = 0; t < T; t++)
		for (int h = 0; h < H; h++)
			for (int i = 0; i < HD; i++) {
				const size_t j = ((size_t)t * H + h) * HD + i;
				const size_t ja = j - (i >= half ? half : 0);
				const double mag = fabs(pre[ja]) + fabs(pre[ja + half]);
				const double a = (double)pos[t] * freq[i % half];
				r[j] = ref[j];
				bound[j] = rope ? (fabs(a) * U32 + 8 * U32 + en) * mag
				                : en * fabs(pre[j]) + U32 * fabs(pre[j]);
				if (scale != 1.0f)
					bound[j] = bound[j] * scale + U32 * fabs(r[j]);
			}
	oh_expect_close(&c, "x", x, r, bound, n, T, H, HD);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1));
	oh_end(&c);
}

static void head_prep_cases(void)
{
	static const int steps[][3] = {{1, 0, 1}, {1, 0, 0}, {0, 1, 1}, {0, 0, 1}, {1, 1, 1}};
	static const int Ts[] = {1, 3, 5};
	for (int ti = 0; ti < 3; ti++)
		for (int s = 0; s < 5; s++) {
			const int bi = steps[s][0], no = steps[s][1], ro = steps[s][2];
			head_prep_check(Ts[ti], 7, 64, bi, no, ro, 128, 1.0f);  /* 7 heads over 4 warps */
			head_prep_check(Ts[ti], 2, 128, bi, no, ro, 256, 1.0f); /* Qwen3 head_dim, idle warps */
			head_prep_check(Ts[ti], 3, 80, bi, no, ro, 64, 1.0f);   /* half 40: lanes 8..31 idle in j = 1 */
			head_prep_check(Ts[ti], 5, 6, bi, no, ro, 32, 1.0f);    /* 3 pairs, one warp */
		}
	head_prep_check(2, 3, 256, 0, 1, 1, 128, 1.0f); /* Gemma-sized heads, 4 pairs a lane */
	/* Gemma 3's steps: q norm + rope + scale (query_pre_attn_scalar 24
	 * under head_dim 32: sqrtf(32 / 24); 256 under 256 is no multiply, 168
	 * under 128 a scale below 1), k norm + rope. */
	const float s1 = sqrtf(32.0f / 24.0f), s2 = sqrtf(128.0f / 168.0f);
	for (int T = 1; T <= 5; T += 2) {
		head_prep_check(T, 4, 32, 0, 1, 1, 128, s1);   /* the test model's q */
		head_prep_check(T, 2, 32, 0, 1, 1, 128, 1.0f); /* its k */
		head_prep_check(T, 5, 256, 0, 1, 1, 64, s1);   /* 270M-sized heads over 2 warps */
		head_prep_check(T, 7, 128, 0, 1, 1, 128, s2);
		head_prep_check(T, 3, 80, 0, 1, 1, 32, s2);    /* ragged lanes */
	}
}

/* The kernels an engine takes: Qwen2-7B q/k/v and Qwen3-8B q/k (head_dim
 * 128), and head_dim 256 with every step; Gemma 3 270M's q (4 heads) and k
 * (1) of head_dim 256, the query scaled (a 27B-style query_pre_attn_scalar
 * 168 under 128); under 4 heads a warp a head, as the planner launches them
 * (gen/arch_qwen.c: one head of 256 spills 8 bytes at 64 threads on
 * sm_80). */
static void head_prep_nvrtc(void)
{
	static const int cases[][5] = {{28, 128, 1, 0, 1}, {4, 128, 1, 0, 0}, {32, 128, 0, 1, 1},
	                               {8, 128, 0, 1, 1}, {16, 256, 1, 1, 1}, {14, 64, 1, 0, 1}};
	oh_case c;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		head_prep_begin(&c, cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], 128,
		                1.0f, " nvrtc");
		oh_nvrtc(&c);
		oh_end(&c);
	}
	static const int gem[][4] = {{4, 256, 0, 128}, {1, 256, 0, 32}, {2, 256, 0, 64},
	                             {3, 256, 0, 96},  {2, 128, 0, 64}, {1, 128, 0, 32},
	                             {1, 64, 0, 32},   {32, 128, 1, 128}};
	for (size_t i = 0; i < sizeof(gem) / sizeof(gem[0]); i++) {
		head_prep_begin(&c, gem[i][0], gem[i][1], 0, 1, 1, gem[i][3],
		                gem[i][2] ? sqrtf(128.0f / 168.0f) : 1.0f, " nvrtc");
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- feature_tap ------------------------------------------------------ */

/* vs ref_feature_tap: DIM on the vector path and not a multiple of the
 * 4-float vector; N_TAPS 3 with SLOT first, middle, last, and N_TAPS 1. The
 * tap buffer starts with random values (and the h, delta inputs hold every
 * float class: normals, subnormals, signed zeros, infinities, NaN), so the
 * whole buffer is compared bit for bit: the slot's columns equal the
 * reference's one fp32 add, every other column keeps its old bits (checked
 * also against the buffer's copy, independently of the reference). */

/* Mostly ordinary values, now and then a random bit pattern (any class). */
static float rnd_float(void)
{
	uint64_t r = tu_rand(&rng_state);
	if (r % 16 == 0) {
		uint32_t b = (uint32_t)(r >> 32);
		float f;
		memcpy(&f, &b, sizeof(f));
		return f;
	}
	return (float)((double)(r >> 11) * 0x1p-53 * 8.0 - 4.0);
}

static void feature_tap_begin(oh_case *c, int rows, int dim, int n_taps, int slot, int block)
{
	oh_begin(c, SW_OP_feature_tap, "ROWS%d DIM%d N_TAPS%d SLOT%d", rows, dim, n_taps, slot);
	oh_pi(c, "ROWS", rows);
	oh_pi(c, "DIM", dim);
	oh_pi(c, "N_TAPS", n_taps);
	oh_pi(c, "SLOT", slot);
	oh_pi(c, "BLOCK", block);
}

static void feature_tap_check(int rows, int dim, int n_taps, int slot)
{
	const int block = dim % 4 ? 32 : 64;
	oh_case c;
	feature_tap_begin(&c, rows, dim, n_taps, slot, block);
	const size_t nt = (size_t)rows * n_taps * dim, nh = (size_t)rows * dim;
	float *taps = oh_buf(&c, "taps", nt, sizeof(float));
	float *h = oh_buf(&c, "h", nh, sizeof(float));
	float *delta = oh_buf(&c, "delta", nh, sizeof(float));

	for (size_t i = 0; i < nt; i++)
		taps[i] = rnd_float();
	for (size_t i = 0; i < nh; i++) {
		h[i] = rnd_float();
		delta[i] = rnd_float();
	}
	h[0] = -0.0f; /* -0 + -0 = -0; -0 + +0 = +0 */
	delta[0] = rows > 1 ? -0.0f : 0.0f;
	const float *old = oh_copy(&c, taps, nt * sizeof(float));
	float *want = oh_copy(&c, taps, nt * sizeof(float));
	ref_feature_tap(want, h, delta, rows, dim, n_taps, slot);
	/* independent of the reference: the other slots keep their bits */
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < n_taps * dim; j++)
			if (j / dim != slot)
				assert_memory_equal(&want[(size_t)r * n_taps * dim + j],
				                    &old[(size_t)r * n_taps * dim + j], sizeof(float));
	oh_expect(&c, "taps", KERN_F32, taps, want, nt, rows, n_taps, dim);
	oh_launch(&c, d3((unsigned)rows, 1, 1), d3((unsigned)block, 1, 1));
	/* and the slot holds h + delta as this test adds them */
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < dim; j++) {
			const float s = h[(size_t)r * dim + j] + delta[(size_t)r * dim + j];
			assert_memory_equal(&taps[((size_t)r * n_taps + slot) * dim + j], &s, sizeof(s));
		}
	oh_end(&c);
}

/* three rows, the middle of 3 slots */
static void feature_tap_shape(int dim)
{
	feature_tap_check(3, dim, 3, 1);
}

/* ROWS 1, 3, 26, 63 by DIM 8, 37, 99 and 576, every slot of 3 and of 1 */
static void feature_tap_cases(void)
{
	static const int rows[] = {1, 3, 26, 63}, dims[] = {8, 37, 99, 576};
	for (int r = 0; r < 4; r++)
		for (int d = 0; d < 4; d++) {
			for (int slot = 0; slot < 3; slot++)
				feature_tap_check(rows[r], dims[d], 3, slot);
			feature_tap_check(rows[r], dims[d], 1, 0);
		}
}

/* SmolLM2 (576, 3 taps, a tree of 26 rows), Llama-3-8B (4096, 3 taps, 63
 * rows), the scalar path */
static void feature_tap_nvrtc(void)
{
	static const int shapes[][4] = {{26, 576, 3, 1}, {63, 4096, 3, 2}, {3, 99, 3, 0}};
	for (int s = 0; s < 3; s++) {
		oh_case c;
		feature_tap_begin(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 128);
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- embedding16 ------------------------------------------------------ */

/* vs ref_embedding16: bf16 and fp16 tables of random 16-bit patterns (every
 * class: normals, subnormals, zeros, infinities, NaNs with payloads), the
 * vector path and the scalar one, out-of-range ids, and ids in the padding
 * range [N_ROWS, N_IDS) (a draft whose vocabulary is a prefix of the
 * target's), which must come out as rows of +0.0 bits. Rows times SCALE
 * (Gemma 3's sqrt(dim): 8 and sqrt(640); 1 elsewhere), one fp32 multiply
 * on both sides. Widening is exact, so the bound is zero: bit equality
 * over the whole output, untouched rows still holding emu_alloc's poison.
 * Doubt admitted: the emulator's F16_TO_F32 and gguf_f16_to_f32 keep a
 * NaN's payload; the GPU's cvt.f32.f16 may canonicalise it, which no test
 * here can see (no GPU). */
static void embedding16_begin(oh_case *c, int dim, int n_rows, int n_ids, int is_f16, float scale,
                              int block)
{
	oh_begin(c, SW_OP_embedding16, "DIM%d N_ROWS%d N_IDS%d IS_F16 %d SCALE %g BLOCK%d", dim,
	         n_rows, n_ids, is_f16, (double)scale, block);
	oh_pi(c, "DIM", dim);
	oh_pi(c, "N_ROWS", n_rows);
	oh_pi(c, "N_IDS", n_ids);
	oh_pi(c, "IS_F16", is_f16);
	oh_pf(c, "SCALE", scale);
	oh_pi(c, "BLOCK", block);
}

/* T rows of dim from a table of n_rows and n_pad padding ids beyond it;
 * bad_at >= 0 puts an invalid id there (and a second one at bad_at + 2 when
 * it exists); with n_pad > 0 every third row from row 1 takes a padding id
 * (the last one, n_rows + n_pad - 1, among them). */
static void embedding16_check(int T, int dim, int is_f16, int block, int bad_at, int n_pad,
                              float scale)
{
	const int n_rows = 50, n_ids = n_rows + n_pad;
	oh_case c;
	embedding16_begin(&c, dim, n_rows, n_ids, is_f16, scale, block);
	const size_t ny = (size_t)T * dim;
	float *y = oh_buf(&c, "y", ny, sizeof(float));
	uint16_t *table = oh_buf(&c, "table", (size_t)n_rows * dim, sizeof(uint16_t));
	int32_t *tok = oh_buf(&c, "tok", (size_t)T, sizeof(int32_t));
	int32_t *err = oh_buf(&c, "err", 1, sizeof(int32_t));
	float *ref = oh_host(&c, ny * sizeof(*ref));

	for (size_t i = 0; i < (size_t)n_rows * dim; i++)
		table[i] = (uint16_t)tu_rand(&rng_state);
	for (int t = 0; t < T; t++)
		tok[t] = (int32_t)(tu_rand(&rng_state) % (uint64_t)n_rows);
	tok[T - 1] = n_rows - 1; /* the last row of the table */
	for (int t = 1; n_pad > 0 && t < T; t += 3)
		tok[t] = t + 3 >= T ? n_ids - 1 : n_rows + (int32_t)(tu_rand(&rng_state) % (uint64_t)n_pad);
	if (bad_at >= 0) {
		const int32_t bad_ids[] = {-1, n_ids, 1 << 30, -2147483647 - 1};
		tok[bad_at] = bad_ids[bad_at % 4];
		if (bad_at + 2 < T)
			tok[bad_at + 2] = bad_ids[(bad_at + 1) % 4];
	}
	*err = 0;
	memset(ref, 0xff, ny * sizeof(*ref)); /* the poison emu_alloc leaves in y */
	assert_int_equal(ref_embedding16(ref, table, tok, T, dim, n_rows, n_ids, is_f16, scale),
	                 bad_at >= 0 ? -1 : 0);
	int n = snprintf(c.what + strlen(c.what), sizeof(c.what) - strlen(c.what), " T%d", T);
	if (bad_at >= 0)
		n += snprintf(c.what + strlen(c.what), sizeof(c.what) - strlen(c.what),
		              ", bad ids in rows %d%s (left untouched)", bad_at,
		              bad_at + 2 < T ? " and +2" : "");
	if (n_pad > 0)
		snprintf(c.what + strlen(c.what), sizeof(c.what) - strlen(c.what),
		         ", padding ids (zero rows)");
	(void)n;
	oh_expect(&c, "y", KERN_F32, y, ref, ny, T, dim, 0);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1));
	assert_int_equal(*err, bad_at >= 0);
	/* the rule itself, not only agreement with the reference: a padding id's
	 * row is +0.0 in every element (bits 0), whatever the row held before */
	for (int t = 0; t < T; t++)
		if (tok[t] >= n_rows && tok[t] < n_ids)
			for (int i = 0; i < dim; i++) {
				uint32_t b;
				memcpy(&b, &y[(size_t)t * dim + i], 4);
				if (b)
					fail_msg("%s: row %d (id %d) element %d has bits %08x, expected +0.0",
					         c.what, t, tok[t], i, b);
			}
	oh_end(&c);
}

/* The widening helpers agree with the emulator's on every 16-bit pattern
 * (so the table test's random sample cannot miss a class): row t holds the
 * patterns (63 - t) * dim + i. */
static void embedding16_all_patterns(void)
{
	for (int f16 = 0; f16 < 2; f16++) {
		const int dim = 65536 / 64;
		oh_case c;
		embedding16_begin(&c, dim, 64, 64, f16, 1.0f, 128);
		strcat(c.what, f16 ? ", fp16 widening, all patterns" : ", bf16 widening, all patterns");
		float *y = oh_buf(&c, "y", 65536, sizeof(float));
		uint16_t *table = oh_buf(&c, "table", 65536, sizeof(uint16_t));
		int32_t *tok = oh_buf(&c, "tok", 64, sizeof(int32_t));
		int32_t *err = oh_buf(&c, "err", 1, sizeof(int32_t));
		float *want = oh_host(&c, 65536 * sizeof(*want));
		for (int i = 0; i < 65536; i++)
			table[i] = (uint16_t)i;
		for (int t = 0; t < 64; t++)
			tok[t] = 63 - t;
		*err = 0;
		for (int t = 0; t < 64; t++)
			for (int i = 0; i < dim; i++) {
				uint16_t h = (uint16_t)((63 - t) * dim + i);
				want[t * dim + i] = f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
			}
		oh_expect(&c, "y", KERN_F32, y, want, 65536, 64, dim, 0);
		oh_launch(&c, d3(64, 1, 1), d3(128, 1, 1));
		assert_int_equal(*err, 0);
		oh_end(&c);
	}
}

/* bf16, three padding ids; rows 1 and 7 (the scalar path's block 32, the
 * vector one's 128), and 9 with bad ids beside the padding ones */
static void embedding16_shape(int dim)
{
	const int block = dim % 4 ? 32 : 128;
	embedding16_check(1, dim, 0, block, -1, 3, 1.0f);
	embedding16_check(7, dim, 0, block, -1, 3, 1.0f);
	embedding16_check(9, dim, 0, block, 3, 3, 1.0f);
}

static void embedding16_cases(void)
{
	static const int dims[] = {576, 64, 33, 111};
	static const int Ts[] = {1, 3, 7};
	embedding16_all_patterns();
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 4; a++)
			for (int b = 0; b < 3; b++)
				embedding16_check(Ts[b], dims[a], f16, a % 2 ? 32 : 128, -1, 0, 1.0f);
	/* 72 vectors over 32 threads: a partial third round */
	embedding16_check(2, 576, 0, 32, -1, 0, 1.0f);
	/* Gemma 3's scaled rows: SCALE 8 (dim 64) and sqrtf(640) (270M), every
	 * shape and path, padding and bad ids beside them: still bit equal (the
	 * padding rows +0.0: 0 * scale). */
	const float scales[] = {8.0f, sqrtf(640.0f)};
	for (int sc = 0; sc < 2; sc++)
		for (int f16 = 0; f16 < 2; f16++)
			for (int a = 0; a < 4; a++) {
				embedding16_check(3, dims[a], f16, a % 2 ? 32 : 128, -1, 0, scales[sc]);
				embedding16_check(7, dims[a], f16, 128, -1, 3, scales[sc]);
				embedding16_check(5, dims[a], f16, 32, 2, 0, scales[sc]);
			}
	for (int f16 = 0; f16 < 2; f16++) {
		embedding16_check(5, 111, f16, 32, 2, 0, 1.0f);
		embedding16_check(5, 576, f16, 128, 1, 0, 1.0f);
		embedding16_check(1, 33, f16, 128, 0, 0, 1.0f);
		embedding16_check(7, 64, f16, 32, 3, 0, 1.0f);
	}
	/* Padding-range ids: 3 (the Qwen2 pair's shape in miniature) and 1 ids
	 * beyond the table, on both paths, with bad ids beside them. */
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 4; a++) {
			embedding16_check(7, dims[a], f16, a % 2 ? 32 : 128, -1, 3, 1.0f);
			embedding16_check(2, dims[a], f16, 128, -1, 1, 1.0f);
			embedding16_check(9, dims[a], f16, 32, 3, 3, 1.0f);
		}
}

/* SmolLM2-135M (576 x 49152, bf16), Llama-3-8B (4096 x 128256, fp16), a
 * Qwen2-0.5B draft under Qwen2-7B (896 x 151936, ids to 152064), the scalar
 * path with padding ids, and Gemma 3 270M's table, rows times sqrt(640) */
static void embedding16_nvrtc(void)
{
	static const int shapes[][4] = {{576, 49152, 49152, 0}, {4096, 128256, 128256, 1},
	                                {896, 151936, 152064, 0}, {111, 50, 53, 0},
	                                {640, 262144, 262144, 0}};
	for (int s = 0; s < 5; s++) {
		oh_case c;
		embedding16_begin(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
		                  s == 4 ? sqrtf(640.0f) : 1.0f, 128);
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- kv_store --------------------------------------------------------- */

/* vs ref_kv_store: KVD on the vector path (192, 40) and the scalar one
 * (36), ROWS 1, 26, 63 at ROW0 0 and inside a tree, lengths that fit, that
 * push the last rows past MAX_CTX (skipped) and that skip everything; bf16
 * and fp16. Inputs mix random fp32 bit patterns (overflow to inf, underflow
 * to subnormals and zero), values around the fp16 range and exact
 * round-to-nearest-even ties, so the preludes' F32_TO_BF16 / F32_TO_F16
 * are held bit for bit to gguf_f32_to_bf16 / gguf_f32_to_f16. Whole-cache
 * equality (a stray write anywhere shows); the cache buffer extends to the
 * last slot a launch could address, so a row stored past MAX_CTX shows as a
 * difference. NaN is the one class where the two differ by design (device:
 * canonical 0x7fff; gguf: the payload kept, quieted), so NaN inputs are
 * checked for class only. */
static float kv_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* One input value: a quarter each of random bit patterns (NaN excluded),
 * values spanning the fp16 range, bf16 ties and fp16 ties. */
static float kv_input(void)
{
	uint64_t r = tu_rand(&rng_state);
	uint32_t sign = (uint32_t)(r >> 63) << 31, u;
	switch ((r >> 8) & 3) {
	case 0:
		do
			u = (uint32_t)tu_rand(&rng_state);
		while ((u & 0x7fffffffu) > 0x7f800000u);
		return kv_bits(u);
	case 1: /* 2^-27 .. 2^17: fp16 zero, subnormals, normals, overflow */
		return (float)rnd() * ldexpf(1.0f, (int)(r >> 16) % 45 - 27);
	case 2: /* a bf16 tie: the dropped half is exactly 0x8000 */
		return kv_bits(((uint32_t)(r >> 16) & 0x7f7f0000u) | 0x8000u | sign);
	default: { /* an fp16 tie: half an fp16 ulp above a finite fp16 value */
		uint32_t e = (uint32_t)(r >> 16) % 31, m = (uint32_t)(r >> 24) & 0x3ffu;
		if (e == 0)
			return kv_bits(sign) + (sign ? -1.0f : 1.0f) * ((float)m + 0.5f) * 0x1p-24f;
		return kv_bits(sign | (e + 112u) << 23 | m << 13 | 1u << 12);
	}
	}
}

typedef struct kv_shape {
	int rows, kvd, row0, max_ctx, is_f16, block;
} kv_shape;

static void kv_store_begin(oh_case *c, const kv_shape *s, const char *what)
{
	oh_begin(c, SW_OP_kv_store, "ROWS%d KVD%d ROW0 %d MAX_CTX%d IS_F16 %d BLOCK%d%s", s->rows,
	         s->kvd, s->row0, s->max_ctx, s->is_f16, s->block, what);
	oh_pi(c, "ROWS", s->rows);
	oh_pi(c, "KVD", s->kvd);
	oh_pi(c, "ROW0", s->row0);
	oh_pi(c, "MAX_CTX", s->max_ctx);
	oh_pi(c, "IS_F16", s->is_f16);
	oh_pi(c, "BLOCK", s->block);
}

/* One store at length len (row r at slot len + ROW0 + r); returns how many
 * rows landed. */
static int kv_store_check(const kv_shape *s, int len)
{
	oh_case c;
	char what[48];
	snprintf(what, sizeof(what), " len %d", len);
	kv_store_begin(&c, s, what);
	/* the buffer reaches past MAX_CTX to the last slot the launch could
	 * touch, so a row written past MAX_CTX shows in the comparison (and
	 * cannot corrupt the heap beyond the guard) */
	const int slots = s->max_ctx > len + s->row0 + s->rows ? s->max_ctx : len + s->row0 + s->rows;
	const size_t nc = (size_t)slots * s->kvd, nx = (size_t)s->rows * s->kvd;
	uint16_t *kc = oh_alloc(&c, "k_cache", nc, 2), *vc = oh_alloc(&c, "v_cache", nc, 2);
	oh_arg(&c, kc + (size_t)s->row0 * s->kvd);
	oh_arg(&c, vc + (size_t)s->row0 * s->kvd);
	float *k = oh_buf(&c, "k", nx, 4), *v = oh_buf(&c, "v", nx, 4);
	int32_t *dlen = oh_buf(&c, "len", 1, 4);

	for (size_t i = 0; i < nc; i++) {
		kc[i] = (uint16_t)tu_rand(&rng_state);
		vc[i] = (uint16_t)tu_rand(&rng_state);
	}
	for (size_t i = 0; i < nx; i++) {
		k[i] = kv_input();
		v[i] = kv_input();
	}
	*dlen = len;
	uint16_t *hk = oh_copy(&c, kc, nc * 2), *hv = oh_copy(&c, vc, nc * 2);
	ref_kv_store(hk + (size_t)s->row0 * s->kvd, hv + (size_t)s->row0 * s->kvd, k, v, len, s->rows,
	             s->kvd, s->row0, s->max_ctx, s->is_f16);
	oh_expect(&c, "k_cache", KERN_U16, kc, hk, nc, slots, s->kvd, 0);
	oh_expect(&c, "v_cache", KERN_U16, vc, hv, nc, slots, s->kvd, 0);
	const int vec = s->kvd % 8 == 0 ? 8 : 1;
	oh_launch(&c, d3((unsigned)((s->rows * s->kvd / vec + s->block - 1) / s->block), 1, 1),
	          d3((unsigned)s->block, 1, 1));
	assert_int_equal(*dlen, len); /* the length is the commit's to advance */
	oh_end(&c);
	int landed = s->max_ctx - len - s->row0;
	return landed < 0 ? 0 : landed > s->rows ? s->rows : landed;
}

/* a 26-row tree level at ROW0 5 in bf16, half the room */
static void kv_store_shape(int kvd)
{
	kv_shape s = {26, kvd, 5, 160, 0, 128};
	assert_int_equal(kv_store_check(&s, (s.max_ctx - s.row0 - s.rows) / 2), s.rows);
}

/* NaN: the device's canonical 0x7fff, gguf's quieted payload; both NaN. */
static void kv_store_nan(int f16, int vec)
{
	kv_shape s = {3, vec ? 40 : 36, 0, 8, f16, 64};
	oh_case c;
	kv_store_begin(&c, &s, f16 ? ", NaN to the canonical fp16 0x7fff" :
	                             ", NaN to the canonical bf16 0x7fff");
	const size_t nx = (size_t)s.rows * s.kvd;
	uint16_t *kc = oh_buf(&c, "k_cache", (size_t)s.max_ctx * s.kvd, 2);
	uint16_t *vc = oh_buf(&c, "v_cache", (size_t)s.max_ctx * s.kvd, 2);
	float *k = oh_buf(&c, "k", nx, 4), *v = oh_buf(&c, "v", nx, 4);
	int32_t *dlen = oh_buf(&c, "len", 1, 4);
	for (size_t i = 0; i < nx; i++) {
		uint32_t u = 0x7f800001u | (uint32_t)tu_rand(&rng_state); /* a NaN, any payload and sign */
		k[i] = kv_bits(u);
		v[i] = kv_bits(u ^ 0x80000000u);
	}
	*dlen = 2;
	uint16_t *canon = oh_host(&c, nx * sizeof(*canon));
	for (size_t i = 0; i < nx; i++) {
		uint16_t want = f16 ? gguf_f32_to_f16(k[i]) : gguf_f32_to_bf16(k[i]);
		uint16_t exp_mask = f16 ? 0x7c00u : 0x7f80u, man = f16 ? 0x03ffu : 0x007fu;
		assert_true((want & exp_mask) == exp_mask && (want & man) != 0);
		canon[i] = 0x7fffu;
	}
	/* rows 0..2 land at slots 2..4 */
	oh_expect(&c, "k_cache[2:]", KERN_U16, kc + 2 * s.kvd, canon, nx, s.rows, s.kvd, 0);
	oh_expect(&c, "v_cache[2:]", KERN_U16, vc + 2 * s.kvd, canon, nx, s.rows, s.kvd, 0);
	oh_launch(&c, d3((unsigned)(nx / (vec ? 8 : 1) + 63) / 64, 1, 1), d3(64, 1, 1));
	oh_end(&c);
}

static void kv_store_cases(void)
{
	static const int kvds[] = {192, 40, 36};
	static const int rows[][2] = {{1, 0}, {26, 0}, {26, 5}, {63, 37}}; /* ROWS, ROW0 */
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 4; b++) {
				kv_shape s = {rows[b][0], kvds[a], rows[b][1], 160, f16, (a + b) % 2 ? 64 : 128};
				int room = s.max_ctx - s.row0 - s.rows; /* the largest len that fits all */
				assert_int_equal(kv_store_check(&s, 0), s.rows);
				assert_int_equal(kv_store_check(&s, room / 2), s.rows);
				assert_int_equal(kv_store_check(&s, room), s.rows);
			}
	/* past MAX_CTX */
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 3; a++) {
			kv_shape s = {26, kvds[a], 5, 100, f16, 128};
			int room = s.max_ctx - s.row0 - s.rows;
			assert_int_equal(kv_store_check(&s, room + 1), s.rows - 1); /* the last row skipped */
			assert_int_equal(kv_store_check(&s, room + 20), s.rows - 20);
			assert_int_equal(kv_store_check(&s, s.max_ctx - s.row0 - 1), 1); /* only row 0 */
			assert_int_equal(kv_store_check(&s, s.max_ctx - s.row0), 0);     /* nothing */
			assert_int_equal(kv_store_check(&s, s.max_ctx + 7), 0);
			kv_shape one = {1, kvds[a], 0, 100, f16, 64};
			assert_int_equal(kv_store_check(&one, 99), 1);
			assert_int_equal(kv_store_check(&one, 100), 0);
		}
	for (int f16 = 0; f16 < 2; f16++)
		for (int vec = 0; vec < 2; vec++)
			kv_store_nan(f16, vec);
}

/* SmolLM2-135M (3 KV heads x 64), Llama-3-8B (8 x 128, fp16), a 26-node
 * tree's draft rows at ROW0 0, the scalar path */
static void kv_store_nvrtc(void)
{
	static const kv_shape shapes[] = {{26, 192, 0, 8192, 0, 128}, {64, 1024, 1, 8192, 1, 128},
	                                  {1, 192, 25, 8192, 0, 128}, {63, 36, 0, 4096, 1, 128}};
	for (int i = 0; i < 4; i++) {
		oh_case c;
		kv_store_begin(&c, &shapes[i], " nvrtc");
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- fill_random ------------------------------------------------------ */

/* Random weights (timing only) vs kernels/ref/fill_random.c, exactly (bit
 * patterns), for f32, fp16 and bf16 outputs, with a full grid and with a
 * grid of one block (the grid-stride loop). The reference is checked
 * independently: element e is rebuilt from philox4x32_10 (the
 * known-answer-tested block function, test_philox) with the counter
 * written out by hand, every value lies in (c - a, c + a), the mean and
 * variance of 2^16 draws match the uniform law's (1/2 and 1/12 of the unit
 * interval) within 6 standard errors, and a seed, a buffer or the element
 * change the bits. */
enum { FILL_BLOCK = 64 };

static void fill_random_begin(oh_case *c, const char *fmt, uint64_t n, int mode, unsigned grid)
{
	oh_begin(c, SW_OP_fill_random, fmt, (unsigned long long)n, mode, grid);
	oh_pi(c, "BLOCK", FILL_BLOCK);
}

static void fill_random_check(uint64_t n, int mode, uint64_t seed, uint32_t buf, float a, float cc,
                              unsigned grid)
{
	const size_t es = mode == REF_FILL_F32 ? 4 : 2;
	oh_case c;
	fill_random_begin(&c, "n %llu mode %d grid %u", n, mode, grid);
	void *y = oh_buf(&c, "y", (size_t)n, es);
	void *want = oh_host(&c, (size_t)n * es);
	assert_int_equal(ref_fill_random(want, n, mode, seed, buf, a, cc), 0);
	uint32_t ab, cb;
	memcpy(&ab, &a, 4);
	memcpy(&cb, &cc, 4);
	const uint64_t vbuf = buf, vmode = (uint64_t)mode, va = ab, vc = cb;
	oh_val(&c, &n, 8);
	oh_val(&c, &seed, 8);
	oh_val(&c, &vbuf, 8);
	oh_val(&c, &vmode, 8);
	oh_val(&c, &va, 8);
	oh_val(&c, &vc, 8);
	oh_expect(&c, "y", mode == REF_FILL_F32 ? KERN_F32 : KERN_U16, y, want, (size_t)n, 0, 0, 0);
	oh_launch(&c, d3(grid, 1, 1), d3(FILL_BLOCK, 1, 1));
	oh_end(&c);
}

/* f32, fp16 and bf16 (a weight's dtypes), a grid covering the groups and
 * one block striding over all */
static void fill_random_shape(int n)
{
	for (int mode = 0; mode < 3; mode++) {
		const uint64_t groups = ((uint64_t)n + 3) / 4;
		const unsigned full = (unsigned)((groups + FILL_BLOCK - 1) / FILL_BLOCK);
		fill_random_check((uint64_t)n, mode, 0x123456789abcdefull, (uint32_t)(7 + n % 5),
		                  0.0441941738f, 0.0f, full);
		fill_random_check((uint64_t)n, mode, 42, 3, 0.0625f, 1.0f, 1);
	}
}

static void fill_random_ref_independent(void)
{
	enum { N = 1 << 16 };
	float *x = malloc(N * sizeof(float));
	uint16_t *h = malloc(N * sizeof(uint16_t)), *b = malloc(N * sizeof(uint16_t));
	assert_non_null(x);
	assert_non_null(h);
	assert_non_null(b);
	const uint64_t seed = 0xfeedface12345ull;
	const float a = 0.25f, c = -0.5f;
	assert_int_equal(ref_fill_random(x, N, REF_FILL_F32, seed, 9, a, c), 0);
	assert_int_equal(ref_fill_random(h, N, REF_FILL_F16, seed, 9, a, c), 0);
	assert_int_equal(ref_fill_random(b, N, REF_FILL_BF16, seed, 9, a, c), 0);
	/* element e from the block function, counter by hand */
	static const uint64_t es[] = {0, 1, 3, 4, 5, 4099, N - 1};
	for (size_t i = 0; i < sizeof(es) / sizeof(es[0]); i++) {
		const uint64_t e = es[i];
		const uint32_t ctr[4] = {(uint32_t)(e / 4), (uint32_t)((e / 4) >> 32), 8u, 9u};
		const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
		uint32_t w[4];
		philox4x32_10(ctr, key, w);
		const double u = ((double)(w[e % 4] >> 9) * 2.0 + 1.0) / 16777216.0; /* (2k+1) 2^-24 */
		const double want = c + a * (2.0 * u - 1.0); /* one rounding: fmaf */
		assert_true(x[e] == (float)want);
		assert_int_equal(h[e], sw_f32_to_half(x[e], 1));
		assert_int_equal(b[e], sw_f32_to_half(x[e], 0));
	}
	double s = 0, s2 = 0;
	for (int i = 0; i < N; i++) {
		assert_true(x[i] > c - a && x[i] < c + a);
		const double v = (x[i] - (c - a)) / (2.0 * a); /* in (0, 1) */
		s += v;
		s2 += v * v;
	}
	const double mean = s / N, var = s2 / N - mean * mean;
	/* standard errors of the mean and of the variance of U(0,1) */
	assert_true(fabs(mean - 0.5) < 6.0 * sqrt(1.0 / 12.0 / N));
	assert_true(fabs(var - 1.0 / 12.0) < 6.0 * sqrt((1.0 / 80.0 - 1.0 / 144.0) / N));
	/* another seed, buffer or element: other bits */
	float y[8], z[8];
	assert_int_equal(ref_fill_random(y, 8, REF_FILL_F32, seed + 1, 9, a, c), 0);
	assert_int_equal(ref_fill_random(z, 8, REF_FILL_F32, seed, 10, a, c), 0);
	assert_memory_not_equal(y, x, sizeof(y));
	assert_memory_not_equal(z, x, sizeof(z));
	assert_true(x[0] != x[1] && x[1] != x[4]);
	assert_int_equal(ref_fill_random(y, 8, 3, seed, 9, a, c), REF_EINVAL);
	free(x);
	free(h);
	free(b);
}

/* lengths 3, 5, 4 * 97 + 1, one past a block's groups, and three blocks' groups less two */
static void fill_random_cases(void)
{
	static const int lens[] = {3, 5, 4 * 97 + 1, 4 * FILL_BLOCK + 1, 4 * FILL_BLOCK * 3 - 2};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		fill_random_shape(lens[i]);
	fill_random_ref_independent();
}

static void fill_random_nvrtc(void)
{
	oh_case c;
	fill_random_begin(&c, "nvrtc %llu %d %u", 0, 0, 0);
	oh_nvrtc(&c);
	oh_end(&c);
}

/* ---- block_embed ------------------------------------------------------ */

/* vs ref_block_embed: block sizes B = 2, 5, 16, bf16 and fp16 tables of
 * random 16-bit patterns, FIRST 0 (tokens as block_unmask leaves them:
 * valid ids and masked -1s) and FIRST 1 (the block started from the root:
 * blk_tok's B + 1 words rewritten, whatever they held). Bad tokens: -1 at
 * row 0, ids outside [0, N_ROWS), a bad root: the row stays untouched
 * (emu_alloc's poison) and err is 1. Widening is exact, so every output is
 * compared bit for bit: y, blk_tok, blk_pos and err. Independently of the
 * reference, the masked rows are checked against gguf's widening of the
 * mask table and blk_pos against len + j. */
enum { BE_N_ROWS = 61 };

static void block_embed_begin(oh_case *c, int B, int dim, int n_rows, int is_f16, int first,
                              int block)
{
	oh_begin(c, SW_OP_block_embed, "B%d DIM%d N_ROWS%d IS_F16 %d FIRST%d BLOCK%d", B, dim,
	         n_rows, is_f16, first, block);
	oh_pi(c, "B", B);
	oh_pi(c, "DIM", dim);
	oh_pi(c, "N_ROWS", n_rows);
	oh_pi(c, "IS_F16", is_f16);
	oh_pi(c, "FIRST", first);
	oh_pi(c, "BLOCK", block);
}

/* Token patterns for FIRST 0: 0 valid ids and -1s at j > 0, 1 also -1 at
 * row 0, 2 also ids N_ROWS and INT32_MIN / 1 << 30. FIRST 1: bad_root
 * makes the root out of range. */
static void block_embed_check(int B, int dim, int is_f16, int first, int pattern, int bad_root)
{
	const int block = dim % 8 ? 32 : 64;
	oh_case c;
	block_embed_begin(&c, B, dim, BE_N_ROWS, is_f16, first, block);
	if (pattern || bad_root)
		snprintf(c.what + strlen(c.what), sizeof(c.what) - strlen(c.what), " pattern %d%s",
		         pattern, bad_root ? " bad root" : "");
	const size_t ny = (size_t)B * dim;
	float *y = oh_buf(&c, "y", ny, sizeof(float));
	uint16_t *tab = oh_buf(&c, "tok_embd", (size_t)BE_N_ROWS * dim, sizeof(uint16_t));
	uint16_t *msk = oh_buf(&c, "mask_embd", (size_t)(B - 1) * dim, sizeof(uint16_t));
	int32_t *tok = oh_buf(&c, "blk_tok", (size_t)B + 1, sizeof(int32_t));
	int32_t *root = oh_buf(&c, "root", 1, sizeof(int32_t));
	int32_t *pos = oh_buf(&c, "blk_pos", (size_t)B, sizeof(int32_t));
	int32_t *len = oh_buf(&c, "len", 1, sizeof(int32_t));
	int32_t *err = oh_buf(&c, "err", 1, sizeof(int32_t));
	float *ry = oh_host(&c, ny * sizeof(*ry));
	int32_t *rtok = oh_host(&c, ((size_t)B + 1) * sizeof(*rtok));
	int32_t *rpos = oh_host(&c, (size_t)B * sizeof(*rpos));

	for (size_t i = 0; i < (size_t)BE_N_ROWS * dim; i++)
		tab[i] = (uint16_t)tu_rand(&rng_state);
	for (size_t i = 0; i < (size_t)(B - 1) * dim; i++)
		msk[i] = (uint16_t)tu_rand(&rng_state);
	*root = bad_root ? BE_N_ROWS + 3 : (int32_t)(tu_rand(&rng_state) % BE_N_ROWS);
	*len = (int32_t)(tu_rand(&rng_state) % 4000);
	for (int j = 0; j <= B; j++) {
		if (first) /* junk FIRST must overwrite */
			tok[j] = (int32_t)(tu_rand(&rng_state) % 1000) - 500;
		else
			tok[j] = j > 0 && tu_rand(&rng_state) % 2 ? -1
			                                          : (int32_t)(tu_rand(&rng_state) % BE_N_ROWS);
	}
	if (!first && B > 2)
		tok[B - 1] = BE_N_ROWS - 1; /* the table's last row */
	if (!first && pattern >= 1)
		tok[0] = -1;
	if (!first && pattern >= 2) {
		tok[1] = BE_N_ROWS;
		tok[B - 1] = B > 2 ? -2147483647 - 1 : tok[B - 1];
		if (B > 3)
			tok[2] = 1 << 30;
	}
	*err = 0;
	memcpy(rtok, tok, ((size_t)B + 1) * sizeof(*tok));
	memset(ry, 0xff, ny * sizeof(*ry)); /* emu_alloc's poison */
	memset(rpos, 0xff, (size_t)B * sizeof(*rpos));
	const int bad = pattern > 0 || bad_root;
	assert_int_equal(ref_block_embed(ry, tab, msk, rtok, *root, rpos, *len, B, dim, BE_N_ROWS,
	                                 is_f16, first),
	                 bad ? -1 : 0);
	/* independent of the reference: masked rows widened by gguf, positions */
	for (int j = 1; j < B; j++)
		if (rtok[j] == -1)
			for (int i = 0; i < dim; i++) {
				const uint16_t h = msk[(size_t)(j - 1) * dim + i];
				const float w = is_f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
				assert_memory_equal(&ry[(size_t)j * dim + i], &w, sizeof(w));
			}
	for (int j = 0; j < B; j++)
		assert_int_equal(rpos[j], *len + j);
	if (first) {
		assert_int_equal(rtok[0], *root);
		for (int j = 1; j <= B; j++)
			assert_int_equal(rtok[j], -1);
	}
	oh_expect(&c, "y", KERN_F32, y, ry, ny, B, dim, 0);
	oh_expect(&c, "blk_tok", KERN_I32, tok, rtok, (size_t)B + 1, 0, 0, 0);
	oh_expect(&c, "blk_pos", KERN_I32, pos, rpos, (size_t)B, 0, 0, 0);
	oh_launch(&c, d3((unsigned)B, 1, 1), d3((unsigned)block, 1, 1));
	assert_int_equal(*err, bad);
	oh_end(&c);
}

/* B 5, bf16, FIRST 0 */
static void block_embed_shape(int dim)
{
	block_embed_check(5, dim, 0, 0, 0, 0);
}

static void block_embed_cases(void)
{
	static const int Bs[] = {2, 5, 16}, dims[] = {8, 100, 576};
	for (int f16 = 0; f16 < 2; f16++)
		for (int b = 0; b < 3; b++)
			for (int d = 0; d < 3; d++)
				for (int first = 0; first < 2; first++)
					block_embed_check(Bs[b], dims[d], f16, first, 0, 0);
	/* bad tokens */
	for (int f16 = 0; f16 < 2; f16++)
		for (int b = 0; b < 3; b++) {
			block_embed_check(Bs[b], dims[(b + f16) % 3], f16, 0, 1, 0);
			block_embed_check(Bs[b], dims[(b + f16 + 1) % 3], f16, 0, 2, 0);
			block_embed_check(Bs[b], dims[(b + f16 + 2) % 3], f16, 1, 0, 1);
		}
}

/* SmolLM2 (576 x 49152, bf16, B 8) and Llama-3-8B (4096 x 128256, fp16, B
 * 16), FIRST 0 and 1, and the scalar path */
static void block_embed_nvrtc(void)
{
	static const int shapes[][5] = {{8, 576, 49152, 0, 1}, {8, 576, 49152, 0, 0},
	                                {16, 4096, 128256, 1, 1}, {16, 4096, 128256, 1, 0},
	                                {5, 100, 61, 0, 1}};
	for (int s = 0; s < 5; s++) {
		oh_case c;
		block_embed_begin(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
		                  shapes[s][4], 128);
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- draft_pick ------------------------------------------------------- */

/* The n-gram-first drafter's pick (gen/drafter_eagle3.c) vs ref_draft_pick,
 * and both against the rule stated in the template: hk = 0 when node 1 is
 * present, else LEVELS without a controller (CTRL 0) or the controller's
 * RT_CTRL_HEAD_K clamped to [0, LEVELS]; go[j] = j < hk; RT_ST_HEAD = hk >
 * 0; RT_ST_DRAFTED = hk exactly when hk > 0; every other state word, token
 * and ctrl word untouched. Node 1 absent or present (ids 0 and large),
 * later nodes anything, the state and go words holding junk from an
 * earlier iteration, HEAD_K from -2 to LEVELS + 2; LEVELS 1 .. N - 1,
 * blocks of 32 and 64. Exact. */
static void draft_pick_begin(oh_case *c, int n, int levels, int ctl, int block, int rep)
{
	oh_begin(c, SW_OP_draft_pick, "N %d LEVELS %d CTRL %d BLOCK %d rep %d", n, levels, ctl, block,
	         rep);
	oh_pi(c, "N_NODES", n);
	oh_pi(c, "LEVELS", levels);
	oh_pi(c, "CTRL", ctl);
	oh_pi(c, "BLOCK", block);
}

static void draft_pick_cases(void)
{
	static uint64_t rng = 0x5eed0d1ce5ULL;
#define RND_INT(n) ((int)(tu_rand(&rng) % (uint64_t)(n)))
	int falls = 0, keeps = 0, partial = 0, plain = 0;
	for (int n = 2; n <= 8; n += 3)
		for (int levels = 1; levels < n; levels++)
			for (int ctl = 0; ctl <= 1; ctl++)
				for (int block = 32; block <= 64; block += 32)
					for (int rep = 0; rep < 8; rep++) {
						oh_case c;
						draft_pick_begin(&c, n, levels, ctl, block, rep);
						int32_t *go = oh_buf(&c, "go", (size_t)levels, 4);
						int32_t *tok = oh_buf(&c, "tree_tokens", (size_t)n, 4);
						int32_t *st = oh_buf(&c, "state", RT_ST_WORDS, 4);
						int32_t *cw = oh_buf(&c, "ctrl", RT_CTRL_STATS, 4);
						int32_t want_go[8], want_st[RT_ST_WORDS], tok0[8], st0[RT_ST_WORDS];
						int32_t cw0[RT_CTRL_STATS];
						for (int i = 0; i < n; i++)
							tok[i] = RND_INT(3) ? RND_INT(49152) : -1;
						if (rep % 2)
							tok[1] = -1; /* no n-gram draft: half the cases */
						else if (rep % 4 == 2)
							tok[1] = 0; /* id 0 is a token, not absence */
						for (int i = 0; i < RT_ST_WORDS; i++)
							st[i] = RND_INT(1000) - 500;
						for (int i = 0; i < RT_CTRL_STATS; i++)
							cw[i] = RND_INT(1000) - 500;
						cw[RT_CTRL_HEAD_K] = RND_INT(levels + 5) - 2;
						for (int j = 0; j < levels; j++)
							go[j] = want_go[j] = RND_INT(5) - 2;
						memcpy(want_st, st, sizeof(want_st));
						memcpy(tok0, tok, (size_t)n * 4);
						memcpy(st0, st, sizeof(st0));
						memcpy(cw0, cw, sizeof(cw0));
						ref_draft_pick(levels, want_go, tok, want_st, ctl ? cw : NULL);
						/* the rule, stated independently of ref */
						const int hk0 = ctl ? cw[RT_CTRL_HEAD_K] : levels;
						const int hk = tok[1] >= 0 ? 0 : hk0 < 0 ? 0 : hk0 > levels ? levels : hk0;
						for (int j = 0; j < levels; j++)
							assert_int_equal(want_go[j], j < hk);
						for (int i = 0; i < RT_ST_WORDS; i++)
							assert_int_equal(want_st[i], i == RT_ST_HEAD ? hk > 0
							                 : i == RT_ST_DRAFTED && hk > 0 ? hk : st0[i]);
						falls += hk > 0;
						keeps += tok[1] >= 0;
						partial += hk > 0 && hk < levels;
						plain += tok[1] < 0 && hk == 0;
						oh_expect(&c, "go", KERN_I32, go, want_go, (size_t)levels, 0, 0, 0);
						oh_expect(&c, "state", KERN_I32, st, want_st, RT_ST_WORDS, 0, 0, 0);
						oh_expect(&c, "tree_tokens", KERN_I32, tok, tok0, (size_t)n, 0, 0, 0);
						oh_expect(&c, "ctrl", KERN_I32, cw, cw0, RT_CTRL_STATS, 0, 0, 0);
						oh_launch(&c, d3(1, 1, 1), d3((unsigned)block, 1, 1));
						oh_end(&c);
					}
#undef RND_INT
	assert_true(falls > 20 && keeps > 20 && partial > 5 && plain > 5);
}

static void draft_pick_nvrtc(void)
{
	for (int ctl = 0; ctl <= 1; ctl++) {
		oh_case c;
		draft_pick_begin(&c, 7, 2, ctl, 32, 0);
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- the table -------------------------------------------------------- */

typedef struct op_test {
	void (*shape)(int n);  /* one size of oh_shapes; NULL: the op has no free size */
	void (*cases)(void);   /* the op's own cases */
	void (*nvrtc)(void);   /* NVRTC at real shapes */
	const char *file;      /* a test file of its own (tests/), instead of the above */
} op_test;

static const op_test TESTS[] = {
	[SW_OP_adapt] = {.file = "test_kern_adapt.c"},
	[SW_OP_argmax] = {argmax_shape, argmax_cases, NULL, NULL},
	[SW_OP_block_embed] = {block_embed_shape, block_embed_cases, block_embed_nvrtc, NULL},
	[SW_OP_block_unmask] = {.file = "test_kern_block_unmask.c"},
	[SW_OP_cast] = {cast_shape, cast_cases, NULL, NULL},
	[SW_OP_draft_ctrl] = {.file = "test_kern_draft_ctrl.c"},
	[SW_OP_draft_pick] = {NULL, draft_pick_cases, draft_pick_nvrtc, NULL},
	[SW_OP_eagle3_in] = {.file = "test_kern_eagle3_in.c"},
	[SW_OP_embedding] = {embedding_shape, embedding_cases, NULL, NULL},
	[SW_OP_embedding16] = {embedding16_shape, embedding16_cases, embedding16_nvrtc, NULL},
	[SW_OP_embedding_gguf] = {.file = "test_kern_embedding_gguf.c"},
	[SW_OP_feature_tap] = {feature_tap_shape, feature_tap_cases, feature_tap_nvrtc, NULL},
	[SW_OP_fill_random] = {fill_random_shape, fill_random_cases, fill_random_nvrtc, NULL},
	[SW_OP_gemv16] = {.file = "test_kern_gemv16.c"},
	[SW_OP_gemv_gguf] = {.file = "test_kern_gemv_gguf.c"},
	[SW_OP_head_prep] = {NULL, head_prep_cases, head_prep_nvrtc, NULL},
	[SW_OP_kv_commit] = {.file = "test_kern_kv_commit.c"},
	[SW_OP_kv_store] = {kv_store_shape, kv_store_cases, kv_store_nvrtc, NULL},
	[SW_OP_logits_process] = {.file = "test_kern_logits_process.c"},
	[SW_OP_ngram_lookup] = {.file = "test_kern_ngram_lookup.c"},
	[SW_OP_q_target] = {q_target_shape, q_target_cases, q_target_nvrtc, NULL},
	[SW_OP_qkv_rope] = {.file = "test_kern_fused.c"},
	[SW_OP_quant_a8] = {.file = "test_kern_gemv_gguf.c"},
	[SW_OP_rmsnorm_cast] = {.file = "test_kern_fused.c"},
	[SW_OP_rmsnorm_residual] = {rmsnorm_residual_shape, rmsnorm_residual_cases, NULL, NULL},
	[SW_OP_rope] = {NULL, rope_cases, NULL, NULL},
	[SW_OP_step] = {.file = "test_kern_step.c"},
	[SW_OP_swiglu] = {swiglu_shape, swiglu_cases, swiglu_nvrtc, NULL},
	[SW_OP_swiglu_cast] = {.file = "test_kern_fused.c"},
	[SW_OP_tree_attention] = {.file = "test_kern_tree_attention.c"},
	[SW_OP_tree_expand] = {.file = "test_kern_tree_expand.c"},
	[SW_OP_verify] = {.file = "test_kern_verify.c"},
};
_Static_assert(sizeof(TESTS) / sizeof(TESTS[0]) == SW_OP_COUNT,
               "test_ops.c: one entry per row of kernels/ops.def");

static bool file_has(const char *path, const char *needle)
{
	char *t = sw_read_file(path, SW_CAP_SOURCE, NULL);
	bool has = t && strstr(t, needle);
	free(t);
	return has;
}

/* The op's test: its cases here, or its own file, which must exist and
 * load the op's template. */
static void test_op(void **state)
{
	const int op = *(const int *)*state;
	const op_test *t = &TESTS[op];
	const sw_op_info *info = sw_op_get(op);
	if (t->file) {
		char path[512], quoted[96], id[96];
		snprintf(path, sizeof(path), "%s/tests/%s", src_root(), t->file);
		snprintf(quoted, sizeof(quoted), "%s", info->tmpl);
		snprintf(id, sizeof(id), "SW_OP_%s", info->name);
		if (!file_has(path, quoted) && !file_has(path, id))
			fail_msg("%s: its test %s is missing or does not load %s", info->name, path,
			         info->tmpl);
		print_message("  %s: tested by tests/%s\n", info->name, t->file);
		return;
	}
	if (!t->shape && !t->cases)
		fail_msg("%s: no test (a row of kernels/ops.def needs a case in tests/test_ops.c "
		         "or a file named there)", info->name);
	for (int s = 0; t->shape && s < oh_n_shapes; s++)
		t->shape(oh_shapes[s]);
	if (t->cases)
		t->cases();
	if (t->nvrtc)
		t->nvrtc();
}

/* Every row has templates/<name>.cu.tmpl and kernels/ref/<name>.c, and
 * every template is a row (a template nobody declared is an op no
 * registry knows). */
static void test_op_list(void **state)
{
	(void)state;
	char path[512];
	struct stat st;
	for (int i = 0; i < SW_OP_COUNT; i++) {
		const sw_op_info *o = sw_op_get(i);
		assert_int_equal(sw_op_find(o->name), i);
		snprintf(path, sizeof(path), "%s/templates/%s", src_root(), o->tmpl);
		if (stat(path, &st))
			fail_msg("kernels/ops.def row %s: no %s", o->name, path);
		snprintf(path, sizeof(path), "%s/kernels/ref/%s.c", src_root(), o->name);
		if (stat(path, &st))
			fail_msg("kernels/ops.def row %s: no %s", o->name, path);
	}
	assert_int_equal(sw_op_find("nosuch"), -1);
	assert_null(sw_op_get(SW_OP_COUNT));
	snprintf(path, sizeof(path), "%s/templates", src_root());
	DIR *d = opendir(path);
	assert_non_null(d);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d))) {
		const size_t l = strlen(de->d_name);
		if (l < 9 || strcmp(de->d_name + l - 8, ".cu.tmpl"))
			continue;
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(l - 8), de->d_name);
		if (sw_op_find(name) < 0)
			fail_msg("templates/%s: no row of kernels/ops.def names it", de->d_name);
		n++;
	}
	closedir(d);
	assert_int_equal(n, SW_OP_COUNT);
}

int main(void)
{
	static int ids[SW_OP_COUNT];
	struct CMUnitTest tests[SW_OP_COUNT + 1];
	tests[0] = (struct CMUnitTest)cmocka_unit_test(test_op_list);
	for (int i = 0; i < SW_OP_COUNT; i++) {
		ids[i] = i;
		tests[i + 1] = (struct CMUnitTest){.name = sw_op_get(i)->name, .test_func = test_op,
		                                   .initial_state = &ids[i]};
	}
	if (getenv("OPS") && *getenv("OPS"))
		cmocka_set_test_filter(getenv("OPS"));
	return _cmocka_run_group_tests("test_ops", tests, SW_OP_COUNT + 1, NULL, NULL);
}

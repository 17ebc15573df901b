/* A layer's small ops fused with their neighbours (issue 37):
 * templates/rmsnorm_cast.cu.tmpl, swiglu_cast.cu.tmpl and qkv_rope.cu.tmpl,
 * each in the emulator against the unfused kernels it replaces, run one
 * after another on the same inputs (rmsnorm_residual + cast [+ quant_a8];
 * swiglu + cast [+ quant_a8]; rope or head_prep on q, k and v + cast +
 * kv_store): every output bit for bit (the 16-bit rows, the residual, the
 * int8 blocks with their scales and sums, the whole K/V caches, so a row
 * past MAX_CTX or a slot outside the rows shows). Those kernels are each
 * held to their kernels/ref specification by tests/test_ops.c; these
 * specifications' compositions are the fused ops' (kernels/ref
 * rmsnorm_cast.c, swiglu_cast.c, qkv_rope.c), checked here too: the
 * int8 blocks = ref_quant_a8 of the kernel's own 16-bit rows (exact), and
 * the 16-bit rows within the unfused tests' derived bounds plus the 16-bit
 * rounding, widened (below). Awkward shapes: rows 1, 3, 7; widths of
 * oh_shapes (1, 31, 33, 111, 260, 576, 4097) and the int8 path's multiples
 * of 32 (32, 576, 2048); gate/up rows of their own or one GEMM's (LD 2
 * FFN); every family's q/k/v steps (Llama's adjacent pairs, Qwen2's biases,
 * Qwen3's norms, Gemma 3's norms, per-layer frequencies and query scale),
 * fused q|k|v rows or their own, heads over fewer and more warps, ragged
 * lanes (head_dim 80, 6, 10), rows past MAX_CTX. Then NVRTC at the
 * engines' shapes (sm_80, sm_90, zero spills; skipped without NVRTC). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/half.h"
#include "kernels/ref/ref.h"

#include "check.h"
#include "op_harness.h"

/* an emulator buffer holding a copy of n bytes of src */
static void *emu_copy(const void *src, size_t n, const char *name)
{
	void *p = emu_alloc(n ? n : 1, name);
	memcpy(p, src, n);
	return p;
}

static size_t a8_bytes(int M, int K)
{
	return (size_t)M * K + (size_t)M * (K / 32) * 8;
}

/* quant_a8 of (M, K) fp16 rows a16 into a8, in the emulator */
static void run_quant_a8(void *a8, void *a16, int M, int K)
{
	gen_param p[] = {OH_NAME, OH_I("M", M), OH_I("K", K), OH_I("BLOCK", 128)};
	const emu_kernel *k = oh_load(SW_OP_quant_a8, p, 4);
	void *args[] = {&a8, &a16};
	launch(k, d3((unsigned)(((size_t)M * (K / 32) + 127) / 128), 1, 1), d3(128, 1, 1), args);
}

/* cast MODE 0/1 of n floats x into y16, in the emulator */
static void run_cast(uint16_t *y16, float *x, int n, int is_f16)
{
	gen_param p[] = {OH_NAME, OH_I("N", n), OH_I("MODE", is_f16), OH_I("BLOCK", 256)};
	const emu_kernel *k = oh_load(SW_OP_cast, p, 4);
	void *args[] = {&y16, &x};
	const int v = n % 8 == 0 ? 8 : 1;
	launch(k, d3((unsigned)((n / v + 255) / 256), 1, 1), d3(256, 1, 1), args);
}

/* 16-bit rows y16 widened against ref within bound: the fp32 result's
 * bound b32 (relative to |ref|) plus the rounding to 16 bits (u16 of the
 * rounded fp32 value) */
static void check_widened(const char *what, const uint16_t *y16, const double *ref,
                          const double *b32, size_t n, int is_f16)
{
	const double u16 = is_f16 ? 0x1p-11 : 0x1p-8;
	float *w = malloc(sizeof(*w) * (n ? n : 1));
	double *b = malloc(sizeof(*b) * (n ? n : 1));
	assert_true(w && b);
	for (size_t i = 0; i < n; i++) {
		w[i] = sw_half_to_f32(y16[i], is_f16);
		b[i] = b32[i] + u16 * (fabs(ref[i]) + b32[i]) + (is_f16 ? 0x1p-24 : 0x1p-133);
	}
	check_close(what, w, ref, b, n);
	free(w);
	free(b);
}

/* ---- rmsnorm_cast ------------------------------------------------------ */

static void rmsnorm_cast_begin(oh_case *c, int dim, int block, int is_f16, int a8,
                               const char *what)
{
	oh_begin(c, SW_OP_rmsnorm_cast, "DIM%d BLOCK%d IS_F16 %d A8 %d%s", dim, block, is_f16, a8,
	         what);
	oh_pi(c, "DIM", dim);
	oh_pi(c, "BLOCK", block);
	oh_pf(c, "EPS", 1e-5f);
	oh_pi(c, "IS_F16", is_f16);
	oh_pi(c, "A8", a8);
}

/* T rows of dim; alias: s is x (the engine's h += delta in place). */
static void rmsnorm_cast_check(int T, int dim, int block, int is_f16, int a8, int alias)
{
	oh_case c;
	char what[24];
	snprintf(what, sizeof(what), " T%d%s", T, alias ? " s=x" : "");
	rmsnorm_cast_begin(&c, dim, block, is_f16, a8, what);
	const size_t n = (size_t)T * dim;
	uint16_t *y = oh_buf(&c, "y", n, 2);
	float *x = oh_alloc(&c, "x", n, 4);
	float *s = alias ? x : oh_alloc(&c, "s", n, 4);
	oh_arg(&c, s);
	oh_arg(&c, x);
	float *r = oh_buf(&c, "r", n, 4), *w = oh_buf(&c, "w", (size_t)dim, 4);
	uint8_t *q = a8 ? oh_buf(&c, "a8", a8_bytes(T, dim), 1) : NULL;
	if (!a8)
		oh_arg(&c, y); /* y's buffer, not read (as the planner passes) */
	for (size_t i = 0; i < n; i++) {
		x[i] = (float)(rnd() * 2.0);
		r[i] = (float)rnd();
	}
	if (T > 1 && dim > 3) { /* a row of zeros: quant_a8's zero block, and one huge */
		memset(x + dim, 0, sizeof(*x) * (size_t)dim);
		memset(r + dim, 0, sizeof(*r) * (size_t)dim);
		x[2] = 3e4f;
	}
	for (int i = 0; i < dim; i++)
		w[i] = (float)(1.0 + 0.9 * rnd());
	/* the unfused kernels on copies of the same inputs */
	float *ux = emu_copy(x, n * 4, "ux"), *ur = emu_copy(r, n * 4, "ur");
	float *uw = emu_copy(w, (size_t)dim * 4, "uw");
	float *uy = emu_alloc(n * 4, "uy"), *us = alias ? ux : emu_alloc(n * 4, "us");
	uint16_t *uy16 = emu_alloc(n * 2, "uy16");
	uint8_t *uq = a8 ? emu_alloc(a8_bytes(T, dim), "ua8") : NULL;
	{
		gen_param p[] = {OH_NAME, OH_I("DIM", dim), OH_I("BLOCK", block), OH_F("EPS", 1e-5f)};
		const emu_kernel *k = oh_load(SW_OP_rmsnorm_residual, p, 4);
		void *args[] = {&uy, &us, &ux, &ur, &uw};
		launch(k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args);
	}
	run_cast(uy16, uy, (int)n, is_f16);
	if (a8)
		run_quant_a8(uq, uy16, T, dim);
	oh_expect(&c, "y = rmsnorm_residual + cast", KERN_U16, y, uy16, n, T, dim, 0);
	oh_expect(&c, "s = rmsnorm_residual's", KERN_F32, s, us, n, T, dim, 0);
	if (a8)
		oh_expect(&c, "a8 = quant_a8's", KERN_U8, q, uq, a8_bytes(T, dim), 0, 0, 0);
	/* the specification: ref_rmsnorm_cast's composition, within
	 * test_ops.c rmsnorm_residual's bound (gamma_dim / 2 + 6 u) before the
	 * rounding to 16 bits; its int8 blocks are ref_quant_a8 of the rows */
	const float *x0 = oh_copy(&c, x, n * 4);
	double *ref = oh_host(&c, n * sizeof(double)), *b = oh_host(&c, n * sizeof(double));
	for (int t = 0; t < T; t++) {
		double ss = 0.0;
		for (int i = 0; i < dim; i++) {
			const double v = (double)x0[(size_t)t * dim + i] + r[(size_t)t * dim + i];
			ss += v * v;
		}
		const double sc = 1.0 / sqrt(ss / dim + 1e-5);
		for (int i = 0; i < dim; i++) {
			const size_t j = (size_t)t * dim + i;
			ref[j] = (double)(x0[j] + r[j]) * sc * w[i];
			b[j] = (gamma_n(dim) / 2 + 6.0 * U32) * fabs(ref[j]);
		}
	}
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1));
	check_widened("rmsnorm_cast y vs the exact norm", y, ref, b, n, is_f16);
	if (a8) {
		uint8_t *rq = oh_host(&c, a8_bytes(T, dim));
		assert_int_equal(ref_quant_a8(rq, y, T, dim), 0);
		kern_expect_equal("rmsnorm_cast", "a8 vs ref_quant_a8 of y", KERN_U8, q, rq,
		                  a8_bytes(T, dim));
	}
	if (!alias)
		emu_free(us);
	emu_free(ux);
	emu_free(ur);
	emu_free(uw);
	emu_free(uy);
	emu_free(uy16);
	if (uq)
		emu_free(uq);
	oh_end(&c);
}

static void rmsnorm_cast_shape(int dim)
{
	for (int f16 = 0; f16 < 2; f16++) {
		rmsnorm_cast_check(1, dim, 256, f16, 0, 0);
		rmsnorm_cast_check(3, dim, 32, f16, 0, f16);
	}
}

static void rmsnorm_cast_cases(void)
{
	static const int dims[] = {32, 576, 2048};
	for (int a = 0; a < 3; a++) {
		rmsnorm_cast_check(1, dims[a], 256, 1, 1, 0);
		rmsnorm_cast_check(3, dims[a], 64, 1, 1, 1);
		rmsnorm_cast_check(7, dims[a], 32, 1, 1, 0);
	}
	rmsnorm_cast_check(7, 576, 256, 0, 0, 1);
	rmsnorm_cast_check(5, 260, 128, 1, 0, 0);
}

static void rmsnorm_cast_nvrtc(void)
{
	static const int cases[][3] = {{4096, 0, 0}, {4096, 1, 1}, {576, 1, 1}, {896, 0, 0},
	                               {2560, 1, 0}, {4097, 0, 0}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		oh_case c;
		rmsnorm_cast_begin(&c, cases[i][0], 256, cases[i][1], cases[i][2], " nvrtc");
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- swiglu_cast ------------------------------------------------------- */

static void swiglu_cast_begin(oh_case *c, int F, int ld, int act, int is_f16, int a8, int block,
                              const char *what)
{
	oh_begin(c, SW_OP_swiglu_cast, "FFN%d LD%d ACT %d IS_F16 %d A8 %d BLOCK%d%s", F, ld, act,
	         is_f16, a8, block, what);
	oh_pi(c, "FFN", F);
	oh_pi(c, "LD", ld);
	oh_pi(c, "ACT", act);
	oh_pi(c, "IS_F16", is_f16);
	oh_pi(c, "A8", a8);
	oh_pi(c, "BLOCK", block);
}

/* fused: gate and up are one GEMM's rows (LD 2 FFN, up = gate + FFN) */
static void swiglu_cast_check(int T, int F, int fused, int act, int is_f16, int a8, int block)
{
	oh_case c;
	char what[16];
	snprintf(what, sizeof(what), " T%d", T);
	const int ld = fused ? 2 * F : F;
	swiglu_cast_begin(&c, F, ld, act, is_f16, a8, block, what);
	const size_t n = (size_t)T * F;
	uint16_t *y = oh_buf(&c, "y", n, 2);
	float *g, *u;
	if (fused) {
		g = oh_alloc(&c, "gate|up", (size_t)T * ld, 4);
		u = g + F;
		oh_arg(&c, g);
		oh_arg(&c, u);
	} else {
		g = oh_buf(&c, "gate", n, 4);
		u = oh_buf(&c, "up", n, 4);
	}
	uint8_t *q = a8 ? oh_buf(&c, "a8", a8_bytes(T, F), 1) : NULL;
	if (!a8)
		oh_arg(&c, y);
	float *cg = oh_host(&c, n * 4), *cu = oh_host(&c, n * 4);
	double *ref = oh_host(&c, n * sizeof(double)), *b = oh_host(&c, n * sizeof(double));
	for (int t = 0; t < T; t++)
		for (int i = 0; i < F; i++) {
			const size_t j = (size_t)t * F + i;
			g[(size_t)t * ld + i] = cg[j] = (float)(rnd() * 4.0);
			u[(size_t)t * ld + i] = cu[j] = (float)rnd();
			if (t == 1 && i < 2) /* exp overflow: silu -0; GeGLU saturates */
				g[(size_t)t * ld + i] = cg[j] = i ? 100.0f : -100.0f;
			/* test_ops.c swiglu's bounds (expf, tanhf within 2 ulp) */
			const double gd = cg[j], ud = cu[j];
			ref[j] = act ? 0.5 * gd * (1.0 + tanh(0.7978845608028654 * (gd + 0.044715 * gd * gd * gd))) * ud
			             : gd / (1.0 + exp(-gd)) * ud;
			b[j] = (act ? 8 * U32 * fabs(gd * ud) : 6 * U32 * fabs(ref[j])) + 0x1p-140;
		}
	/* the unfused kernels on contiguous copies */
	float *ug = emu_copy(cg, n * 4, "ugate"), *uu = emu_copy(cu, n * 4, "uup");
	float *uy = emu_alloc(n * 4, "uy");
	uint16_t *uy16 = emu_alloc(n * 2, "uy16");
	uint8_t *uq = a8 ? emu_alloc(a8_bytes(T, F), "ua8") : NULL;
	{
		gen_param p[] = {OH_NAME, OH_I("FFN", F), OH_I("ACT", act), OH_I("BLOCK", block)};
		const emu_kernel *k = oh_load(SW_OP_swiglu, p, 4);
		void *args[] = {&uy, &ug, &uu};
		const int v = F % 4 == 0 ? 4 : 1;
		launch(k, d3((unsigned)((F / v + block - 1) / block), (unsigned)T, 1),
		       d3((unsigned)block, 1, 1), args);
	}
	run_cast(uy16, uy, (int)n, is_f16);
	if (a8)
		run_quant_a8(uq, uy16, T, F);
	oh_expect(&c, "y = swiglu + cast", KERN_U16, y, uy16, n, T, F, 0);
	if (a8)
		oh_expect(&c, "a8 = quant_a8's", KERN_U8, q, uq, a8_bytes(T, F), 0, 0, 0);
	const int v = F % 4 == 0 ? 4 : 1;
	oh_launch(&c, d3((unsigned)((F / v + block - 1) / block), (unsigned)T, 1),
	          d3((unsigned)block, 1, 1));
	check_widened("swiglu_cast y vs the exact activation", y, ref, b, n, is_f16);
	uint16_t *ry = oh_host(&c, n * 2);
	float *tmp = oh_host(&c, (size_t)F * 4);
	uint8_t *rq = a8 ? oh_host(&c, a8_bytes(T, F)) : NULL;
	/* in the emulator expf and tanhf are libm's, the reference's: its
	 * composition gives the kernel's bits */
	assert_int_equal(ref_swiglu_cast(ry, g, u, rq, T, F, ld, act, is_f16, tmp), 0);
	kern_expect_equal("swiglu_cast", "y vs ref_swiglu_cast", KERN_U16, y, ry, n);
	if (a8)
		kern_expect_equal("swiglu_cast", "a8 vs ref_swiglu_cast", KERN_U8, q, rq,
		                  a8_bytes(T, F));
	emu_free(ug);
	emu_free(uu);
	emu_free(uy);
	emu_free(uy16);
	if (uq)
		emu_free(uq);
	oh_end(&c);
}

static void swiglu_cast_shape(int F)
{
	for (int f16 = 0; f16 < 2; f16++) {
		swiglu_cast_check(1, F, 0, 0, f16, 0, 256);
		swiglu_cast_check(3, F, 1, f16, f16, 0, 64);
	}
}

static void swiglu_cast_cases(void)
{
	static const int Fs[] = {32, 576, 2048};
	for (int a = 0; a < 3; a++)
		for (int act = 0; act < 2; act++) {
			swiglu_cast_check(1, Fs[a], 1, act, 1, 1, 256);
			swiglu_cast_check(3, Fs[a], 0, act, 1, 1, 32);
			swiglu_cast_check(7, Fs[a], 1, act, 1, 1, 64);
		}
	swiglu_cast_check(7, 1536, 1, 0, 0, 0, 256);
}

static void swiglu_cast_nvrtc(void)
{
	static const int cases[][4] = {{14336, 1, 0, 0}, {14336, 1, 0, 1}, {1536, 1, 0, 1},
	                               {4864, 0, 0, 0},  {2048, 1, 1, 0},  {2047, 0, 1, 0}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		oh_case c;
		const int F = cases[i][0];
		swiglu_cast_begin(&c, F, cases[i][1] ? 2 * F : F, cases[i][2], 1, cases[i][3], 256,
		                  " nvrtc");
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- qkv_rope ---------------------------------------------------------- */

/* A family's q/k/v steps: the unfused ops the planner emitted for it
 * (gen/arch_*.c) and qkv_rope's constants. */
typedef struct qkv_fam {
	const char *name;
	int bias, norm, rope; /* rope: REF_ROPE_* */
	float scale;          /* the query's */
	int freq_layer;       /* Gemma 3: a per-layer frequency table (any table here) */
} qkv_fam;

static const qkv_fam FAMS[] = {
	{"llama", 0, 0, REF_ROPE_ADJACENT, 1.0f, 0},
	{"qwen2", 1, 0, REF_ROPE_NEOX, 1.0f, 0},
	{"qwen3", 0, 1, REF_ROPE_NEOX, 1.0f, 0},
	{"gemma3", 0, 1, REF_ROPE_NEOX, 1.1547005f, 1},
};

typedef struct qkv_shape {
	int T, H, KH, HD, fused, row0, max_ctx, len, is_f16, block;
} qkv_shape;

#define UNTOUCHED 0x7e01u

static void qkv_rope_begin(oh_case *c, const qkv_fam *f, const qkv_shape *s, const char *what)
{
	oh_begin(c, SW_OP_qkv_rope, "%s T%d H%d KH%d HD%d FUSED %d ROW0 %d MAX_CTX%d len %d IS_F16 %d "
	         "BLOCK%d%s", f->name, s->T, s->H, s->KH, s->HD, s->fused, s->row0, s->max_ctx, s->len,
	         s->is_f16, s->block, what);
	oh_pi(c, "N_HEADS", s->H);
	oh_pi(c, "N_KV_HEADS", s->KH);
	oh_pi(c, "HEAD_DIM", s->HD);
	oh_pi(c, "FUSED", s->fused);
	oh_pi(c, "ROWS", s->T);
	oh_pi(c, "ROW0", s->row0);
	oh_pi(c, "MAX_CTX", s->max_ctx);
	oh_pi(c, "IS_F16", s->is_f16);
	oh_pi(c, "BIAS", f->bias);
	oh_pi(c, "NORM", f->norm);
	oh_pi(c, "ROPE", f->rope);
	oh_pf(c, "EPS", 1e-6f);
	oh_pf(c, "SCALE", f->scale);
	oh_pi(c, "BLOCK", s->block);
}

/* One projection's unfused in-place op on x (T, H, HD) in the emulator: the
 * rope kernel (adjacent pairs) or head_prep with the family's steps. */
static void run_qkv_op(const qkv_fam *f, float *x, int32_t *pos, float *freq, float *bw, float *nw,
                       int T, int H, int HD, int proj)
{
	if (f->rope == REF_ROPE_ADJACENT) {
		if (proj == 2)
			return; /* Llama's v: nothing */
		gen_param p[] = {OH_NAME, OH_I("N_HEADS", H), OH_I("HEAD_DIM", HD), OH_I("ROT_DIM", HD),
		                 OH_I("BLOCK", 128)};
		const emu_kernel *k = oh_load(SW_OP_rope, p, 5);
		void *args[] = {&x, &pos, &freq};
		launch(k, d3((unsigned)T, 1, 1), d3(128, 1, 1), args);
		return;
	}
	if (proj == 2 && !f->bias)
		return;
	const int block = H < 4 ? 32 * H : 128; /* gen/arch_qwen.c's */
	gen_param p[] = {OH_NAME, OH_I("N_HEADS", H), OH_I("HEAD_DIM", HD), OH_I("BIAS", f->bias),
	                 OH_I("NORM", proj < 2 ? f->norm : 0),
	                 OH_I("ROPE", proj < 2 ? f->rope == REF_ROPE_NEOX : 0), OH_F("EPS", 1e-6f),
	                 OH_F("SCALE", proj == 0 ? f->scale : 1.0f), OH_I("BLOCK", block)};
	const emu_kernel *k = oh_load(SW_OP_head_prep, p, 9);
	void *args[] = {&x, &pos, &freq, &bw, &nw};
	launch(k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args);
}

static void qkv_rope_check(const qkv_fam *f, const qkv_shape *s)
{
	oh_case c;
	qkv_rope_begin(&c, f, s, "");
	const int T = s->T, H = s->H, KH = s->KH, HD = s->HD;
	const int qd = H * HD, kvd = KH * HD, ld = s->fused ? qd + 2 * kvd : 0;
	/* the cache reaches every slot a launch could touch past MAX_CTX */
	const int slots = s->max_ctx > s->len + s->row0 + T ? s->max_ctx : s->len + s->row0 + T;
	const size_t nc = (size_t)slots * kvd;
	uint16_t *q16 = oh_buf(&c, "q16", (size_t)T * qd, 2);
	uint16_t *kc = oh_alloc(&c, "k_cache", nc, 2), *vc = oh_alloc(&c, "v_cache", nc, 2);
	oh_arg(&c, kc + (size_t)s->row0 * kvd);
	oh_arg(&c, vc + (size_t)s->row0 * kvd);
	float *q, *k, *v;
	if (s->fused) {
		q = oh_alloc(&c, "q|k|v", (size_t)T * ld, 4);
		k = q + qd;
		v = k + kvd;
		oh_arg(&c, q);
		oh_arg(&c, k);
		oh_arg(&c, v);
	} else {
		q = oh_buf(&c, "q", (size_t)T * qd, 4);
		k = oh_buf(&c, "k", (size_t)T * kvd, 4);
		v = oh_buf(&c, "v", (size_t)T * kvd, 4);
	}
	const int ldq = s->fused ? ld : qd, ldkv = s->fused ? ld : kvd;
	int32_t *pos = oh_buf(&c, "pos", (size_t)T, 4);
	float *freq = oh_buf(&c, "inv_freq", (size_t)HD / 2, 4);
	int32_t *len = oh_buf(&c, "len", 1, 4);
	float *bq = oh_alloc(&c, "bq", (size_t)qd, 4), *bk = oh_alloc(&c, "bk", (size_t)kvd, 4);
	float *bv = oh_alloc(&c, "bv", (size_t)kvd, 4);
	float *qn = oh_alloc(&c, "q_norm", (size_t)HD, 4), *kn = oh_alloc(&c, "k_norm", (size_t)HD, 4);
	/* the weights a step reads, else a buffer that is there */
	oh_arg(&c, f->bias ? bq : f->norm ? qn : freq);
	oh_arg(&c, f->bias ? bk : f->norm ? kn : freq);
	oh_arg(&c, f->bias ? bv : freq);

	if (f->freq_layer) /* Gemma 3's local base */
		ref_rope_freqs(freq, HD, 1e4f, 0, 1.0f, 0, 0, 0);
	else
		ref_rope_freqs(freq, HD, 1e6f, 0, 1.0f, 0, 0, 0);
	for (int t = 0; t < T; t++) {
		pos[t] = s->len + s->row0 + t + (t * 1237) % 3001;
		for (int i = 0; i < qd; i++)
			q[(size_t)t * ldq + i] = (float)(4.0 * rnd());
		for (int i = 0; i < kvd; i++) {
			k[(size_t)t * ldkv + i] = (float)(4.0 * rnd());
			v[(size_t)t * ldkv + i] = (float)(4.0 * rnd());
		}
	}
	for (int i = 0; i < qd; i++)
		bq[i] = (float)rnd();
	for (int i = 0; i < kvd; i++)
		bk[i] = (float)rnd(), bv[i] = (float)rnd();
	for (int i = 0; i < HD; i++)
		qn[i] = (float)(1.0 + 0.5 * rnd()), kn[i] = (float)(1.0 + 0.5 * rnd());
	/* a NaN no store writes (a NaN result is 0x7fff): untouched slots show */
	for (size_t i = 0; i < nc; i++)
		kc[i] = vc[i] = UNTOUCHED;
	*len = s->len;

	/* the unfused ops on contiguous copies: the family's in-place ops, the
	 * q cast, kv_store into copies of the caches */
	float *uq = emu_alloc((size_t)T * qd * 4, "uq"), *uk = emu_alloc((size_t)T * kvd * 4, "uk");
	float *uv = emu_alloc((size_t)T * kvd * 4, "uv");
	for (int t = 0; t < T; t++) {
		memcpy(uq + (size_t)t * qd, q + (size_t)t * ldq, (size_t)qd * 4);
		memcpy(uk + (size_t)t * kvd, k + (size_t)t * ldkv, (size_t)kvd * 4);
		memcpy(uv + (size_t)t * kvd, v + (size_t)t * ldkv, (size_t)kvd * 4);
	}
	int32_t *upos = emu_copy(pos, (size_t)T * 4, "upos"), *ulen = emu_copy(len, 4, "ulen");
	float *ufreq = emu_copy(freq, (size_t)HD / 2 * 4, "ufreq");
	float *ubq = emu_copy(bq, (size_t)qd * 4, "ubq"), *ubk = emu_copy(bk, (size_t)kvd * 4, "ubk");
	float *ubv = emu_copy(bv, (size_t)kvd * 4, "ubv");
	float *uqn = emu_copy(qn, (size_t)HD * 4, "uqn"), *ukn = emu_copy(kn, (size_t)HD * 4, "ukn");
	uint16_t *ukc = emu_copy(kc, nc * 2, "ukc"), *uvc = emu_copy(vc, nc * 2, "uvc");
	uint16_t *uq16 = emu_alloc((size_t)T * qd * 2, "uq16");
	run_qkv_op(f, uq, upos, ufreq, f->bias ? ubq : ufreq, f->norm ? uqn : ufreq, T, H, HD, 0);
	run_qkv_op(f, uk, upos, ufreq, f->bias ? ubk : ufreq, f->norm ? ukn : ufreq, T, KH, HD, 1);
	run_qkv_op(f, uv, upos, ufreq, f->bias ? ubv : ufreq, ufreq, T, KH, HD, 2);
	run_cast(uq16, uq, T * qd, s->is_f16);
	{
		gen_param p[] = {OH_NAME, OH_I("ROWS", T), OH_I("KVD", kvd), OH_I("ROW0", s->row0),
		                 OH_I("MAX_CTX", s->max_ctx), OH_I("IS_F16", s->is_f16),
		                 OH_I("BLOCK", 128)};
		const emu_kernel *kk = oh_load(SW_OP_kv_store, p, 7);
		uint16_t *kc0 = ukc + (size_t)s->row0 * kvd, *vc0 = uvc + (size_t)s->row0 * kvd;
		void *args[] = {&kc0, &vc0, &uk, &uv, &ulen};
		const int vec = kvd % 8 == 0 ? 8 : 1;
		launch(kk, d3((unsigned)((T * kvd / vec + 127) / 128), 1, 1), d3(128, 1, 1), args);
	}
	oh_expect(&c, "q16 = the family's ops + q_cast", KERN_U16, q16, uq16, (size_t)T * qd, T, H, HD);
	oh_expect(&c, "k_cache = kv_store's", KERN_U16, kc, ukc, nc, slots, KH, HD);
	oh_expect(&c, "v_cache = kv_store's", KERN_U16, vc, uvc, nc, slots, KH, HD);
	/* the specification writes the same slots and v's bits (the bias add
	 * alone); its q and k (angles and sums in double) agree within the
	 * unfused kernels' bounds (test_ops.c), here loosely: 2^-5 relative
	 * plus 2^-5 (inputs of magnitude ~1-4, rounded to 16 bits) */
	uint16_t *rkc = oh_copy(&c, kc, nc * 2), *rvc = oh_copy(&c, vc, nc * 2);
	uint16_t *rq16 = oh_host(&c, (size_t)T * qd * 2);
	float *tmp = oh_host(&c, (size_t)(qd + kvd) * 4);
	const ref_qkv_shape rs = {.T = T, .n_heads = H, .n_kv_heads = KH, .head_dim = HD,
	                          .ldq = ldq, .ldkv = ldkv, .row0 = s->row0, .max_ctx = s->max_ctx,
	                          .is_f16 = s->is_f16, .bias = f->bias, .norm = f->norm,
	                          .rope = f->rope, .eps = 1e-6f, .scale = f->scale};
	assert_int_equal(ref_qkv_rope(&rs, rq16, rkc + (size_t)s->row0 * kvd,
	                              rvc + (size_t)s->row0 * kvd, q, k, v, pos, freq, s->len, bq, bk,
	                              bv, qn, kn, tmp), 0);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)s->block, 1, 1));
	size_t moved = 0;
	for (size_t i = 0; i < nc; i++) {
		assert_int_equal(kc[i] == UNTOUCHED, rkc[i] == UNTOUCHED);
		assert_int_equal(vc[i], rvc[i]);
		if (kc[i] == UNTOUCHED)
			continue;
		const float a = sw_half_to_f32(kc[i], s->is_f16), b = sw_half_to_f32(rkc[i], s->is_f16);
		assert_true(fabsf(a - b) <= 0x1p-5f * (fabsf(b) + 1.0f));
		moved++;
	}
	for (size_t i = 0; i < (size_t)T * qd; i++) {
		const float a = sw_half_to_f32(q16[i], s->is_f16), b = sw_half_to_f32(rq16[i], s->is_f16);
		assert_true(fabsf(a - b) <= 0x1p-5f * (fabsf(b) + 1.0f));
	}
	const size_t want = (size_t)kvd * (size_t)(s->max_ctx - s->row0 - s->len < 0 ? 0
	                    : s->max_ctx - s->row0 - s->len < T ? s->max_ctx - s->row0 - s->len : T);
	assert_int_equal(moved, want);
	emu_free(uq);
	emu_free(uk);
	emu_free(uv);
	emu_free(upos);
	emu_free(ulen);
	emu_free(ufreq);
	emu_free(ubq);
	emu_free(ubk);
	emu_free(ubv);
	emu_free(uqn);
	emu_free(ukn);
	emu_free(ukc);
	emu_free(uvc);
	emu_free(uq16);
	oh_end(&c);
}

static void qkv_rope_cases(void)
{
	/* T, H, KH, HD, fused, row0, max_ctx, len, is_f16, block */
	static const qkv_shape shapes[] = {
		{1, 9, 3, 64, 1, 0, 64, 5, 1, 128},   /* SmolLM2, a decode row */
		{3, 9, 3, 64, 0, 2, 64, 7, 0, 128},   /* own rows, ROW0 2 */
		{7, 7, 1, 80, 1, 0, 40, 30, 1, 64},   /* ragged lanes; rows 10.. past MAX_CTX */
		{5, 2, 2, 6, 1, 1, 16, 3, 0, 32},     /* 3 pairs, one warp for 6 heads */
		{3, 4, 2, 256, 0, 0, 32, 0, 1, 256},  /* Gemma-sized heads, 4 pairs a lane */
		{2, 3, 1, 10, 1, 0, 8, 7, 1, 32},     /* rope's one-pair path; one row lands */
	};
	for (size_t f = 0; f < sizeof(FAMS) / sizeof(FAMS[0]); f++)
		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
			qkv_rope_check(&FAMS[f], &shapes[i]);
}

/* The engines' shapes: Llama-3-8B, Qwen2-0.5B (biases), Qwen3-8B (norms),
 * Gemma 3 270M (4 / 1 heads of 256, the scale), SmolLM2. */
static void qkv_rope_nvrtc(void)
{
	static const struct {
		int fam, H, KH, HD;
	} cases[] = {{0, 32, 8, 128}, {1, 14, 2, 64}, {2, 32, 8, 128}, {3, 4, 1, 256}, {0, 9, 3, 64}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		oh_case c;
		const qkv_shape s = {26, cases[i].H, cases[i].KH, cases[i].HD, 1, 0, 4096, 0, 0, 256};
		qkv_rope_begin(&c, &FAMS[cases[i].fam], &s, " nvrtc");
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

/* ---- the tests --------------------------------------------------------- */

static void test_rmsnorm_cast(void **state)
{
	(void)state;
	for (int s = 0; s < oh_n_shapes; s++)
		rmsnorm_cast_shape(oh_shapes[s]);
	rmsnorm_cast_cases();
	rmsnorm_cast_nvrtc();
}

static void test_swiglu_cast(void **state)
{
	(void)state;
	for (int s = 0; s < oh_n_shapes; s++)
		swiglu_cast_shape(oh_shapes[s]);
	swiglu_cast_cases();
	swiglu_cast_nvrtc();
}

static void test_qkv_rope(void **state)
{
	(void)state;
	qkv_rope_cases();
	qkv_rope_nvrtc();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rmsnorm_cast),
		cmocka_unit_test(test_swiglu_cast),
		cmocka_unit_test(test_qkv_rope),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

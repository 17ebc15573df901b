/* head_prep template (the Qwen family's bias, per-head RMSNorm and NeoX
 * RoPE on one projection) in the emulator vs ref_head_prep, on awkward
 * shapes: more heads than warps and more warps than heads, HEAD_DIM / 2 not
 * a multiple of 32 (ragged lanes), 6, 64, 80, 128 and 256, every
 * combination of the three steps the planner emits (Qwen2 q/k: bias +
 * rope; Qwen2 v: bias; Qwen3 q/k: norm + rope), positions up to 5000 with
 * theta 1e6; Gemma 3's q and k (norm + rope, the query times SCALE
 * sqrt(head_dim / query_pre_attn_scalar), head_dim 32 and 256); then NVRTC
 * for sm_80 / sm_90 with zero spills. */
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
#include "kernels/ref/ref.h"
#include "gen/render.h"

#include "kern_util.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}

static int params(gen_param *p, int H, int HD, int bias, int norm, int rope, int block, float scale)
{
	gen_param q[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("N_HEADS", H), I("HEAD_DIM", HD),
	                 I("BIAS", bias), I("NORM", norm), I("ROPE", rope),
	                 {.name = "EPS", .type = GEN_PARAM_FLOAT, .f = 1e-6f},
	                 {.name = "SCALE", .type = GEN_PARAM_FLOAT, .f = scale}, I("BLOCK", block)};
	memcpy(p, q, sizeof(q));
	return 9;
}

/* Bound per element, against ref_head_prep (double sums and angles,
 * rounded once per step). The bias add is the same fp32 add on both sides
 * (exact agreement). The kernel's sum of squares: a lane's 2 PPL terms in
 * order, then 5 butterfly levels, relative error <= (2 PPL + 5) u
 * (gamma); the mean, + eps, sqrtf and the reciprocal add 4 u, the square
 * root halves the sum's; the two products a * scale * w 2 u more: a normed
 * value errs by at most (PPL + 9) u of its magnitude. The rotation then as
 * test_kern_rope derives it: (|angle| u + 7 u) (|a| + |c|) of the pair's
 * (normed) inputs, plus the inputs' own error carried through the
 * rotation (<= (PPL + 9) u (|a| + |c|)). A scale s != 1 multiplies the
 * result once more: the bound times s, plus u of the result. */
static void check_s(int T, int H, int HD, int bias, int norm, int rope, int block, float scale)
{
	gen_param p[9];
	const int np = params(p, H, HD, bias, norm, rope, block, scale);
	const emu_kernel *k = load_kernel("head_prep.cu.tmpl", "head_prep", p, np);
	const size_t n = (size_t)T * H * HD;
	const int half = HD / 2, ppl = (half + 31) / 32;
	float *x = emu_alloc(n * sizeof(float), "x");
	int32_t *pos = emu_alloc((size_t)T * sizeof(int32_t), "pos");
	float *freq = emu_alloc((size_t)half * sizeof(float), "inv_freq");
	float *b = emu_alloc((size_t)H * HD * sizeof(float), "b");
	float *w = emu_alloc((size_t)HD * sizeof(float), "w");
	float *pre = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
	double *r = malloc(n * sizeof(double)), *bound = malloc(n * sizeof(double));
	char what[128];

	ref_rope_freqs(freq, HD, 1e6f, 0, 1.0f, 0, 0, 0);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(4.0 * rnd());
	for (int i = 0; i < H * HD; i++)
		b[i] = (float)rnd();
	for (int i = 0; i < HD; i++)
		w[i] = (float)(1.0 + 0.5 * rnd());
	for (int t = 0; t < T; t++)
		pos[t] = t == 0 ? 0 : (int32_t)((t * 1237) % 5001);
	memcpy(pre, x, n * sizeof(float));
	ref_head_prep(pre, pos, T, H, HD, bias ? b : NULL, norm ? w : NULL, 1e-6f, 0, freq, 1.0f);
	memcpy(ref, x, n * sizeof(float));
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
	/* unused steps get a buffer that is there, as the planner passes */
	float *bp = bias ? b : freq, *wp = norm ? w : freq;
	void *args[] = {&x, &pos, &freq, &bp, &wp};
	snprintf(what, sizeof(what), "%s T%d scale %g", k->name, T, (double)scale);
	kern_out o = {.name = "x", .type = KERN_F32, .got = x, .ref = r, .bound = bound, .n = n,
	              .dims = {T, H, HD}};
	kern_launch_expect(what, k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args, &o, 1);
	emu_free(x);
	emu_free(pos);
	emu_free(freq);
	emu_free(b);
	emu_free(w);
	free(pre);
	free(ref);
	free(r);
	free(bound);
}

static void check(int T, int H, int HD, int bias, int norm, int rope, int block)
{
	check_s(T, H, HD, bias, norm, rope, block, 1.0f);
}

static const int steps[][3] = {{1, 0, 1}, {1, 0, 0}, {0, 1, 1}, {0, 0, 1}, {1, 1, 1}};

static void test_head_prep_shapes(void **state)
{
	(void)state;
	static const int Ts[] = {1, 3, 5};
	for (int ti = 0; ti < 3; ti++)
		for (int s = 0; s < 5; s++) {
			const int bi = steps[s][0], no = steps[s][1], ro = steps[s][2];
			check(Ts[ti], 7, 64, bi, no, ro, 128);  /* 7 heads over 4 warps */
			check(Ts[ti], 2, 128, bi, no, ro, 256); /* Qwen3 head_dim, idle warps */
			check(Ts[ti], 3, 80, bi, no, ro, 64);   /* half 40: lanes 8..31 idle in j = 1 */
			check(Ts[ti], 5, 6, bi, no, ro, 32);    /* 3 pairs, one warp */
		}
	check(2, 3, 256, 0, 1, 1, 128);                  /* Gemma-sized heads, 4 pairs a lane */
}

/* Gemma 3's steps: q norm + rope + scale (query_pre_attn_scalar 24 under
 * head_dim 32: sqrtf(32 / 24); 256 under 256 is no multiply, 168 under 128
 * a scale below 1), k norm + rope. */
static void test_head_prep_gemma(void **state)
{
	(void)state;
	const float s1 = sqrtf(32.0f / 24.0f), s2 = sqrtf(128.0f / 168.0f);
	for (int T = 1; T <= 5; T += 2) {
		check_s(T, 4, 32, 0, 1, 1, 128, s1);  /* the test model's q */
		check_s(T, 2, 32, 0, 1, 1, 128, 1.0f); /* its k */
		check_s(T, 5, 256, 0, 1, 1, 64, s1);  /* 270M-sized heads over 2 warps */
		check_s(T, 7, 128, 0, 1, 1, 128, s2);
		check_s(T, 3, 80, 0, 1, 1, 32, s2);   /* ragged lanes */
	}
}

/* The kernels an engine takes: Qwen2-7B q/k/v and Qwen3-8B q/k (head_dim
 * 128), and head_dim 256 with every step. */
static void test_head_prep_nvrtc(void **state)
{
	(void)state;
	static const int cases[][5] = {{28, 128, 1, 0, 1}, {4, 128, 1, 0, 0}, {32, 128, 0, 1, 1},
	                               {8, 128, 0, 1, 1}, {16, 256, 1, 1, 1}, {14, 64, 1, 0, 1}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gen_param p[9];
		const int np = params(p, cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4],
		                      128, 1.0f);
		nvrtc_check_ex("head_prep.cu.tmpl", "head_prep", p, np, false);
	}
	/* Gemma 3 270M's q (4 heads) and k (1) of head_dim 256, the query scaled
	 * (a 27B-style query_pre_attn_scalar 168 under 128); under 4 heads a
	 * warp a head, as the planner launches them (gen/arch_qwen.c: one head
	 * of 256 spills 8 bytes at 64 threads on sm_80) */
	static const int gem[][4] = {{4, 256, 0, 128}, {1, 256, 0, 32}, {2, 256, 0, 64}, {3, 256, 0, 96}, {2, 128, 0, 64}, {1, 128, 0, 32}, {1, 64, 0, 32}, {32, 128, 1, 128}};
	for (size_t i = 0; i < sizeof(gem) / sizeof(gem[0]); i++) {
		gen_param p[9];
		const int np = params(p, gem[i][0], gem[i][1], 0, 1, 1, gem[i][3],
		                      gem[i][2] ? sqrtf(128.0f / 168.0f) : 1.0f);
		nvrtc_check_ex("head_prep.cu.tmpl", "head_prep", p, np, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_prep_shapes),
		cmocka_unit_test(test_head_prep_gemma),
		cmocka_unit_test(test_head_prep_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

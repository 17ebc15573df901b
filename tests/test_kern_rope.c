/* rope template in the emulator vs ref_rope (adjacent pairs, inv_freq table
 * from ref_rope_freqs): two-pair (16-byte) and one-pair paths, partial
 * rotation, positions up to 5000, a derived per-element bound. */
#include <dlfcn.h>
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

/* Bound per rotated pair, against ref_rope (double inside, rounded once):
 * the kernel's angle p * f is one fp32 rounding, |da| <= |a| u; sincosf is
 * within 2 ulp on the GPU (1 in glibc), so cos and sin each err by at most
 * |a| u + 2u; the rotation x0 c - x1 s costs 3 roundings of terms bounded by
 * |x0| + |x1|; the reference's final rounding adds u |y| <= u (|x0| + |x1|).
 * Total (|a| u + 6u) (|x0| + |x1|), one more u for second-order terms. */
static void check(int T, int H, int HD, int ROT, int block)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "N_HEADS", .type = GEN_PARAM_INT, .i = H},
		{.name = "HEAD_DIM", .type = GEN_PARAM_INT, .i = HD},
		{.name = "ROT_DIM", .type = GEN_PARAM_INT, .i = ROT},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	const emu_kernel *k = load_kernel("rope.cu.tmpl", "rope_f32", p, 5);
	size_t n = (size_t)T * H * HD;
	float *x = emu_alloc(n * sizeof(float), "x");
	int32_t *pos = emu_alloc((size_t)T * sizeof(int32_t), "pos");
	float *freq = emu_alloc((size_t)(ROT / 2) * sizeof(float), "inv_freq");
	float *x0 = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
	double *r = malloc(n * sizeof(double)), *bound = malloc(n * sizeof(double));
	char what[96];

	ref_rope_freqs(freq, ROT, 10000.0f, 0, 1.0f, 0, 0, 0);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)rnd();
	for (int t = 0; t < T; t++)
		pos[t] = t == 0 ? 0 : (int32_t)((t * 1237) % 5001);
	memcpy(x0, x, n * sizeof(float));
	memcpy(ref, x, n * sizeof(float));
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
	void *args[] = {&x, &pos, &freq};
	snprintf(what, sizeof(what), "%s T%d", k->name, T);
	kern_out o = {.name = "x", .type = KERN_F32, .got = x, .ref = r, .bound = bound, .n = n,
	              .dims = {T, H, HD}};
	kern_launch_expect(what, k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args, &o, 1);
	emu_free(x);
	emu_free(pos);
	emu_free(freq);
	free(x0);
	free(ref);
	free(r);
	free(bound);
}

static void test_rope_shapes(void **state)
{
	(void)state;
	static const int Ts[] = {1, 3, 7};
	for (int b = 0; b < 3; b++) {
		check(Ts[b], 9, 64, 64, 128);  /* SmolLM2-135M heads, two-pair path */
		check(Ts[b], 3, 64, 32, 32);   /* partial rotation */
		check(Ts[b], 5, 36, 36, 64);   /* 36 % 4 == 0 but 9 quads: ragged */
		check(Ts[b], 3, 10, 8, 32);    /* head_dim % 4 != 0: one-pair path */
		check(Ts[b], 1, 6, 6, 32);
		check(Ts[b], 4, 12, 6, 32);    /* rot % 4 != 0 */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rope_shapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

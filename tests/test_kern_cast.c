/* cast template in the emulator: f32 -> bf16/f16 against gguf's round-to-
 * nearest-even conversions (special values, ties, the f16 overflow edge,
 * subnormals, random), bf16/f16 -> f32 over all 65536 bit patterns; NaN ->
 * 0x7fff as CUDA's __float2bfloat16_rn / __float2half_rn (gguf keeps a
 * payload, so NaN is checked separately). Exact: bound zero. */
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

#include "formats/gguf.h"

#include "kern_util.h"

static const emu_kernel *kern(int N, int mode)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "N", .type = GEN_PARAM_INT, .i = N},
		{.name = "MODE", .type = GEN_PARAM_INT, .i = mode},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = 128},
	};
	return load_kernel("cast.cu.tmpl", "cast", p, 4);
}

static unsigned grid_for(int N)
{
	int v = N % 8 == 0 ? 8 : 1;
	return (unsigned)((N / v + 127) / 128);
}

static float bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Casts x into y (both emu_alloc'ed), compares y with want (malloc'ed)
 * exactly, frees all three. */
static void launch_expect(const emu_kernel *k, int N, void *y, void *x, kern_dtype yt, void *want)
{
	void *args[] = {&y, &x};
	kern_out o = {.name = "y", .type = yt, .got = y, .want = want, .n = (size_t)N};
	kern_launch_expect(k->name, k, d3(grid_for(N), 1, 1), d3(128, 1, 1), args, &o, 1);
	emu_free(x);
	emu_free(y);
	free(want);
}

static void check_down(int N, int mode)
{
	const emu_kernel *k = kern(N, mode);
	float *x = emu_alloc((size_t)N * sizeof(float), "x");
	uint16_t *y = emu_alloc((size_t)N * sizeof(uint16_t), "y");
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

	for (int i = 0; i < N; i++) {
		if (i < ns)
			x[i] = bits(special[i]);
		else if (i % 3 == 0)
			x[i] = (float)(rnd() * 70000.0);
		else if (i % 3 == 1)
			x[i] = (float)(rnd() * 1e-6);
		else
			x[i] = (float)rnd();
	}
	uint16_t *want = malloc((size_t)N * sizeof(*want));
	for (int i = 0; i < N; i++)
		want[i] = isnan(x[i]) ? 0x7fffu : mode == 0 ? gguf_f32_to_bf16(x[i]) : gguf_f32_to_f16(x[i]);
	launch_expect(k, N, y, x, KERN_U16, want);
}

static void check_up(int N, int mode)
{
	const emu_kernel *k = kern(N, mode);
	uint16_t *x = emu_alloc((size_t)N * sizeof(uint16_t), "x");
	float *y = emu_alloc((size_t)N * sizeof(float), "y");

	for (int i = 0; i < N; i++)
		x[i] = (uint16_t)(N == 65536 ? (unsigned)i : ((unsigned)i * 40503u) & 0xffffu);
	float *want = malloc((size_t)N * sizeof(*want));
	for (int i = 0; i < N; i++)
		want[i] = mode == 2 ? gguf_bf16_to_f32(x[i]) : gguf_f16_to_f32(x[i]);
	launch_expect(k, N, y, x, KERN_F32, want);
}

static void test_cast_down(void **state)
{
	static const int Ns[] = {1, 17, 33, 111, 260, 576, 4096};
	(void)state;
	for (int a = 0; a < 7; a++) {
		check_down(Ns[a], 0);
		check_down(Ns[a], 1);
	}
}

static void test_cast_up(void **state)
{
	static const int Ns[] = {1, 33, 111, 260, 576, 65536};
	(void)state;
	for (int a = 0; a < 6; a++) {
		check_up(Ns[a], 2);
		check_up(Ns[a], 3);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cast_down),
		cmocka_unit_test(test_cast_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

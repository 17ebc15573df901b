/* feature_tap template in the emulator vs ref_feature_tap: ROWS 1, 3, 26,
 * 63; DIM on the vector path (8, 576) and not a multiple of the 4-float
 * vector (37, 99); N_TAPS 3 with SLOT first, middle, last, and N_TAPS 1.
 * The tap buffer starts with random values (and the h, delta inputs hold
 * every float class: normals, subnormals, signed zeros, infinities, NaN), so
 * the whole buffer is compared bit for bit: the slot's columns equal the
 * reference's one fp32 add, every other column keeps its old bits (checked
 * also against the buffer's copy, independently of the reference). Guard
 * zones around taps are checked by the emulator. Then NVRTC (sm_80,
 * sm_90). */
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
#include "testutil.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}

static uint64_t rnd64(void)
{
	return tu_rand(&rng_state);
}

/* Mostly ordinary values, now and then a random bit pattern (any class). */
static float rnd_float(void)
{
	uint64_t r = rnd64();
	if (r % 16 == 0) {
		uint32_t b = (uint32_t)(r >> 32);
		float f;
		memcpy(&f, &b, sizeof(f));
		return f;
	}
	return (float)((double)(r >> 11) * 0x1p-53 * 8.0 - 4.0);
}

static void check(int rows, int dim, int n_taps, int slot)
{
	const int block = dim % 4 ? 32 : 64;
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("ROWS", rows), I("DIM", dim),
	                 I("N_TAPS", n_taps), I("SLOT", slot), I("BLOCK", block)};
	const emu_kernel *k = load_kernel("feature_tap.cu.tmpl", "feature_tap", p, 6);
	const size_t nt = (size_t)rows * n_taps * dim, nh = (size_t)rows * dim;
	float *taps = emu_alloc(nt * sizeof(*taps), "taps");
	float *h = emu_alloc(nh * sizeof(*h), "h");
	float *delta = emu_alloc(nh * sizeof(*delta), "delta");
	float *want = malloc(nt * sizeof(*want)), *old = malloc(nt * sizeof(*old));

	for (size_t i = 0; i < nt; i++)
		old[i] = taps[i] = rnd_float();
	for (size_t i = 0; i < nh; i++) {
		h[i] = rnd_float();
		delta[i] = rnd_float();
	}
	h[0] = -0.0f; /* -0 + -0 = -0; -0 + +0 = +0 */
	delta[0] = rows > 1 ? -0.0f : 0.0f;
	memcpy(want, old, nt * sizeof(*want));
	ref_feature_tap(want, h, delta, rows, dim, n_taps, slot);
	/* independent of the reference: the other slots keep their bits */
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < n_taps * dim; c++)
			if (c / dim != slot)
				assert_memory_equal(&want[(size_t)r * n_taps * dim + c],
				                    &old[(size_t)r * n_taps * dim + c], sizeof(float));
	void *args[] = {&taps, &h, &delta};
	char what[96];
	snprintf(what, sizeof(what), "%s ROWS%d DIM%d N_TAPS%d SLOT%d", k->name, rows, dim, n_taps,
	         slot);
	kern_out o = {.name = "taps", .type = KERN_F32, .got = taps, .want = want, .n = nt,
	              .dims = {rows, n_taps, dim}};
	kern_launch_expect(what, k, d3((unsigned)rows, 1, 1), d3((unsigned)block, 1, 1), args, &o, 1);
	/* and the slot holds h + delta as this test adds them */
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < dim; c++) {
			const float s = h[(size_t)r * dim + c] + delta[(size_t)r * dim + c];
			assert_memory_equal(&taps[((size_t)r * n_taps + slot) * dim + c], &s, sizeof(s));
		}
	emu_free(taps);
	emu_free(h);
	emu_free(delta);
	free(want);
	free(old);
}

static void test_feature_tap_shapes(void **state)
{
	static const int rows[] = {1, 3, 26, 63}, dims[] = {8, 37, 99, 576};
	(void)state;
	for (int r = 0; r < 4; r++)
		for (int d = 0; d < 4; d++) {
			for (int slot = 0; slot < 3; slot++)
				check(rows[r], dims[d], 3, slot);
			check(rows[r], dims[d], 1, 0);
		}
}

static void test_feature_tap_nvrtc(void **state)
{
	/* SmolLM2 (576, 3 taps, a tree of 26 rows), Llama-3-8B (4096, 3 taps,
	 * 63 rows), the scalar path */
	static const int shapes[][4] = {{26, 576, 3, 1}, {63, 4096, 3, 2}, {3, 99, 3, 0}};
	(void)state;
	for (int s = 0; s < 3; s++) {
		gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("ROWS", shapes[s][0]),
		                 I("DIM", shapes[s][1]), I("N_TAPS", shapes[s][2]),
		                 I("SLOT", shapes[s][3]), I("BLOCK", 128)};
		nvrtc_check_ex("feature_tap.cu.tmpl", "feature_tap", p, 6, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_feature_tap_shapes),
		cmocka_unit_test(test_feature_tap_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

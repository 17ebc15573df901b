/* embedding16 template in the emulator vs ref_embedding16: bf16 and fp16
 * tables of random 16-bit patterns (every class: normals, subnormals, zeros,
 * infinities, NaNs with payloads), awkward dims on the vector path (576, 64)
 * and the scalar one (33, 111), 1 and odd token counts, out-of-range ids,
 * and ids in the padding range [N_ROWS, N_IDS) (a draft whose vocabulary is
 * a prefix of the target's), which must come out as rows of +0.0 bits.
 * Rows times SCALE (Gemma 3's sqrt(dim): 8 and sqrt(640); 1 elsewhere),
 * one fp32 multiply on both sides. Widening is exact, so the bound is zero: bit equality over the whole
 * output, untouched rows still holding emu_alloc's poison, guard zones
 * checked by the emulator. Then NVRTC (sm_80, sm_90) at real shapes: zero
 * spills, resources printed.
 * Doubt admitted: the emulator's F16_TO_F32 and gguf_f16_to_f32 keep a NaN's
 * payload; the GPU's cvt.f32.f16 may canonicalise it, which no test here can
 * see (no GPU). */
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
#include "formats/gguf.h"
#include "kernels/ref/ref.h"
#include "gen/render.h"

#include "kern_util.h"
#include "testutil.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}

static uint64_t rnd64(void) /* splitmix64 (tu_rand) on the shared state */
{
	return tu_rand(&rng_state);
}

static float g_scale = 1.0f; /* SCALE of the kernels check() loads */

static const emu_kernel *kern(int dim, int n_rows, int n_ids, int is_f16, int block)
{
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("DIM", dim), I("N_ROWS", n_rows),
	                 I("N_IDS", n_ids), I("IS_F16", is_f16),
	                 {.name = "SCALE", .type = GEN_PARAM_FLOAT, .f = g_scale}, I("BLOCK", block)};
	return load_kernel("embedding16.cu.tmpl", "embedding16", p, 7);
}

/* T rows of dim from a table of n_rows and n_pad padding ids beyond it;
 * bad_at >= 0 puts an invalid id there (and a second one at bad_at + 2 when
 * it exists); with n_pad > 0 every third row from row 1 takes a padding id
 * (the last one, n_rows + n_pad - 1, among them). */
static void check(int T, int dim, int is_f16, int block, int bad_at, int n_pad)
{
	const int n_rows = 50, n_ids = n_rows + n_pad;
	const emu_kernel *k = kern(dim, n_rows, n_ids, is_f16, block);
	const size_t ny = (size_t)T * dim;
	uint16_t *table = emu_alloc((size_t)n_rows * dim * sizeof(*table), "table");
	float *y = emu_alloc(ny * sizeof(*y), "y");
	int32_t *tok = emu_alloc((size_t)T * sizeof(*tok), "tok");
	int32_t *err = emu_alloc(sizeof(*err), "err");
	float *ref = malloc(ny * sizeof(*ref));

	for (size_t i = 0; i < (size_t)n_rows * dim; i++)
		table[i] = (uint16_t)rnd64();
	for (int t = 0; t < T; t++)
		tok[t] = (int32_t)(rnd64() % (uint64_t)n_rows);
	tok[T - 1] = n_rows - 1; /* the last row of the table */
	for (int t = 1; n_pad > 0 && t < T; t += 3)
		tok[t] = t + 3 >= T ? n_ids - 1 : n_rows + (int32_t)(rnd64() % (uint64_t)n_pad);
	if (bad_at >= 0) {
		const int32_t bad_ids[] = {-1, n_ids, 1 << 30, -2147483647 - 1};
		tok[bad_at] = bad_ids[bad_at % 4];
		if (bad_at + 2 < T)
			tok[bad_at + 2] = bad_ids[(bad_at + 1) % 4];
	}
	*err = 0;
	memset(ref, 0xff, ny * sizeof(*ref)); /* the poison emu_alloc leaves in y */
	assert_int_equal(ref_embedding16(ref, table, tok, T, dim, n_rows, n_ids, is_f16, g_scale),
	                 bad_at >= 0 ? -1 : 0);
	void *args[] = {&y, &table, &tok, &err};
	char what[128];
	int n = snprintf(what, sizeof(what), "%s T%d scale %g", k->name, T, (double)g_scale);
	if (bad_at >= 0)
		n += snprintf(what + n, sizeof(what) - (size_t)n, ", bad ids in rows %d%s (left untouched)",
		              bad_at, bad_at + 2 < T ? " and +2" : "");
	if (n_pad > 0)
		snprintf(what + n, sizeof(what) - (size_t)n, ", padding ids (zero rows)");
	kern_out o = {.name = "y", .type = KERN_F32, .got = y, .want = ref, .n = ny, .dims = {T, dim}};
	kern_launch_expect(what, k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args, &o, 1);
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
					         what, t, tok[t], i, b);
			}
	emu_free(table);
	emu_free(y);
	emu_free(tok);
	emu_free(err);
	free(ref);
}

/* The widening helpers agree with the emulator's on every 16-bit pattern
 * (so the table test's random sample cannot miss a class). */
static void test_embedding16_all_patterns(void **state)
{
	(void)state;
	for (int f16 = 0; f16 < 2; f16++) {
		const int dim = 65536 / 64;
		const emu_kernel *k = kern(dim, 64, 64, f16, 128);
		uint16_t *table = emu_alloc(65536 * sizeof(*table), "table");
		float *y = emu_alloc(65536 * sizeof(*y), "y");
		int32_t *tok = emu_alloc(64 * sizeof(*tok), "tok");
		int32_t *err = emu_alloc(sizeof(*err), "err");
		for (int i = 0; i < 65536; i++)
			table[i] = (uint16_t)i;
		for (int t = 0; t < 64; t++)
			tok[t] = 63 - t;
		*err = 0;
		float *want = malloc(65536 * sizeof(*want));
		for (int t = 0; t < 64; t++)
			for (int i = 0; i < dim; i++) {
				uint16_t h = (uint16_t)((63 - t) * dim + i);
				want[t * dim + i] = f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
			}
		void *args[] = {&y, &table, &tok, &err};
		/* row t holds the patterns (63 - t) * dim + i */
		kern_out o = {.name = "y", .type = KERN_F32, .got = y, .want = want, .n = 65536,
		              .dims = {64, dim}};
		kern_launch_expect(f16 ? "fp16 widening, all patterns" : "bf16 widening, all patterns",
		                   k, d3(64, 1, 1), d3(128, 1, 1), args, &o, 1);
		free(want);
		assert_int_equal(*err, 0);
		emu_free(table);
		emu_free(y);
		emu_free(tok);
		emu_free(err);
	}
}

static void test_embedding16_shapes(void **state)
{
	static const int dims[] = {576, 64, 33, 111};
	static const int Ts[] = {1, 3, 7};
	(void)state;
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 4; a++)
			for (int b = 0; b < 3; b++)
				check(Ts[b], dims[a], f16, a % 2 ? 32 : 128, -1, 0);
	check(2, 576, 0, 32, -1, 0); /* 72 vectors over 32 threads: a partial third round */
}

/* Padding-range ids: 3 (the Qwen2 pair's shape in miniature) and 1 ids
 * beyond the table, on both paths, with bad ids beside them. */
static void test_embedding16_padding(void **state)
{
	static const int dims[] = {576, 64, 33, 111};
	(void)state;
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 4; a++) {
			check(7, dims[a], f16, a % 2 ? 32 : 128, -1, 3);
			check(2, dims[a], f16, 128, -1, 1);
			check(9, dims[a], f16, 32, 3, 3);
		}
}

/* Gemma 3's scaled rows: SCALE 8 (dim 64) and sqrtf(640) (270M), every
 * shape and path, padding and bad ids beside them: still bit equal (the
 * padding rows +0.0: 0 * scale). */
static void test_embedding16_scaled(void **state)
{
	static const int dims[] = {576, 64, 33, 111};
	(void)state;
	const float scales[] = {8.0f, sqrtf(640.0f)};
	for (int sc = 0; sc < 2; sc++) {
		g_scale = scales[sc];
		for (int f16 = 0; f16 < 2; f16++)
			for (int a = 0; a < 4; a++) {
				check(3, dims[a], f16, a % 2 ? 32 : 128, -1, 0);
				check(7, dims[a], f16, 128, -1, 3);
				check(5, dims[a], f16, 32, 2, 0);
			}
	}
	g_scale = 1.0f;
}

static void test_embedding16_bad_id(void **state)
{
	(void)state;
	for (int f16 = 0; f16 < 2; f16++) {
		check(5, 111, f16, 32, 2, 0);
		check(5, 576, f16, 128, 1, 0);
		check(1, 33, f16, 128, 0, 0);
		check(7, 64, f16, 32, 3, 0);
	}
}

static void test_embedding16_nvrtc(void **state)
{
	/* SmolLM2-135M (576 x 49152, bf16), Llama-3-8B (4096 x 128256, fp16),
	 * a Qwen2-0.5B draft under Qwen2-7B (896 x 151936, ids to 152064), and
	 * the scalar path with padding ids */
	static const int shapes[][4] = {{576, 49152, 49152, 0}, {4096, 128256, 128256, 1},
	                                {896, 151936, 152064, 0}, {111, 50, 53, 0},
	                                {640, 262144, 262144, 0}};
	(void)state;
	for (int s = 0; s < 5; s++) {
		/* the last: Gemma 3 270M's table, rows times sqrt(640) */
		gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("DIM", shapes[s][0]),
		                 I("N_ROWS", shapes[s][1]), I("N_IDS", shapes[s][2]),
		                 I("IS_F16", shapes[s][3]),
		                 {.name = "SCALE", .type = GEN_PARAM_FLOAT,
		                  .f = s == 4 ? sqrtf(640.0f) : 1.0f},
		                 I("BLOCK", 128)};
		nvrtc_check_ex("embedding16.cu.tmpl", "embedding16", p, 7, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedding16_all_patterns),
		cmocka_unit_test(test_embedding16_shapes),
		cmocka_unit_test(test_embedding16_scaled),
		cmocka_unit_test(test_embedding16_bad_id),
		cmocka_unit_test(test_embedding16_padding),
		cmocka_unit_test(test_embedding16_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

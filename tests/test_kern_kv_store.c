/* kv_store template in the emulator vs ref_kv_store: KVD on the vector path
 * (192, 40) and the scalar one (36), ROWS 1, 26, 63 at ROW0 0 and inside a
 * tree, lengths that fit, that push the last rows past MAX_CTX (skipped) and
 * that skip everything; bf16 and fp16. Inputs mix random fp32 bit patterns
 * (overflow to inf, underflow to subnormals and zero), values around the
 * fp16 range and exact round-to-nearest-even ties, so the preludes'
 * F32_TO_BF16 / F32_TO_F16 are held bit for bit to gguf_f32_to_bf16 /
 * gguf_f32_to_f16. Whole-cache byte equality (a stray write anywhere shows),
 * guard zones from emu_alloc; the cache buffer extends to the last slot a
 * launch could address, so a row stored past MAX_CTX shows as a difference.
 * NaN is the one class where the two differ by design (device: canonical
 * 0x7fff; gguf: the payload kept, quieted), so NaN inputs are checked for
 * class only. Then NVRTC (sm_80, sm_90): zero spills. */
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

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* One input value: a quarter each of random bit patterns (NaN excluded),
 * values spanning the fp16 range, bf16 ties and fp16 ties. */
static float input_value(void)
{
	uint64_t r = rnd64();
	uint32_t sign = (uint32_t)(r >> 63) << 31, u;
	switch ((r >> 8) & 3) {
	case 0:
		do
			u = (uint32_t)rnd64();
		while ((u & 0x7fffffffu) > 0x7f800000u);
		return bits_f32(u);
	case 1: /* 2^-27 .. 2^17: fp16 zero, subnormals, normals, overflow */
		return (float)rnd() * ldexpf(1.0f, (int)(r >> 16) % 45 - 27);
	case 2: /* a bf16 tie: the dropped half is exactly 0x8000 */
		return bits_f32(((uint32_t)(r >> 16) & 0x7f7f0000u) | 0x8000u | sign);
	default: { /* an fp16 tie: half an fp16 ulp above a finite fp16 value */
		uint32_t e = (uint32_t)(r >> 16) % 31, m = (uint32_t)(r >> 24) & 0x3ffu;
		if (e == 0)
			return bits_f32(sign) + (sign ? -1.0f : 1.0f) * ((float)m + 0.5f) * 0x1p-24f;
		return bits_f32(sign | (e + 112u) << 23 | m << 13 | 1u << 12);
	}
	}
}

typedef struct shape {
	int rows, kvd, row0, max_ctx, is_f16, block;
} shape;

static const emu_kernel *kern(const shape *s)
{
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("ROWS", s->rows), I("KVD", s->kvd),
	                 I("ROW0", s->row0), I("MAX_CTX", s->max_ctx), I("IS_F16", s->is_f16),
	                 I("BLOCK", s->block)};
	return load_kernel("kv_store.cu.tmpl", "kv_store", p, 7);
}

/* One store at length len; returns how many rows landed. */
static int check(const shape *s, int len)
{
	const emu_kernel *kn = kern(s);
	/* the buffer reaches past MAX_CTX to the last slot the launch could
	 * touch, so a row written past MAX_CTX shows in the comparison (and
	 * cannot corrupt the heap beyond the guard) */
	const int slots = s->max_ctx > len + s->row0 + s->rows ? s->max_ctx : len + s->row0 + s->rows;
	const size_t nc = (size_t)slots * s->kvd, nx = (size_t)s->rows * s->kvd;
	uint16_t *kc = emu_alloc(nc * 2, "k_cache"), *vc = emu_alloc(nc * 2, "v_cache");
	float *k = emu_alloc(nx * 4, "k"), *v = emu_alloc(nx * 4, "v");
	int32_t *dlen = emu_alloc(4, "len");
	uint16_t *hk = malloc(nc * 2), *hv = malloc(nc * 2);

	for (size_t i = 0; i < nc; i++) {
		kc[i] = hk[i] = (uint16_t)rnd64();
		vc[i] = hv[i] = (uint16_t)rnd64();
	}
	for (size_t i = 0; i < nx; i++) {
		k[i] = input_value();
		v[i] = input_value();
	}
	*dlen = len;
	uint16_t *kc0 = kc + (size_t)s->row0 * s->kvd, *vc0 = vc + (size_t)s->row0 * s->kvd;
	void *args[] = {&kc0, &vc0, &k, &v, &dlen};
	const int vec = s->kvd % 8 == 0 ? 8 : 1;
	unsigned grid = (unsigned)((s->rows * s->kvd / vec + s->block - 1) / s->block);
	launch(kn, d3(grid, 1, 1), d3((unsigned)s->block, 1, 1), args);
	ref_kv_store(hk + (size_t)s->row0 * s->kvd, hv + (size_t)s->row0 * s->kvd, k, v, len, s->rows,
	             s->kvd, s->row0, s->max_ctx, s->is_f16);
	assert_int_equal(*dlen, len); /* the length is the commit's to advance */
	char what[128];
	snprintf(what, sizeof(what), "%s len %d (row r at slot len + %d + r)", kn->name, len, s->row0);
	const kern_out outs[] = {
		{.name = "k_cache", .type = KERN_U16, .got = kc, .want = hk, .n = nc, .dims = {slots, s->kvd}},
		{.name = "v_cache", .type = KERN_U16, .got = vc, .want = hv, .n = nc, .dims = {slots, s->kvd}},
	};
	for (int i = 0; i < 2; i++)
		kern_expect(what, &outs[i]);
	int landed = s->max_ctx - len - s->row0;
	landed = landed < 0 ? 0 : landed > s->rows ? s->rows : landed;
	emu_free(kc);
	emu_free(vc);
	emu_free(k);
	emu_free(v);
	emu_free(dlen);
	free(hk);
	free(hv);
	return landed;
}

static void test_kv_store_shapes(void **state)
{
	static const int kvds[] = {192, 40, 36};
	static const int rows[][2] = {{1, 0}, {26, 0}, {26, 5}, {63, 37}}; /* ROWS, ROW0 */
	(void)state;
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 4; b++) {
				shape s = {rows[b][0], kvds[a], rows[b][1], 160, f16, (a + b) % 2 ? 64 : 128};
				int room = s.max_ctx - s.row0 - s.rows; /* the largest len that fits all */
				assert_int_equal(check(&s, 0), s.rows);
				assert_int_equal(check(&s, room / 2), s.rows);
				assert_int_equal(check(&s, room), s.rows);
			}
}

static void test_kv_store_past_max_ctx(void **state)
{
	static const int kvds[] = {192, 40, 36};
	(void)state;
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 3; a++) {
			shape s = {26, kvds[a], 5, 100, f16, 128};
			int room = s.max_ctx - s.row0 - s.rows;
			assert_int_equal(check(&s, room + 1), s.rows - 1); /* the last row skipped */
			assert_int_equal(check(&s, room + 20), s.rows - 20);
			assert_int_equal(check(&s, s.max_ctx - s.row0 - 1), 1); /* only row 0 */
			assert_int_equal(check(&s, s.max_ctx - s.row0), 0);     /* nothing */
			assert_int_equal(check(&s, s.max_ctx + 7), 0);
			shape one = {1, kvds[a], 0, 100, f16, 64};
			assert_int_equal(check(&one, 99), 1);
			assert_int_equal(check(&one, 100), 0);
		}
}

/* NaN: the device's canonical 0x7fff, gguf's quieted payload; both NaN. */
static void test_kv_store_nan(void **state)
{
	(void)state;
	for (int f16 = 0; f16 < 2; f16++)
		for (int vec = 0; vec < 2; vec++) {
			shape s = {3, vec ? 40 : 36, 0, 8, f16, 64};
			const emu_kernel *kn = kern(&s);
			const size_t nx = (size_t)s.rows * s.kvd;
			uint16_t *kc = emu_alloc((size_t)s.max_ctx * s.kvd * 2, "k_cache");
			uint16_t *vc = emu_alloc((size_t)s.max_ctx * s.kvd * 2, "v_cache");
			float *k = emu_alloc(nx * 4, "k"), *v = emu_alloc(nx * 4, "v");
			int32_t *dlen = emu_alloc(4, "len");
			for (size_t i = 0; i < nx; i++) {
				uint32_t u = 0x7f800001u | (uint32_t)rnd64(); /* a NaN, any payload and sign */
				k[i] = bits_f32(u);
				v[i] = bits_f32(u ^ 0x80000000u);
			}
			*dlen = 2;
			void *args[] = {&kc, &vc, &k, &v, &dlen};
			uint16_t *canon = malloc(nx * sizeof(*canon));
			for (size_t i = 0; i < nx; i++) {
				uint16_t want = f16 ? gguf_f32_to_f16(k[i]) : gguf_f32_to_bf16(k[i]);
				uint16_t exp_mask = f16 ? 0x7c00u : 0x7f80u, man = f16 ? 0x03ffu : 0x007fu;
				assert_true((want & exp_mask) == exp_mask && (want & man) != 0);
				canon[i] = 0x7fffu;
			}
			const kern_out outs[] = { /* rows 0..2 land at slots 2..4 */
				{.name = "k_cache[2:]", .type = KERN_U16, .got = kc + 2 * s.kvd, .want = canon,
				 .n = nx, .dims = {s.rows, s.kvd}},
				{.name = "v_cache[2:]", .type = KERN_U16, .got = vc + 2 * s.kvd, .want = canon,
				 .n = nx, .dims = {s.rows, s.kvd}},
			};
			kern_launch_expect(f16 ? "NaN to the canonical fp16 0x7fff" :
			                   "NaN to the canonical bf16 0x7fff", kn,
			                   d3((unsigned)(nx / (vec ? 8 : 1) + 63) / 64, 1, 1), d3(64, 1, 1),
			                   args, outs, 2);
			free(canon);
			emu_free(kc);
			emu_free(vc);
			emu_free(k);
			emu_free(v);
			emu_free(dlen);
		}
}

static void test_kv_store_nvrtc(void **state)
{
	/* SmolLM2-135M (3 KV heads x 64), Llama-3-8B (8 x 128, fp16), a 26-node
	 * tree's draft rows at ROW0 0, the scalar path */
	static const shape shapes[] = {{26, 192, 0, 8192, 0, 128}, {64, 1024, 1, 8192, 1, 128},
	                               {1, 192, 25, 8192, 0, 128}, {63, 36, 0, 4096, 1, 128}};
	(void)state;
	for (int i = 0; i < 4; i++) {
		const shape *s = &shapes[i];
		gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("ROWS", s->rows),
		                 I("KVD", s->kvd), I("ROW0", s->row0), I("MAX_CTX", s->max_ctx),
		                 I("IS_F16", s->is_f16), I("BLOCK", s->block)};
		nvrtc_check_ex("kv_store.cu.tmpl", "kv_store", p, 7, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kv_store_shapes),
		cmocka_unit_test(test_kv_store_past_max_ctx),
		cmocka_unit_test(test_kv_store_nan),
		cmocka_unit_test(test_kv_store_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

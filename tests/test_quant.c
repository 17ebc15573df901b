/* Dequantization and quantization against independent references:
 * (1) hand-built blocks whose floats follow from the format description by a
 * separate formula; (2) quantize -> dequantize errors within bounds derived
 * from each format; (3) the real model and our quantizers against the Python
 * `gguf` package (gguf-py's numpy code, written independently of ours),
 * compared bit for bit. Not a test of the reader's validation (test_gguf.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "formats/gguf.h"

#define PYTHON "build/venv/bin/python"
#define DEFAULT_MODEL "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
/* splitmix64 -> uniform in [-1, 1) */
static double rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1p-52 - 1.0;
}

static uint32_t rndu(uint32_t n) { return (uint32_t)((rnd() + 1.0) * 0.5 * n) % n; }

static void st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static void expect_bits(const float *got, const float *want, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof(float)))
			fail_msg("%s: element %zu: got %.9g, expected %.9g", what, i, (double)got[i], (double)want[i]);
}

/* ---- (1) conversions and hand-built blocks ------------------------------ */

/* Every half, against the IEEE binary16 definition evaluated with ldexp. */
static void test_f16_exhaustive(void **state)
{
	for (uint32_t h = 0; h < 65536; h++) {
		uint32_t s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
		float got = gguf_f16_to_f32((uint16_t)h);
		if (e == 31) {
			assert_true(m ? isnan(got) : isinf(got));
			assert_int_equal(signbit(got) != 0, s);
			if (m)
				assert_true(gguf_f32_to_f16(got) & 0x200 && (gguf_f32_to_f16(got) & 0x7c00) == 0x7c00);
			else
				assert_int_equal(gguf_f32_to_f16(got), h);
			continue;
		}
		double v = e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
		float want = (float)(s ? -v : v);
		assert_true(memcmp(&got, &want, 4) == 0 || (v == 0 && got == 0 && signbit(got) == (int)s));
		assert_int_equal(gguf_f32_to_f16(got), h); /* exact values round-trip */
	}
}

/* Rounding of values between halves: nearest, ties to even, overflow. */
static void test_f32_to_f16_rounding(void **state)
{
	for (uint32_t h = 0; h < 0x7bff; h++) {
		double a = gguf_f16_to_f32((uint16_t)h), b = gguf_f16_to_f32((uint16_t)(h + 1));
		double mid = (a + b) / 2; /* exact in fp32: halves have 11 bits */
		uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
		assert_int_equal(gguf_f32_to_f16((float)mid), even);
		assert_int_equal(gguf_f32_to_f16(nextafterf((float)mid, 0)), h);
		assert_int_equal(gguf_f32_to_f16(nextafterf((float)mid, INFINITY)), h + 1);
		assert_int_equal(gguf_f32_to_f16(-(float)mid), 0x8000 | even);
	}
	assert_int_equal(gguf_f32_to_f16(65519.99f), 0x7bff);
	assert_int_equal(gguf_f32_to_f16(65520.0f), 0x7c00);
	assert_int_equal(gguf_f32_to_f16(1e30f), 0x7c00);
	assert_int_equal(gguf_f32_to_f16(-INFINITY), 0xfc00);
	assert_int_equal(gguf_f32_to_f16(0x1p-25f), 0);      /* tie with 0: even */
	assert_int_equal(gguf_f32_to_f16(0x1.8p-25f), 1);
	assert_int_equal(gguf_f32_to_f16(1e-10f), 0);
	assert_true((gguf_f32_to_f16(NAN) & 0x7e00) == 0x7e00);
}

static void test_bf16(void **state)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = gguf_bf16_to_f32((uint16_t)h);
		uint32_t u;
		memcpy(&u, &f, 4);
		assert_int_equal(u, h << 16);
		if (!isnan(f))
			assert_int_equal(gguf_f32_to_bf16(f), h);
	}
	/* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1) */
	assert_int_equal(gguf_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
	assert_int_equal(gguf_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
	assert_int_equal(gguf_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie, odd below: up */
}

static void deq(uint32_t type, const void *blk, uint64_t n, float *out)
{
	assert_int_equal(gguf_dequantize(type, blk, n, out), 0);
}

static void test_q4_0_block(void **state)
{
	uint8_t b[18];
	float got[32], want[32];
	st16(b, 0x3800); /* d = 0.5 */
	for (int j = 0; j < 16; j++)
		b[2 + j] = (uint8_t)((j & 15) | (15 - j) << 4);
	for (int j = 0; j < 16; j++) {
		want[j] = (float)((j - 8) * 0.5);
		want[j + 16] = (float)((7 - j) * 0.5);
	}
	deq(GGML_T_Q4_0, b, 32, got);
	expect_bits(got, want, 32, "Q4_0");
}

static void test_q4_1_block(void **state)
{
	uint8_t b[20];
	float got[32], want[32];
	st16(b, 0x3400);     /* d = 0.25 */
	st16(b + 2, 0xbe00); /* m = -1.5 */
	for (int j = 0; j < 16; j++)
		b[4 + j] = (uint8_t)((3 * j & 15) | (j ^ 5) << 4);
	for (int j = 0; j < 16; j++) {
		want[j] = (float)((3 * j & 15) * 0.25 - 1.5);
		want[j + 16] = (float)((j ^ 5) * 0.25 - 1.5);
	}
	deq(GGML_T_Q4_1, b, 32, got);
	expect_bits(got, want, 32, "Q4_1");
}

static void test_q8_0_block(void **state)
{
	uint8_t b[2 * 34];
	float got[64], want[64];
	st16(b, 0x3000);      /* d = 0.125 */
	st16(b + 34, 0xc500); /* d = -5 */
	for (int j = 0; j < 32; j++) {
		b[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
		b[36 + j] = (uint8_t)(int8_t)(127 - j);
		want[j] = (float)((j * 8 - 128) * 0.125);
		want[32 + j] = (float)((127 - j) * -5.0);
	}
	deq(GGML_T_Q8_0, b, 64, got);
	expect_bits(got, want, 64, "Q8_0");
}

/* Q5: element j's fifth bit is bit j of the 32-bit qh (j and j + 16 share
 * byte j of qs, low and high nibble). */
static void test_q5_blocks(void **state)
{
	uint8_t b0[22], b1[24];
	float got[32], want[32];
	uint32_t qh = 0xa5a5f00fu;
	st16(b0, 0x3c00); /* d = 1 */
	st16(b1, 0x3800); /* d = 0.5 */
	st16(b1 + 2, 0x4200); /* m = 3 */
	for (int i = 0; i < 4; i++)
		b0[2 + i] = b1[4 + i] = (uint8_t)(qh >> (8 * i));
	for (int j = 0; j < 16; j++)
		b0[6 + j] = b1[8 + j] = (uint8_t)((j * 5 & 15) | (15 - j) << 4);
	for (int j = 0; j < 32; j++) {
		int lo = j < 16 ? (j * 5 & 15) : 15 - (j - 16);
		want[j] = (float)((lo + 16 * (int)((qh >> j) & 1)) - 16);
	}
	deq(GGML_T_Q5_0, b0, 32, got);
	expect_bits(got, want, 32, "Q5_0");
	for (int j = 0; j < 32; j++) {
		int lo = j < 16 ? (j * 5 & 15) : 15 - (j - 16);
		want[j] = (float)((lo + 16 * (int)((qh >> j) & 1)) * 0.5 + 3);
	}
	deq(GGML_T_Q5_1, b1, 32, got);
	expect_bits(got, want, 32, "Q5_1");
}

/* Q4_K: 8 sub-blocks of 32 with 6-bit scale and min, packed into 12 bytes;
 * sub-blocks 2k and 2k+1 take the low and high nibbles of qs[32k..32k+31].
 * The test packs with its own inverse of that layout. */
static void test_q4_k_block(void **state)
{
	uint8_t b[144] = { 0 };
	uint8_t sc[8], mn[8], q[256];
	float got[256], want[256];
	const float d = 0.0625f, dmin = 0.5f;
	st16(b, gguf_f32_to_f16(d));
	st16(b + 2, gguf_f32_to_f16(dmin));
	for (int i = 0; i < 8; i++) {
		sc[i] = (uint8_t)rndu(64);
		mn[i] = (uint8_t)rndu(64);
	}
	sc[5] = 63;
	mn[6] = 63;
	for (int i = 0; i < 4; i++) {
		b[4 + i] = (uint8_t)(sc[i] | (sc[i + 4] >> 4) << 6);
		b[4 + i + 4] = (uint8_t)(mn[i] | (mn[i + 4] >> 4) << 6);
		b[4 + i + 8] = (uint8_t)((sc[i + 4] & 15) | (mn[i + 4] & 15) << 4);
	}
	for (int i = 0; i < 256; i++) {
		q[i] = (uint8_t)rndu(16);
		int sub = i / 32, k = sub / 2, l = i % 32;
		b[16 + 32 * k + l] |= (uint8_t)(sub & 1 ? q[i] << 4 : q[i]);
		float ds = d * sc[sub], ms = dmin * mn[sub];
		want[i] = ds * q[i] - ms;
	}
	deq(GGML_T_Q4_K, b, 256, got);
	expect_bits(got, want, 256, "Q4_K");
}

/* Q6_K: element i = 128 h + 32 g + l takes its low 4 bits from
 * ql[64 h + 32 (g & 1) + l] (low nibble for g < 2, high for g >= 2), its top
 * 2 bits from bits 2g..2g+1 of qh[32 h + l], and scale sc[8 h + 2 g + l/16]. */
static void test_q6_k_block(void **state)
{
	uint8_t b[210] = { 0 };
	int8_t sc[16];
	int q[256];
	float got[256], want[256];
	const float d = 0.03125f;
	for (int i = 0; i < 16; i++)
		sc[i] = (int8_t)(rndu(256) - 128);
	sc[3] = -128;
	memcpy(b + 192, sc, 16);
	st16(b + 208, gguf_f32_to_f16(d));
	for (int i = 0; i < 256; i++) {
		q[i] = (int)rndu(64);
		int h = i / 128, g = (i % 128) / 32, l = i % 32;
		uint8_t *ql = &b[64 * h + 32 * (g & 1) + l];
		*ql |= (uint8_t)(g < 2 ? (q[i] & 15) : (q[i] & 15) << 4);
		b[128 + 32 * h + l] |= (uint8_t)((q[i] >> 4) << (2 * g));
		want[i] = d * sc[8 * h + 2 * g + l / 16] * (q[i] - 32);
	}
	deq(GGML_T_Q6_K, b, 256, got);
	expect_bits(got, want, 256, "Q6_K");
}

static void test_dequantize_refusals(void **state)
{
	uint8_t b[84] = { 0 };
	float out[256];
	assert_int_equal(gguf_dequantize(GGML_T_Q2_K, b, 256, out), SW_ENOTSUP);
	assert_int_equal(gguf_dequantize(GGML_T_Q8_0, b, 16, out), SW_EINVAL);
	assert_int_equal(gguf_dequantize(99, b, 1, out), SW_ENOTSUP);
	assert_int_equal(gguf_quantize(GGML_T_Q4_0, out, 33, b), 0);
	assert_int_equal(gguf_quantize(GGML_T_Q6_K, out, 256, b), 0);
}

/* ---- (2) quantize -> dequantize error bounds ----------------------------- */

/* Test blocks: uniform, one outlier, all zero, constant, tiny values,
 * negative and positive extremes, and fp16-saturating magnitudes avoided
 * (d must stay finite in fp16: |x| <= 65504 * 8). */
static void fill_block(float *x, int kind)
{
	double scale = pow(10, rnd() * 3);
	for (int j = 0; j < 32; j++) {
		switch (kind % 7) {
		case 0: x[j] = (float)(rnd() * scale); break;
		case 1: x[j] = (float)(rnd() * 0.01 * scale); break;
		case 2: x[j] = 0; break;
		case 3: x[j] = -1.75f; break;
		case 4: x[j] = (float)(rnd() * 1e-6); break;
		case 5: x[j] = (float)(fabs(rnd()) * scale); break;
		case 6: x[j] = (float)(-fabs(rnd()) * scale); break;
		}
	}
	if (kind % 7 == 1)
		x[rndu(32)] = (float)(kind & 8 ? scale : -scale); /* the outlier */
}

#define NBLK 700
/* Slack for fp32 rounding inside quantizer and dequantizer: the ops on the
 * path are a handful of fp32 multiplies/adds of magnitude <= amax, each off
 * by at most amax * 2^-24; 2^-20 covers them with margin. */
#define FP32_SLACK 0x1p-20

static void test_roundtrip_q8_0(void **state)
{
	float x[32], y[32];
	uint8_t b[34];
	for (int k = 0; k < NBLK; k++) {
		fill_block(x, k);
		assert_int_equal(gguf_quantize(GGML_T_Q8_0, x, 32, b), 34);
		deq(GGML_T_Q8_0, b, 32, y);
		float amax = 0;
		for (int j = 0; j < 32; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		/* d = amax/127 maps every x to within half a step of an integer
		 * in -127..127; storing d in fp16 moves step q by |q| |d - dh|. */
		double d = amax / 127.0, dh = gguf_f16_to_f32(gguf_f32_to_f16((float)(amax / 127)));
		double bound = d / 2 + 127 * fabs(d - dh) + amax * FP32_SLACK;
		for (int j = 0; j < 32; j++)
			if (fabs((double)x[j] - y[j]) > bound)
				fail_msg("Q8_0 block %d elem %d: |%g - %g| > %g", k, j, (double)x[j], (double)y[j], bound);
	}
}

static void test_roundtrip_q4_0(void **state)
{
	float x[32], y[32];
	uint8_t b[18];
	for (int k = 0; k < NBLK; k++) {
		fill_block(x, k);
		assert_int_equal(gguf_quantize(GGML_T_Q4_0, x, 32, b), 18);
		deq(GGML_T_Q4_0, b, 32, y);
		float amax = 0, max = 0;
		for (int j = 0; j < 32; j++)
			if (fabsf(x[j]) > amax) {
				amax = fabsf(x[j]);
				max = x[j];
			}
		/* d = max/-8: the extreme maps to -8 exactly; values of the other
		 * sign up to +8 steps clamp to +7, so x*id in (7.5, 8] costs up to
		 * a full step, everything else half a step; fp16 d adds at most
		 * 8 |d - dh|. */
		double d = fabs(max / -8.0), dh = fabs(gguf_f16_to_f32(gguf_f32_to_f16(max / -8)));
		for (int j = 0; j < 32; j++) {
			double t = d ? x[j] / (max / -8.0) : 0;
			double bound = (t > 7.5 ? d : d / 2) + 8 * fabs(d - dh) + amax * FP32_SLACK;
			if (fabs((double)x[j] - y[j]) > bound)
				fail_msg("Q4_0 block %d elem %d: |%g - %g| > %g", k, j, (double)x[j], (double)y[j], bound);
		}
	}
}

static void test_roundtrip_q4_1(void **state)
{
	float x[32], y[32];
	uint8_t b[20];
	for (int k = 0; k < NBLK; k++) {
		fill_block(x, k);
		assert_int_equal(gguf_quantize(GGML_T_Q4_1, x, 32, b), 20);
		deq(GGML_T_Q4_1, b, 32, y);
		float mn = x[0], mx = x[0];
		for (int j = 0; j < 32; j++) {
			mn = fminf(mn, x[j]);
			mx = fmaxf(mx, x[j]);
		}
		/* d = (max-min)/15 spans the range in 15 steps: half a step from
		 * rounding, plus fp16 storage of d (x15) and of min. */
		double d = (mx - mn) / 15.0, dh = gguf_f16_to_f32(gguf_f32_to_f16((mx - mn) / 15));
		double mh = gguf_f16_to_f32(gguf_f32_to_f16(mn));
		double bound = d / 2 + 15 * fabs(d - dh) + fabs(mn - mh) +
			       (fabs(mx) + fabs(mn)) * FP32_SLACK;
		for (int j = 0; j < 32; j++)
			if (fabs((double)x[j] - y[j]) > bound)
				fail_msg("Q4_1 block %d elem %d: |%g - %g| > %g", k, j, (double)x[j], (double)y[j], bound);
	}
}

static void test_roundtrip_float_types(void **state)
{
	float x[256], y[256];
	uint8_t b[1024];
	for (int j = 0; j < 256; j++)
		x[j] = (float)((rnd() < 0 ? -1 : 1) * (1 + fabs(rnd())) * pow(2, rnd() * 12));
	assert_int_equal(gguf_quantize(GGML_T_F32, x, 256, b), 1024);
	deq(GGML_T_F32, b, 256, y);
	expect_bits(y, x, 256, "F32");
	/* F16/BF16: relative error <= 2^-11 / 2^-8 (half an ulp) in the
	 * normal range; |x| in [2^-12, 2^13] stays inside fp16's. */
	assert_int_equal(gguf_quantize(GGML_T_F16, x, 256, b), 512);
	deq(GGML_T_F16, b, 256, y);
	for (int j = 0; j < 256; j++)
		assert_true(fabs((double)x[j] - y[j]) <= fabs(x[j]) * 0x1p-11);
	assert_int_equal(gguf_quantize(GGML_T_BF16, x, 256, b), 512);
	deq(GGML_T_BF16, b, 256, y);
	for (int j = 0; j < 256; j++)
		assert_true(fabs((double)x[j] - y[j]) <= fabs(x[j]) * 0x1p-8);
}

/* ---- (3) against gguf-py --------------------------------------------------- */

static const char *py_script =
	"import sys, numpy as np, gguf\n"
	"mode, out = sys.argv[1], sys.argv[2]\n"
	"f = open(out, 'wb')\n"
	"if mode == 'rows':\n"
	"    r = gguf.GGUFReader(sys.argv[3])\n"
	"    by = {t.name: t for t in r.tensors}\n"
	"    for spec in sys.argv[4:]:\n"
	"        name, rows = spec.split(':')\n"
	"        t = by[name]\n"
	"        d = t.data if t.data.ndim == 2 else t.data.reshape(1, -1)\n"
	"        rows = [int(v) for v in rows.split(',')]\n"
	"        y = gguf.quants.dequantize(d[rows], t.tensor_type)\n"
	"        f.write(np.ascontiguousarray(y, dtype=np.float32).tobytes())\n"
	"else:\n"
	"    x = np.fromfile(sys.argv[3], dtype=np.float32).reshape(-1, 256)\n"
	"    for q in ('Q4_0', 'Q4_1', 'Q8_0', 'F16', 'BF16'):\n"
	"        f.write(gguf.quants.quantize(x, gguf.GGMLQuantizationType[q]).tobytes())\n"
	"f.close()\n";

struct tmp {
	char dir[64], script[96], in[96], out[96];
};

static void tmp_init(struct tmp *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/sw_test_quant_XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->script, sizeof(t->script), "%s/ref.py", t->dir);
	snprintf(t->in, sizeof(t->in), "%s/in.bin", t->dir);
	snprintf(t->out, sizeof(t->out), "%s/out.bin", t->dir);
	FILE *fp = fopen(t->script, "w");
	assert_non_null(fp);
	fputs(py_script, fp);
	fclose(fp);
}

static void tmp_free(struct tmp *t)
{
	unlink(t->script);
	unlink(t->in);
	unlink(t->out);
	rmdir(t->dir);
}

static void need_python(void)
{
	if (access(PYTHON, X_OK) != 0)
		fail_msg("%s not found: run tests/deps.sh (it creates the venv with numpy and gguf)", PYTHON);
}

static void *read_all(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		fail_msg("cannot read %s", path);
	fseek(fp, 0, SEEK_END);
	long len = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	void *p = malloc(len > 0 ? (size_t)len : 1);
	*n = fread(p, 1, (size_t)len, fp);
	fclose(fp);
	return p;
}

static void test_quantize_matches_gguf_py(void **state)
{
	enum { ROWS = 24, N = ROWS * 256 };
	struct tmp t;
	float *x = malloc(N * sizeof(*x));
	uint8_t *mine = malloc(N * 4);
	need_python();
	tmp_init(&t);
	for (int b = 0; b < N / 32; b++)
		fill_block(x + 32 * b, b);
	for (int i = 0; i < 32; i++) /* exact ties of x*id + 0.5 and friends */
		x[i] = (float)(i - 16) * 0.5f;
	FILE *fp = fopen(t.in, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(x, sizeof(*x), N, fp), N);
	fclose(fp);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s %s quant %s %s", PYTHON, t.script, t.out, t.in);
	assert_int_equal(system(cmd), 0);
	size_t n_ref;
	uint8_t *ref = read_all(t.out, &n_ref), *r = ref;
	const uint32_t types[] = { GGML_T_Q4_0, GGML_T_Q4_1, GGML_T_Q8_0, GGML_T_F16, GGML_T_BF16 };
	for (int k = 0; k < 5; k++) {
		uint64_t nb = gguf_quantize(types[k], x, N, mine);
		assert_int_equal(nb, ggml_dtype_nbytes(types[k], N));
		assert_true((size_t)(r - ref) + nb <= n_ref);
		for (uint64_t i = 0; i < nb; i++)
			if (mine[i] != r[i])
				fail_msg("%s: byte %llu differs from gguf-py: %u vs %u", ggml_dtype_name(types[k]),
					 (unsigned long long)i, mine[i], r[i]);
		r += nb;
	}
	assert_int_equal((size_t)(r - ref), n_ref);
	free(ref);
	free(mine);
	free(x);
	tmp_free(&t);
}

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	p = p && *p ? p : DEFAULT_MODEL;
	if (access(p, R_OK) != 0)
		fail_msg("model %s not found: run `make model` (or set SW_MODEL)", p);
	return p;
}

struct rowspec {
	const char *name;
	int rows[5];
	int n;
	uint32_t type; /* expected in the file: the point is covering each */
};

/* Rows of a real file's tensors, ours against gguf-py's, bit for bit. */
static void rows_vs_gguf_py(const char *path, const struct rowspec *specs, int n_specs, gguf_file **fo,
                            float **refo)
{
	struct tmp t;
	sw_err e = { 0 };
	need_python();
	tmp_init(&t);
	char cmd[2048];
	int k = snprintf(cmd, sizeof(cmd), "%s %s rows %s '%s'", PYTHON, t.script, t.out, path);
	for (int s = 0; s < n_specs; s++) {
		k += snprintf(cmd + k, sizeof(cmd) - (size_t)k, " %s:", specs[s].name);
		for (int r = 0; r < specs[s].n; r++)
			k += snprintf(cmd + k, sizeof(cmd) - (size_t)k, "%s%d", r ? "," : "", specs[s].rows[r]);
	}
	assert_int_equal(system(cmd), 0);
	size_t n_ref;
	float *ref = read_all(t.out, &n_ref), *r = ref;

	gguf_file *f = gguf_open(path, &e);
	if (!f)
		fail_msg("%s", e.msg);
	for (int s = 0; s < n_specs; s++) {
		const gguf_tensor *tt = gguf_tensor_find(f, specs[s].name);
		assert_non_null(tt);
		assert_int_equal(tt->type, specs[s].type);
		uint64_t ne0 = tt->ne[0], row_bytes = ggml_dtype_nbytes(tt->type, ne0);
		float *row = malloc(ne0 * sizeof(*row));
		for (int i = 0; i < specs[s].n; i++) {
			const uint8_t *src = (const uint8_t *)tt->data + (uint64_t)specs[s].rows[i] * row_bytes;
			assert_int_equal(gguf_dequantize(tt->type, src, ne0, row), 0);
			assert_true((size_t)(r + ne0 - ref) * sizeof(float) <= n_ref);
			char what[96];
			snprintf(what, sizeof(what), "%s row %d", specs[s].name, specs[s].rows[i]);
			expect_bits(row, r, ne0, what);
			r += ne0;
		}
		free(row);
	}
	assert_int_equal((size_t)(r - ref) * sizeof(float), n_ref);
	tmp_free(&t);
	*fo = f;
	*refo = ref;
}

static void test_real_model_vs_gguf_py(void **state)
{
	const char *path = model_path();
	static const struct rowspec specs[] = {
		{ "token_embd.weight", { 0, 1, 2, 12345, 49151 }, 5, GGML_T_Q8_0 },
		{ "blk.0.attn_q.weight", { 0, 100, 575 }, 3, GGML_T_Q4_1 },
		{ "blk.29.ffn_down.weight", { 0, 311, 575 }, 3, GGML_T_Q4_1 },
		{ "blk.7.attn_k.weight", { 191 }, 1, GGML_T_Q4_1 },
		{ "output_norm.weight", { 0 }, 1, GGML_T_F32 },
	};
	gguf_file *f;
	float *ref;
	sw_err e = { 0 };
	rows_vs_gguf_py(path, specs, sizeof(specs) / sizeof(specs[0]), &f, &ref);

	/* the whole-tensor path agrees with the row path */
	const gguf_tensor *tq = gguf_tensor_find(f, "blk.0.attn_q.weight");
	float *all = malloc(tq->n_elems * sizeof(*all));
	assert_int_equal(gguf_tensor_to_f32(f, tq, all, &e), 0);
	expect_bits(all + 100 * 576, ref + 5 * 576 + 576, 576, "blk.0.attn_q.weight row 100 (whole tensor)");
	free(all);

	gguf_close(f);
	free(ref);
}

/* The second real model's types (Gemma 3 270M Q4_K_M: Q4_K, Q6_K, Q5_0,
 * Q8_0), skipped without it (make model-gemma; SW_GEMMA_MODEL) */
static void test_gemma_vs_gguf_py(void **state)
{
	(void)state;
	const char *path = getenv("SW_GEMMA_MODEL");
	if (!path)
		path = "models/cache/gemma-3-270m-q4_k_m.gguf";
	if (access(path, R_OK)) {
		printf("  %s absent (make model-gemma): skipped\n", path);
		skip();
	}
	static const struct rowspec specs[] = {
		{ "blk.0.attn_output.weight", { 0, 1, 333, 639 }, 4, GGML_T_Q4_K },
		{ "blk.0.ffn_down.weight", { 0, 17, 639 }, 3, GGML_T_Q6_K },
		{ "blk.3.attn_q.weight", { 0, 512, 1023 }, 3, GGML_T_Q5_0 },
		{ "blk.0.attn_v.weight", { 0, 255 }, 2, GGML_T_Q8_0 },
		{ "token_embd.weight", { 0, 2, 262143 }, 3, GGML_T_Q8_0 },
	};
	gguf_file *f;
	float *ref;
	rows_vs_gguf_py(path, specs, sizeof(specs) / sizeof(specs[0]), &f, &ref);
	gguf_close(f);
	free(ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_exhaustive),
		cmocka_unit_test(test_f32_to_f16_rounding),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_q4_0_block),
		cmocka_unit_test(test_q4_1_block),
		cmocka_unit_test(test_q8_0_block),
		cmocka_unit_test(test_q5_blocks),
		cmocka_unit_test(test_q4_k_block),
		cmocka_unit_test(test_q6_k_block),
		cmocka_unit_test(test_dequantize_refusals),
		cmocka_unit_test(test_roundtrip_q8_0),
		cmocka_unit_test(test_roundtrip_q4_0),
		cmocka_unit_test(test_roundtrip_q4_1),
		cmocka_unit_test(test_roundtrip_float_types),
		cmocka_unit_test(test_quantize_matches_gguf_py),
		cmocka_unit_test(test_real_model_vs_gguf_py),
		cmocka_unit_test(test_gemma_vs_gguf_py),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

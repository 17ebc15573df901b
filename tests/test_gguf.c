/* GGUF reader and writer: writer -> reader round trips of every metadata type
 * and of tensors, then one test per class of malformed file, each checking
 * the specific error (code and the words a user needs). Hostile buffers are
 * exact-size heap copies so ASan sees any overread. Dequantization accuracy
 * lives in test_quant.c. */
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

/* ---- helpers ------------------------------------------------------------ */

static void *to_mem(gguf_writer *w, size_t *n)
{
	void *p = NULL;
	sw_err e = { 0 };
	assert_int_equal(gguf_writer_to_mem(w, &p, n, &e), 0);
	return p;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Location of a kv's or tensor's name bytes inside a serialized file: the
 * 8-byte length precedes them. Names in the tests are unique substrings. */
static uint8_t *find_name(uint8_t *buf, size_t n, const char *name)
{
	size_t k = strlen(name);
	for (size_t i = 8; i + k <= n; i++)
		if (!memcmp(buf + i, name, k) && buf[i - 8] == k && !memcmp(buf + i - 7, "\0\0\0\0\0\0\0", 7))
			return buf + i;
	fail_msg("name %s not found in the buffer", name);
	return NULL;
}

/* Fields of the tensor info whose name is `name`. */
static uint8_t *tinfo_ndims(uint8_t *buf, size_t n, const char *name)
{
	return find_name(buf, n, name) + strlen(name);
}

static uint8_t *tinfo_type(uint8_t *buf, size_t n, const char *name)
{
	uint8_t *p = tinfo_ndims(buf, n, name);
	uint32_t nd = p[0];
	return p + 4 + 8 * nd;
}

static uint8_t *tinfo_offset(uint8_t *buf, size_t n, const char *name)
{
	return tinfo_type(buf, n, name) + 4;
}

/* Opens an exact-size heap copy (ASan catches overreads past it) and
 * expects failure with code and every given substring in the message. */
static void expect_fail(const uint8_t *buf, size_t n, int code, const char *s1, const char *s2)
{
	uint8_t *copy = malloc(n ? n : 1);
	sw_err e = { 0 };
	memcpy(copy, buf, n);
	gguf_file *f = gguf_open_mem(copy, n, "hostile.gguf", &e);
	if (f) {
		gguf_close(f);
		free(copy);
		fail_msg("expected failure (%s) but the file parsed", s1);
	}
	free(copy);
	if (e.code != code || !strstr(e.msg, "hostile.gguf") || (s1 && !strstr(e.msg, s1)) ||
	    (s2 && !strstr(e.msg, s2)))
		fail_msg("expected code %d with '%s' '%s', got %d: %s", code, s1, s2 ? s2 : "", e.code, e.msg);
}

static gguf_file *open_ok(const void *buf, size_t n)
{
	sw_err e = { 0 };
	gguf_file *f = gguf_open_mem(buf, n, "ok.gguf", &e);
	if (!f)
		fail_msg("open failed: %s", e.msg);
	return f;
}

/* A small valid file: two kvs, a string array and three tensors. */
static void *small_file(size_t *n, uint64_t alignment)
{
	gguf_writer *w = gguf_writer_new(3, alignment);
	static const float f32[8] = { 1, -2, 3.5f, 0, 1e-3f, -7, 8, 9 };
	static const char *const strs[] = { "a", "bc", "" };
	uint8_t q8[34 * 2];
	float src[64];
	uint64_t ne1[1] = { 8 }, ne2[2] = { 32, 2 }, ne3[3] = { 2, 2, 2 };

	for (int i = 0; i < 64; i++)
		src[i] = (float)(i - 30) / 7.0f;
	gguf_quantize(GGML_T_Q8_0, src, 64, q8);
	gguf_w_str(w, "general.architecture", "llama");
	gguf_w_u32(w, "test.count", 7);
	gguf_w_arr_str(w, "test.strs", strs, NULL, 3);
	gguf_w_tensor(w, "vec", GGML_T_F32, 1, ne1, f32, sizeof(f32));
	gguf_w_tensor(w, "mat", GGML_T_Q8_0, 2, ne2, q8, sizeof(q8));
	gguf_w_tensor(w, "cube", GGML_T_F32, 3, ne3, f32, sizeof(f32));
	void *p = to_mem(w, n);
	gguf_writer_free(w);
	return p;
}

/* ---- round trips -------------------------------------------------------- */

static void metadata_roundtrip(uint32_t version)
{
	char path[] = "/tmp/sw_test_gguf_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);

	gguf_writer *w = gguf_writer_new(version, 32);
	assert_non_null(w);
	uint8_t u8 = 250;
	int8_t i8 = -100;
	uint16_t u16 = 65000;
	int16_t i16 = -30000;
	uint64_t u64 = 0x123456789abcdefull, u64small = 77;
	int64_t i64 = -5000000000ll, i64small = -5;
	double f64 = 3.25;
	gguf_w_scalar(w, "t.u8", GGUF_VT_UINT8, &u8);
	gguf_w_scalar(w, "t.i8", GGUF_VT_INT8, &i8);
	gguf_w_scalar(w, "t.u16", GGUF_VT_UINT16, &u16);
	gguf_w_scalar(w, "t.i16", GGUF_VT_INT16, &i16);
	gguf_w_u32(w, "t.u32", 4000000000u);
	gguf_w_i32(w, "t.i32", -123456);
	gguf_w_f32(w, "t.f32", 0.1f);
	gguf_w_bool(w, "t.bool", true);
	gguf_w_bool(w, "t.false", false);
	gguf_w_str(w, "t.str", "hello, gguf");
	gguf_w_str(w, "t.empty", "");
	gguf_w_scalar(w, "t.u64", GGUF_VT_UINT64, &u64);
	gguf_w_scalar(w, "t.u64small", GGUF_VT_UINT64, &u64small);
	gguf_w_scalar(w, "t.i64", GGUF_VT_INT64, &i64);
	gguf_w_scalar(w, "t.i64small", GGUF_VT_INT64, &i64small);
	gguf_w_scalar(w, "t.f64", GGUF_VT_FLOAT64, &f64);

	int32_t ai[5] = { 1, -2, 3, -4, 2147483647 };
	float af[3] = { 0.5f, -1e30f, 7 };
	uint8_t ab[4] = { 1, 0, 1, 1 };
	uint64_t au[2] = { 1, UINT64_MAX };
	gguf_w_arr(w, "a.i32", GGUF_VT_INT32, ai, 5);
	gguf_w_arr(w, "a.f32", GGUF_VT_FLOAT32, af, 3);
	gguf_w_arr(w, "a.bool", GGUF_VT_BOOL, ab, 4);
	gguf_w_arr(w, "a.u64", GGUF_VT_UINT64, au, 2);
	gguf_w_arr(w, "a.empty", GGUF_VT_UINT16, NULL, 0);
	const char *strs[] = { "zero", "", "with\0nul", "last" };
	uint64_t lens[] = { 4, 0, 8, 4 };
	gguf_w_arr_str(w, "a.str", strs, lens, 4);
	gguf_w_arr_str(w, "a.nostr", NULL, NULL, 0);
	sw_err e = { 0 };
	assert_int_equal(gguf_writer_save(w, path, &e), 0);
	gguf_writer_free(w);

	gguf_file *f = gguf_open(path, &e);
	if (!f)
		fail_msg("%s", e.msg);
	assert_int_equal(f->version, version);
	assert_int_equal(f->n_kv, 23);
	assert_int_equal(f->n_tensors, 0);
	assert_int_equal(f->alignment, 32);

	uint32_t u;
	int32_t i;
	float x;
	bool b;
	gguf_str s;
	assert_int_equal(gguf_get_u32(f, "t.u8", &u, &e), 0);
	assert_int_equal(u, 250);
	assert_int_equal(gguf_get_u32(f, "t.u16", &u, &e), 0);
	assert_int_equal(u, 65000);
	assert_int_equal(gguf_get_u32(f, "t.u32", &u, &e), 0);
	assert_int_equal(u, 4000000000u);
	assert_int_equal(gguf_get_u32(f, "t.u64small", &u, &e), 0);
	assert_int_equal(u, 77);
	assert_int_equal(gguf_get_i32(f, "t.i8", &i, &e), 0);
	assert_int_equal(i, -100);
	assert_int_equal(gguf_get_i32(f, "t.i16", &i, &e), 0);
	assert_int_equal(i, -30000);
	assert_int_equal(gguf_get_i32(f, "t.i32", &i, &e), 0);
	assert_int_equal(i, -123456);
	assert_int_equal(gguf_get_i32(f, "t.i64small", &i, &e), 0);
	assert_int_equal(i, -5);
	assert_int_equal(gguf_get_f32(f, "t.f32", &x, &e), 0);
	assert_true(x == 0.1f);
	assert_int_equal(gguf_get_f32(f, "t.f64", &x, &e), 0);
	assert_true(x == 3.25f);
	assert_int_equal(gguf_get_f32(f, "t.i32", &x, &e), 0);
	assert_true(x == -123456.0f);
	assert_int_equal(gguf_get_bool(f, "t.bool", &b, &e), 0);
	assert_true(b);
	assert_int_equal(gguf_get_bool(f, "t.false", &b, &e), 0);
	assert_false(b);
	assert_int_equal(gguf_get_str(f, "t.str", &s, &e), 0);
	assert_int_equal(s.n, 11);
	assert_memory_equal(s.p, "hello, gguf", 11);
	assert_int_equal(gguf_get_str(f, "t.empty", &s, &e), 0);
	assert_int_equal(s.n, 0);

	/* the raw 64-bit values survive */
	const gguf_kv *kv = gguf_find(f, "t.u64");
	assert_non_null(kv);
	assert_int_equal(kv->type, GGUF_VT_UINT64);
	uint64_t rv;
	memcpy(&rv, kv->val, 8);
	assert_true(rv == u64);
	kv = gguf_find(f, "t.i64");
	memcpy(&rv, kv->val, 8);
	assert_true((int64_t)rv == i64);

	/* type and range errors name the key, expected and found */
	assert_int_equal(gguf_get_u32(f, "t.i32", &u, &e), SW_EINVAL);
	assert_non_null(strstr(e.msg, "t.i32"));
	assert_non_null(strstr(e.msg, "-123456"));
	assert_int_equal(gguf_get_u32(f, "t.u64", &u, &e), SW_EINVAL);
	assert_int_equal(gguf_get_i32(f, "t.u32", &i, &e), SW_EINVAL);
	assert_int_equal(gguf_get_i32(f, "t.i64", &i, &e), SW_EINVAL);
	assert_int_equal(gguf_get_str(f, "t.u32", &s, &e), SW_EINVAL);
	assert_non_null(strstr(e.msg, "expected string, found u32"));
	assert_int_equal(gguf_get_bool(f, "t.u8", &b, &e), SW_EINVAL);
	assert_int_equal(gguf_get_f32(f, "t.str", &x, &e), SW_EINVAL);
	assert_int_equal(gguf_get_u32(f, "a.i32", &u, &e), SW_EINVAL);
	assert_int_equal(gguf_get_u32(f, "no.such.key", &u, &e), SW_ENOENT_KEY);
	assert_non_null(strstr(e.msg, "no.such.key"));
	assert_null(gguf_find(f, "t.u"));    /* no prefix matches */
	assert_null(gguf_find(f, "t.u8x"));

	uint32_t et;
	uint64_t n;
	assert_int_equal(gguf_get_arr(f, "a.i32", &et, &n, &e), 0);
	assert_int_equal(et, GGUF_VT_INT32);
	assert_int_equal(n, 5);
	const int32_t *pi = gguf_arr_data(gguf_find(f, "a.i32"));
	assert_true((uintptr_t)pi % _Alignof(int32_t) == 0);
	assert_memory_equal(pi, ai, sizeof(ai));
	const float *pf = gguf_arr_data(gguf_find(f, "a.f32"));
	assert_true((uintptr_t)pf % _Alignof(float) == 0);
	assert_memory_equal(pf, af, sizeof(af));
	assert_memory_equal(gguf_arr_data(gguf_find(f, "a.bool")), ab, sizeof(ab));
	assert_memory_equal(gguf_arr_data(gguf_find(f, "a.u64")), au, sizeof(au));
	assert_int_equal(gguf_get_arr(f, "a.empty", &et, &n, &e), 0);
	assert_int_equal(et, GGUF_VT_UINT16);
	assert_int_equal(n, 0);
	assert_int_equal(gguf_get_arr(f, "t.u8", &et, &n, &e), SW_EINVAL);

	kv = gguf_find(f, "a.str");
	assert_int_equal(gguf_get_arr(f, "a.str", &et, &n, &e), 0);
	assert_int_equal(et, GGUF_VT_STRING);
	assert_int_equal(n, 4);
	assert_null(gguf_arr_data(kv));
	for (uint64_t k = 0; k < 4; k++) {
		s = gguf_arr_str(f, kv, k);
		assert_int_equal(s.n, lens[k]);
		assert_memory_equal(s.p, strs[k], lens[k]);
	}
	s = gguf_arr_str(f, kv, 4); /* out of range: empty, no crash */
	assert_null(s.p);
	s = gguf_arr_str(f, gguf_find(f, "a.i32"), 0);
	assert_null(s.p);
	assert_int_equal(gguf_get_arr(f, "a.nostr", &et, &n, &e), 0);
	assert_int_equal(n, 0);

	gguf_close(f);
	unlink(path);
}

static void test_metadata_roundtrip_v3(void **state) { metadata_roundtrip(3); }
static void test_metadata_roundtrip_v2(void **state) { metadata_roundtrip(2); }

static void tensor_roundtrip(uint64_t alignment)
{
	gguf_writer *w = gguf_writer_new(3, alignment);
	float a[37], b[6 * 5 * 4 * 3];
	uint16_t h[64 * 3];
	uint8_t q[3 * 34];
	uint64_t ne_a[1] = { 37 }, ne_b[4] = { 6, 5, 4, 3 }, ne_h[2] = { 64, 3 }, ne_q[2] = { 32, 3 };

	for (int i = 0; i < 37; i++)
		a[i] = (float)i * 0.25f - 3;
	for (int i = 0; i < 360; i++)
		b[i] = (float)(i % 17) - 8;
	for (int i = 0; i < 192; i++)
		h[i] = (uint16_t)(i * 331);
	for (int i = 0; i < 102; i++)
		q[i] = (uint8_t)(i * 7 + 1);
	gguf_w_tensor(w, "a", GGML_T_F32, 1, ne_a, a, sizeof(a));
	gguf_w_tensor(w, "b4", GGML_T_F32, 4, ne_b, b, sizeof(b));
	gguf_w_tensor(w, "h", GGML_T_F16, 2, ne_h, h, sizeof(h));
	gguf_w_tensor(w, "q", GGML_T_Q8_0, 2, ne_q, q, sizeof(q));
	size_t n;
	uint8_t *buf = to_mem(w, &n);
	gguf_writer_free(w);

	gguf_file *f = open_ok(buf, n);
	assert_int_equal(f->alignment, alignment);
	assert_int_equal(f->n_tensors, 4);
	assert_int_equal((size_t)(f->data - f->base) % alignment, 0);
	const char *names[] = { "a", "b4", "h", "q" };
	const void *datas[] = { a, b, h, q };
	uint64_t sizes[] = { sizeof(a), sizeof(b), sizeof(h), sizeof(q) };
	for (int i = 0; i < 4; i++) {
		const gguf_tensor *t = gguf_tensor_find(f, names[i]);
		assert_non_null(t);
		assert_int_equal(t->nbytes, sizes[i]);
		assert_memory_equal(t->data, datas[i], sizes[i]);
		assert_int_equal(t->offset % alignment, 0);
		assert_int_equal(((const uint8_t *)t->data - f->base) % alignment, 0);
	}
	const gguf_tensor *t = gguf_tensor_find(f, "b4");
	assert_int_equal(t->n_dims, 4);
	assert_int_equal(t->ne[0], 6);
	assert_int_equal(t->ne[3], 3);
	assert_int_equal(t->n_elems, 360);
	t = gguf_tensor_find(f, "q");
	assert_int_equal(t->type, GGML_T_Q8_0);
	assert_int_equal(t->n_elems, 96);
	t = gguf_tensor_find(f, "a");
	assert_int_equal(t->ne[1], 1); /* unused dims read as 1 */
	assert_null(gguf_tensor_find(f, "b"));

	float out[360];
	sw_err e = { 0 };
	assert_int_equal(gguf_tensor_to_f32(f, gguf_tensor_find(f, "b4"), out, &e), 0);
	assert_memory_equal(out, b, sizeof(b));
	gguf_close(f);
	free(buf);
}

static void test_tensor_roundtrip(void **state)
{
	tensor_roundtrip(32);
	tensor_roundtrip(64);
	tensor_roundtrip(1);
}

static void test_dtype_table(void **state)
{
	assert_string_equal(ggml_dtype_name(GGML_T_Q4_1), "Q4_1");
	assert_string_equal(ggml_dtype_name(GGML_T_BF16), "BF16");
	assert_string_equal(ggml_dtype_name(99), "type#99");
	assert_int_equal(ggml_dtype_nbytes(GGML_T_Q4_0, 64), 36);
	assert_int_equal(ggml_dtype_nbytes(GGML_T_Q4_1, 32), 20);
	assert_int_equal(ggml_dtype_nbytes(GGML_T_Q8_0, 96), 102);
	assert_int_equal(ggml_dtype_nbytes(GGML_T_Q6_K, 256), 210);
	assert_int_equal(ggml_dtype_nbytes(GGML_T_Q8_0, 33), 0);
	assert_int_equal(ggml_dtype_nbytes(99, 32), 0);
	assert_int_equal(ggml_dtype_nbytes(GGML_T_F32, UINT64_MAX / 2), 0); /* overflow */
	assert_null(gguf_writer_new(1, 32));
	assert_null(gguf_writer_new(3, 48));
}

/* ---- malformed files ---------------------------------------------------- */

static void test_bad_header(void **state)
{
	size_t n;
	uint8_t *buf = small_file(&n, 32);
	buf[0] = 'X';
	expect_fail(buf, n, SW_EINVAL, "bad magic", NULL);
	buf[0] = 'G';
	put32(buf + 4, 1);
	expect_fail(buf, n, SW_ENOTSUP, "version 1", NULL);
	put32(buf + 4, 0x03000000); /* a big-endian v3 read as little-endian */
	expect_fail(buf, n, SW_ENOTSUP, "big-endian", NULL);
	put32(buf + 4, 4);
	expect_fail(buf, n, SW_ENOTSUP, "version 4", NULL);
	expect_fail(buf, 0, SW_EINVAL, "bad magic", NULL);
	put32(buf + 4, 2); /* v2 has the same layout: accepted */
	gguf_close(open_ok(buf, n));
	free(buf);

	sw_err e = { 0 };
	assert_null(gguf_open("/nonexistent/dir/x.gguf", &e));
	assert_int_equal(e.code, SW_EIO);
	assert_non_null(strstr(e.msg, "/nonexistent/dir/x.gguf"));
}

/* Every prefix of a valid file is either refused with a message, or (when
 * the cut falls in the final padding) parses to the same content. */
static void test_truncation_every_offset(void **state)
{
	size_t n;
	uint8_t *buf = small_file(&n, 32);
	gguf_file *full = open_ok(buf, n);
	int refused = 0, parsed = 0;
	for (size_t k = 0; k < n; k++) {
		uint8_t *copy = malloc(k ? k : 1);
		memcpy(copy, buf, k);
		sw_err e = { 0 };
		gguf_file *f = gguf_open_mem(copy, k, "cut.gguf", &e);
		if (!f) {
			assert_true(e.code < 0);
			assert_non_null(strstr(e.msg, "cut.gguf"));
			refused++;
		} else {
			assert_int_equal(f->n_kv, full->n_kv);
			assert_int_equal(f->n_tensors, full->n_tensors);
			for (uint64_t i = 0; i < f->n_tensors; i++) {
				assert_int_equal(f->tensors[i].nbytes, full->tensors[i].nbytes);
				assert_memory_equal(f->tensors[i].data, full->tensors[i].data, f->tensors[i].nbytes);
			}
			parsed++;
			gguf_close(f);
		}
		free(copy);
	}
	/* the last tensor (32 bytes of F32) is followed by no padding, so
	 * every proper prefix must lose data */
	assert_int_equal(parsed, 0);
	assert_int_equal(refused, (int)n);
	gguf_close(full);
	free(buf);
}

static void test_absurd_counts(void **state)
{
	size_t n;
	uint8_t *buf = small_file(&n, 32);
	uint8_t save[8];

	memcpy(save, buf + 16, 8);
	put64(buf + 16, UINT64_MAX); /* n_kv */
	expect_fail(buf, n, SW_EINVAL, "kv count", "cannot fit");
	put64(buf + 16, 1ull << 40);
	expect_fail(buf, n, SW_EINVAL, "kv count", NULL);
	memcpy(buf + 16, save, 8);

	memcpy(save, buf + 8, 8);
	put64(buf + 8, UINT64_MAX / 2); /* n_tensors */
	expect_fail(buf, n, SW_EINVAL, "tensor count", "cannot fit");
	put64(buf + 8, 4); /* one more than there is: runs into the data */
	expect_fail(buf, n, SW_EINVAL, NULL, NULL);
	memcpy(buf + 8, save, 8);

	/* key length */
	uint8_t *key = find_name(buf, n, "test.count");
	memcpy(save, key - 8, 8);
	put64(key - 8, UINT64_MAX);
	expect_fail(buf, n, SW_EINVAL, "key of kv 1", "length");
	put64(key - 8, n);
	expect_fail(buf, n, SW_EINVAL, "length", NULL);
	memcpy(key - 8, save, 8);

	/* string value length */
	uint8_t *arch = find_name(buf, n, "general.architecture") + strlen("general.architecture") + 4;
	memcpy(save, arch, 8);
	put64(arch, 1ull << 62);
	expect_fail(buf, n, SW_EINVAL, "string value of kv 'general.architecture'", NULL);
	memcpy(arch, save, 8);

	/* string array: count, then one element's length */
	uint8_t *arr = find_name(buf, n, "test.strs") + strlen("test.strs") + 4 + 4;
	memcpy(save, arr, 8);
	put64(arr, UINT64_MAX / 8);
	expect_fail(buf, n, SW_EINVAL, "test.strs", "strings");
	memcpy(arr, save, 8);
	put64(arr + 8 + 8 + 1, UINT64_MAX); /* length of string 1 */
	expect_fail(buf, n, SW_EINVAL, "string 1 of kv 'test.strs'", NULL);
	put64(arr + 8 + 8 + 1, 2);

	/* numeric array count: turn the string array into a u32 array */
	put32(arr - 4, GGUF_VT_UINT32);
	put64(arr, 1ull << 61);
	expect_fail(buf, n, SW_EINVAL, "test.strs", "elements");
	put32(arr - 4, GGUF_VT_ARRAY); /* nested arrays are refused */
	expect_fail(buf, n, SW_EINVAL, "test.strs", "array");
	put32(arr - 4, 13);
	expect_fail(buf, n, SW_EINVAL, "test.strs", NULL);
	put32(arr - 4, GGUF_VT_STRING);
	memcpy(arr, save, 8);

	/* unknown value type */
	uint8_t *cnt = find_name(buf, n, "test.count") + strlen("test.count");
	put32(cnt, 77);
	expect_fail(buf, n, SW_EINVAL, "unknown value type 77", NULL);
	put32(cnt, GGUF_VT_UINT32);

	gguf_close(open_ok(buf, n)); /* all restored */
	free(buf);
}

static void test_tensor_extents(void **state)
{
	size_t n;
	uint8_t *buf = small_file(&n, 32);

	uint8_t *off = tinfo_offset(buf, n, "cube");
	uint64_t good;
	memcpy(&good, off, 8);
	put64(off, good + 32); /* past the end */
	expect_fail(buf, n, SW_EINVAL, "tensor 'cube'", "outside");
	put64(off, UINT64_MAX - 31); /* offset + nbytes overflows */
	expect_fail(buf, n, SW_EINVAL, "tensor 'cube'", "outside");
	put64(off, good + 4);
	expect_fail(buf, n, SW_EINVAL, "tensor 'cube'", "not a multiple of the alignment 32");
	put64(off, good);

	uint8_t *nd = tinfo_ndims(buf, n, "vec");
	put32(nd, 0);
	expect_fail(buf, n, SW_EINVAL, "tensor 'vec'", "n_dims must be 1..4, found 0");
	put32(nd, 5);
	expect_fail(buf, n, SW_EINVAL, "tensor 'vec'", "found 5");
	put32(nd, 1);

	/* ne product overflow: mat is [32, 2]; make it [2^32, 2^32] */
	uint8_t *ne = tinfo_ndims(buf, n, "mat") + 4;
	put64(ne, 1ull << 32);
	put64(ne + 8, 1ull << 32);
	expect_fail(buf, n, SW_EINVAL, "tensor 'mat'", "overflows");
	put64(ne, 0);
	expect_fail(buf, n, SW_EINVAL, "tensor 'mat'", "ne[0] = 0");
	put64(ne, 33); /* Q8_0 rows must be whole blocks */
	put64(ne + 8, 2);
	expect_fail(buf, n, SW_EINVAL, "tensor 'mat'", "block size 32");
	put64(ne, 32);
	put64(ne + 8, 5); /* more block rows than the file holds after it */
	expect_fail(buf, n, SW_EINVAL, "tensor 'mat'", "outside");
	put64(ne + 8, 2);

	uint8_t *ty = tinfo_type(buf, n, "vec");
	put32(ty, 99);
	expect_fail(buf, n, SW_ENOTSUP, "tensor 'vec'", "unknown type 99");
	put32(ty, 4); /* removed Q4_2: unknown too */
	expect_fail(buf, n, SW_ENOTSUP, "tensor 'vec'", NULL);
	put32(ty, GGML_T_F32);

	gguf_close(open_ok(buf, n));
	free(buf);
}

static void test_duplicates_and_alignment_key(void **state)
{
	size_t n;
	uint64_t ne[1] = { 4 };
	float x[4] = { 0 };

	gguf_writer *w = gguf_writer_new(3, 32);
	gguf_w_tensor(w, "same", GGML_T_F32, 1, ne, x, sizeof(x));
	gguf_w_tensor(w, "other", GGML_T_F32, 1, ne, x, sizeof(x));
	gguf_w_tensor(w, "same", GGML_T_F32, 1, ne, x, sizeof(x));
	uint8_t *buf = to_mem(w, &n);
	gguf_writer_free(w);
	expect_fail(buf, n, SW_EINVAL, "duplicate tensor name 'same'", NULL);
	free(buf);

	w = gguf_writer_new(3, 32);
	gguf_w_u32(w, "k", 1);
	gguf_w_str(w, "k2", "x");
	gguf_w_u32(w, "k", 2);
	buf = to_mem(w, &n);
	gguf_writer_free(w);
	expect_fail(buf, n, SW_EINVAL, "duplicate metadata key 'k'", NULL);
	free(buf);

	const uint32_t bad[] = { 0, 48, 3 };
	for (int i = 0; i < 3; i++) {
		w = gguf_writer_new(3, 32);
		gguf_w_u32(w, "general.alignment", bad[i]);
		buf = to_mem(w, &n);
		gguf_writer_free(w);
		expect_fail(buf, n, SW_EINVAL, "general.alignment", "power of two");
		free(buf);
	}
	w = gguf_writer_new(3, 32);
	gguf_w_str(w, "general.alignment", "32");
	buf = to_mem(w, &n);
	gguf_writer_free(w);
	expect_fail(buf, n, SW_EINVAL, "general.alignment", "expected an integer, found string");
	free(buf);
}

static void test_unsupported_type_at_dequant(void **state)
{
	size_t n;
	uint64_t ne[2] = { 256, 2 };
	uint8_t blocks[2 * 84] = { 0 };
	gguf_writer *w = gguf_writer_new(3, 32);
	gguf_w_tensor(w, "blk.0.ffn_q2k.weight", GGML_T_Q2_K, 2, ne, blocks, sizeof(blocks));
	uint8_t *buf = to_mem(w, &n);
	gguf_writer_free(w);
	gguf_file *f = open_ok(buf, n);
	const gguf_tensor *t = gguf_tensor_find(f, "blk.0.ffn_q2k.weight");
	assert_non_null(t);
	assert_int_equal(t->nbytes, sizeof(blocks));
	float out[512];
	sw_err e = { 0 };
	assert_int_equal(gguf_tensor_to_f32(f, t, out, &e), SW_ENOTSUP);
	assert_non_null(strstr(e.msg, "blk.0.ffn_q2k.weight"));
	assert_non_null(strstr(e.msg, "Q2_K"));
	gguf_close(f);
	free(buf);
}

/* A file with no tensors may end right after its metadata (no padding). */
static void test_no_tensors_no_padding(void **state)
{
	size_t n;
	gguf_writer *w = gguf_writer_new(3, 32);
	uint8_t v = 1;
	gguf_w_scalar(w, "x", GGUF_VT_UINT8, &v);
	uint8_t *buf = to_mem(w, &n);
	gguf_writer_free(w);
	size_t unpadded = 24 + 8 + 1 + 4 + 1;
	assert_true(n >= unpadded);
	gguf_file *f = open_ok(buf, unpadded);
	assert_int_equal(f->n_kv, 1);
	gguf_close(f);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metadata_roundtrip_v3),
		cmocka_unit_test(test_metadata_roundtrip_v2),
		cmocka_unit_test(test_tensor_roundtrip),
		cmocka_unit_test(test_dtype_table),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_truncation_every_offset),
		cmocka_unit_test(test_absurd_counts),
		cmocka_unit_test(test_tensor_extents),
		cmocka_unit_test(test_duplicates_and_alignment_key),
		cmocka_unit_test(test_unsupported_type_at_dequant),
		cmocka_unit_test(test_no_tensors_no_padding),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* GGUF v2/v3 reader, dequantizers and a minimal writer. The reader validates
 * every count, length and extent against the file size before it touches or
 * allocates anything, so a hostile file gets an error, never an out-of-bounds
 * read. Not a general ggml: no compute, and quantizers only for the simple
 * round-to-nearest block formats (Q4_0, Q4_1, Q8_0) that tests need. */
#include "gguf.h"
#include "core/output.h"
#include "core/fileio.h"
#include "core/timing.h"
#include "core/wformat.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/half.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32

/* ---- type tables: the weight formats are core/wformat.h's ---------------- */

const char *ggml_dtype_name(uint32_t type)
{
	/* Ring of buffers so a message can name two unknown types. */
	static _Thread_local char buf[4][16];
	static _Thread_local int next;
	const sw_wformat *t = sw_wformat_get(type);
	if (t)
		return t->name;
	char *b = buf[next++ & 3];
	snprintf(b, sizeof(buf[0]), "type#%u", type);
	return b;
}

uint64_t ggml_dtype_nbytes(uint32_t type, uint64_t n)
{
	return sw_wformat_nbytes(type, n);
}

static const char *vtype_name(uint32_t t)
{
	static const char *names[] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
		"string", "array", "u64", "i64", "f64",
	};
	return t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

/* Size of one scalar value; 0 for string/array/unknown. */
static uint32_t vtype_size(uint32_t t)
{
	switch (t) {
	case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
	case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
	case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
	case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
	default: return 0;
	}
}

/* ---- little-endian loads (the mmap is unaligned in general) ------------- */

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t ld64(const uint8_t *p) { return ld32(p) | (uint64_t)ld32(p + 4) << 32; }

/* ---- half / bfloat16: kernels/half.h; these names stay for the callers
 * outside formats/ (engine, tests) ---------------------------------------- */

float gguf_f16_to_f32(uint16_t h) { return sw_f16_to_f32(h); }
uint16_t gguf_f32_to_f16(float f) { return sw_f32_to_f16(f); }
float gguf_bf16_to_f32(uint16_t h) { return sw_bf16_to_f32(h); }
uint16_t gguf_f32_to_bf16(float f) { return sw_f32_to_bf16(f); }

/* ---- parsing ------------------------------------------------------------ */

struct cur {
	const gguf_file *f;
	size_t pos;
	sw_err *err;
};

static size_t cur_left(const struct cur *c) { return c->f->size - c->pos; }

static int need(struct cur *c, uint64_t n, const char *what)
{
	if (n > cur_left(c))
		return sw_errf(c->err, SW_EINVAL,
			       "%s: truncated reading %s at byte %zu (need %llu bytes, %zu left)",
			       c->f->path, what, c->pos, (unsigned long long)n, cur_left(c));
	return 0;
}

static int rd_u32(struct cur *c, uint32_t *v, const char *what)
{
	int rc = need(c, 4, what);
	if (rc)
		return rc;
	*v = ld32(c->f->base + c->pos);
	c->pos += 4;
	return 0;
}

static int rd_u64(struct cur *c, uint64_t *v, const char *what)
{
	int rc = need(c, 8, what);
	if (rc)
		return rc;
	*v = ld64(c->f->base + c->pos);
	c->pos += 8;
	return 0;
}

static int rd_str(struct cur *c, gguf_str *s, const char *what)
{
	uint64_t n;
	int rc = rd_u64(c, &n, what);
	if (rc)
		return rc;
	if (n > cur_left(c))
		return sw_errf(c->err, SW_EINVAL,
			       "%s: %s at byte %zu has length %llu but only %zu bytes remain",
			       c->f->path, what, c->pos - 8, (unsigned long long)n, cur_left(c));
	s->p = (const char *)c->f->base + c->pos;
	s->n = n;
	c->pos += n;
	return 0;
}

static bool str_eq(gguf_str a, const char *b, size_t bn)
{
	return a.n == bn && memcmp(a.p, b, bn) == 0;
}

/* Printable form of a file string for messages (truncated, NUL-safe). */
static const char *str_show(gguf_str s)
{
	static _Thread_local char buf[4][96];
	static _Thread_local int next;
	char *b = buf[next++ & 3];
	size_t n = s.n < 80 ? s.n : 80, j = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		b[j++] = ch >= 32 && ch < 127 ? (char)ch : '?';
	}
	if (s.n > n) {
		memcpy(b + j, "...", 3);
		j += 3;
	}
	b[j] = 0;
	return b;
}

static int parse_kv(struct cur *c, gguf_file *f, uint64_t i)
{
	gguf_kv *kv = &f->kv[i];
	char what[64];
	int rc;

	snprintf(what, sizeof(what), "key of kv %llu", (unsigned long long)i);
	if ((rc = rd_str(c, &kv->key, what)))
		return rc;
	snprintf(what, sizeof(what), "type of kv '%s'", str_show(kv->key));
	if ((rc = rd_u32(c, &kv->type, what)))
		return rc;
	if (kv->type == GGUF_VT_STRING) {
		gguf_str s;
		kv->val = f->base + c->pos;
		snprintf(what, sizeof(what), "string value of kv '%s'", str_show(kv->key));
		return rd_str(c, &s, what);
	}
	if (kv->type != GGUF_VT_ARRAY) {
		uint32_t sz = vtype_size(kv->type);
		if (!sz)
			return sw_errf(c->err, SW_EINVAL, "%s: kv '%s' has unknown value type %u",
				       f->path, str_show(kv->key), kv->type);
		snprintf(what, sizeof(what), "value of kv '%s'", str_show(kv->key));
		if ((rc = need(c, sz, what)))
			return rc;
		kv->val = f->base + c->pos;
		c->pos += sz;
		return 0;
	}

	snprintf(what, sizeof(what), "array header of kv '%s'", str_show(kv->key));
	if ((rc = rd_u32(c, &kv->arr_type, what)) || (rc = rd_u64(c, &kv->arr_n, what)))
		return rc;
	if (kv->arr_type == GGUF_VT_STRING) {
		/* Each string costs at least its 8-byte length, which bounds
		 * the offset table by the bytes left before we allocate it. */
		if (kv->arr_n > cur_left(c) / 8)
			return sw_errf(c->err, SW_EINVAL,
				       "%s: kv '%s' claims %llu strings but only %zu bytes remain",
				       f->path, str_show(kv->key), (unsigned long long)kv->arr_n, cur_left(c));
		uint64_t *off = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof(*off));
		if (!off)
			return sw_errf(c->err, SW_ENOMEM, "%s: out of memory for kv '%s'",
				       f->path, str_show(kv->key));
		f->arr_str_off[i] = off;
		kv->val = f->base + c->pos;
		for (uint64_t j = 0; j < kv->arr_n; j++) {
			gguf_str s;
			snprintf(what, sizeof(what), "string %llu of kv '%s'",
				 (unsigned long long)j, str_show(kv->key));
			if ((rc = rd_str(c, &s, what)))
				return rc;
			off[j] = (uint64_t)((const uint8_t *)s.p - f->base);
		}
		return 0;
	}
	uint32_t sz = vtype_size(kv->arr_type);
	if (!sz)
		return sw_errf(c->err, SW_EINVAL,
			       "%s: kv '%s' is an array of %s (type %u); only arrays of scalars or strings are supported",
			       f->path, str_show(kv->key), vtype_name(kv->arr_type), kv->arr_type);
	if (kv->arr_n > cur_left(c) / sz)
		return sw_errf(c->err, SW_EINVAL,
			       "%s: kv '%s' claims %llu elements of %u bytes but only %zu bytes remain",
			       f->path, str_show(kv->key), (unsigned long long)kv->arr_n, sz, cur_left(c));
	/* Numeric arrays are copied to aligned memory so callers may index
	 * them as float/int32 arrays; the file offsets are arbitrary. */
	size_t bytes = (size_t)kv->arr_n * sz;
	uint8_t *copy = malloc(bytes ? bytes : 1);
	if (!copy)
		return sw_errf(c->err, SW_ENOMEM, "%s: out of memory for kv '%s'", f->path, str_show(kv->key));
	memcpy(copy, f->base + c->pos, bytes);
	kv->val = copy;
	c->pos += bytes;
	return 0;
}

static int parse_tensor_info(struct cur *c, gguf_file *f, uint64_t i)
{
	gguf_tensor *t = &f->tensors[i];
	char what[64];
	int rc;

	snprintf(what, sizeof(what), "name of tensor %llu", (unsigned long long)i);
	if ((rc = rd_str(c, &t->name, what)))
		return rc;
	snprintf(what, sizeof(what), "n_dims of tensor '%s'", str_show(t->name));
	if ((rc = rd_u32(c, &t->n_dims, what)))
		return rc;
	if (t->n_dims < 1 || t->n_dims > 4)
		return sw_errf(c->err, SW_EINVAL, "%s: tensor '%s': n_dims must be 1..4, found %u",
			       f->path, str_show(t->name), t->n_dims);
	t->n_elems = 1;
	for (uint32_t d = 0; d < 4; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		snprintf(what, sizeof(what), "ne[%u] of tensor '%s'", d, str_show(t->name));
		if ((rc = rd_u64(c, &t->ne[d], what)))
			return rc;
		if (t->ne[d] == 0 || t->ne[d] > INT64_MAX)
			return sw_errf(c->err, SW_EINVAL, "%s: tensor '%s': ne[%u] = %llu out of range 1..2^63-1",
				       f->path, str_show(t->name), d, (unsigned long long)t->ne[d]);
		if (__builtin_mul_overflow(t->n_elems, t->ne[d], &t->n_elems) || t->n_elems > INT64_MAX)
			return sw_errf(c->err, SW_EINVAL, "%s: tensor '%s': element count overflows",
				       f->path, str_show(t->name));
	}
	snprintf(what, sizeof(what), "type of tensor '%s'", str_show(t->name));
	if ((rc = rd_u32(c, &t->type, what)))
		return rc;
	const sw_wformat *tr = sw_wformat_get(t->type);
	if (!tr)
		return sw_errf(c->err, SW_ENOTSUP, "%s: tensor '%s' has unknown type %u",
			       f->path, str_show(t->name), t->type);
	if (t->ne[0] % tr->block)
		return sw_errf(c->err, SW_EINVAL,
			       "%s: tensor '%s': ne[0] = %llu is not a multiple of the %s block size %u",
			       f->path, str_show(t->name), (unsigned long long)t->ne[0], tr->name, tr->block);
	t->nbytes = ggml_dtype_nbytes(t->type, t->n_elems);
	if (!t->nbytes)
		return sw_errf(c->err, SW_EINVAL, "%s: tensor '%s': byte size overflows",
			       f->path, str_show(t->name));
	snprintf(what, sizeof(what), "offset of tensor '%s'", str_show(t->name));
	return rd_u64(c, &t->offset, what);
}

static int cmp_str(const gguf_str *a, const gguf_str *b)
{
	size_t n = a->n < b->n ? a->n : b->n;
	int r = memcmp(a->p, b->p, n);
	if (r)
		return r;
	return a->n < b->n ? -1 : a->n > b->n;
}

static int cmp_kv_key(const void *a, const void *b)
{
	return cmp_str(&(*(const gguf_kv *const *)a)->key, &(*(const gguf_kv *const *)b)->key);
}

static int cmp_tensor_name(const void *a, const void *b)
{
	return cmp_str(&(*(const gguf_tensor *const *)a)->name, &(*(const gguf_tensor *const *)b)->name);
}

/* Sort pointers, compare neighbours: O(n log n) even for a hostile count. */
static int check_duplicates(gguf_file *f, sw_err *err)
{
	uint64_t n = f->n_kv > f->n_tensors ? f->n_kv : f->n_tensors;
	const void **idx = malloc((n ? n : 1) * sizeof(*idx));
	int rc = 0;
	if (!idx)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", f->path);
	for (uint64_t i = 0; i < f->n_kv; i++)
		idx[i] = &f->kv[i];
	qsort(idx, f->n_kv, sizeof(*idx), cmp_kv_key);
	for (uint64_t i = 1; i < f->n_kv; i++) {
		if (!cmp_kv_key(&idx[i - 1], &idx[i])) {
			rc = sw_errf(err, SW_EINVAL, "%s: duplicate metadata key '%s'",
				     f->path, str_show(((const gguf_kv *)idx[i])->key));
			goto out_free_idx;
		}
	}
	for (uint64_t i = 0; i < f->n_tensors; i++)
		idx[i] = &f->tensors[i];
	qsort(idx, f->n_tensors, sizeof(*idx), cmp_tensor_name);
	for (uint64_t i = 1; i < f->n_tensors; i++) {
		if (!cmp_tensor_name(&idx[i - 1], &idx[i])) {
			rc = sw_errf(err, SW_EINVAL, "%s: duplicate tensor name '%s'",
				     f->path, str_show(((const gguf_tensor *)idx[i])->name));
			goto out_free_idx;
		}
	}
out_free_idx:
	free(idx);
	return rc;
}

static int parse(gguf_file *f, sw_err *err)
{
	struct cur c = { .f = f, .pos = 0, .err = err };
	int rc;

	if (f->size < 4 || memcmp(f->base, GGUF_MAGIC, 4) != 0)
		return sw_errf(err, SW_EINVAL, "%s: not a GGUF file (bad magic, expected \"GGUF\")", f->path);
	c.pos = 4;
	if ((rc = rd_u32(&c, &f->version, "version")))
		return rc;
	/* A byte-swapped version has its small number in the high bytes. */
	if ((f->version & 0xffff0000u) && !(f->version & 0xffff))
		return sw_errf(err, SW_ENOTSUP, "%s: big-endian GGUF (version field reads 0x%08x); only little-endian files are supported",
			       f->path, f->version);
	if (f->version == 1)
		return sw_errf(err, SW_ENOTSUP, "%s: GGUF version 1 is not supported (expected 2 or 3)", f->path);
	if (f->version != 2 && f->version != 3)
		return sw_errf(err, SW_ENOTSUP, "%s: unsupported GGUF version %u (expected 2 or 3)", f->path, f->version);
	if ((rc = rd_u64(&c, &f->n_tensors, "tensor count")) || (rc = rd_u64(&c, &f->n_kv, "kv count")))
		return rc;

	/* Minimum encodings: a kv is key length (8) + type (4) + 1 value byte;
	 * a tensor info is name length (8) + n_dims (4) + ne[0] (8) + type (4)
	 * + offset (8). Counts beyond what the bytes left can hold are lies. */
	if (f->n_kv > cur_left(&c) / 13)
		return sw_errf(err, SW_EINVAL, "%s: kv count %llu cannot fit in the %zu bytes left",
			       f->path, (unsigned long long)f->n_kv, cur_left(&c));
	if (f->n_tensors > cur_left(&c) / 32)
		return sw_errf(err, SW_EINVAL, "%s: tensor count %llu cannot fit in the %zu bytes left",
			       f->path, (unsigned long long)f->n_tensors, cur_left(&c));

	f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof(*f->kv));
	f->arr_str_off = calloc(f->n_kv ? f->n_kv : 1, sizeof(*f->arr_str_off));
	f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof(*f->tensors));
	if (!f->kv || !f->arr_str_off || !f->tensors)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory for %llu kvs, %llu tensors", f->path,
			       (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors);

	for (uint64_t i = 0; i < f->n_kv; i++) {
		/* mark as scalar until parsed so gguf_close never frees a
		 * file pointer as a numeric-array copy */
		f->kv[i].type = GGUF_VT_UINT8;
		if ((rc = parse_kv(&c, f, i))) {
			/* keep only fully parsed kvs (plus this one's copy) */
			f->n_kv = i + 1;
			if (f->kv[i].type != GGUF_VT_ARRAY || f->kv[i].arr_type == GGUF_VT_STRING)
				f->kv[i].val = NULL;
			return rc;
		}
	}

	f->alignment = GGUF_DEFAULT_ALIGNMENT;
	if (gguf_find(f, "general.alignment")) {
		uint32_t a;
		if ((rc = gguf_get_u32(f, "general.alignment", &a, err)))
			return sw_err_prefix(err, "%s", f->path);
		if (a == 0 || (a & (a - 1)))
			return sw_errf(err, SW_EINVAL, "%s: general.alignment must be a power of two, found %u",
				       f->path, a);
		f->alignment = a;
	}

	for (uint64_t i = 0; i < f->n_tensors; i++)
		if ((rc = parse_tensor_info(&c, f, i)))
			return rc;

	uint64_t data_off = c.pos;
	if (data_off % f->alignment)
		data_off += f->alignment - data_off % f->alignment;
	if (data_off > f->size) {
		if (f->n_tensors)
			return sw_errf(err, SW_EINVAL, "%s: truncated: data section starts at byte %llu past the end (%zu bytes)",
				       f->path, (unsigned long long)data_off, f->size);
		data_off = f->size; /* no tensors: padding may be absent */
	}
	f->data = f->base + data_off;
	uint64_t data_size = f->size - data_off;

	for (uint64_t i = 0; i < f->n_tensors; i++) {
		gguf_tensor *t = &f->tensors[i];
		if (t->offset % f->alignment)
			return sw_errf(err, SW_EINVAL, "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
				       f->path, str_show(t->name), (unsigned long long)t->offset,
				       (unsigned long long)f->alignment);
		if (t->offset > data_size || t->nbytes > data_size - t->offset)
			return sw_errf(err, SW_EINVAL,
				       "%s: tensor '%s': data [%llu, +%llu) lies outside the %llu-byte data section",
				       f->path, str_show(t->name), (unsigned long long)t->offset,
				       (unsigned long long)t->nbytes, (unsigned long long)data_size);
		t->data = f->data + t->offset;
	}
	return check_duplicates(f, err);
}

static gguf_file *file_new(const char *name)
{
	gguf_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->path = strdup(name);
	if (!f->path) {
		free(f);
		return NULL;
	}
	return f;
}

gguf_file *gguf_open_mem(const void *buf, size_t size, const char *name, sw_err *err)
{
	gguf_file *f = file_new(name ? name : "<memory>");
	if (!f) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory", name ? name : "<memory>");
		return NULL;
	}
	f->base = buf;
	f->size = buf ? size : 0;
	if (parse(f, err)) {
		gguf_close(f);
		return NULL;
	}
	return f;
}

gguf_file *gguf_open(const char *path, sw_err *err)
{
	struct stat st;
	gguf_file *f = NULL;
	int fd = sw_open_regular(path, err); /* never blocks on a FIFO */
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0) {
		sw_errf(err, SW_EIO, "%s: cannot stat: %s", path, strerror(errno));
		goto out_close_fd;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < 4) {
		sw_errf(err, SW_EINVAL, "%s: not a GGUF file (%s)", path,
			S_ISREG(st.st_mode) ? "shorter than the 4-byte magic" : "not a regular file");
		goto out_close_fd;
	}
	f = file_new(path);
	if (!f) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory", path);
		goto out_close_fd;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		sw_errf(err, SW_EIO, "%s: cannot mmap %lld bytes: %s", path, (long long)st.st_size, strerror(errno));
		gguf_close(f);
		f = NULL;
		goto out_close_fd;
	}
	f->base = m;
	f->size = (size_t)st.st_size;
	f->mapped = true;
	if (parse(f, err)) {
		gguf_close(f);
		f = NULL;
	}
out_close_fd:
	close(fd);
	return f;
}

void gguf_close(gguf_file *f)
{
	if (!f)
		return;
	for (uint64_t i = 0; f->kv && i < f->n_kv; i++) {
		if (f->arr_str_off)
			free(f->arr_str_off[i]);
		if (f->kv[i].type == GGUF_VT_ARRAY && f->kv[i].arr_type != GGUF_VT_STRING)
			free((void *)f->kv[i].val);
	}
	free(f->arr_str_off);
	free(f->kv);
	free(f->tensors);
	if (f->mapped)
		munmap((void *)f->base, f->size);
	free((void *)f->path);
	free(f);
}

/* ---- metadata getters --------------------------------------------------- */

const gguf_kv *gguf_find(const gguf_file *f, const char *key)
{
	size_t n = strlen(key);
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (str_eq(f->kv[i].key, key, n))
			return &f->kv[i];
	return NULL;
}

static int find_or_err(const gguf_file *f, const char *key, const gguf_kv **kv, sw_err *err)
{
	*kv = gguf_find(f, key);
	if (!*kv)
		return sw_errf(err, SW_ENOENT_KEY, "%s: missing metadata key '%s'", f->path, key);
	return 0;
}

static int type_err(const gguf_file *f, const char *key, const char *expected,
		    const gguf_kv *kv, sw_err *err)
{
	return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected %s, found %s", f->path, key,
		       expected, vtype_name(kv->type));
}

/* Integers of any width as a signed 128-bit-free pair: is it negative, and
 * its magnitude. Returns false for non-integer types. */
static bool kv_int(const gguf_kv *kv, bool *neg, uint64_t *mag)
{
	int64_t s;
	*neg = false;
	switch (kv->type) {
	case GGUF_VT_UINT8: *mag = kv->val[0]; return true;
	case GGUF_VT_UINT16: *mag = ld16(kv->val); return true;
	case GGUF_VT_UINT32: *mag = ld32(kv->val); return true;
	case GGUF_VT_UINT64: *mag = ld64(kv->val); return true;
	case GGUF_VT_INT8: s = (int8_t)kv->val[0]; break;
	case GGUF_VT_INT16: s = (int16_t)ld16(kv->val); break;
	case GGUF_VT_INT32: s = (int32_t)ld32(kv->val); break;
	case GGUF_VT_INT64: s = (int64_t)ld64(kv->val); break;
	default: return false;
	}
	*neg = s < 0;
	*mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
	return true;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, sw_err *err)
{
	const gguf_kv *kv;
	bool neg;
	uint64_t mag;
	int rc = find_or_err(f, key, &kv, err);
	if (rc)
		return rc;
	if (!kv_int(kv, &neg, &mag))
		return type_err(f, key, "an integer", kv, err);
	if (neg || mag > UINT32_MAX)
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected a value in 0..%u, found %s%llu",
			       f->path, key, UINT32_MAX, neg ? "-" : "", (unsigned long long)mag);
	*out = (uint32_t)mag;
	return 0;
}

int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out, sw_err *err)
{
	const gguf_kv *kv;
	bool neg;
	uint64_t mag;
	int rc = find_or_err(f, key, &kv, err);
	if (rc)
		return rc;
	if (!kv_int(kv, &neg, &mag))
		return type_err(f, key, "an integer", kv, err);
	if (mag > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX))
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected a value in %d..%d, found %s%llu",
			       f->path, key, INT32_MIN, INT32_MAX, neg ? "-" : "", (unsigned long long)mag);
	*out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
	return 0;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, sw_err *err)
{
	const gguf_kv *kv;
	bool neg;
	uint64_t mag;
	int rc = find_or_err(f, key, &kv, err);
	if (rc)
		return rc;
	if (kv->type == GGUF_VT_FLOAT32) {
		uint32_t u = ld32(kv->val);
		memcpy(out, &u, sizeof(*out));
	} else if (kv->type == GGUF_VT_FLOAT64) {
		uint64_t u = ld64(kv->val);
		double d;
		memcpy(&d, &u, sizeof(d));
		*out = (float)d;
	} else if (kv_int(kv, &neg, &mag)) {
		*out = neg ? -(float)mag : (float)mag;
	} else {
		return type_err(f, key, "a number", kv, err);
	}
	return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out, sw_err *err)
{
	const gguf_kv *kv;
	int rc = find_or_err(f, key, &kv, err);
	if (rc)
		return rc;
	if (kv->type != GGUF_VT_BOOL)
		return type_err(f, key, "bool", kv, err);
	*out = kv->val[0] != 0;
	return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, sw_err *err)
{
	const gguf_kv *kv;
	int rc = find_or_err(f, key, &kv, err);
	if (rc)
		return rc;
	if (kv->type != GGUF_VT_STRING)
		return type_err(f, key, "string", kv, err);
	out->n = ld64(kv->val);
	out->p = (const char *)kv->val + 8;
	return 0;
}

int gguf_get_arr(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *n, sw_err *err)
{
	const gguf_kv *kv;
	int rc = find_or_err(f, key, &kv, err);
	if (rc)
		return rc;
	if (kv->type != GGUF_VT_ARRAY)
		return type_err(f, key, "array", kv, err);
	*elem_type = kv->arr_type;
	*n = kv->arr_n;
	return 0;
}

const void *gguf_arr_data(const gguf_kv *kv)
{
	if (kv->type != GGUF_VT_ARRAY || kv->arr_type == GGUF_VT_STRING)
		return NULL;
	return kv->val;
}

gguf_str gguf_arr_str(const gguf_file *f, const gguf_kv *kv, uint64_t i)
{
	gguf_str s = { NULL, 0 };
	if (kv < f->kv || kv >= f->kv + f->n_kv || kv->type != GGUF_VT_ARRAY ||
	    kv->arr_type != GGUF_VT_STRING || i >= kv->arr_n)
		return s;
	uint64_t off = f->arr_str_off[kv - f->kv][i];
	s.p = (const char *)f->base + off;
	s.n = ld64(f->base + off - 8);
	return s;
}

const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name)
{
	size_t n = strlen(name);
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (str_eq(f->tensors[i].name, name, n))
			return &f->tensors[i];
	return NULL;
}

/* ---- dequantization: core/wformat.c's, one block at a time ---------------- */

bool gguf_dtype_can_dequantize(uint32_t type)
{
	const sw_wformat *t = sw_wformat_get(type);
	return t && t->dequant;
}

int gguf_dequantize(uint32_t type, const void *src, uint64_t n, float *out)
{
	return sw_wformat_dequant(type, src, n, out);
}

int gguf_tensor_to_f32(const gguf_file *f, const gguf_tensor *t, float *out, sw_err *err)
{
	if (!gguf_dtype_can_dequantize(t->type))
		return sw_errf(err, SW_ENOTSUP, "%s: tensor '%s' has type %s, which cannot be dequantized (supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K)",
			       f->path, str_show(t->name), ggml_dtype_name(t->type));
	int rc = gguf_dequantize(t->type, t->data, t->n_elems, out);
	if (rc)
		return sw_errf(err, rc, "%s: tensor '%s': cannot dequantize %llu elements of %s",
			       f->path, str_show(t->name), (unsigned long long)t->n_elems, ggml_dtype_name(t->type));
	return 0;
}

/* ---- the finite scan ---------------------------------------------------- */

int gguf_tensor_check_finite(const gguf_file *f, const gguf_tensor *t, sw_err *err)
{
	const sw_wformat *w = sw_wformat_get(t->type); /* the reader refuses a type without a row */
	const int64_t bad = w ? sw_wformat_find_nonfinite(w, t->data, t->n_elems) : -1;
	if (bad < 0)
		return 0;
	char what[160];
	sw_wformat_describe(w, t->data, bad, what, sizeof(what));
	return sw_errf(err, SW_EINVAL, "%s: tensor '%s' (%s, %llu elements): expected finite values, "
	               "found a non-finite one: %s", f->path, str_show(t->name), w->name,
	               (unsigned long long)t->n_elems, what);
}

int gguf_check_finite(const gguf_file *f, sw_wscan_cost *cost, sw_err *err)
{
	const double t0 = sw_now_s();
	uint64_t bytes = 0;
	int rc = 0;
	for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
		rc = gguf_tensor_check_finite(f, &f->tensors[i], err);
		bytes += f->tensors[i].nbytes;
	}
	if (cost) {
		cost->bytes += bytes;
		cost->tensors += f->n_tensors;
		cost->seconds += sw_now_s() - t0;
	}
	return rc;
}

/* ---- quantization (ggml reference round-to-nearest) --------------------- */

static void st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* quantize_row_q4_0_ref: d maps the signed extreme to -8, so values of the
 * other sign reach at most +8, which clamps to 15 (one step of error). */
static void q4_0_block(const float *x, uint8_t *b)
{
	float amax = 0, max = 0;
	for (int j = 0; j < 32; j++) {
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	}
	float d = max / -8, id = d ? 1.0f / d : 0.0f;
	st16(b, sw_f32_to_f16(d));
	for (int j = 0; j < 16; j++) {
		float x0 = x[j] * id, x1 = x[16 + j] * id;
		uint8_t i0 = (uint8_t)(int8_t)(x0 + 8.5f), i1 = (uint8_t)(int8_t)(x1 + 8.5f);
		i0 = i0 < 15 ? i0 : 15;
		i1 = i1 < 15 ? i1 : 15;
		b[2 + j] = (uint8_t)(i0 | i1 << 4);
	}
}

static void q4_1_block(const float *x, uint8_t *b)
{
	float min = INFINITY, max = -INFINITY;
	for (int j = 0; j < 32; j++) {
		if (x[j] < min)
			min = x[j];
		if (x[j] > max)
			max = x[j];
	}
	float d = (max - min) / 15, id = d ? 1.0f / d : 0.0f;
	st16(b, sw_f32_to_f16(d));
	st16(b + 2, sw_f32_to_f16(min));
	for (int j = 0; j < 16; j++) {
		float x0 = (x[j] - min) * id, x1 = (x[16 + j] - min) * id;
		uint8_t i0 = (uint8_t)(int8_t)(x0 + 0.5f), i1 = (uint8_t)(int8_t)(x1 + 0.5f);
		i0 = i0 < 15 ? i0 : 15;
		i1 = i1 < 15 ? i1 : 15;
		b[4 + j] = (uint8_t)(i0 | i1 << 4);
	}
}

static void q8_0_block(const float *x, uint8_t *b)
{
	float amax = 0;
	for (int j = 0; j < 32; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	float d = amax / 127, id = d ? 1.0f / d : 0.0f;
	st16(b, sw_f32_to_f16(d));
	for (int j = 0; j < 32; j++)
		b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

uint64_t gguf_quantize(uint32_t type, const float *x, uint64_t n, void *out)
{
	uint8_t *o = out;
	void (*blk)(const float *, uint8_t *) = NULL;
	switch (type) {
	case GGML_T_F32:
		memcpy(out, x, n * sizeof(*x));
		return n * sizeof(*x);
	case GGML_T_F16:
		for (uint64_t i = 0; i < n; i++)
			st16(o + 2 * i, sw_f32_to_f16(x[i]));
		return 2 * n;
	case GGML_T_BF16:
		for (uint64_t i = 0; i < n; i++)
			st16(o + 2 * i, sw_f32_to_bf16(x[i]));
		return 2 * n;
	case GGML_T_Q4_0: blk = q4_0_block; break;
	case GGML_T_Q4_1: blk = q4_1_block; break;
	case GGML_T_Q8_0: blk = q8_0_block; break;
	default: return 0;
	}
	const sw_wformat *tr = sw_wformat_get(type);
	if (n % tr->block)
		return 0;
	for (uint64_t i = 0; i < n / tr->block; i++)
		blk(x + i * tr->block, o + i * tr->bytes);
	return n / tr->block * tr->bytes;
}

/* ---- writer ------------------------------------------------------------- */

struct buf {
	uint8_t *p;
	size_t n, cap;
};

struct wtensor {
	char *name;
	uint32_t type, n_dims;
	uint64_t ne[4];
	uint8_t *data;
	uint64_t nbytes;
};

struct gguf_writer {
	uint32_t version;
	uint64_t alignment;
	uint64_t n_kv;
	struct buf kv;          /* serialized kv section */
	struct wtensor *t;
	uint64_t n_t, cap_t;
	bool oom;               /* sticky: reported by save */
};

static void buf_put(gguf_writer *w, struct buf *b, const void *p, size_t n)
{
	if (w->oom)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q) {
			w->oom = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void put_u32(gguf_writer *w, struct buf *b, uint32_t v)
{
	uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	buf_put(w, b, x, 4);
}

static void put_u64(gguf_writer *w, struct buf *b, uint64_t v)
{
	put_u32(w, b, (uint32_t)v);
	put_u32(w, b, (uint32_t)(v >> 32));
}

static void put_str(gguf_writer *w, struct buf *b, const char *s, uint64_t n)
{
	put_u64(w, b, n);
	buf_put(w, b, s, n);
}

static void kv_head(gguf_writer *w, const char *key, uint32_t type)
{
	put_str(w, &w->kv, key, strlen(key));
	put_u32(w, &w->kv, type);
	w->n_kv++;
}

gguf_writer *gguf_writer_new(uint32_t version, uint64_t alignment)
{
	if ((version != 2 && version != 3) || !alignment || (alignment & (alignment - 1)) ||
	    alignment > UINT32_MAX)
		return NULL;
	gguf_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->version = version;
	w->alignment = alignment;
	if (alignment != GGUF_DEFAULT_ALIGNMENT)
		gguf_w_u32(w, "general.alignment", (uint32_t)alignment);
	return w;
}

void gguf_writer_free(gguf_writer *w)
{
	if (!w)
		return;
	for (uint64_t i = 0; i < w->n_t; i++) {
		free(w->t[i].name);
		free(w->t[i].data);
	}
	free(w->t);
	free(w->kv.p);
	free(w);
}

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v)
{
	kv_head(w, key, GGUF_VT_UINT32);
	put_u32(w, &w->kv, v);
}

void gguf_w_i32(gguf_writer *w, const char *key, int32_t v)
{
	kv_head(w, key, GGUF_VT_INT32);
	put_u32(w, &w->kv, (uint32_t)v);
}

void gguf_w_f32(gguf_writer *w, const char *key, float v)
{
	uint32_t u;
	memcpy(&u, &v, sizeof(u));
	kv_head(w, key, GGUF_VT_FLOAT32);
	put_u32(w, &w->kv, u);
}

void gguf_w_bool(gguf_writer *w, const char *key, bool v)
{
	uint8_t b = v;
	kv_head(w, key, GGUF_VT_BOOL);
	buf_put(w, &w->kv, &b, 1);
}

void gguf_w_str(gguf_writer *w, const char *key, const char *v)
{
	kv_head(w, key, GGUF_VT_STRING);
	put_str(w, &w->kv, v, strlen(v));
}

void gguf_w_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v)
{
	uint32_t sz = vtype_size(type);
	if (!sz) {
		w->oom = true; /* a programming error: make save fail loudly */
		return;
	}
	kv_head(w, key, type);
	/* host is little-endian (x86-64/aarch64), as is the format */
	buf_put(w, &w->kv, v, sz);
}

void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n)
{
	uint32_t sz = vtype_size(elem_type);
	if (!sz || n > SIZE_MAX / sz) {
		w->oom = true;
		return;
	}
	kv_head(w, key, GGUF_VT_ARRAY);
	put_u32(w, &w->kv, elem_type);
	put_u64(w, &w->kv, n);
	buf_put(w, &w->kv, data, (size_t)n * sz);
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, const uint64_t *lens, uint64_t n)
{
	kv_head(w, key, GGUF_VT_ARRAY);
	put_u32(w, &w->kv, GGUF_VT_STRING);
	put_u64(w, &w->kv, n);
	for (uint64_t i = 0; i < n; i++)
		put_str(w, &w->kv, v[i], lens ? lens[i] : strlen(v[i]));
}

void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
		   const void *data, uint64_t nbytes)
{
	if (w->oom)
		return;
	if (n_dims < 1 || n_dims > 4 || nbytes > SIZE_MAX) {
		w->oom = true;
		return;
	}
	if (w->n_t == w->cap_t) {
		uint64_t cap = w->cap_t ? 2 * w->cap_t : 16;
		struct wtensor *t = realloc(w->t, cap * sizeof(*t));
		if (!t) {
			w->oom = true;
			return;
		}
		w->t = t;
		w->cap_t = cap;
	}
	struct wtensor *t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->data = malloc(nbytes ? nbytes : 1);
	if (!t->name || !t->data) {
		free(t->name);
		free(t->data);
		w->oom = true;
		return;
	}
	if (nbytes)
		memcpy(t->data, data, nbytes);
	t->type = type;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < 4; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->nbytes = nbytes;
	w->n_t++;
}

static void pad_to(gguf_writer *w, struct buf *b, uint64_t align)
{
	static const uint8_t zeros[64];
	while (b->n % align && !w->oom) {
		size_t k = align - b->n % align;
		buf_put(w, b, zeros, k < sizeof(zeros) ? k : sizeof(zeros));
	}
}

int gguf_writer_to_mem(gguf_writer *w, void **out, size_t *size, sw_err *err)
{
	struct buf b = { 0 };
	uint64_t off = 0;

	buf_put(w, &b, GGUF_MAGIC, 4);
	put_u32(w, &b, w->version);
	put_u64(w, &b, w->n_t);
	put_u64(w, &b, w->n_kv);
	buf_put(w, &b, w->kv.p, w->kv.n);
	for (uint64_t i = 0; i < w->n_t; i++) {
		const struct wtensor *t = &w->t[i];
		put_str(w, &b, t->name, strlen(t->name));
		put_u32(w, &b, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			put_u64(w, &b, t->ne[d]);
		put_u32(w, &b, t->type);
		put_u64(w, &b, off);
		off += t->nbytes;
		if (off % w->alignment)
			off += w->alignment - off % w->alignment;
	}
	pad_to(w, &b, w->alignment);
	for (uint64_t i = 0; i < w->n_t; i++) {
		buf_put(w, &b, w->t[i].data, w->t[i].nbytes);
		pad_to(w, &b, w->alignment);
	}
	if (w->oom) {
		free(b.p);
		return sw_errf(err, SW_ENOMEM, "gguf writer: out of memory or invalid argument while building the file");
	}
	*out = b.p;
	*size = b.n;
	return 0;
}

int gguf_writer_save(gguf_writer *w, const char *path, sw_err *err)
{
	void *p;
	size_t n;
	int rc = gguf_writer_to_mem(w, &p, &n, err);
	if (rc)
		return sw_err_prefix(err, "%s", path);
	/* an exclusive temporary, checked writes, fsync, rename: a full disk
	 * or a kill never leaves a half-written file, and a device or a
	 * directory at path is refused, never renamed over */
	rc = sw_outfile_save(path, "-o", p, n, err);
	free(p);
	return rc;
}

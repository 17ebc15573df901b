/* safetensors parsing and validation (header length, JSON header, dtypes,
 * shapes, data offsets) plus the shard index of HF checkpoints. The file is
 * never written and never trusted: a hostile header gets an error naming the
 * tensor and the field, not an out-of-bounds read. */
#include "safetensors.h"
#include "core/fileio.h"

#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/timing.h"

static const struct {
	const char *name;
	int dtype;
	unsigned size;
} dtypes[] = {
	{ "F32", SAFETENSORS_F32, 4 },
	{ "F16", SAFETENSORS_F16, 2 },
	{ "BF16", SAFETENSORS_BF16, 2 },
	{ "I64", SAFETENSORS_I64, 8 },
	{ "BOOL", SAFETENSORS_BOOL, 1 },
	{ "I8", SAFETENSORS_I8, 1 },
};

const char *safetensors_dtype_name(int dtype)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (dtypes[i].dtype == dtype)
			return dtypes[i].name;
	return "?";
}

static unsigned dtype_size(int dtype)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (dtypes[i].dtype == dtype)
			return dtypes[i].size;
	return 0;
}

float safetensors_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31;
	uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
	float f;

	if (exp == 0) {
		/* zero or subnormal: mant * 2^-24, exact in f32 */
		f = (float)mant * 0x1p-24f;
		return sign ? -f : f;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (mant << 13); /* inf, NaN payload kept */
	else
		bits = sign | ((exp + 112) << 23) | (mant << 13); /* rebias 15 -> 127 */
	memcpy(&f, &bits, sizeof(f));
	return f;
}

float safetensors_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

int safetensors_check_finite(const safetensors_file *f, sw_wscan_cost *cost, sw_err *err)
{
	const double t0 = sw_now_s();
	uint64_t bytes = 0, n = 0;
	int rc = 0;
	for (size_t i = 0; i < f->n_tensors && !rc; i++) {
		const safetensors_tensor *t = &f->tensors[i];
		const uint32_t wt = t->dtype == SAFETENSORS_F32 ? SW_WT_F32 : t->dtype == SAFETENSORS_F16 ? SW_WT_F16
		                    : t->dtype == SAFETENSORS_BF16 ? SW_WT_BF16 : UINT32_MAX;
		const sw_wformat *w = sw_wformat_get(wt);
		if (!w) /* the index maps (I64, BOOL) */
			continue;
		bytes += t->nbytes;
		n++;
		const int64_t bad = sw_wformat_find_nonfinite(w, t->data, t->numel);
		if (bad >= 0) {
			char what[160];
			sw_wformat_describe(w, t->data, bad, what, sizeof(what));
			rc = sw_errf(err, SW_EINVAL, "%s: tensor %s (%s, %llu elements): expected finite "
			             "values, found a non-finite one: %s", f->name, t->name, w->name,
			             (unsigned long long)t->numel, what);
		}
	}
	if (cost) {
		cost->bytes += bytes;
		cost->tensors += n;
		cost->seconds += sw_now_s() - t0;
	}
	return rc;
}

void safetensors_to_f32(const safetensors_tensor *t, float *out)
{
	const uint8_t *p = t->data;

	/* Little-endian file, little-endian hosts only (x86-64, aarch64). */
	switch (t->dtype) {
	case SAFETENSORS_F32:
		memcpy(out, p, t->numel * sizeof(float));
		break;
	case SAFETENSORS_F16:
		for (uint64_t i = 0; i < t->numel; i++)
			out[i] = safetensors_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		break;
	case SAFETENSORS_BF16:
		for (uint64_t i = 0; i < t->numel; i++)
			out[i] = safetensors_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		break;
	case SAFETENSORS_I64:
	case SAFETENSORS_BOOL: {
		for (uint64_t i = 0; i < t->numel; i++) {
			int64_t v;
			if (t->dtype == SAFETENSORS_BOOL) {
				v = p[i] != 0;
			} else {
				memcpy(&v, p + 8 * i, sizeof(v));
			}
			out[i] = (float)v;
		}
		break;
	}
	case SAFETENSORS_I8:
		for (uint64_t i = 0; i < t->numel; i++)
			out[i] = NAN;
		break;
	}
}

int safetensors_numeric(const safetensors_file *f, const safetensors_tensor *t, sw_err *err)
{
	if (t->dtype != SAFETENSORS_I8)
		return 0;
	return sw_errf(err, SW_ENOTSUP, "%s: tensor \"%.128s\": dtype I8 (the int8 codes of a quantized weight, "
	               "whose scales this loader does not read): expected F32, F16 or BF16", f->name, t->name);
}

int safetensors_to_i64(const safetensors_tensor *t, int64_t *out)
{
	const uint8_t *p = t->data;
	switch (t->dtype) {
	case SAFETENSORS_I64:
		memcpy(out, p, t->numel * sizeof(int64_t));
		return 0;
	case SAFETENSORS_BOOL:
		for (uint64_t i = 0; i < t->numel; i++)
			out[i] = p[i] != 0;
		return 0;
	default:
		return -1;
	}
}

static void free_tensors(safetensors_file *f)
{
	for (size_t i = 0; i < f->n_tensors; i++)
		free(f->tensors[i].name);
	free(f->tensors);
	f->tensors = NULL;
	f->n_tensors = 0;
}

void safetensors_free(safetensors_file *f)
{
	if (!f)
		return;
	free_tensors(f);
	if (f->mapped)
		munmap((void *)f->base, f->size);
	free(f->name);
	free(f);
}

static int parse_tensor(safetensors_file *f, const json_member *m, uint64_t data_len,
			uint64_t *begin, safetensors_tensor *t, sw_err *err)
{
	static const char *const keys[] = { "dtype", "shape", "data_offsets", NULL };
	const json_value *v = m->value, *shape, *offs;
	const char *dt;
	char path[256], ep[300];
	int64_t b, e;
	int rc;

	json_path_key(path, sizeof(path), "$", m->key);
	if ((rc = json_as_object(v, path, err)) || (rc = json_check_keys(v, path, keys, err)) ||
	    (rc = json_get_string(v, "dtype", path, &dt, err)))
		return rc;

	t->dtype = -1;
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (!strcmp(dt, dtypes[i].name))
			t->dtype = dtypes[i].dtype;
	if (t->dtype < 0)
		return sw_errf(err, SW_ENOTSUP, "%s: tensor \"%.128s\": dtype %.32s is not supported (supported: F32, F16, BF16, I64, BOOL, I8)",
			       f->name, m->key, dt);

	if ((rc = json_get_array(v, "shape", path, 0, SAFETENSORS_MAX_DIMS, &shape, err)))
		return rc;
	t->n_dims = (int)shape->n;
	t->numel = 1;
	for (size_t i = 0; i < shape->n; i++) {
		snprintf(ep, sizeof(ep), "%s.shape[%zu]", path, i);
		if ((rc = json_as_int(shape->items[i], ep, 0, INT64_MAX, &t->shape[i], err)))
			return rc;
		uint64_t d = (uint64_t)t->shape[i];
		if (d && t->numel > UINT64_MAX / d)
			return sw_errf(err, SW_EINVAL, "%s: tensor \"%.128s\": shape overflows 64-bit element count",
				       f->name, m->key);
		t->numel *= d;
	}

	if ((rc = json_get_array(v, "data_offsets", path, 2, 2, &offs, err)))
		return rc;
	snprintf(ep, sizeof(ep), "%s.data_offsets[0]", path);
	if ((rc = json_as_int(offs->items[0], ep, 0, INT64_MAX, &b, err)))
		return rc;
	snprintf(ep, sizeof(ep), "%s.data_offsets[1]", path);
	if ((rc = json_as_int(offs->items[1], ep, 0, INT64_MAX, &e, err)))
		return rc;
	if (e < b)
		return sw_errf(err, SW_EINVAL, "%s: tensor \"%.128s\": data_offsets [%lld, %lld) end before begin",
			       f->name, m->key, (long long)b, (long long)e);
	if ((uint64_t)e > data_len)
		return sw_errf(err, SW_EINVAL, "%s: tensor \"%.128s\": data_offsets [%lld, %lld) outside the data section (%llu bytes)",
			       f->name, m->key, (long long)b, (long long)e, (unsigned long long)data_len);
	unsigned es = dtype_size(t->dtype);
	if (t->numel > UINT64_MAX / es)
		return sw_errf(err, SW_EINVAL, "%s: tensor \"%.128s\": %llu elements of %s overflow a 64-bit byte count",
			       f->name, m->key, (unsigned long long)t->numel, dt);
	if (t->numel * es != (uint64_t)(e - b))
		return sw_errf(err, SW_EINVAL, "%s: tensor \"%.128s\": data_offsets span %lld bytes, expected %llu (%llu elements of %s)",
			       f->name, m->key, (long long)(e - b), (unsigned long long)(t->numel * es),
			       (unsigned long long)t->numel, dt);
	t->nbytes = (uint64_t)(e - b);
	*begin = (uint64_t)b;
	return 0;
}

struct span {
	uint64_t b, e;
	size_t i;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return x->e < y->e ? -1 : x->e > y->e;
}

static int parse_header(safetensors_file *f, sw_err *err)
{
	char hname[512];
	uint64_t hlen = 0;
	json_value *root;
	struct span *spans = NULL;
	int rc;

	if (f->size < 8)
		return sw_errf(err, SW_EINVAL, "%s: file is %zu bytes, too short for the 8-byte header length",
			       f->name, f->size);
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)f->base[i] << (8 * i);
	if (hlen > SAFETENSORS_MAX_HEADER)
		return sw_errf(err, SW_EINVAL, "%s: header length %llu exceeds the %u-byte limit (not a safetensors file?)",
			       f->name, (unsigned long long)hlen, SAFETENSORS_MAX_HEADER);
	if (hlen > f->size - 8)
		return sw_errf(err, SW_EINVAL, "%s: header length %llu exceeds the file size %zu (truncated file?)",
			       f->name, (unsigned long long)hlen, f->size);

	snprintf(hname, sizeof(hname), "%s (header)", f->name);
	root = json_parse((const char *)f->base + 8, (size_t)hlen, hname, err);
	if (!root)
		return err ? err->code : SW_EINVAL;
	if ((rc = json_as_object(root, "$", err)))
		goto out_free_root;

	uint64_t data_len = f->size - 8 - hlen;
	const uint8_t *data = f->base + 8 + hlen;
	f->tensors = calloc(root->n ? root->n : 1, sizeof(*f->tensors));
	spans = malloc((root->n ? root->n : 1) * sizeof(*spans));
	if (!f->tensors || !spans) {
		rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", f->name);
		goto out_free_spans;
	}
	for (size_t i = 0; i < root->n; i++) {
		const json_member *m = &root->members[i];
		if (!strcmp(m->key, "__metadata__"))
			continue; /* free-form strings; nothing we need */
		if (strlen(m->key) != m->key_len) {
			rc = sw_errf(err, SW_EINVAL, "%s: a tensor name contains a NUL character", f->name);
			goto out_free_spans;
		}
		safetensors_tensor *t = &f->tensors[f->n_tensors];
		uint64_t b = 0;
		if ((rc = parse_tensor(f, m, data_len, &b, t, err)))
			goto out_free_spans;
		t->name = strdup(m->key);
		if (!t->name) {
			rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", f->name);
			goto out_free_spans;
		}
		t->data = data + b;
		spans[f->n_tensors] = (struct span){ b, b + t->nbytes, f->n_tensors };
		f->n_tensors++;
	}

	/* The format lays tensors out back to back; overlapping ranges mean a
	 * corrupt or crafted header. Gaps are tolerated (alignment padding). */
	qsort(spans, f->n_tensors, sizeof(*spans), cmp_span);
	for (size_t i = 1; i < f->n_tensors; i++) {
		if (spans[i].b < spans[i - 1].e) {
			rc = sw_errf(err, SW_EINVAL, "%s: tensors \"%.128s\" and \"%.128s\" overlap in the data section",
				     f->name, f->tensors[spans[i - 1].i].name, f->tensors[spans[i].i].name);
			goto out_free_spans;
		}
	}
	rc = 0;

out_free_spans:
	free(spans);
	if (rc)
		free_tensors(f);
out_free_root:
	json_free(root);
	return rc;
}

int safetensors_open_mem(const void *data, size_t len, const char *name,
			 safetensors_file **out, sw_err *err)
{
	safetensors_file *f = calloc(1, sizeof(*f));
	int rc;

	*out = NULL;
	if (!f || !(f->name = strdup(name ? name : "<memory>"))) {
		free(f);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	f->base = data;
	f->size = data ? len : 0;
	if ((rc = parse_header(f, err))) {
		safetensors_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

int safetensors_open(const char *path, safetensors_file **out, sw_err *err)
{
	safetensors_file *f;
	struct stat st;
	void *map;
	int fd, rc;

	*out = NULL;
	fd = sw_open_regular(path, err); /* never blocks on a FIFO */
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return sw_errf(err, SW_EIO, "%s: not a regular file", path);
	}
	if (st.st_size < 8) {
		close(fd);
		return sw_errf(err, SW_EINVAL, "%s: file is %lld bytes, too short for the 8-byte header length",
			       path, (long long)st.st_size);
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return sw_errf(err, SW_EIO, "%s: mmap failed: %m", path);

	f = calloc(1, sizeof(*f));
	if (!f || !(f->name = strdup(path))) {
		free(f);
		munmap(map, (size_t)st.st_size);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	f->base = map;
	f->size = (size_t)st.st_size;
	f->mapped = 1;
	if ((rc = parse_header(f, err))) {
		safetensors_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name)
{
	for (size_t i = 0; i < f->n_tensors; i++)
		if (!strcmp(f->tensors[i].name, name))
			return &f->tensors[i];
	return NULL;
}

/* ---- checkpoint directories ---- */

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define MAX_INDEX_BYTES (64u << 20)

static int read_text(const char *path, char **out, size_t *n, sw_err *err)
{
	*out = sw_read_capped(path, MAX_INDEX_BYTES, "a safetensors index", n, err);
	return *out ? 0 : err->code;
}

void safetensors_ckpt_free(safetensors_ckpt *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_files; i++)
		safetensors_free(c->files[i]);
	for (size_t i = 0; i < c->n_map; i++)
		free(c->map_names[i]);
	free(c->files);
	free(c->map_names);
	free(c->map_file);
	free(c->dir);
	free(c);
}

static int ckpt_add_file(safetensors_ckpt *c, const char *fname, size_t *idx, sw_err *err)
{
	char path[4096];
	int rc;

	for (size_t i = 0; i < c->n_files; i++) {
		const char *base = strrchr(c->files[i]->name, '/');
		if (!strcmp(base ? base + 1 : c->files[i]->name, fname)) {
			*idx = i;
			return 0;
		}
	}
	if (snprintf(path, sizeof(path), "%s/%s", c->dir, fname) >= (int)sizeof(path))
		return sw_errf(err, SW_EINVAL, "%s: path too long", c->dir);
	safetensors_file **nf = realloc(c->files, (c->n_files + 1) * sizeof(*nf));
	if (!nf)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	c->files = nf;
	if ((rc = safetensors_open(path, &c->files[c->n_files], err)))
		return rc;
	*idx = c->n_files++;
	return 0;
}

static int ckpt_open_index(safetensors_ckpt *c, const char *ipath, sw_err *err)
{
	const json_value *map;
	json_value *root;
	char *text = NULL;
	size_t n = 0;
	int rc;

	if ((rc = read_text(ipath, &text, &n, err)))
		return rc;
	root = json_parse(text, n, ipath, err);
	free(text);
	if (!root)
		return err ? err->code : SW_EINVAL;
	if ((rc = json_as_object(root, "$", err)) ||
	    (rc = json_get_object(root, "weight_map", "$", &map, err)))
		goto out_free_root;

	c->map_names = calloc(map->n ? map->n : 1, sizeof(*c->map_names));
	c->map_file = calloc(map->n ? map->n : 1, sizeof(*c->map_file));
	if (!c->map_names || !c->map_file) {
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
		goto out_free_root;
	}
	for (size_t i = 0; i < map->n; i++) {
		const json_member *m = &map->members[i];
		const char *fname;
		char path[300];

		json_path_key(path, sizeof(path), "$.weight_map", m->key);
		if ((rc = json_as_string(m->value, path, &fname, err)))
			goto out_free_root;
		/* Shard names come from the file: keep them inside dir. */
		if (!*fname || strchr(fname, '/') || !strcmp(fname, "..") || !strcmp(fname, ".") ||
		    strlen(fname) != m->value->str_len) {
			rc = sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: expected a file name in the checkpoint directory, found \"%.128s\"",
				     ipath, m->value->line, m->value->col, path, fname);
			goto out_free_root;
		}
		if ((rc = ckpt_add_file(c, fname, &c->map_file[i], err)))
			goto out_free_root;
		c->map_names[i] = strdup(m->key);
		if (!c->map_names[i]) {
			rc = sw_errf(err, SW_ENOMEM, "out of memory");
			goto out_free_root;
		}
		c->n_map++;
	}
	rc = 0;
out_free_root:
	json_free(root);
	return rc;
}

int safetensors_ckpt_open(const char *dir, safetensors_ckpt **out, sw_err *err)
{
	safetensors_ckpt *c;
	char path[4096];
	size_t idx;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->dir = strdup(dir))) {
		free(c);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	if (snprintf(path, sizeof(path), "%s/%s", dir, INDEX_NAME) >= (int)sizeof(path)) {
		rc = sw_errf(err, SW_EINVAL, "%s: path too long", dir);
		goto out_free_c;
	}
	if (access(path, F_OK) == 0) {
		rc = ckpt_open_index(c, path, err);
	} else {
		snprintf(path, sizeof(path), "%s/%s", dir, SINGLE_NAME);
		if (access(path, F_OK) != 0) {
			rc = sw_errf(err, SW_EIO, "%s: neither %s nor %s found", dir, SINGLE_NAME, INDEX_NAME);
			goto out_free_c;
		}
		rc = ckpt_add_file(c, SINGLE_NAME, &idx, err);
	}
	if (rc)
		goto out_free_c;
	*out = c;
	return 0;

out_free_c:
	safetensors_ckpt_free(c);
	return rc;
}

int safetensors_ckpt_find(const safetensors_ckpt *c, const char *name,
			  const safetensors_tensor **t, const safetensors_file **file,
			  sw_err *err)
{
	*t = NULL;
	if (!c->map_names) {
		*t = c->n_files ? safetensors_find(c->files[0], name) : NULL;
		if (file)
			*file = c->n_files ? c->files[0] : NULL;
		return 0;
	}
	for (size_t i = 0; i < c->n_map; i++) {
		if (strcmp(c->map_names[i], name))
			continue;
		const safetensors_file *f = c->files[c->map_file[i]];
		if (file)
			*file = f;
		*t = safetensors_find(f, name);
		if (!*t)
			return sw_errf(err, SW_EINVAL, "%s/%s: weight_map puts \"%s\" in %s, but that shard has no such tensor",
				       c->dir, INDEX_NAME, name, f->name);
		return 0;
	}
	return 0;
}

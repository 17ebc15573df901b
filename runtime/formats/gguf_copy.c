/* Copying one metadata entry of an open GGUF file into a writer, whatever its
 * type: how a derived model carries its source's tokenizer (every
 * tokenizer.* key, chat template included) without knowing each key. */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

/* The string at p (u64 length, then bytes) as a NUL-terminated copy, or NULL
 * when it holds a NUL byte (the writer takes C strings). */
static char *cstr(const char *p, uint64_t n)
{
	if (memchr(p, 0, n))
		return NULL;
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

int gguf_w_copy_kv(gguf_writer *w, const gguf_file *f, const gguf_kv *kv, sw_err *err)
{
	char *key = cstr(kv->key.p, kv->key.n);
	int rc = 0;
	if (!key)
		return sw_errf(err, SW_EINVAL, "%s: a metadata key holds a NUL byte", f->path);
	if (kv->type == GGUF_VT_STRING) {
		uint64_t n;
		memcpy(&n, kv->val, 8);
		char *v = cstr((const char *)kv->val + 8, n);
		if (!v)
			rc = sw_errf(err, SW_EINVAL, "%s: %s: expected a string without NUL bytes", f->path, key);
		else
			gguf_w_str(w, key, v);
		free(v);
	} else if (kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_STRING) {
		const char **v = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof(*v));
		uint64_t *lens = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof(*lens));
		if (!v || !lens) {
			rc = sw_errf(err, SW_ENOMEM, "%s: %s: out of memory", f->path, key);
		} else {
			for (uint64_t i = 0; i < kv->arr_n; i++) {
				gguf_str s = gguf_arr_str(f, kv, i);
				v[i] = s.p;
				lens[i] = s.n;
			}
			gguf_w_arr_str(w, key, v, lens, kv->arr_n);
		}
		free(v);
		free(lens);
	} else if (kv->type == GGUF_VT_ARRAY) {
		if (kv->arr_type == GGUF_VT_ARRAY || !gguf_arr_data(kv))
			rc = sw_errf(err, SW_ENOTSUP, "%s: %s: an array of arrays cannot be copied (expected "
			             "numbers or strings)", f->path, key);
		else
			gguf_w_arr(w, key, kv->arr_type, gguf_arr_data(kv), kv->arr_n);
	} else if (kv->type == GGUF_VT_BOOL) {
		gguf_w_bool(w, key, kv->val[0] != 0);
	} else {
		gguf_w_scalar(w, key, kv->type, kv->val);
	}
	free(key);
	return rc;
}

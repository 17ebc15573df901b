/* libFuzzer target for the GGUF reader and the Llama GGUF loader: parse the
 * input, touch every key, value, array element and string, dequantize every
 * tensor of a supported type (at most ~1M elements per input, to stay fast),
 * then read a Llama config and load weights. Any crash, sanitizer report or
 * hang is a bug in the reader; errors are the expected outcome. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/model_gguf.h"

#define ELEM_BUDGET (1u << 20)

static volatile uint8_t sink;

static void touch(const void *p, uint64_t n)
{
	const uint8_t *b = p;
	uint8_t x = 0;
	for (uint64_t i = 0; i < n; i++)
		x ^= b[i];
	sink ^= x;
}

static void walk_kv(const gguf_file *f, const gguf_kv *kv)
{
	sw_err e;
	char key[256];

	touch(kv->key.p, kv->key.n);
	/* the getters take C strings: only keys without NULs round-trip */
	if (kv->key.n >= sizeof(key) || memchr(kv->key.p, 0, kv->key.n))
		return;
	memcpy(key, kv->key.p, kv->key.n);
	key[kv->key.n] = 0;
	if (gguf_find(f, key) != kv)
		abort(); /* duplicates are refused at open, so lookup is exact */

	uint32_t u;
	int32_t i;
	float x;
	bool b;
	gguf_str s;
	uint32_t et;
	uint64_t n;
	if (!gguf_get_u32(f, key, &u, &e))
		sink ^= (uint8_t)u;
	if (!gguf_get_i32(f, key, &i, &e))
		sink ^= (uint8_t)i;
	if (!gguf_get_f32(f, key, &x, &e))
		sink ^= (uint8_t)(x == x);
	if (!gguf_get_bool(f, key, &b, &e))
		sink ^= b;
	if (!gguf_get_str(f, key, &s, &e))
		touch(s.p, s.n);
	if (gguf_get_arr(f, key, &et, &n, &e))
		return;
	if (et == GGUF_VT_STRING) {
		for (uint64_t k = 0; k < n; k++) {
			gguf_str t = gguf_arr_str(f, kv, k);
			touch(t.p, t.n);
		}
		gguf_str t = gguf_arr_str(f, kv, n); /* one past the end: empty */
		if (t.p)
			abort();
	} else {
		static const uint8_t size[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
		touch(gguf_arr_data(kv), n * size[et]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sw_err e;
	gguf_file *f = gguf_open_mem(data, size, "fuzz.gguf", &e);
	if (!f)
		return 0;

	for (uint64_t k = 0; k < f->n_kv; k++)
		walk_kv(f, &f->kv[k]);

	uint64_t budget = ELEM_BUDGET;
	for (uint64_t k = 0; k < f->n_tensors; k++) {
		const gguf_tensor *t = &f->tensors[k];
		touch(t->name.p, t->name.n);
		touch(t->data, t->nbytes);
		if (t->n_elems > budget)
			continue;
		float *out = malloc(t->n_elems * sizeof(*out));
		if (!out)
			continue;
		if (!gguf_tensor_to_f32(f, t, out, &e)) {
			budget -= t->n_elems;
			touch(out, t->n_elems * sizeof(*out));
		}
		free(out);
	}

	rt_config cfg;
	if (!rt_llama_config_from_gguf(f, &cfg, &e)) {
		/* every loaded tensor must lie in the file, so the arena is
		 * bounded by a small multiple of the input: safe to load */
		rt_weights w;
		if (!rt_llama_load_gguf(f, &cfg, &w, &e)) {
			touch(w.tok_embd, sizeof(float));
			rt_weights_free(&w);
		}
	}
	gguf_close(f);
	return 0;
}

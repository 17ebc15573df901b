/* libFuzzer target for runtime/safetensors.c and the HF config parser: the
 * input is read both as a safetensors file image (every accepted tensor is
 * converted, so a bad offset would read out of bounds) and as config.json.
 * Finds crashes and leaks, not wrong answers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_hf.h"
#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	safetensors_file *f;
	rt_config cfg;
	sw_err err;

	if (!safetensors_open_mem(data, size, "fuzz", &f, &err)) {
		for (size_t i = 0; i < f->n_tensors; i++) {
			const safetensors_tensor *t = &f->tensors[i];
			if (t->data < data || t->data + t->nbytes > data + size)
				abort();
			/* Cap the work per input; the bounds check above is the point. */
			if (t->numel > (1u << 20))
				continue;
			float *out = malloc(t->numel * sizeof(*out) + 1);
			if (out) {
				safetensors_to_f32(t, out);
				free(out);
			}
			if (safetensors_find(f, t->name) == NULL)
				abort();
		}
		safetensors_free(f);
	}
	if (!rt_llama_config_from_hf_json((const char *)data, size, "fuzz.json", &cfg, &err)) {
		if (cfg.n_heads % cfg.n_kv_heads || cfg.head_dim % 2 || cfg.dim <= 0)
			abort();
	}
	return 0;
}

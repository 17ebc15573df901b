/* KV commit, plain C: the specification of templates/kv_commit.cu.tmpl
 * (llama_commit_kv of runtime/model/llama.c on the engine's cache layout).
 * The moves run in increasing i: move i reads row keep[i] >= i, which only a
 * later move j = keep[i] may overwrite, so the sequential loop is the
 * result the kernel's chunked loads and stores must reproduce. */
#include <string.h>

#include "ref.h"

void ref_kv_commit(void *k, void *v, const int32_t *keep, int n, int32_t *len, int n_layers,
                   int max_ctx, size_t row_bytes)
{
	for (int w = 0; w < 2; w++)
		for (int l = 0; l < n_layers; l++) {
			char *c = (char *)(w ? v : k) + ((size_t)l * max_ctx + (size_t)*len) * row_bytes;
			for (int i = 0; i < n; i++)
				if (keep[i] != i)
					memmove(c + (size_t)i * row_bytes, c + (size_t)keep[i] * row_bytes, row_bytes);
		}
	*len += n;
}

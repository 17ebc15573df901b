/* Model-kind dispatch: loading by file type, the per-sequence context and its
 * generic bookkeeping (tokens, staged block, commit/truncate). The forward
 * passes themselves live in llama.c and table_model.c. */
#include "ctx.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/gguf.h"
#include "model_gguf.h"
#include "model_hf.h"

rt_ctx *rt_ctx_new(const rt_model *m, int max_ctx, int max_block, sw_err *err)
{
	if (max_ctx < 1 || max_block < 1 || max_block > max_ctx) {
		sw_errf(err, SW_EINVAL, "context: max_ctx %d / max_block %d invalid (need 1 <= max_block <= max_ctx)",
		        max_ctx, max_block);
		return NULL;
	}
	if (m->cfg.max_ctx > 0 && max_ctx > m->cfg.max_ctx) {
		sw_errf(err, SW_ERANGE, "%s: requested context %d exceeds the model's trained context %d",
		        m->name, max_ctx, m->cfg.max_ctx);
		return NULL;
	}
	rt_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		goto out_nomem;
	c->m = m;
	c->max_ctx = max_ctx;
	c->max_block = max_block;
	c->tokens = calloc((size_t)max_ctx, sizeof(*c->tokens));
	c->blk_tok = calloc((size_t)max_block, sizeof(*c->blk_tok));
	c->blk_pos = calloc((size_t)max_block, sizeof(*c->blk_pos));
	c->mask_words = (max_block + 63) / 64;
	c->blk_mask = calloc((size_t)max_block * c->mask_words, sizeof(*c->blk_mask));
	if (!c->tokens || !c->blk_tok || !c->blk_pos || !c->blk_mask)
		goto out_free_ctx;
	if (m->ops->ctx_init(c, err))
		goto out_free_ctx_noerr;
	return c;
out_free_ctx:
	sw_errf(err, SW_ENOMEM, "context: out of memory for max_ctx %d", max_ctx);
out_free_ctx_noerr:
	free(c->tokens);
	free(c->blk_tok);
	free(c->blk_pos);
	free(c->blk_mask);
	free(c);
	return NULL;
out_nomem:
	sw_errf(err, SW_ENOMEM, "context: out of memory");
	return NULL;
}

int rt_ctx_set_taps(rt_ctx *c, const int *layers, int n, sw_err *err)
{
	const rt_model *m = c->m;
	if (m->kind != RT_MODEL_LLAMA)
		return sw_errf(err, SW_EINVAL, "%s: hidden-state taps need a transformer; this model has no layers", m->name);
	if (c->len != 0)
		return sw_errf(err, SW_EINVAL, "%s: taps can only be set on an empty context (found %d committed tokens)",
		               m->name, c->len);
	if (n < 0 || n > RT_MAX_TAPS)
		return sw_errf(err, SW_ERANGE, "%s: %d taps requested, expected 0..%d", m->name, n, RT_MAX_TAPS);
	for (int i = 0; i < n; i++)
		if (layers[i] < 0 || layers[i] >= m->n_layers_run || (i > 0 && layers[i] <= layers[i - 1]))
			return sw_errf(err, SW_EINVAL, "%s: tap layer %d at index %d: expected increasing layers in [0, %d)",
			               m->name, layers[i], i, m->n_layers_run);
	free(c->tap_cache);
	c->tap_cache = NULL;
	c->n_taps = 0;
	if (n == 0)
		return 0;
	c->tap_cache = malloc((size_t)c->max_ctx * n * m->cfg.dim * sizeof(float));
	if (!c->tap_cache)
		return sw_errf(err, SW_ENOMEM, "%s: cannot allocate taps for context %d", m->name, c->max_ctx);
	memcpy(c->tap_layers, layers, (size_t)n * sizeof(*layers));
	c->n_taps = n;
	return 0;
}

void rt_ctx_free(rt_ctx *c)
{
	if (!c)
		return;
	free(c->tap_cache);
	c->m->ops->ctx_free(c);
	free(c->tokens);
	free(c->blk_tok);
	free(c->blk_pos);
	free(c->blk_mask);
	free(c);
}

int rt_ctx_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                float *logits, float *hidden, sw_err *err)
{
	c->blk_T = 0;
	return rt_ctx_eval_append(c, tok, pos, T, mask, logits, hidden, err);
}

int rt_ctx_eval_append(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                       float *logits, float *hidden, sw_err *err)
{
	int off = c->blk_T, n_blk = off + T;
	if (T < 1 || n_blk > c->max_block)
		return sw_errf(err, SW_ERANGE, "eval: block of %d tokens after %d staged, this context allows %d in all",
		               T, off, c->max_block);
	if (c->len + n_blk > c->max_ctx)
		return sw_errf(err, SW_ERANGE, "eval: %d committed + %d new tokens exceed the context of %d",
		               c->len, n_blk, c->max_ctx);
	for (int i = 0; i < T; i++) {
		if (tok[i] < 0 || tok[i] >= c->m->cfg.vocab)
			return sw_errf(err, SW_EINVAL, "eval: token id %d at block index %d outside the vocabulary [0, %d)",
			               tok[i], off + i, c->m->cfg.vocab);
		if (pos[i] < 0 || pos[i] >= c->max_ctx)
			return sw_errf(err, SW_ERANGE, "eval: position %d at block index %d outside [0, %d)",
			               pos[i], off + i, c->max_ctx);
	}
	int words = (n_blk + 63) / 64;
	for (int i = 0; i < T; i++) {
		uint64_t *row = c->blk_mask + (size_t)(off + i) * c->mask_words;
		memset(row, 0, (size_t)c->mask_words * sizeof(*row));
		if (mask) {
			memcpy(row, mask + (size_t)i * words, (size_t)words * sizeof(*mask));
		} else {
			for (int j = 0; j <= off + i; j++)
				row[j / 64] |= 1ull << (j % 64);
		}
		c->blk_tok[off + i] = tok[i];
		c->blk_pos[off + i] = pos[i];
	}
	c->blk_off = off;
	int rc = c->m->ops->eval(c, tok, pos, T, mask, logits, hidden, err);
	c->blk_T = rc ? off : n_blk;
	c->n_evals++;
	c->n_eval_tokens += (uint64_t)T;
	return rc;
}

void rt_ctx_commit(rt_ctx *c, const int *keep, int n)
{
	c->m->ops->commit_kv(c, keep, n);
	if (c->tap_cache) {
		size_t row = (size_t)c->n_taps * c->m->cfg.dim;
		float *base = c->tap_cache + (size_t)c->len * row;
		for (int i = 0; i < n; i++)
			if (keep[i] != i)
				memcpy(base + (size_t)i * row, base + (size_t)keep[i] * row, row * sizeof(float));
	}
	for (int i = 0; i < n; i++)
		c->tokens[c->len + i] = c->blk_tok[keep[i]];
	c->len += n;
	c->blk_T = 0;
}

int rt_ctx_feed(rt_ctx *c, const int32_t *tok, int T, float *logits, sw_err *err)
{
	int32_t pos[256];
	int keep[256];
	int done = 0, rc = 0;
	while (done < T) {
		int n = T - done;
		if (n > c->max_block)
			n = c->max_block;
		if (n > 256)
			n = 256;
		for (int i = 0; i < n; i++) {
			pos[i] = c->len + i;
			keep[i] = i;
		}
		bool last = done + n == T;
		c->logits_last_only = true;
		rc = rt_ctx_eval(c, tok + done, pos, n, NULL, last ? logits : NULL, NULL, err);
		c->logits_last_only = false;
		if (rc)
			return rc;
		rt_ctx_commit(c, keep, n);
		done += n;
	}
	return 0;
}

void rt_ctx_truncate(rt_ctx *c, int n)
{
	if (n < c->len)
		c->len = n < 0 ? 0 : n;
	c->blk_T = 0;
}

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

rt_model *rt_llama_from_gguf_file(gguf_file *f, sw_err *err);
rt_model *rt_table_from_gguf_file(gguf_file *f, sw_err *err);

rt_model *rt_model_load(const char *path, sw_err *err)
{
	if (is_dir(path)) {
		rt_config cfg;
		rt_weights w;
		memset(&w, 0, sizeof(w));
		if (rt_llama_load_hf(path, &cfg, &w, err))
			return NULL;
		return rt_model_from_weights(&cfg, &w, path, err);
	}
	gguf_file *f = gguf_open(path, err);
	if (!f)
		return NULL;
	/* every tensor of the file, before anything is dequantized: the scan
	 * is the first touch of a mapped page, the dequantization the next */
	sw_wscan_cost cost = {0};
	if (gguf_check_finite(f, &cost, err)) {
		gguf_close(f);
		return NULL;
	}
	gguf_str arch = { 0 };
	sw_err e2;
	rt_model *m = NULL;
	if (gguf_get_str(f, "general.architecture", &arch, &e2) == 0 && arch.n == 6 &&
	    memcmp(arch.p, "markov", 6) == 0)
		m = rt_table_from_gguf_file(f, err);
	else
		m = rt_llama_from_gguf_file(f, err);
	if (m)
		rt_load_note(f->path, &cost);
	gguf_close(f);
	return m;
}

void rt_model_free(rt_model *m)
{
	if (m)
		m->ops->free(m);
}

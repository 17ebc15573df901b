/* Markov "table" models: the next-token distribution is a row of a transition
 * table indexed by the previous one or two tokens. Small enough that the
 * output distribution of any decoding method can be enumerated exactly, so the
 * exactness tests use them as target and draft. File form: GGUF with
 * general.architecture = "markov", markov.order, markov.vocab_size and an F32
 * tensor markov.table of ne [vocab, vocab^order]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "formats/gguf.h"

/* The token preceding staged block entry b: its nearest visible earlier
 * entry (the parent, since parents precede children), else the last
 * committed token; missing history reads as token 0. */
static int32_t prev_token(const rt_ctx *c, int b)
{
	const uint64_t *row = c->blk_mask + (size_t)b * c->mask_words;
	for (int k = b - 1; k >= 0; k--)
		if (row[k / 64] >> (k % 64) & 1)
			return c->blk_tok[k];
	return c->len > 0 ? c->tokens[c->len - 1] : 0;
}

static int table_ctx_init(rt_ctx *c, sw_err *err) { return 0; }
static void table_ctx_free(rt_ctx *c) {}
static void table_commit_kv(rt_ctx *c, const int *keep, int n) {}

static int table_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                      float *logits, float *hidden, sw_err *err)
{
	const rt_model *m = c->m;
	int V = m->cfg.vocab;
	for (int i = 0; i < T; i++) {
		size_t row = (size_t)tok[i];
		if (m->table_order == 2)
			row += (size_t)prev_token(c, c->blk_off + i) * V;
		if (logits && c->logits_last_only && i == T - 1)
			memcpy(logits, m->log_table + row * V, (size_t)V * sizeof(float));
		else if (logits && !c->logits_last_only)
			memcpy(logits + (size_t)i * V, m->log_table + row * V, (size_t)V * sizeof(float));
		if (hidden) /* no hidden state: expose the probabilities */
			memcpy(hidden + (size_t)i * V, m->table + row * V, (size_t)V * sizeof(float));
	}
	return 0;
}

static void table_free(rt_model *m)
{
	free(m->table);
	free(m->log_table);
	free(m);
}

static const struct rt_model_ops table_ops = {
	/* .ctx_init  = */ table_ctx_init,
	/* .ctx_free  = */ table_ctx_free,
	/* .eval      = */ table_eval,
	/* .commit_kv = */ table_commit_kv,
	/* .free      = */ table_free,
};

rt_model *rt_model_table(int vocab, int order, const float *table, const char *name, sw_err *err)
{
	if (vocab < 2 || vocab > 4096 || (order != 1 && order != 2)) {
		sw_errf(err, SW_EINVAL, "%s: table model needs vocab in [2, 4096] and order 1 or 2, found vocab %d order %d",
		        name, vocab, order);
		return NULL;
	}
	size_t rows = order == 1 ? (size_t)vocab : (size_t)vocab * vocab;
	size_t n = rows * vocab;
	for (size_t r = 0; r < rows; r++) {
		double s = 0;
		for (int v = 0; v < vocab; v++) {
			float x = table[r * vocab + v];
			if (!(x >= 0.0f) || !isfinite(x)) {
				sw_errf(err, SW_EINVAL, "%s: markov.table row %zu entry %d is %g, expected a finite probability >= 0",
				        name, r, v, (double)x);
				return NULL;
			}
			s += x;
		}
		if (fabs(s - 1.0) > 1e-4) {
			sw_errf(err, SW_EINVAL, "%s: markov.table row %zu sums to %.6f, expected 1", name, r, s);
			return NULL;
		}
	}
	rt_model *m = calloc(1, sizeof(*m));
	if (!m)
		goto out_nomem;
	m->table = malloc(n * sizeof(float));
	m->log_table = malloc(n * sizeof(float));
	if (!m->table || !m->log_table)
		goto out_free_m;
	memcpy(m->table, table, n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		m->log_table[i] = table[i] > 0 ? logf(table[i]) : -INFINITY;
	m->ops = &table_ops;
	m->kind = RT_MODEL_TABLE;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->cfg.vocab = vocab;
	m->cfg.bos_id = m->cfg.eos_id = -1;
	m->table_order = order;
	m->owns_weights = true;
	return m;
out_free_m:
	free(m->table);
	free(m->log_table);
	free(m);
out_nomem:
	sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
	return NULL;
}

rt_model *rt_table_from_gguf_file(gguf_file *f, sw_err *err)
{
	uint32_t order = 0, vocab = 0;
	if (gguf_get_u32(f, "markov.order", &order, err) ||
	    gguf_get_u32(f, "markov.vocab_size", &vocab, err))
		return NULL;
	if (vocab < 2 || vocab > 4096 || (order != 1 && order != 2)) {
		sw_errf(err, SW_EINVAL, "%s: markov.order must be 1 or 2 and markov.vocab_size in [2, 4096], found %u and %u",
		        f->path, order, vocab);
		return NULL;
	}
	const gguf_tensor *t = gguf_tensor_find(f, "markov.table");
	if (!t) {
		sw_errf(err, SW_EINVAL, "%s: tensor markov.table missing", f->path);
		return NULL;
	}
	uint64_t rows = order == 1 ? vocab : (uint64_t)vocab * vocab;
	if (t->n_dims != 2 || t->ne[0] != vocab || t->ne[1] != rows) {
		sw_errf(err, SW_EINVAL, "%s: tensor markov.table has shape [%llu, %llu] (n_dims %u), expected [%u, %llu]",
		        f->path, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], t->n_dims, vocab,
		        (unsigned long long)rows);
		return NULL;
	}
	float *tab = malloc(rows * vocab * sizeof(*tab));
	if (!tab) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory", f->path);
		return NULL;
	}
	rt_model *m = NULL;
	if (gguf_tensor_to_f32(f, t, tab, err) == 0)
		m = rt_model_table((int)vocab, (int)order, tab, f->path, err);
	free(tab);
	return m;
}

int rt_table_save(const char *path, int vocab, int order, const float *table, sw_err *err)
{
	gguf_writer *w = gguf_writer_new(3, 32);
	if (!w)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", path);
	uint64_t rows = order == 1 ? (uint64_t)vocab : (uint64_t)vocab * vocab;
	uint64_t ne[2] = { (uint64_t)vocab, rows };
	gguf_w_str(w, "general.architecture", "markov");
	gguf_w_u32(w, "markov.order", (uint32_t)order);
	gguf_w_u32(w, "markov.vocab_size", (uint32_t)vocab);
	gguf_w_tensor(w, "markov.table", GGML_T_F32, 2, ne, table, rows * vocab * sizeof(float));
	int rc = gguf_writer_save(w, path, err);
	gguf_writer_free(w);
	return rc;
}

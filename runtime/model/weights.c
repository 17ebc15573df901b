/* Releasing model weights (every array of an rt_weights lives in its one
 * arena, so freeing is one call), finding one by the engine's field name,
 * and what every loader shares about finiteness: the load note of its
 * scan and the run-time check of logits. Loading lives in the loaders
 * (model_gguf.c, the safetensors loader). */
#include "ctx.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rt_arch_name(int arch)
{
	switch (arch) {
	case RT_ARCH_LLAMA: return "llama";
	case RT_ARCH_QWEN2: return "qwen2";
	case RT_ARCH_QWEN3: return "qwen3";
	case RT_ARCH_GEMMA3: return "gemma3";
	default: return "unknown";
	}
}

void rt_weights_free(rt_weights *w)
{
	if (!w)
		return;
	free(w->arena);
	memset(w, 0, sizeof(*w));
}

const float *rt_model_weight(const rt_model *m, const char *field, int l, size_t *n)
{
	const rt_config *c = &m->cfg;
	const size_t D = (size_t)c->dim, F = (size_t)c->ffn_dim,
	             qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
	const rt_layer_weights *L = l >= 0 && l < c->n_layers ? &m->w.layers[l] : NULL;
	const size_t V = (size_t)(m->embd_rows > 0 ? m->embd_rows : c->vocab); /* table rows */
	const struct {
		const char *name;
		const float *p;
		size_t n;
	} t[] = {
		{"tok_embd", m->w.tok_embd, V * D},
		{"out_norm", m->w.out_norm, D},
		{"lm_head", m->w.lm_head, V * D},
		{"inv_freq", m->inv_freq, (size_t)rt_config_inv_freq_len(c)},
		/* layer l's RoPE table (head_dim / 2): Gemma 3's sliding layers
		 * their own base, every other layer the model's (gen/arch_gemma.c) */
		{"rope_freq", L ? m->inv_freq + (rt_config_layer_sliding(c, l) ? c->head_dim / 2 : 0) : NULL,
		 (size_t)c->head_dim / 2},
		{"attn_norm", L ? L->attn_norm : NULL, D},
		{"ffn_norm", L ? L->ffn_norm : NULL, D},
		{"wq", L ? L->wq : NULL, qd * D},
		{"wk", L ? L->wk : NULL, kvd * D},
		{"wv", L ? L->wv : NULL, kvd * D},
		{"wo", L ? L->wo : NULL, D * qd},
		{"w_gate", L ? L->w_gate : NULL, F * D},
		{"w_up", L ? L->w_up : NULL, F * D},
		{"w_down", L ? L->w_down : NULL, D * F},
		{"bq", L ? L->bq : NULL, qd},
		{"bk", L ? L->bk : NULL, kvd},
		{"bv", L ? L->bv : NULL, kvd},
		{"q_norm", L ? L->q_norm : NULL, (size_t)c->head_dim},
		{"k_norm", L ? L->k_norm : NULL, (size_t)c->head_dim},
		{"post_attn_norm", L ? L->post_attn_norm : NULL, D},
		{"post_ffn_norm", L ? L->post_ffn_norm : NULL, D},
	};
	*n = 0;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i].name, field)) {
			*n = t[i].p ? t[i].n : 0;
			return t[i].p;
		}
	return NULL;
}

void rt_load_note(const char *name, const sw_wscan_cost *c)
{
	fprintf(stderr, "specwright: %s: scanned %.1f MB (%llu tensors) for non-finite values in %.1f ms\n",
	        name, (double)c->bytes / 1e6, (unsigned long long)c->tensors, 1e3 * c->seconds);
}

int rt_logits_check(const float *logits, int rows, int n, size_t ld, const char *who, const char *op,
                    unsigned long long step, const int32_t *pos, sw_err *err)
{
	const sw_wformat *f32 = sw_wformat_get(SW_WT_F32);
	for (int r = 0; r < rows; r++) {
		const float *row = logits + (size_t)r * ld;
		const int64_t bad = sw_wformat_find_nonfinite(f32, row, (uint64_t)n);
		if (bad < 0)
			continue;
		char at[48] = "";
		if (pos)
			snprintf(at, sizeof(at), ", position %d", (int)pos[r]);
		return sw_errf(err, SW_EINVAL, "%s: non-finite logit %g (token id %lld, row %d%s): op %s, "
		               "step %llu: no token is drawn from a NaN or an infinity", who, (double)row[bad],
		               (long long)bad, r, at, op, step);
	}
	return 0;
}

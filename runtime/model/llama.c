/* The Llama-architecture forward pass on the host, composed from the
 * kernels/ref ops: a block of T tokens at arbitrary positions with an ancestor
 * mask, over the committed KV cache. This is the host backend's "native" path
 * and the reference the generated kernels are checked against. Also what the
 * Llama family shares (transformer.h: cache, embedding, MLP, taps, LM head)
 * and the model views (layer skip, padded vocabulary); the Qwen attention
 * block is qwen.c's, Gemma 3's hooks gemma.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "formats/gguf.h"
#include "transformer.h"
#include "model_gguf.h"
#include "gemm.h"
#include "kernels/ref/ref.h"

static size_t kv_dim(const rt_config *c) { return (size_t)c->n_kv_heads * c->head_dim; }

int rt_tf_ctx_init(rt_ctx *c, sw_err *err)
{
	const rt_model *m = c->m;
	const rt_config *cfg = &m->cfg;
	size_t kv = (size_t)m->n_layers_run * c->max_ctx * kv_dim(cfg);
	size_t T = (size_t)c->max_block;
	size_t qd = (size_t)cfg->n_heads * cfg->head_dim;
	/* mask row: 2 floats a word, first (8-byte aligned); x, h, o: T*dim
	 * each; q, att: T*qd; mlp: 2*T*ffn; attention: max_ctx */
	c->scratch_floats = 2 * (size_t)c->mask_words + 3 * T * cfg->dim + 2 * T * qd +
	                    2 * T * cfg->ffn_dim + c->max_ctx + T;
	c->k_cache = malloc(kv * sizeof(float));
	c->v_cache = malloc(kv * sizeof(float));
	c->scratch = malloc(c->scratch_floats * sizeof(float));
	if (!c->k_cache || !c->v_cache || !c->scratch) {
		free(c->k_cache);
		free(c->v_cache);
		free(c->scratch);
		return sw_errf(err, SW_ENOMEM, "%s: cannot allocate a KV cache of %zu MB for context %d",
		               m->name, 2 * kv * sizeof(float) >> 20, c->max_ctx);
	}
	return 0;
}

void rt_tf_ctx_free(rt_ctx *c)
{
	free(c->k_cache);
	free(c->v_cache);
	free(c->scratch);
}

void rt_tf_scratch_at(const rt_ctx *c, int T, rt_tf_scratch *s)
{
	const rt_config *cfg = &c->m->cfg;
	const size_t dim = (size_t)cfg->dim, qd = (size_t)cfg->n_heads * cfg->head_dim;
	s->mask_row = (uint64_t *)(void *)c->scratch;
	s->x = c->scratch + 2 * (size_t)c->mask_words;
	s->h = s->x + (size_t)T * dim;
	s->o = s->h + (size_t)T * dim;
	s->q = s->o + (size_t)T * dim;
	s->att = s->q + (size_t)T * qd;
	s->mlp = s->att + (size_t)T * qd;
	s->att_scratch = s->mlp + 2 * (size_t)T * cfg->ffn_dim;
}

int rt_tf_embed(const rt_ctx *c, const int32_t *tok, int T, float *x, sw_err *err)
{
	const rt_model *m = c->m;
	const int dim = m->cfg.dim;
	/* a padded draft (rt_model_pad_vocab): ids past its table embed as a
	 * zero row, as the engine's embedding16 does with N_IDS */
	const int rows = m->embd_rows > 0 ? m->embd_rows : m->cfg.vocab;
	if (ref_embedding(x, m->w.tok_embd, tok, T, dim, rows)) /* all or nothing */
		for (int t = 0; t < T; t++) {
			if (tok[t] < 0 || tok[t] >= m->cfg.vocab)
				return sw_errf(err, SW_EINVAL, "%s: token id %d outside the vocabulary [0, %d)",
				               m->name, tok[t], m->cfg.vocab);
			if (ref_embedding(x + (size_t)t * dim, m->w.tok_embd, &tok[t], 1, dim, rows))
				memset(x + (size_t)t * dim, 0, (size_t)dim * sizeof(*x));
		}
	if (m->cfg.embd_scale > 0) /* Gemma: in fp32, as llama.cpp and transformers' fp32 model */
		for (size_t i = 0; i < (size_t)T * dim; i++)
			x[i] *= m->cfg.embd_scale;
	return 0;
}

/* The MLP half of run layer l (norm, MLP, post-norm, residual add) and its taps. */
static void tf_mlp(rt_ctx *c, const rt_layer_weights *L, int l, int T, const rt_tf_scratch *s,
                   const rt_tf_family *fam)
{
	const rt_config *cfg = &c->m->cfg;
	const int dim = cfg->dim;
	ref_rmsnorm(s->h, s->x, L->ffn_norm, T, dim, cfg->norm_eps);
	if (fam->ffn)
		fam->ffn(c, L, T, s->h, s->o, s->mlp);
	else
		rt_mlp_swiglu(s->o, s->h, L->w_gate, L->w_up, L->w_down, T, dim, cfg->ffn_dim, s->mlp);
	if (L->post_ffn_norm)
		ref_rmsnorm(s->o, s->o, L->post_ffn_norm, T, dim, cfg->norm_eps);
	ref_add(s->x, s->x, s->o, (size_t)T * dim);
	for (int k = 0; k < c->n_taps; k++) {
		if (c->tap_layers[k] != l)
			continue;
		size_t row = (size_t)c->n_taps * dim;
		float *dst = c->tap_cache + ((size_t)c->len + c->blk_off) * row + (size_t)k * dim;
		for (int t = 0; t < T; t++)
			memcpy(dst + (size_t)t * row, s->x + (size_t)t * dim, (size_t)dim * sizeof(float));
	}
}

void rt_tf_head(const rt_ctx *c, int T, float *x, float *h, float *logits, float *hidden)
{
	const rt_model *m = c->m;
	const rt_config *cfg = &m->cfg;
	const rt_weights *w = &m->w;
	const int dim = cfg->dim;
	if (hidden)
		ref_rmsnorm(hidden, x, w->out_norm, T, dim, cfg->norm_eps);
	if (logits) {
		int V = cfg->vocab, Vh = m->vocab_limit > 0 ? m->vocab_limit : V;
		int rows = c->logits_last_only ? 1 : T;
		const float *xs = x + (size_t)(T - rows) * dim;
		if (Vh == V) {
			rt_lm_head(logits, xs, w->out_norm, w->lm_head, rows, dim, V, cfg->norm_eps, h);
		} else {
			/* Row r's Vh logits land at r*V, computed one row at a time
			 * (in place from the back would also work; rows are few). */
			for (int r = 0; r < rows; r++) {
				float *lr = logits + (size_t)r * V;
				rt_lm_head(lr, xs + (size_t)r * dim, w->out_norm, w->lm_head, 1, dim, Vh,
				            cfg->norm_eps, h);
				for (int v = Vh; v < V; v++)
					lr[v] = -INFINITY;
			}
		}
		const float cap = cfg->final_softcap;
		if (cap > 0)
			for (int r = 0; r < rows; r++)
				for (int v = 0; v < Vh; v++) {
					float *p = &logits[(size_t)r * V + v];
					*p = cap * tanhf(*p / cap);
				}
	}
}

int rt_tf_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
               float *logits, float *hidden, const rt_tf_family *fam, sw_err *err)
{
	const rt_model *m = c->m;
	const rt_config *cfg = &m->cfg;
	const rt_weights *w = &m->w;
	const int dim = cfg->dim, hd = cfg->head_dim, nh = cfg->n_heads, nkv = cfg->n_kv_heads;
	const int qd = nh * hd, kvd = nkv * hd;
	rt_tf_scratch s;
	rt_tf_scratch_at(c, T, &s);

	if (rt_tf_embed(c, tok, T, s.x, err))
		return err->code;
	for (int l = 0; l < m->n_layers_run; l++) {
		const int lw = m->layer_map[l];
		const rt_layer_weights *L = &w->layers[lw];
		float *kc = c->k_cache + (size_t)l * c->max_ctx * kvd;
		float *vc = c->v_cache + (size_t)l * c->max_ctx * kvd;
		size_t first = (size_t)c->len + c->blk_off; /* slot of the first new entry */
		float *kb = kc + first * kvd, *vb = vc + first * kvd;

		ref_rmsnorm(s.h, s.x, L->attn_norm, T, dim, cfg->norm_eps);
		rt_matmul(s.q, s.h, L->wq, T, dim, qd);
		rt_matmul(kb, s.h, L->wk, T, dim, kvd);
		rt_matmul(vb, s.h, L->wv, T, dim, kvd);
		fam->qk(c, L, lw, pos, T, s.q, kb, vb);
		if (fam->attend)
			fam->attend(c, lw, pos, T, s.q, kc, vc, mask, s.att, &s);
		else
			ref_attention_append(s.att, s.q, kc, vc, T, c->len, c->blk_off + T, nh, nkv, hd,
			                     mask, s.att_scratch);
		rt_matmul(s.o, s.att, L->wo, T, qd, dim);
		if (L->post_attn_norm)
			ref_rmsnorm(s.o, s.o, L->post_attn_norm, T, dim, cfg->norm_eps);
		ref_add(s.x, s.x, s.o, (size_t)T * dim);
		tf_mlp(c, L, l, T, &s, fam);
	}
	rt_tf_head(c, T, s.x, s.h, logits, hidden);
	if (!logits)
		return 0;
	/* a NaN or inf logit would be drawn as token 0 or -1 downstream: stop
	 * here, naming the step (this context's forward count) */
	const int rows = c->logits_last_only ? 1 : T, V = cfg->vocab;
	return rt_logits_check(logits, rows, m->vocab_limit > 0 ? m->vocab_limit : V, (size_t)V, m->name,
	                       "lm_head", (unsigned long long)c->n_evals + 1, pos + (T - rows), err);
}

/* Llama: no biases, RoPE in GGUF's "normal" pairing */
static void llama_qk(const rt_ctx *c, const rt_layer_weights *L, int lw, const int32_t *pos, int T,
                     float *q, float *k, float *v)
{
	const rt_config *cfg = &c->m->cfg;
	(void)L;
	(void)lw;
	(void)v;
	ref_rope(q, pos, T, cfg->n_heads, cfg->head_dim, cfg->head_dim, c->m->inv_freq);
	ref_rope(k, pos, T, cfg->n_kv_heads, cfg->head_dim, cfg->head_dim, c->m->inv_freq);
}

static int llama_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                      float *logits, float *hidden, sw_err *err)
{
	static const rt_tf_family fam = { llama_qk, NULL, NULL };
	return rt_tf_eval(c, tok, pos, T, mask, logits, hidden, &fam, err);
}

void rt_tf_commit_kv(rt_ctx *c, const int *keep, int n)
{
	const rt_model *m = c->m;
	size_t kvd = kv_dim(&m->cfg);
	for (int l = 0; l < m->n_layers_run; l++) {
		float *kc = c->k_cache + ((size_t)l * c->max_ctx + c->len) * kvd;
		float *vc = c->v_cache + ((size_t)l * c->max_ctx + c->len) * kvd;
		for (int i = 0; i < n; i++) {
			if (keep[i] == i)
				continue;
			memcpy(kc + (size_t)i * kvd, kc + (size_t)keep[i] * kvd, kvd * sizeof(float));
			memcpy(vc + (size_t)i * kvd, vc + (size_t)keep[i] * kvd, kvd * sizeof(float));
		}
	}
}

void rt_tf_free(rt_model *m)
{
	if (m->owns_weights)
		rt_weights_free(&m->w);
	free(m->inv_freq);
	free(m->layer_map);
	rt_model_free(m->owned_src);
	free(m);
}

static const struct rt_model_ops llama_ops = {
	/* .ctx_init  = */ rt_tf_ctx_init,
	/* .ctx_free  = */ rt_tf_ctx_free,
	/* .eval      = */ llama_eval,
	/* .commit_kv = */ rt_tf_commit_kv,
	/* .free      = */ rt_tf_free,
};

/* The arrays each family's forward reads beyond Llama's, present exactly
 * when the family has them: a forward never meets a NULL it needs, and a
 * bias or q/k norm is never dropped silently. */
static int arch_check_weights(const rt_config *c, const rt_weights *w, const char *name, sw_err *err)
{
	const bool bias = c->arch == RT_ARCH_QWEN2, gemma = c->arch == RT_ARCH_GEMMA3;
	const bool qknorm = c->arch == RT_ARCH_QWEN3 || gemma;
	for (int l = 0; w->layers && l < c->n_layers; l++) {
		const rt_layer_weights *L = &w->layers[l];
		const struct { const char *f; const float *p; bool want; } a[] = {
			{"bq", L->bq, bias}, {"bk", L->bk, bias}, {"bv", L->bv, bias},
			{"q_norm", L->q_norm, qknorm}, {"k_norm", L->k_norm, qknorm},
			{"post_attn_norm", L->post_attn_norm, gemma},
			{"post_ffn_norm", L->post_ffn_norm, gemma},
		};
		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
			if (!a[i].p != !a[i].want)
				return sw_errf(err, SW_EINVAL, "%s: layer %d weight %s: expected %s for architecture "
				               "%s, found %s", name, l, a[i].f, a[i].want ? "present" : "absent",
				               rt_arch_name(c->arch), a[i].p ? "present" : "absent");
	}
	return 0;
}

static int llama_check_config(const rt_config *c, const char *name, sw_err *err)
{
	if (c->arch != RT_ARCH_LLAMA && c->arch != RT_ARCH_QWEN2 && c->arch != RT_ARCH_QWEN3 &&
	    c->arch != RT_ARCH_GEMMA3)
		return sw_errf(err, SW_EINVAL, "%s: config arch: expected llama, qwen2, qwen3 or gemma3, found %d",
		               name, c->arch);
	const bool gemma = c->arch == RT_ARCH_GEMMA3;
	if (!gemma && (c->embd_scale != 0 || c->query_scalar != 0 || c->swa_window != 0 ||
	               c->swa_pattern != 0 || c->rope_theta_local != 0 || c->final_softcap != 0))
		return sw_errf(err, SW_EINVAL, "%s: config: Gemma 3 fields (embedding scale, query scale, sliding "
		               "window, softcap) set for architecture %s", name, rt_arch_name(c->arch));
	if (gemma && (!(c->embd_scale > 0) || !(c->query_scalar > 0) || c->swa_window < 0 ||
	              c->swa_pattern < 0 || (c->swa_window > 0 && !(c->rope_theta_local > 0)) ||
	              !(c->final_softcap >= 0)))
		return sw_errf(err, SW_EINVAL, "%s: config: expected a positive embedding and query scale, a "
		               "non-negative sliding window and pattern, a positive local RoPE base, a "
		               "non-negative softcap for gemma3", name);
	if (c->n_layers < 1 || c->dim < 1 || c->n_heads < 1 || c->n_kv_heads < 1 || c->head_dim < 2 ||
	    c->ffn_dim < 1 || c->vocab < 1)
		return sw_errf(err, SW_EINVAL, "%s: config has a non-positive dimension", name);
	if (c->n_heads % c->n_kv_heads)
		return sw_errf(err, SW_EINVAL, "%s: head count %d is not a multiple of the KV head count %d",
		               name, c->n_heads, c->n_kv_heads);
	if (c->head_dim % 2)
		return sw_errf(err, SW_EINVAL, "%s: head_dim %d must be even for RoPE", name, c->head_dim);
	return 0;
}

rt_model *rt_model_from_weights(const rt_config *cfg, rt_weights *w, const char *name, sw_err *err)
{
	if (llama_check_config(cfg, name, err) || arch_check_weights(cfg, w, name, err))
		goto out_free_w;
	rt_model *m = calloc(1, sizeof(*m));
	float *inv = malloc((size_t)rt_config_inv_freq_len(cfg) * sizeof(*inv));
	if (!m || !inv) {
		free(m);
		free(inv);
		sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
		goto out_free_w;
	}
	m->ops = cfg->arch == RT_ARCH_LLAMA ? &llama_ops : cfg->arch == RT_ARCH_GEMMA3 ? &rt_gemma_ops
	                                                                               : &rt_qwen_ops;
	m->kind = RT_MODEL_LLAMA;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->cfg = *cfg;
	m->w = *w;
	m->owns_weights = true;
	m->n_layers_run = cfg->n_layers;
	m->layer_map = malloc((size_t)cfg->n_layers * sizeof(*m->layer_map));
	if (!m->layer_map) {
		free(m);
		free(inv);
		sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
		goto out_free_w;
	}
	for (int l = 0; l < cfg->n_layers; l++)
		m->layer_map[l] = l;
	m->inv_freq = inv;
	ref_rope_freqs(inv, cfg->head_dim, cfg->rope_theta, cfg->rope_scaling, cfg->rope_factor,
	               cfg->rope_low_freq_factor, cfg->rope_high_freq_factor, cfg->rope_orig_ctx);
	if (cfg->arch == RT_ARCH_GEMMA3) /* the sliding layers': their own base, unscaled */
		ref_rope_freqs(inv + cfg->head_dim / 2, cfg->head_dim,
		               cfg->swa_window > 0 ? cfg->rope_theta_local : cfg->rope_theta,
		               RT_ROPE_SCALING_NONE, 1.0f, 0, 0, 0);
	memset(w, 0, sizeof(*w));
	return m;
out_free_w:
	rt_weights_free(w);
	return NULL;
}

rt_model *rt_model_layerskip(const rt_model *src, const int *layers, int n, int vocab_limit, sw_err *err)
{
	if (src->kind != RT_MODEL_LLAMA) {
		sw_errf(err, SW_EINVAL, "layer-skip drafting needs a transformer target; %s is not one", src->name);
		return NULL;
	}
	if (n < 1 || n >= src->cfg.n_layers) {
		sw_errf(err, SW_ERANGE, "layer-skip: %d layers requested, the target %s has %d (expected 1..%d)",
		        n, src->name, src->cfg.n_layers, src->cfg.n_layers - 1);
		return NULL;
	}
	for (int i = 0; i < n; i++)
		if (layers[i] < 0 || layers[i] >= src->cfg.n_layers || (i > 0 && layers[i] <= layers[i - 1])) {
			sw_errf(err, SW_EINVAL, "layer-skip: layer %d at index %d: expected increasing indices in [0, %d)",
			        layers[i], i, src->cfg.n_layers);
			return NULL;
		}
	if (vocab_limit < 0 || vocab_limit > src->cfg.vocab) {
		sw_errf(err, SW_ERANGE, "layer-skip: vocabulary limit %d outside [0, %d]", vocab_limit, src->cfg.vocab);
		return NULL;
	}
	rt_model *m = malloc(sizeof(*m));
	float *inv = malloc((size_t)rt_config_inv_freq_len(&src->cfg) * sizeof(*inv));
	int *map = malloc((size_t)n * sizeof(*map));
	if (!m || !inv || !map) {
		free(m);
		free(inv);
		free(map);
		sw_errf(err, SW_ENOMEM, "layer-skip: out of memory");
		return NULL;
	}
	*m = *src;
	m->owns_weights = false;
	m->owned_src = NULL;
	m->n_layers_run = n;
	memcpy(map, layers, (size_t)n * sizeof(*map));
	m->layer_map = map;
	m->vocab_limit = vocab_limit;
	memcpy(inv, src->inv_freq, (size_t)rt_config_inv_freq_len(&src->cfg) * sizeof(*inv));
	m->inv_freq = inv;
	snprintf(m->name, sizeof(m->name), "%.200s[%d of %d layers]", src->name, n, src->cfg.n_layers);
	return m;
}

rt_model *rt_model_pad_vocab(rt_model *src, int vocab, bool own, sw_err *err)
{
	if (src->kind != RT_MODEL_LLAMA || src->embd_rows > 0) {
		sw_errf(err, SW_EINVAL, "%s: a draft with fewer ids (%d) than its target (%d): expected "
		        "a Llama model (its embedding is padded with zero rows), found %s", src->name,
		        src->cfg.vocab, vocab, src->kind != RT_MODEL_LLAMA ? "a table model"
		                                                           : "one padded already");
		return NULL;
	}
	if (vocab < src->cfg.vocab) {
		sw_errf(err, SW_EINVAL, "%s: vocabulary: expected at most the target's %d, found %d",
		        src->name, vocab, src->cfg.vocab);
		return NULL;
	}
	rt_model *m = malloc(sizeof(*m));
	float *inv = malloc((size_t)rt_config_inv_freq_len(&src->cfg) * sizeof(*inv));
	int *map = malloc((size_t)src->n_layers_run * sizeof(*map));
	if (!m || !inv || !map) {
		free(m);
		free(inv);
		free(map);
		sw_errf(err, SW_ENOMEM, "%s: out of memory", src->name);
		return NULL;
	}
	*m = *src;
	m->owns_weights = false;
	m->cfg.vocab = vocab;
	m->embd_rows = src->cfg.vocab;
	m->vocab_limit = src->vocab_limit > 0 ? src->vocab_limit : src->cfg.vocab;
	memcpy(map, src->layer_map, (size_t)src->n_layers_run * sizeof(*map));
	m->layer_map = map;
	memcpy(inv, src->inv_freq, (size_t)rt_config_inv_freq_len(&src->cfg) * sizeof(*inv));
	m->inv_freq = inv;
	m->owned_src = own ? src : NULL;
	snprintf(m->name, sizeof(m->name), "%.200s[ids to %d]", src->name, vocab);
	return m;
}

rt_model *rt_model_layerskip_parse(const rt_model *src, const char *spec, sw_err *err)
{
	int layers[1024], n = 0, vlim = 0;
	const char *p = spec;
	char *end;
	int L = src->cfg.n_layers;
	long a = strtol(p, &end, 10);
	if (end == p)
		goto bad;
	if (*end == '\0' || *end == '@') {
		/* "N": the first N layers */
		if (a < 1 || a >= L || a > 1024)
			goto bad_range;
		for (n = 0; n < a; n++)
			layers[n] = n;
		p = end;
	} else {
		for (;;) {
			a = strtol(p, &end, 10);
			if (end == p)
				goto bad;
			long b = a;
			p = end;
			if (*p == '-') {
				b = strtol(p + 1, &end, 10);
				if (end == p + 1)
					goto bad;
				p = end;
			}
			if (a < 0 || b < a || b >= L)
				goto bad_range;
			for (long i = a; i <= b && n < 1024; i++)
				layers[n++] = (int)i;
			if (*p != ',')
				break;
			p++;
		}
	}
	if (*p == '@') {
		long v = strtol(p + 1, &end, 10);
		if (end == p + 1 || *end || v < 1 || v > src->cfg.vocab) {
			sw_errf(err, SW_EINVAL, "layerskip:%s: vocabulary limit after '@' must be in [1, %d]", spec,
			        src->cfg.vocab);
			return NULL;
		}
		vlim = (int)v;
	} else if (*p) {
		goto bad;
	}
	return rt_model_layerskip(src, layers, n, vlim, err);
bad:
	sw_errf(err, SW_EINVAL, "layerskip:%s: expected N, or ranges like 0-11,24-29, optionally @VOCAB", spec);
	return NULL;
bad_range:
	sw_errf(err, SW_ERANGE, "layerskip:%s: layers must lie in [0, %d) (the target has %d layers)", spec, L, L);
	return NULL;
}

rt_model *rt_llama_from_gguf_file(gguf_file *f, sw_err *err)
{
	rt_config cfg;
	rt_weights w;
	memset(&w, 0, sizeof(w));
	if (rt_llama_load_gguf(f, &cfg, &w, err))
		return NULL;
	return rt_model_from_weights(&cfg, &w, f->path, err);
}

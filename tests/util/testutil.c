/* Test helpers (see testutil.h). */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "formats/gguf.h"

uint64_t tu_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

double tu_uniform(uint64_t *s) { return ((tu_rand(s) >> 11) + 0.5) * 0x1.0p-53; }

void tu_random_table(float *t, int rows, int V, double zero_frac, uint64_t seed)
{
	uint64_t s = seed;
	for (int r = 0; r < rows; r++) {
		double sum = 0;
		for (int v = 0; v < V; v++) {
			double x = tu_uniform(&s) < zero_frac ? 0.0 : 0.05 + tu_uniform(&s);
			t[(size_t)r * V + v] = (float)x;
			sum += x;
		}
		if (sum == 0) {
			t[(size_t)r * V + (int)(tu_rand(&s) % (uint64_t)V)] = 1.0f;
			sum = 1;
		}
		for (int v = 0; v < V; v++)
			t[(size_t)r * V + v] = (float)(t[(size_t)r * V + v] / sum);
	}
}

static rt_model *tiny_model(int arch, int vocab, int dim, int n_layers, int n_heads, int n_kv_heads,
                            int head_dim, int ffn, uint64_t seed)
{
	rt_config c;
	memset(&c, 0, sizeof(c));
	c.arch = arch;
	c.n_layers = n_layers;
	c.dim = dim;
	c.n_heads = n_heads;
	c.n_kv_heads = n_kv_heads;
	c.head_dim = head_dim;
	c.ffn_dim = ffn;
	c.vocab = vocab;
	c.max_ctx = 4096;
	c.rope_theta = arch == RT_ARCH_LLAMA ? 10000.0f : 1000000.0f;
	c.norm_eps = 1e-5f;
	c.bos_id = c.eos_id = -1;
	int qd = n_heads * c.head_dim, kvd = n_kv_heads * c.head_dim;
	size_t per_layer = 2 * (size_t)dim + (size_t)qd * dim * 2 + (size_t)kvd * dim * 2 + 3 * (size_t)ffn * dim +
	                   (size_t)qd + 2 * (size_t)kvd + 2 * (size_t)head_dim;
	size_t total = (size_t)vocab * dim * 2 + dim + per_layer * n_layers;
	rt_weights w;
	memset(&w, 0, sizeof(w));
	size_t layer_bytes = (size_t)n_layers * sizeof(rt_layer_weights);
	w.arena = calloc(1, layer_bytes + total * sizeof(float));
	w.arena_bytes = layer_bytes + total * sizeof(float);
	w.layers = w.arena;
	float *p = (float *)((char *)w.arena + layer_bytes);
	uint64_t s = seed;
	/* Scales keep logits O(1..3) so distributions are neither flat nor one-hot. */
#define TAKE(ptr, n, scale, bias)                                                       \
	do {                                                                                \
		ptr = p;                                                                        \
		for (size_t i_ = 0; i_ < (size_t)(n); i_++)                                     \
			p[i_] = (float)((bias) + (scale) * (2 * tu_uniform(&s) - 1));               \
		p += (n);                                                                       \
	} while (0)
	TAKE(w.tok_embd, (size_t)vocab * dim, 1.0, 0.0);
	for (int l = 0; l < n_layers; l++) {
		rt_layer_weights *L = &w.layers[l];
		double ws = 1.0 / sqrt((double)dim);
		TAKE(L->attn_norm, dim, 0.2, 1.0);
		TAKE(L->wq, (size_t)qd * dim, 2 * ws, 0.0);
		TAKE(L->wk, (size_t)kvd * dim, 2 * ws, 0.0);
		TAKE(L->wv, (size_t)kvd * dim, ws, 0.0);
		TAKE(L->wo, (size_t)dim * qd, ws, 0.0);
		TAKE(L->ffn_norm, dim, 0.2, 1.0);
		TAKE(L->w_gate, (size_t)ffn * dim, ws, 0.0);
		TAKE(L->w_up, (size_t)ffn * dim, ws, 0.0);
		TAKE(L->w_down, (size_t)dim * ffn, 1.0 / sqrt((double)ffn), 0.0);
	}
	TAKE(w.out_norm, dim, 0.2, 1.0);
	TAKE(w.lm_head, (size_t)vocab * dim, 1.5, 0.0);
	/* the families' extra arrays last: a Llama draws what it always drew */
	for (int l = 0; l < n_layers; l++) {
		rt_layer_weights *L = &w.layers[l];
		if (arch == RT_ARCH_QWEN2) {
			TAKE(L->bq, qd, 0.5, 0.0);
			TAKE(L->bk, kvd, 0.5, 0.0);
			TAKE(L->bv, kvd, 0.5, 0.0);
		} else if (arch == RT_ARCH_QWEN3) {
			TAKE(L->q_norm, head_dim, 0.2, 1.0);
			TAKE(L->k_norm, head_dim, 0.2, 1.0);
		}
	}
#undef TAKE
	sw_err err;
	return rt_model_from_weights(&c, &w, arch == RT_ARCH_LLAMA ? "tiny-llama" : rt_arch_name(arch), &err);
}

/* One random F32 tensor (ne0 in, ne1 out; ne1 0: a vector) of bias +
 * scale U(-1, 1) into w. */
static int gemma_tensor(gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1, double scale,
                        double bias, uint64_t *s)
{
	const uint64_t n = ne0 * (ne1 ? ne1 : 1), ne[2] = {ne0, ne1};
	float *x = malloc(sizeof(*x) * n);
	if (!x)
		return -1;
	for (uint64_t i = 0; i < n; i++)
		x[i] = (float)(bias + scale * (2 * tu_uniform(s) - 1));
	gguf_w_tensor(w, name, GGML_T_F32, ne1 ? 2 : 1, ne, x, n * sizeof(*x)); /* copied */
	free(x);
	return 0;
}

int tu_tiny_gemma_gguf(const char *path, int vocab, int dim, int n_layers, int n_heads,
                       int n_kv_heads, int head_dim, int ffn, int window, uint64_t seed,
                       sw_err *err)
{
	gguf_writer *w = gguf_writer_new(3, 32);
	if (!w)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	gguf_w_str(w, "general.architecture", "gemma3");
	gguf_w_str(w, "general.name", "tiny-gemma3");
	gguf_w_u32(w, "gemma3.context_length", 4096);
	gguf_w_u32(w, "gemma3.embedding_length", (uint32_t)dim);
	gguf_w_u32(w, "gemma3.block_count", (uint32_t)n_layers);
	gguf_w_u32(w, "gemma3.feed_forward_length", (uint32_t)ffn);
	gguf_w_u32(w, "gemma3.attention.head_count", (uint32_t)n_heads);
	gguf_w_u32(w, "gemma3.attention.head_count_kv", (uint32_t)n_kv_heads);
	gguf_w_u32(w, "gemma3.attention.key_length", (uint32_t)head_dim);
	gguf_w_u32(w, "gemma3.attention.value_length", (uint32_t)head_dim);
	gguf_w_f32(w, "gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
	gguf_w_f32(w, "gemma3.rope.freq_base", 1000000.0f);
	gguf_w_u32(w, "gemma3.attention.sliding_window", (uint32_t)window);
	const uint64_t D = (uint64_t)dim, Q = (uint64_t)n_heads * head_dim,
	               K = (uint64_t)n_kv_heads * head_dim, F = (uint64_t)ffn;
	const double ws = 1.0 / sqrt((double)dim);
	uint64_t s = seed;
	char nm[64];
	/* the embedding times sqrt(dim) in the forward: rows of O(1) after it */
	int rc = gemma_tensor(w, "token_embd.weight", D, (uint64_t)vocab, 1.5 * ws, 0.0, &s);
	for (int l = 0; l < n_layers && !rc; l++) {
		static const struct { const char *name; char in, out; double scale, bias; } T[] = {
			{"attn_norm", 'D', 0, 0.2, 1.0}, {"attn_q", 'D', 'Q', 2.0, 0.0},
			{"attn_k", 'D', 'K', 2.0, 0.0}, {"attn_v", 'D', 'K', 1.0, 0.0},
			{"attn_q_norm", 'H', 0, 0.2, 1.0}, {"attn_k_norm", 'H', 0, 0.2, 1.0},
			{"attn_output", 'Q', 'D', 1.0, 0.0}, {"post_attention_norm", 'D', 0, 0.2, 1.0},
			{"ffn_norm", 'D', 0, 0.2, 1.0}, {"ffn_gate", 'D', 'F', 1.0, 0.0},
			{"ffn_up", 'D', 'F', 1.0, 0.0}, {"ffn_down", 'F', 'D', 1.0, 0.0},
			{"post_ffw_norm", 'D', 0, 0.2, 1.0}};
		for (size_t i = 0; i < sizeof(T) / sizeof(T[0]) && !rc; i++) {
#define SZ(c) ((c) == 'D' ? D : (c) == 'Q' ? Q : (c) == 'K' ? K : (c) == 'F' ? F : (c) == 'H' ? (uint64_t)head_dim : 0)
			const uint64_t in = SZ(T[i].in), out = SZ(T[i].out);
#undef SZ
			snprintf(nm, sizeof(nm), "blk.%d.%s.weight", l, T[i].name);
			/* a GEMM weight scaled by 1 / sqrt(its k); a norm 1 + w */
			const double sc = out ? T[i].scale / sqrt((double)in) : T[i].scale;
			rc = gemma_tensor(w, nm, in, out, sc, T[i].bias, &s);
		}
	}
	if (!rc)
		rc = gemma_tensor(w, "output_norm.weight", D, 0, 0.2, 1.0, &s);
	if (rc) {
		gguf_writer_free(w);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	rc = gguf_writer_save(w, path, err);
	gguf_writer_free(w);
	return rc;
}

rt_model *tu_tiny_llama(int vocab, int dim, int n_layers, int n_heads, int n_kv_heads, int ffn,
                        uint64_t seed)
{
	return tiny_model(RT_ARCH_LLAMA, vocab, dim, n_layers, n_heads, n_kv_heads, dim / n_heads, ffn, seed);
}

rt_model *tu_tiny_qwen(int arch, int vocab, int dim, int n_layers, int n_heads, int n_kv_heads,
                       int head_dim, int ffn, uint64_t seed)
{
	return tiny_model(arch, vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn, seed);
}

static void seq_rec(rt_ctx *c, int V, int depth, int n, const rt_sampling *s, double pr, size_t idx,
                    float *logits, float *probs, int *sidx, double *out)
{
	/* logits hold the distribution after the current sequence */
	float *p = probs + (size_t)depth * V;
	rt_probs(p, logits + (size_t)depth * V, V, s, sidx);
	for (int v = 0; v < V; v++) {
		if (p[v] == 0.0f)
			continue;
		size_t id = idx * V + v;
		if (depth + 1 == n) {
			out[id] += pr * p[v];
			continue;
		}
		int len = c->len;
		sw_err err;
		int32_t t = v;
		rt_ctx_feed(c, &t, 1, logits + (size_t)(depth + 1) * V, &err);
		seq_rec(c, V, depth + 1, n, s, pr * p[v], id, logits, probs, sidx, out);
		rt_ctx_truncate(c, len);
	}
}

void tu_seq_dist(const rt_model *m, const int32_t *prompt, int n_prompt, int n, const rt_sampling *s,
                 double *probs)
{
	int V = m->cfg.vocab;
	size_t K = 1;
	for (int i = 0; i < n; i++)
		K *= (size_t)V;
	memset(probs, 0, K * sizeof(*probs));
	sw_err err;
	rt_ctx *c = rt_ctx_new(m, n_prompt + n + 8, n_prompt + n + 8, &err);
	float *logits = malloc((size_t)(n + 1) * V * sizeof(float));
	float *pb = malloc((size_t)(n + 1) * V * sizeof(float));
	int *sidx = malloc((size_t)V * sizeof(int));
	rt_ctx_feed(c, prompt, n_prompt, logits, &err);
	seq_rec(c, V, 0, n, s, 1.0, 0, logits, pb, sidx, probs);
	free(logits);
	free(pb);
	free(sidx);
	rt_ctx_free(c);
}

double tu_norm_quantile(double p)
{
	/* Upper quantile: returns z with P(Z > z) = p, via Acklam's algorithm
	 * for the lower quantile of 1 - p (relative error < 1.2e-9). */
	static const double a[] = { -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
	                            1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00 };
	static const double b[] = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
	                            6.680131188771972e+01, -1.328068155288572e+01 };
	static const double c[] = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
	                            -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00 };
	static const double d[] = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
	                            3.754408661907416e+00 };
	double q = p; /* lower tail of -z */
	double x;
	if (q < 0.02425) {
		double r = sqrt(-2 * log(q));
		x = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) /
		    ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1);
	} else {
		double r = q - 0.5, t = r * r;
		x = (((((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4]) * t + a[5]) * r /
		    (((((b[0] * t + b[1]) * t + b[2]) * t + b[3]) * t + b[4]) * t + 1);
	}
	return -x;
}

double tu_chi2_crit(int df, double alpha)
{
	double z = tu_norm_quantile(alpha);
	double k = 2.0 / (9.0 * df);
	double t = 1 - k + z * sqrt(k);
	return df * t * t * t;
}

double tu_chi2(const uint64_t *counts, const double *probs, int k, uint64_t n, int *df)
{
	double stat = 0, pool_e = 0, pool_o = 0;
	int cats = 0;
	for (int i = 0; i < k; i++) {
		double e = probs[i] * (double)n;
		if (probs[i] <= 0) {
			if (counts[i]) {
				*df = 1;
				return INFINITY;
			}
			continue;
		}
		if (e < 5) {
			pool_e += e;
			pool_o += (double)counts[i];
			continue;
		}
		stat += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
		cats++;
	}
	if (pool_e > 0) {
		stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
		cats++;
	}
	*df = cats > 1 ? cats - 1 : 1;
	return stat;
}

int tu_gguf_revocab(const char *src, const char *dst, int vocab, const char *const *tokens,
                    int n_tok, const char *tok_model, sw_err *err)
{
	gguf_file *f = gguf_open(src, err);
	gguf_writer *w = gguf_writer_new(3, 32);
	void *bufs[2] = {NULL, NULL};
	int nb = 0, rc = -1;
	if (!f || !w)
		goto out;
	for (uint64_t i = 0; i < f->n_kv; i++) {
		const gguf_kv *kv = &f->kv[i];
		char key[256], *v;
		gguf_str s;
		snprintf(key, sizeof(key), "%.*s", (int)kv->key.n, kv->key.p);
		if (!strcmp(key, "llama.vocab_size")) {
			gguf_w_u32(w, key, (uint32_t)vocab);
		} else if (kv->type == GGUF_VT_STRING) {
			if (gguf_get_str(f, key, &s, err) || !(v = strndup(s.p, (size_t)s.n)))
				goto out;
			gguf_w_str(w, key, v);
			free(v);
		} else if (kv->type != GGUF_VT_ARRAY) {
			gguf_w_scalar(w, key, kv->type, kv->val);
		}
	}
	if (tokens) {
		gguf_w_str(w, "tokenizer.ggml.model", tok_model);
		gguf_w_arr_str(w, "tokenizer.ggml.tokens", tokens, NULL, (uint64_t)n_tok);
		/* a byte-level BPE needs its merges key: none, every token whole */
		if (!strcmp(tok_model, "gpt2"))
			gguf_w_arr_str(w, "tokenizer.ggml.merges", NULL, NULL, 0);
	}
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const gguf_tensor *t = &f->tensors[i];
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)t->name.n, t->name.p);
		if ((strcmp(name, "token_embd.weight") && strcmp(name, "output.weight")) ||
		    t->type != GGML_T_F32) {
			gguf_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
			continue;
		}
		const uint64_t D = t->ne[0], keep = t->ne[1] < (uint64_t)vocab ? t->ne[1] : (uint64_t)vocab;
		const uint64_t ne[2] = {D, (uint64_t)vocab};
		float *x = calloc((size_t)(D * vocab), sizeof(*x));
		if (!x)
			goto out;
		bufs[nb++] = x;
		memcpy(x, t->data, (size_t)(D * keep) * sizeof(*x));
		gguf_w_tensor(w, name, GGML_T_F32, 2, ne, x, D * vocab * sizeof(*x));
	}
	rc = gguf_writer_save(w, dst, err);
out:
	for (int i = 0; i < nb; i++)
		free(bufs[i]);
	gguf_writer_free(w);
	gguf_close(f);
	return rc;
}

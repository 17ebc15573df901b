/* Llama-family weights and config from a GGUF file (llama.cpp tensor and key
 * names; general.architecture "llama", "qwen2", "qwen3" or "gemma3", keys under that
 * prefix). Everything is dequantized to fp32 into one arena; ggml's ne = [in,
 * out] is already the row-major (out, in) layout rt_weights wants, and Q/K
 * rows stay in GGUF order (Llama: GGUF's RoPE pairing; Qwen: HF order, NeoX
 * RoPE, as llama.cpp runs them). Gemma 3's norms are stored as (1 + w)
 * by llama.cpp's converter, which is what the forward wants. Not a
 * converter. */
#include "model_gguf.h"

#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

/* The metadata key "<arch>.<suffix>" */
#define KEY(suffix) key_name(kb, sizeof(kb), c->arch, suffix)
static const char *key_name(char *b, size_t n, int arch, const char *suffix)
{
	snprintf(b, n, "%s.%s", rt_arch_name(arch), suffix);
	return b;
}
/* Loose sanity bounds: large enough for any Llama, small enough that every
 * size product below fits comfortably in 64 bits. */
#define MAX_DIM (1 << 24)

static int get_dim(const gguf_file *f, const char *key, int *out, bool required, int def, int max, sw_err *err)
{
	uint32_t v;
	int rc = gguf_get_u32(f, key, &v, err);
	if (rc == SW_ENOENT_KEY && !required) {
		*out = def;
		return 0;
	}
	if (rc)
		return rc;
	if (v < 1 || v > (uint32_t)max)
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected a value in 1..%d, found %u",
			       f->path, key, max, v);
	*out = (int)v;
	return 0;
}

static int get_float(const gguf_file *f, const char *key, float *out, bool required, float def, sw_err *err)
{
	int rc = gguf_get_f32(f, key, out, err);
	if (rc == SW_ENOENT_KEY && !required) {
		*out = def;
		return 0;
	}
	if (rc)
		return rc;
	if (!(*out > 0) || *out > 1e30f) /* also rejects NaN */
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected a positive finite number, found %g",
			       f->path, key, (double)*out);
	return 0;
}

static int get_token_id(const gguf_file *f, const char *key, int vocab, int *out, sw_err *err)
{
	uint32_t v;
	int rc = gguf_get_u32(f, key, &v, err);
	if (rc == SW_ENOENT_KEY) {
		*out = -1;
		return 0;
	}
	if (rc)
		return rc;
	if (v >= (uint32_t)vocab)
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': token id %u is outside the vocabulary (0..%d)",
			       f->path, key, v, vocab - 1);
	*out = (int)v;
	return 0;
}

static int rope_scaling(const gguf_file *f, rt_config *c, sw_err *err)
{
	gguf_str type;
	char kb[96];
	int rc;

	c->rope_scaling = RT_ROPE_SCALING_NONE;
	c->rope_factor = 1.0f;
	c->rope_low_freq_factor = 1.0f;
	c->rope_high_freq_factor = 4.0f;
	c->rope_orig_ctx = c->max_ctx;

	rc = gguf_get_str(f, KEY("rope.scaling.type"), &type, err);
	if (rc == SW_ENOENT_KEY) {
		/* older files: a bare linear factor */
		rc = get_float(f, KEY("rope.scale_linear"), &c->rope_factor, false, 1.0f, err);
		if (!rc && c->rope_factor != 1.0f)
			c->rope_scaling = RT_ROPE_SCALING_LINEAR;
		goto check_freqs;
	}
	if (rc)
		return rc;
	if (type.n == 4 && !memcmp(type.p, "none", 4))
		goto check_freqs;
	if (type.n == 6 && !memcmp(type.p, "linear", 6)) {
		c->rope_scaling = RT_ROPE_SCALING_LINEAR;
		rc = get_float(f, KEY("rope.scaling.factor"), &c->rope_factor, true, 1.0f, err);
		goto check_freqs;
	}
	if (type.n == 6 && !memcmp(type.p, "llama3", 6)) {
		c->rope_scaling = RT_ROPE_SCALING_LLAMA3;
		/* defaults are Llama-3.1's published values */
		if ((rc = get_float(f, KEY("rope.scaling.factor"), &c->rope_factor, true, 8.0f, err)) ||
		    (rc = get_float(f, KEY("rope.scaling.low_freq_factor"), &c->rope_low_freq_factor, false, 1.0f, err)) ||
		    (rc = get_float(f, KEY("rope.scaling.high_freq_factor"), &c->rope_high_freq_factor, false, 4.0f, err)) ||
		    (rc = get_dim(f, KEY("rope.scaling.original_context_length"), &c->rope_orig_ctx, false, 8192, INT32_MAX, err)))
			return rc;
		if (!(c->rope_high_freq_factor > c->rope_low_freq_factor))
			return sw_errf(err, SW_EINVAL, "%s: rope.scaling: high_freq_factor (%g) must exceed low_freq_factor (%g)",
				       f->path, (double)c->rope_high_freq_factor, (double)c->rope_low_freq_factor);
		return 0;
	}
	return sw_errf(err, SW_ENOTSUP, "%s: metadata key '%s': expected \"none\", \"linear\" or \"llama3\", found \"%.*s\"",
		       f->path, KEY("rope.scaling.type"), (int)(type.n < 64 ? type.n : 64), type.p);
check_freqs:
	if (rc)
		return rc;
	/* llama.cpp stores Llama-3.1 scaling only as precomputed per-frequency
	 * factors; ignoring them would silently change every position. */
	if (gguf_tensor_find(f, "rope_freqs.weight"))
		return sw_errf(err, SW_ENOTSUP, "%s: tensor 'rope_freqs.weight' (precomputed RoPE factors) is not supported; "
			       "set %s = \"llama3\" with its factors instead", f->path, KEY("rope.scaling.type"));
	return 0;
}

/* What llama.cpp's llama_model::load_hparams reads or fixes for gemma3:
 * the sliding window (absent or 0: every layer global), the pattern 6 and
 * the local RoPE base 10000 (fixed in llama.cpp: no key holds them), the
 * optional final logit softcap, the query scale head_dim^-1/2 except for the
 * 62-layer 27B (dim / n_heads)^-1/2 (query_pre_attn_scalar, which the file
 * does not carry), the embedding times sqrtf(dim) in f32. An attention
 * logit softcap (Gemma 2's) is refused: gemma3 has none. */
static int gemma3_config(const gguf_file *f, rt_config *c, sw_err *err)
{
	char kb[96];
	uint32_t win = 0;
	float cap = 0;
	int rc = gguf_get_u32(f, KEY("attention.sliding_window"), &win, err);
	if (rc && rc != SW_ENOENT_KEY)
		return rc;
	if (win > (uint32_t)INT32_MAX)
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected at most %d, found %u", f->path,
		               KEY("attention.sliding_window"), INT32_MAX, win);
	if ((rc = get_float(f, KEY("final_logit_softcapping"), &c->final_softcap, false, 0.0f, err)))
		return rc;
	rc = gguf_get_f32(f, KEY("attn_logit_softcapping"), &cap, err);
	if (rc && rc != SW_ENOENT_KEY)
		return rc;
	if (!rc && cap != 0)
		return sw_errf(err, SW_ENOTSUP, "%s: metadata key '%s': expected absent or 0 (gemma3 has no "
		               "attention softcap), found %g", f->path, KEY("attn_logit_softcapping"), (double)cap);
	c->swa_window = (int)win;
	c->swa_pattern = win ? 6 : 0;
	c->rope_theta_local = win ? 10000.0f : 0.0f;
	c->embd_scale = sqrtf((float)c->dim);
	c->query_scalar = (float)(c->n_layers == 62 ? c->dim / c->n_heads : c->head_dim);
	return 0;
}

int rt_llama_config_from_gguf(const gguf_file *f, rt_config *cfg, sw_err *err)
{
	rt_config cc, *c = &cc;
	gguf_str arch;
	char kb[96];
	int rc;

	memset(c, 0, sizeof(*c));
	rc = gguf_get_str(f, "general.architecture", &arch, err);
	if (rc)
		return rc;
	static const int archs[] = { RT_ARCH_LLAMA, RT_ARCH_QWEN2, RT_ARCH_QWEN3, RT_ARCH_GEMMA3 };
	c->arch = -1;
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
		const char *nm = rt_arch_name(archs[i]);
		if (arch.n == strlen(nm) && !memcmp(arch.p, nm, arch.n))
			c->arch = archs[i];
	}
	if (c->arch < 0)
		return sw_errf(err, SW_ENOTSUP, "%s: metadata key 'general.architecture': expected \"llama\", \"qwen2\", \"qwen3\" or \"gemma3\", found \"%.*s\"",
			       f->path, (int)(arch.n < 64 ? arch.n : 64), arch.p);

	if ((rc = get_dim(f, KEY("block_count"), &c->n_layers, true, 0, 4096, err)) ||
	    (rc = get_dim(f, KEY("embedding_length"), &c->dim, true, 0, MAX_DIM, err)) ||
	    (rc = get_dim(f, KEY("feed_forward_length"), &c->ffn_dim, true, 0, MAX_DIM, err)) ||
	    (rc = get_dim(f, KEY("attention.head_count"), &c->n_heads, true, 0, 65536, err)) ||
	    (rc = get_dim(f, KEY("attention.head_count_kv"), &c->n_kv_heads, false, c->n_heads, 65536, err)) ||
	    (rc = get_dim(f, KEY("context_length"), &c->max_ctx, true, 0, INT32_MAX, err)) ||
	    (rc = get_float(f, KEY("rope.freq_base"), &c->rope_theta, false, 10000.0f, err)) ||
	    (rc = get_float(f, KEY("attention.layer_norm_rms_epsilon"), &c->norm_eps, true, 0, err)))
		return rc;
	if (c->n_heads % c->n_kv_heads)
		return sw_errf(err, SW_EINVAL, "%s: attention.head_count (%d) must be a multiple of attention.head_count_kv (%d)",
			       f->path, c->n_heads, c->n_kv_heads);

	/* head_dim: explicit key_length when present, else dim / n_heads */
	int kl, vl;
	if ((rc = get_dim(f, KEY("attention.key_length"), &kl, false, 0, MAX_DIM, err)) ||
	    (rc = get_dim(f, KEY("attention.value_length"), &vl, false, kl, MAX_DIM, err)))
		return rc;
	if (kl) {
		if (vl != kl)
			return sw_errf(err, SW_ENOTSUP, "%s: attention.key_length (%d) != attention.value_length (%d) is not supported",
				       f->path, kl, vl);
		c->head_dim = kl;
	} else {
		if (c->dim % c->n_heads)
			return sw_errf(err, SW_EINVAL, "%s: embedding_length (%d) is not a multiple of attention.head_count (%d)",
				       f->path, c->dim, c->n_heads);
		c->head_dim = c->dim / c->n_heads;
	}
	if (c->head_dim % 2 || (uint64_t)c->head_dim * (uint64_t)c->n_heads > MAX_DIM)
		return sw_errf(err, SW_EINVAL, "%s: head_dim %d (x %d heads) must be even and at most %d in total",
			       f->path, c->head_dim, c->n_heads, MAX_DIM);
	int rope_dim;
	if ((rc = get_dim(f, KEY("rope.dimension_count"), &rope_dim, false, c->head_dim, MAX_DIM, err)))
		return rc;
	if (rope_dim != c->head_dim)
		return sw_errf(err, SW_ENOTSUP, "%s: metadata key '%s': expected %d (head_dim; partial RoPE is not supported), found %d",
			       f->path, KEY("rope.dimension_count"), c->head_dim, rope_dim);

	const gguf_tensor *te = gguf_tensor_find(f, "token_embd.weight");
	rc = get_dim(f, KEY("vocab_size"), &c->vocab, false, 0, MAX_DIM, err);
	if (rc)
		return rc;
	if (!c->vocab) {
		if (!te)
			return sw_errf(err, SW_EINVAL, "%s: no '%s' key and no tensor 'token_embd.weight' to take it from",
				       f->path, KEY("vocab_size"));
		if (te->n_dims < 2 || te->ne[1] > MAX_DIM)
			return sw_errf(err, SW_EINVAL, "%s: tensor 'token_embd.weight': expected 2 dims with at most %d rows",
				       f->path, MAX_DIM);
		c->vocab = (int)te->ne[1];
	}
	if ((rc = rope_scaling(f, c, err)))
		return rc;
	if ((rc = get_token_id(f, "tokenizer.ggml.bos_token_id", c->vocab, &c->bos_id, err)) ||
	    (rc = get_token_id(f, "tokenizer.ggml.eos_token_id", c->vocab, &c->eos_id, err)))
		return rc;
	c->tied_embd = gguf_tensor_find(f, "output.weight") == NULL;
	if (c->arch == RT_ARCH_GEMMA3 && (rc = gemma3_config(f, c, err)))
		return rc;
	*cfg = cc;
	return 0;
}

/* ---- weights ------------------------------------------------------------ */

struct want {
	char name[48];
	uint64_t ne0, ne1;  /* ggml order; ne1 == 0 for a vector */
	float **dst;
	const gguf_tensor *t;
	size_t off;         /* in the arena */
};

static void shape_str(char *b, size_t n, const gguf_tensor *t)
{
	int k = snprintf(b, n, "[");
	for (uint32_t d = 0; d < t->n_dims && k > 0 && (size_t)k < n; d++)
		k += snprintf(b + k, n - (size_t)k, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
	if (k > 0 && (size_t)k < n)
		snprintf(b + k, n - (size_t)k, "]");
}

static int check_tensor(const gguf_file *f, struct want *q, sw_err *err)
{
	const gguf_tensor *t = gguf_tensor_find(f, q->name);
	char found[96], expected[64];

	if (!t)
		return sw_errf(err, SW_EINVAL, "%s: missing tensor '%s'", f->path, q->name);
	/* trailing dimensions of 1 are the same shape */
	uint32_t nd = t->n_dims;
	while (nd > 1 && t->ne[nd - 1] == 1)
		nd--;
	bool ok = q->ne1 ? (nd <= 2 && t->ne[0] == q->ne0 && t->ne[1] == q->ne1)
			 : (nd == 1 && t->ne[0] == q->ne0);
	if (!ok) {
		shape_str(found, sizeof(found), t);
		if (q->ne1)
			snprintf(expected, sizeof(expected), "[%llu, %llu]", (unsigned long long)q->ne0,
				 (unsigned long long)q->ne1);
		else
			snprintf(expected, sizeof(expected), "[%llu]", (unsigned long long)q->ne0);
		return sw_errf(err, SW_EINVAL, "%s: tensor '%s': expected shape %s (ggml order: in, out), found %s",
			       f->path, q->name, expected, found);
	}
	if (!gguf_dtype_can_dequantize(t->type))
		return sw_errf(err, SW_ENOTSUP, "%s: tensor '%s' has type %s, which cannot be dequantized",
			       f->path, q->name, ggml_dtype_name(t->type));
	q->t = t;
	return 0;
}

static void want_add(struct want *q, size_t *n, const char *name, uint64_t ne0, uint64_t ne1, float **dst)
{
	struct want *x = &q[(*n)++];
	snprintf(x->name, sizeof(x->name), "%s", name);
	x->ne0 = ne0;
	x->ne1 = ne1;
	x->dst = dst;
	x->t = NULL;
}

/* A bias the forward would not add is refused, never dropped: Qwen2 has
 * exactly blk.N.attn_{q,k,v}.bias, Llama and Qwen3 none (llama.cpp also
 * knows attn_output.bias and output.bias for other Qwen2-derived models). */
static int check_biases(const gguf_file *f, const rt_config *c, sw_err *err)
{
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const gguf_str *gn = &f->tensors[i].name;
		char nm[128];
		snprintf(nm, sizeof(nm), "%.*s", (int)(gn->n < 127 ? gn->n : 127), gn->p);
		size_t len = strlen(nm);
		int l, end = 0;
		char which;
		if (len < 5 || strcmp(nm + len - 5, ".bias"))
			continue;
		if (c->arch == RT_ARCH_QWEN2 && sscanf(nm, "blk.%d.attn_%c.bias%n", &l, &which, &end) == 2 &&
		    (size_t)end == len && (which == 'q' || which == 'k' || which == 'v'))
			continue;
		return sw_errf(err, SW_ENOTSUP, "%s: tensor '%.96s': expected no bias %s (general.architecture "
		               "\"%s\"), found one", f->path, nm,
		               c->arch == RT_ARCH_QWEN2 ? "but attn_q/attn_k/attn_v's" : "at all",
		               rt_arch_name(c->arch));
	}
	return 0;
}

int rt_llama_load_gguf(const gguf_file *f, rt_config *cfg, rt_weights *w, sw_err *err)
{
	rt_config c;
	rt_layer_weights *lw;
	struct want *q;
	size_t n = 0;
	char name[48];
	int rc;

	memset(w, 0, sizeof(*w));
	if ((rc = rt_llama_config_from_gguf(f, &c, err)))
		return rc;

	if ((rc = check_biases(f, &c, err)))
		return rc;
	/* Layer table first, then each tensor 64-byte aligned, all in one arena. */
	size_t n_want = 3 + 14 * (size_t)c.n_layers;
	q = calloc(n_want, sizeof(*q));
	lw = calloc((size_t)c.n_layers, sizeof(*lw)); /* staging; copied into the arena */
	if (!q || !lw) {
		rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", f->path);
		goto out_free_q;
	}
	uint64_t D = (uint64_t)c.dim, QD = (uint64_t)c.n_heads * (uint64_t)c.head_dim,
		 KVD = (uint64_t)c.n_kv_heads * (uint64_t)c.head_dim, F = (uint64_t)c.ffn_dim,
		 V = (uint64_t)c.vocab;
	want_add(q, &n, "token_embd.weight", D, V, &w->tok_embd);
	for (int l = 0; l < c.n_layers; l++) {
		rt_layer_weights *L = &lw[l];
#define W(field, suffix, ne0, ne1) \
		snprintf(name, sizeof(name), "blk.%d." suffix ".weight", l); \
		want_add(q, &n, name, ne0, ne1, &L->field)
		W(attn_norm, "attn_norm", D, 0);
		W(wq, "attn_q", D, QD);
		W(wk, "attn_k", D, KVD);
		W(wv, "attn_v", D, KVD);
		W(wo, "attn_output", QD, D);
		W(ffn_norm, "ffn_norm", D, 0);
		W(w_gate, "ffn_gate", D, F);
		W(w_up, "ffn_up", D, F);
		W(w_down, "ffn_down", F, D);
#undef W
#define B(field, suffix, ne0) \
		snprintf(name, sizeof(name), "blk.%d." suffix, l); \
		want_add(q, &n, name, ne0, 0, &L->field)
		if (c.arch == RT_ARCH_QWEN2) {
			B(bq, "attn_q.bias", QD);
			B(bk, "attn_k.bias", KVD);
			B(bv, "attn_v.bias", KVD);
		}
		if (c.arch == RT_ARCH_QWEN3 || c.arch == RT_ARCH_GEMMA3) {
			B(q_norm, "attn_q_norm.weight", (uint64_t)c.head_dim);
			B(k_norm, "attn_k_norm.weight", (uint64_t)c.head_dim);
		}
		if (c.arch == RT_ARCH_GEMMA3) {
			B(post_attn_norm, "post_attention_norm.weight", D);
			B(post_ffn_norm, "post_ffw_norm.weight", D);
		}
#undef B
	}
	want_add(q, &n, "output_norm.weight", D, 0, &w->out_norm);
	if (!c.tied_embd)
		want_add(q, &n, "output.weight", D, V, &w->lm_head);

	size_t total = ((size_t)c.n_layers * sizeof(*lw) + 63) & ~(size_t)63;
	for (size_t i = 0; i < n; i++) {
		if ((rc = check_tensor(f, &q[i], err)))
			goto out_free_q;
		/* bounded: every extent is below MAX_DIM^2, n below 40k */
		uint64_t bytes = (q[i].t->n_elems * sizeof(float) + 63) & ~(uint64_t)63;
		if (bytes > SIZE_MAX - total) {
			rc = sw_errf(err, SW_ENOMEM, "%s: weights do not fit in the address space", f->path);
			goto out_free_q;
		}
		q[i].off = total;
		total += (size_t)bytes;
	}

	uint8_t *arena = aligned_alloc(64, total);
	if (!arena) {
		rc = sw_errf(err, SW_ENOMEM, "%s: cannot allocate %zu bytes for fp32 weights", f->path, total);
		goto out_free_q;
	}
	w->arena = arena;
	w->arena_bytes = total;
	w->layers = (rt_layer_weights *)arena;
	for (size_t i = 0; i < n; i++) {
		float *dst = (float *)(arena + q[i].off);
		if ((rc = gguf_tensor_to_f32(f, q[i].t, dst, err))) {
			rt_weights_free(w);
			goto out_free_q;
		}
		*q[i].dst = dst;
	}
	memcpy(w->layers, lw, (size_t)c.n_layers * sizeof(*lw));
	if (c.tied_embd)
		w->lm_head = w->tok_embd;
	*cfg = c;
	rc = 0;
out_free_q:
	free(lw);
	free(q);
	return rc;
}

/* ---- a draft's vocabulary against the target's ---------------------------- */

/* *out: the file's GGUF, or NULL (and 0) when path names none: empty, or
 * a directory (an HF model, whose tokenizer.json this project does not
 * read). Non-zero when a file is there but does not open as GGUF. */
static int open_gguf_file(const char *path, gguf_file **out, sw_err *err)
{
	struct stat st;
	*out = NULL;
	if (!path || !path[0] || (!stat(path, &st) && S_ISDIR(st.st_mode)))
		return 0;
	*out = gguf_open(path, err);
	return *out ? 0 : SW_EINVAL;
}

static bool gstr_eq(gguf_str a, gguf_str b)
{
	return a.n == b.n && (a.n == 0 || !memcmp(a.p, b.p, (size_t)a.n));
}

/* tokenizer.ggml.model and every tokenizer.ggml.tokens entry of the draft
 * file equal the target file's at the same id. */
static int tokens_check(const gguf_file *t, const gguf_file *d, sw_err *err)
{
	const gguf_kv *tk = gguf_find(t, "tokenizer.ggml.tokens"),
	              *dk = gguf_find(d, "tokenizer.ggml.tokens");
	gguf_str tm = {NULL, 0}, dm = {NULL, 0};
	sw_err ignore = {0};
	if (!tk || !dk) /* a derived draft carries none: it uses the target's */
		return 0;
	if (tk->type != GGUF_VT_ARRAY || tk->arr_type != GGUF_VT_STRING || dk->type != GGUF_VT_ARRAY ||
	    dk->arr_type != GGUF_VT_STRING)
		return sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.tokens: expected an array of strings "
		               "in it and in %s", d->path, t->path);
	gguf_get_str(t, "tokenizer.ggml.model", &tm, &ignore);
	gguf_get_str(d, "tokenizer.ggml.model", &dm, &ignore);
	if (!gstr_eq(tm, dm))
		return sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.model: expected \"%.*s\" (the target "
		               "%s's), found \"%.*s\"", d->path, (int)tm.n, tm.p ? tm.p : "", t->path,
		               (int)dm.n, dm.p ? dm.p : "");
	if (dk->arr_n > tk->arr_n)
		return sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.tokens: expected at most %llu tokens "
		               "(the target %s's; a draft vocabulary is a prefix of the target's), found "
		               "%llu", d->path, (unsigned long long)tk->arr_n, t->path,
		               (unsigned long long)dk->arr_n);
	for (uint64_t i = 0; i < dk->arr_n; i++) {
		gguf_str a = gguf_arr_str(t, tk, i), b = gguf_arr_str(d, dk, i);
		if (!gstr_eq(a, b))
			return sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.tokens[%llu]: expected \"%.*s\" "
			               "(the target %s's token at that id), found \"%.*s\"", d->path,
			               (unsigned long long)i, (int)(a.n > 64 ? 64 : a.n), a.p ? a.p : "",
			               t->path, (int)(b.n > 64 ? 64 : b.n), b.p ? b.p : "");
	}
	return 0;
}

int rt_draft_vocab_check(const char *tpath, int tvocab, const char *dpath, int dvocab, sw_err *err)
{
	if (dvocab > tvocab)
		return sw_errf(err, SW_EINVAL, "%s: vocabulary: expected at most the target's %d (a draft "
		               "vocabulary is the target's or a prefix of it), found %d",
		               dpath && dpath[0] ? dpath : "draft shape", tvocab, dvocab);
	gguf_file *t = NULL, *d = NULL;
	int rc = open_gguf_file(tpath, &t, err);
	if (!rc && t)
		rc = open_gguf_file(dpath, &d, err);
	if (!rc && t && d)
		rc = tokens_check(t, d, err);
	gguf_close(d);
	gguf_close(t);
	return rc;
}

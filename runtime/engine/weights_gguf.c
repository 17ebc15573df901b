/* GGUF weight source for the engine (weights_gguf.h). The names and the
 * metadata keys are llama.cpp's, as runtime/model/model_gguf.c reads them;
 * ggml's ne = [in, out] is already the row-major (out, in) layout and Q/K
 * rows stay in GGUF order (the engine's RoPE pairing). Each tensor passes
 * the finite scan (formats/gguf.h) when bind reads it: the pages it touches
 * are those the dequantization or the upload reads next. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights_gguf.h"
#include "formats/gguf.h"
#include "kernels/ref/ref.h"

#define ARCH "llama"

struct rt_engine_gguf {
	gguf_file *f;
	float *scratch;           /* the last requested tensor, fp32 */
	size_t cap;               /* floats in scratch */
	float *inv_freq;          /* (head_dim / 2) */
	rt_engine_shape shape;
};

static int meta_int(const gguf_file *f, const char *key, int def, int *out, sw_err *err)
{
	uint32_t v;
	int rc = gguf_get_u32(f, key, &v, err);
	if (rc == SW_ENOENT_KEY && def >= 0) {
		*out = def;
		return 0;
	}
	if (rc)
		return rc;
	if (v < 1 || v > (1u << 24))
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected 1..%d, found %u", f->path,
		               key, 1 << 24, v);
	*out = (int)v;
	return 0;
}

static int meta_float(const gguf_file *f, const char *key, float def, float *out, sw_err *err)
{
	int rc = gguf_get_f32(f, key, out, err);
	if (rc == SW_ENOENT_KEY && def > 0) {
		*out = def;
		return 0;
	}
	if (rc)
		return rc;
	if (!(*out > 0) || *out > 1e30f)
		return sw_errf(err, SW_EINVAL, "%s: metadata key '%s': expected a positive finite "
		               "number, found %g", f->path, key, (double)*out);
	return 0;
}

/* RoPE frequencies with the file's scaling (none, linear, llama3). */
static int rope_freqs(rt_engine_gguf *g, sw_err *err)
{
	const gguf_file *f = g->f;
	int scaling = 0, orig = 8192;
	float factor = 1.0f, lo = 1.0f, hi = 4.0f;
	gguf_str type;
	int rc = gguf_get_str(f, ARCH ".rope.scaling.type", &type, err);
	if (rc == SW_ENOENT_KEY) {
		if ((rc = meta_float(f, ARCH ".rope.scale_linear", 1.0f, &factor, err)))
			return rc;
		scaling = factor != 1.0f;
	} else if (rc) {
		return rc;
	} else if (type.n == 6 && !memcmp(type.p, "linear", 6)) {
		scaling = 1;
		if ((rc = meta_float(f, ARCH ".rope.scaling.factor", -1, &factor, err)))
			return rc;
	} else if (type.n == 6 && !memcmp(type.p, "llama3", 6)) {
		scaling = 2;
		if ((rc = meta_float(f, ARCH ".rope.scaling.factor", -1, &factor, err)) ||
		    (rc = meta_float(f, ARCH ".rope.scaling.low_freq_factor", 1.0f, &lo, err)) ||
		    (rc = meta_float(f, ARCH ".rope.scaling.high_freq_factor", 4.0f, &hi, err)) ||
		    (rc = meta_int(f, ARCH ".rope.scaling.original_context_length", 8192, &orig, err)))
			return rc;
	} else if (!(type.n == 4 && !memcmp(type.p, "none", 4))) {
		return sw_errf(err, SW_ENOTSUP, "%s: metadata key '" ARCH ".rope.scaling.type': expected "
		               "\"none\", \"linear\" or \"llama3\", found \"%.*s\"", f->path,
		               (int)(type.n < 64 ? type.n : 64), type.p);
	}
	if (gguf_tensor_find(f, "rope_freqs.weight"))
		return sw_errf(err, SW_ENOTSUP, "%s: tensor 'rope_freqs.weight' (precomputed RoPE "
		               "factors) is not supported", f->path);
	g->inv_freq = malloc(sizeof(*g->inv_freq) * (size_t)(g->shape.head_dim / 2));
	if (!g->inv_freq)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	ref_rope_freqs(g->inv_freq, g->shape.head_dim, g->shape.rope_theta, scaling, factor, lo, hi,
	               orig);
	return 0;
}

static int read_shape(rt_engine_gguf *g, sw_err *err)
{
	const gguf_file *f = g->f;
	rt_engine_shape *s = &g->shape;
	gguf_str arch;
	int rc = gguf_get_str(f, "general.architecture", &arch, err);
	if (rc)
		return rc;
	if (arch.n != strlen(ARCH) || memcmp(arch.p, ARCH, arch.n))
		return sw_errf(err, SW_ENOTSUP, "%s: metadata key 'general.architecture': expected \""
		               ARCH "\" (the engine runs Llama models), found \"%.*s\"", f->path,
		               (int)(arch.n < 64 ? arch.n : 64), arch.p);
	int kl = 0, rd = 0;
	if ((rc = meta_int(f, ARCH ".block_count", -1, &s->n_layers, err)) ||
	    (rc = meta_int(f, ARCH ".embedding_length", -1, &s->dim, err)) ||
	    (rc = meta_int(f, ARCH ".feed_forward_length", -1, &s->ffn_dim, err)) ||
	    (rc = meta_int(f, ARCH ".attention.head_count", -1, &s->n_heads, err)) ||
	    (rc = meta_int(f, ARCH ".attention.head_count_kv", s->n_heads, &s->n_kv_heads, err)) ||
	    (rc = meta_int(f, ARCH ".attention.key_length", s->dim / s->n_heads, &kl, err)) ||
	    (rc = meta_int(f, ARCH ".rope.dimension_count", kl, &rd, err)) ||
	    (rc = meta_float(f, ARCH ".rope.freq_base", 10000.0f, &s->rope_theta, err)) ||
	    (rc = meta_float(f, ARCH ".attention.layer_norm_rms_epsilon", -1, &s->norm_eps, err)))
		return rc;
	s->head_dim = kl;
	if (rd != kl || kl % 2)
		return sw_errf(err, SW_ENOTSUP, "%s: head_dim %d with rope.dimension_count %d: the "
		               "engine rotates whole, even heads", f->path, kl, rd);
	const gguf_tensor *te = gguf_tensor_find(f, "token_embd.weight");
	if (!te || te->n_dims != 2 || te->ne[0] != (uint64_t)s->dim || te->ne[1] > (1u << 24))
		return sw_errf(err, SW_EINVAL, "%s: tensor 'token_embd.weight': expected (%d, vocab), "
		               "%s", f->path, s->dim, te ? "found another shape" : "absent");
	s->vocab = (int)te->ne[1];
	s->tied_embd = gguf_tensor_find(f, "output.weight") == NULL;
	return rope_freqs(g, err);
}

/* The tensor behind field (layer: -1 when not layered), its shape checked. */
static int find_tensor(rt_engine_gguf *g, const char *field, int layer, const gguf_tensor **out,
                       sw_err *err)
{
	static const struct {
		const char *field, *name; /* layered: the name after "blk.N." */
		bool layered;
		int ne0, ne1;             /* 'D' dim, 'Q' heads*head_dim, 'K' kv heads*head_dim,
		                           * 'F' ffn, 'V' vocab, 0 none */
	} map[] = {
		{"tok_embd", "token_embd.weight", false, 'D', 'V'},
		{"out_norm", "output_norm.weight", false, 'D', 0},
		{"lm_head", "output.weight", false, 'D', 'V'},
		{"attn_norm", "attn_norm.weight", true, 'D', 0},
		{"wq", "attn_q.weight", true, 'D', 'Q'},
		{"wk", "attn_k.weight", true, 'D', 'K'},
		{"wv", "attn_v.weight", true, 'D', 'K'},
		{"wo", "attn_output.weight", true, 'Q', 'D'},
		{"ffn_norm", "ffn_norm.weight", true, 'D', 0},
		{"w_gate", "ffn_gate.weight", true, 'D', 'F'},
		{"w_up", "ffn_up.weight", true, 'D', 'F'},
		{"w_down", "ffn_down.weight", true, 'F', 'D'},
	};
	const rt_engine_shape *s = &g->shape;
	size_t i = 0;
	while (i < sizeof(map) / sizeof(map[0]) && strcmp(map[i].field, field))
		i++;
	if (i == sizeof(map) / sizeof(map[0]))
		return sw_errf(err, SW_EINVAL, "%s: the engine asks for weight field \"%s\", which a "
		               "Llama GGUF does not have", g->f->path, field);
	char name[64];
	if (map[i].layered && (layer < 0 || layer >= s->n_layers))
		return sw_errf(err, SW_EINVAL, "%s: weight %s: layer %d of %d", g->f->path, field, layer,
		               s->n_layers);
	if (map[i].layered)
		snprintf(name, sizeof(name), "blk.%d.%s", layer, map[i].name);
	else
		snprintf(name, sizeof(name), "%s", !strcmp(field, "lm_head") && s->tied_embd
		                                       ? "token_embd.weight" : map[i].name);
	const gguf_tensor *t = gguf_tensor_find(g->f, name);
	const uint64_t D = (uint64_t)s->dim, Q = (uint64_t)s->n_heads * s->head_dim,
	               K = (uint64_t)s->n_kv_heads * s->head_dim, F = (uint64_t)s->ffn_dim,
	               V = (uint64_t)s->vocab;
#define DIM(c) ((c) == 'D' ? D : (c) == 'Q' ? Q : (c) == 'K' ? K : (c) == 'F' ? F : (c) == 'V' ? V : 1)
	const uint64_t ne0 = DIM(map[i].ne0), ne1 = DIM(map[i].ne1);
#undef DIM
	if (!t)
		return sw_errf(err, SW_EINVAL, "%s: no tensor '%s'", g->f->path, name);
	if (t->ne[0] != ne0 || (t->n_dims > 1 ? t->ne[1] : 1) != ne1 || t->n_elems != ne0 * ne1)
		return sw_errf(err, SW_EINVAL, "%s: tensor '%s': expected ne (%llu, %llu), found (%llu, "
		               "%llu)", g->f->path, name, (unsigned long long)ne0,
		               (unsigned long long)ne1, (unsigned long long)t->ne[0],
		               (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1));
	*out = t;
	return 0;
}

static int gguf_get(void *user, const char *field, int layer, const float **data, size_t *n,
                    sw_err *err)
{
	rt_engine_gguf *g = user;
	if (!strcmp(field, "inv_freq")) {
		*data = g->inv_freq;
		*n = (size_t)g->shape.head_dim / 2;
		return 0;
	}
	const gguf_tensor *t;
	int rc = find_tensor(g, field, layer, &t, err);
	if (rc || (rc = gguf_tensor_check_finite(g->f, t, err)))
		return rc;
	if (t->n_elems > g->cap) {
		float *p = realloc(g->scratch, sizeof(*p) * (size_t)t->n_elems);
		if (!p)
			return sw_errf(err, SW_ENOMEM, "%s: out of memory for tensor '%.*s'", g->f->path,
			               (int)t->name.n, t->name.p);
		g->scratch = p;
		g->cap = (size_t)t->n_elems;
	}
	if ((rc = gguf_tensor_to_f32(g->f, t, g->scratch, err)))
		return rc;
	*data = g->scratch;
	*n = (size_t)t->n_elems;
	return 0;
}

static int gguf_get_raw(void *user, const char *field, int layer, const void **data,
                        size_t *bytes, int *type, sw_err *err)
{
	const gguf_tensor *t;
	int rc = find_tensor(user, field, layer, &t, err);
	if (rc || (rc = gguf_tensor_check_finite(((rt_engine_gguf *)user)->f, t, err)))
		return rc;
	*data = t->data;
	*bytes = (size_t)t->nbytes;
	*type = (int)t->type;
	return 0;
}

rt_engine_gguf *rt_engine_gguf_open(const char *path, rt_engine_weights *w, sw_err *err)
{
	rt_engine_gguf *g = calloc(1, sizeof(*g));
	if (!g) {
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	if (!(g->f = gguf_open(path, err)) || read_shape(g, err)) {
		rt_engine_gguf_close(g);
		return NULL;
	}
	memset(w, 0, sizeof(*w));
	w->name = g->f->path;
	w->shape = g->shape;
	w->get = gguf_get;
	w->get_raw = gguf_get_raw;
	w->user = g;
	return g;
}

static int raw_only_get(void *user, const char *field, int layer, const float **data, size_t *n,
                        sw_err *err)
{
	const rt_engine_gguf *g = user;
	(void)data;
	(void)n;
	return sw_errf(err, SW_EINVAL, "%s: weight %s (layer %d): opened for its blocks only (a "
	               "gguf_a8 engine's GEMM weights); the values come from the loaded model",
	               g->f->path, field, layer);
}

rt_engine_gguf *rt_engine_gguf_open_raw(const char *path, const rt_engine_shape *shape,
                                        rt_engine_weights *w, sw_err *err)
{
	rt_engine_gguf *g = calloc(1, sizeof(*g));
	if (!g) {
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	gguf_str arch;
	const char *want = rt_manifest_arch_name(shape->arch);
	if (!(g->f = gguf_open(path, err)) || gguf_get_str(g->f, "general.architecture", &arch, err)) {
		rt_engine_gguf_close(g);
		return NULL;
	}
	if (arch.n != strlen(want) || memcmp(arch.p, want, arch.n)) {
		sw_errf(err, SW_EINVAL, "%s: metadata key 'general.architecture': expected \"%s\" (the "
		        "model whose blocks the engine uploads), found \"%.*s\"", path, want,
		        (int)(arch.n < 64 ? arch.n : 64), arch.p);
		rt_engine_gguf_close(g);
		return NULL;
	}
	g->shape = *shape;
	memset(w, 0, sizeof(*w));
	w->name = g->f->path;
	w->shape = g->shape;
	w->get = raw_only_get;
	w->get_raw = gguf_get_raw;
	w->user = g;
	return g;
}

void rt_engine_gguf_close(rt_engine_gguf *g)
{
	if (!g)
		return;
	if (g->f)
		gguf_close(g->f);
	free(g->scratch);
	free(g->inv_freq);
	free(g);
}

/* EAGLE-3 head: loading the public checkpoint format with validation, the
 * committed-row cache and the forward on the host, composed from the
 * kernels/ref ops (see eagle3.h for the definition). Not the drafting loop:
 * that is runtime/decode/eagle3_draft.c. */
#include "eagle3.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "formats/safetensors.h"
#include "gemm.h"
#include "kernels/ref/ref.h"
#include "model_hf.h"

static const char *const ARCHS[] = { "LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", NULL };

/* The tapped layers from the config (see eagle3.h for the two conventions). */
static int parse_taps(const json_value *root, const char *file, int L, int *taps, sw_err *err)
{
	const json_value *ec = json_get(root, "eagle_config"), *ids = NULL, *top;
	char path[96] = "";
	int shift = 0, rc;
	if (ec && ec->type != JSON_NULL) {
		if ((rc = json_as_object(ec, "$.eagle_config", err)))
			return rc;
		const json_value *u = json_get(ec, "use_aux_hidden_state");
		bool b = true;
		if (u && (rc = json_as_bool(u, "$.eagle_config.use_aux_hidden_state", &b, err)))
			return rc;
		if (!b)
			return sw_errf(err, SW_ENOTSUP, "%s: $.eagle_config.use_aux_hidden_state: expected true (an EAGLE-3 head fuses three target layers), found false",
			               file);
		ids = json_get(ec, "eagle_aux_hidden_state_layer_ids");
		if (ids && ids->type != JSON_NULL)
			snprintf(path, sizeof(path), "$.eagle_config.eagle_aux_hidden_state_layer_ids");
		else
			ids = NULL;
	}
	top = json_get(root, "eagle_aux_hidden_state_layer_ids");
	if (top && top->type != JSON_NULL) {
		if (ids)
			return sw_errf(err, SW_EINVAL, "%s: $.eagle_aux_hidden_state_layer_ids: expected absent beside $.eagle_config.eagle_aux_hidden_state_layer_ids (two conventions: the output of layer i vs the input of layer i), found both",
			               file);
		ids = top;
		shift = 1; /* vLLM: id i captures the input of layer i = output of i - 1 */
		snprintf(path, sizeof(path), "$.eagle_aux_hidden_state_layer_ids");
	}
	if (!ids) {
		/* EAGLE / SGLang / vLLM default: inputs of 2, L/2, L-3 */
		int def[RT_E3_TAPS] = { 1, L / 2 - 1, L - 4 };
		for (int i = 0; i < RT_E3_TAPS; i++) {
			if (def[i] < 0 || (i > 0 && def[i] <= def[i - 1]))
				return sw_errf(err, SW_EINVAL, "%s: $.eagle_config.eagle_aux_hidden_state_layer_ids: absent, and the default (the inputs of layers 2, L/2, L-3) needs a target of at least 8 layers; the target has %d",
				               file, L);
			taps[i] = def[i];
		}
		return 0;
	}
	if ((rc = json_as_array(ids, path, RT_E3_TAPS, RT_E3_TAPS, err)))
		return rc;
	for (int i = 0; i < RT_E3_TAPS; i++) {
		char p[128];
		int64_t v;
		snprintf(p, sizeof(p), "%s[%d]", path, i);
		if ((rc = json_as_int(ids->items[i], p, shift, L - 1 + shift, &v, err)))
			return sw_err_prefix(err, "%s (target layers: %d%s)", file, L,
			                     shift ? "; id 0, the embedding, is not tapped" : "");
		taps[i] = (int)v - shift;
		if (i > 0 && taps[i] <= taps[i - 1])
			return sw_errf(err, SW_EINVAL, "%s: %s: expected a layer above the previous one (%lld), found %lld",
			               file, p, (long long)(taps[i - 1] + shift), (long long)v);
	}
	return 0;
}

static int opt_int(const json_value *root, const char *key, int64_t def, int64_t lo, int64_t hi, int *out,
                   sw_err *err)
{
	const json_value *v = json_get(root, key);
	int64_t x = def;
	int rc;
	if (v && v->type != JSON_NULL && (rc = json_get_int(root, key, "$", lo, hi, &x, err)))
		return rc;
	*out = (int)x;
	return 0;
}

static int parse_config(const char *text, size_t n, const char *file, const rt_config *t, const char *tname,
                        rt_e3_config *c, sw_err *err)
{
	int rc;
	memset(c, 0, sizeof(*c));
	if ((rc = rt_llama_config_from_hf_json_as(text, n, file, ARCHS, &c->head, err)))
		return rc;
	json_value *root = json_parse(text, n, file, err);
	if (!root)
		return err->code ? err->code : SW_EINVAL;
	const rt_config *h = &c->head;
	c->target_layers = t->n_layers;
	const json_value *b;
	if (h->n_layers != 1) {
		rc = sw_errf(err, SW_ENOTSUP, "%s: $.num_hidden_layers: expected 1 (one decoder layer over [embedding ; feature]), found %d",
		             file, h->n_layers);
		goto out;
	}
	if (h->vocab != t->vocab) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.vocab_size: expected %d (the vocabulary of the target %s), found %d", file,
		             t->vocab, tname, h->vocab);
		goto out;
	}
	if ((rc = opt_int(root, "draft_vocab_size", h->vocab, 1, h->vocab, &c->draft_vocab, err)) ||
	    (rc = opt_int(root, "target_hidden_size", h->dim, 1, 1 << 20, &c->target_dim, err)))
		goto out;
	if (c->target_dim != t->dim) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.%s: expected %d (the width of the target %s), found %d", file,
		             json_get(root, "target_hidden_size") ? "target_hidden_size" : "hidden_size", t->dim, tname,
		             c->target_dim);
		goto out;
	}
	/* SGLang's fc takes a bias when $.bias is true; the public heads have none */
	b = json_get(root, "bias");
	if (b && b->type != JSON_NULL) {
		bool bias;
		if ((rc = json_as_bool(b, "$.bias", &bias, err)))
			goto out;
		if (bias) {
			rc = sw_errf(err, SW_ENOTSUP, "%s: $.bias: expected false (biases are not supported), found true", file);
			goto out;
		}
	}
	b = json_get(root, "norm_before_residual");
	if (b && b->type != JSON_NULL && (rc = json_as_bool(b, "$.norm_before_residual", &c->norm_before_residual, err)))
		goto out;
	c->tied = h->tied_embd;
	if (c->tied && c->draft_vocab != h->vocab) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.draft_vocab_size: expected %d with tie_word_embeddings (the LM head is the embedding), found %d",
		             file, h->vocab, c->draft_vocab);
		goto out;
	}
	rc = parse_taps(root, file, t->n_layers, c->taps, err);
out:
	json_free(root);
	return rc;
}

struct want {
	const char *name;
	float **dst;
	int64_t d0, d1; /* d1 = 0: a vector */
	bool optional;
};

static void shape_text(const safetensors_tensor *t, char *out, size_t n)
{
	int k = snprintf(out, n, "[");
	for (int i = 0; i < t->n_dims && k < (int)n - 24; i++)
		k += snprintf(out + k, n - (size_t)k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
	snprintf(out + k, n - (size_t)k, "]");
}

static int check_shape(const safetensors_file *f, const safetensors_tensor *t, const char *name, int64_t d0,
                       int64_t d1, sw_err *err)
{
	int nd = d1 ? 2 : 1;
	if (t->n_dims == nd && t->shape[0] == d0 && (nd == 1 || t->shape[1] == d1))
		return 0;
	char found[128];
	shape_text(t, found, sizeof(found));
	if (d1)
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected shape [%lld, %lld], found %s", f->name, name,
		               (long long)d0, (long long)d1, found);
	return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected shape [%lld], found %s", f->name, name, (long long)d0,
	               found);
}

/* An I8 matrix w (d0, d1) with its scales NAME_scale (d0, G), F32/F16/BF16,
 * G dividing d1: w[r][c] = q[r][c] * scale[r][c / (d1 / G)] (the repository's
 * packed heads: Q8_0's blocks of 32 as a 16-bit scale per block, so that
 * a gguf_a8 engine's Q8_0 upload of them is these very blocks). */
static int take_i8(const safetensors_file *f, const struct want *w, const safetensors_tensor *t, float *out,
                   sw_err *err)
{
	char sname[112];
	snprintf(sname, sizeof(sname), "%s_scale", w->name);
	const safetensors_tensor *s = safetensors_find(f, sname);
	if (!w->d1)
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected dtype F32, F16 or BF16 (a vector), found I8",
		               f->name, w->name);
	if (!s)
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: I8 needs its scales %s (shape [%lld, G]), found none",
		               f->name, w->name, sname, (long long)w->d0);
	if (s->dtype != SAFETENSORS_F32 && s->dtype != SAFETENSORS_F16 && s->dtype != SAFETENSORS_BF16)
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected dtype F32, F16 or BF16, found %s", f->name, sname,
		               safetensors_dtype_name(s->dtype));
	const int64_t G = s->n_dims == 2 ? s->shape[1] : 0;
	if (s->n_dims != 2 || s->shape[0] != w->d0 || G < 1 || w->d1 % G) {
		char found[128];
		shape_text(s, found, sizeof(found));
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected shape [%lld, G] with G dividing %lld, found %s",
		               f->name, sname, (long long)w->d0, (long long)w->d1, found);
	}
	float *sc = malloc((size_t)s->numel * sizeof(*sc));
	if (!sc)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", f->name);
	safetensors_to_f32(s, sc);
	const int64_t g = w->d1 / G;
	for (int64_t r = 0; r < w->d0; r++)
		for (int64_t c = 0; c < w->d1; c++)
			out[r * w->d1 + c] = (float)(int8_t)t->data[r * w->d1 + c] * sc[r * G + c / g];
	free(sc);
	return 0;
}

static int take(const safetensors_file *f, const struct want *w, float **cursor, sw_err *err)
{
	const safetensors_tensor *t = safetensors_find(f, w->name);
	if (!t) {
		if (w->optional)
			return 0;
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: missing (expected shape [%lld%s%lld])", f->name, w->name,
		               (long long)w->d0, w->d1 ? ", " : "", w->d1 ? (long long)w->d1 : 0LL);
	}
	if (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_F16 && t->dtype != SAFETENSORS_BF16 &&
	    t->dtype != SAFETENSORS_I8)
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected dtype F32, F16, BF16 or I8 (with %s_scale), found %s",
		               f->name, w->name, w->name, safetensors_dtype_name(t->dtype));
	int rc = check_shape(f, t, w->name, w->d0, w->d1, err);
	if (rc)
		return rc;
	if (t->dtype == SAFETENSORS_I8 && (rc = take_i8(f, w, t, *cursor, err)))
		return rc;
	*w->dst = *cursor;
	if (t->dtype != SAFETENSORS_I8)
		safetensors_to_f32(t, *cursor);
	*cursor += t->numel;
	return 0;
}

/* d2t (offsets) into h->d2t (absolute target ids), checked: in range,
 * distinct, and agreeing with t2d when present. */
static int take_maps(const safetensors_file *f, rt_eagle3 *h, sw_err *err)
{
	const rt_e3_config *c = &h->cfg;
	const int Vd = c->draft_vocab, V = c->head.vocab;
	const safetensors_tensor *t = safetensors_find(f, "d2t"), *tt = safetensors_find(f, "t2d");
	int rc = 0;
	int64_t *buf = NULL;
	uint8_t *seen = calloc((size_t)V, 1);
	if (!seen)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", f->name);
	if (!t) {
		/* vLLM's rule: no d2t, offsets 0 (draft id = target id) */
		for (int i = 0; i < Vd; i++)
			h->d2t[i] = i, seen[i] = 1;
	} else {
		if (t->dtype != SAFETENSORS_I64) {
			rc = sw_errf(err, SW_EINVAL, "%s: tensor d2t: expected dtype I64 (target id = draft id + d2t), found %s",
			             f->name, safetensors_dtype_name(t->dtype));
			goto out;
		}
		if ((rc = check_shape(f, t, "d2t", Vd, 0, err)))
			goto out;
		if (!(buf = malloc((size_t)Vd * sizeof(*buf)))) {
			rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", f->name);
			goto out;
		}
		safetensors_to_i64(t, buf);
		for (int i = 0; i < Vd; i++) {
			int64_t tid = (int64_t)i + buf[i];
			if (tid < 0 || tid >= V) {
				rc = sw_errf(err, SW_EINVAL, "%s: tensor d2t[%d]: expected an offset to a target id in [0, %d), found %lld (target id %lld)",
				             f->name, i, V, (long long)buf[i], (long long)tid);
				goto out;
			}
			if (seen[tid]) {
				rc = sw_errf(err, SW_EINVAL, "%s: tensor d2t[%d]: expected distinct target ids, found target id %lld twice",
				             f->name, i, (long long)tid);
				goto out;
			}
			seen[tid] = 1;
			h->d2t[i] = (int32_t)tid;
		}
	}
	if (tt) {
		if (tt->dtype != SAFETENSORS_BOOL && tt->dtype != SAFETENSORS_I64) {
			rc = sw_errf(err, SW_EINVAL, "%s: tensor t2d: expected dtype BOOL, found %s", f->name,
			             safetensors_dtype_name(tt->dtype));
			goto out;
		}
		if ((rc = check_shape(f, tt, "t2d", V, 0, err)))
			goto out;
		int64_t *tb = malloc((size_t)V * sizeof(*tb));
		if (!tb) {
			rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", f->name);
			goto out;
		}
		safetensors_to_i64(tt, tb);
		for (int v = 0; v < V && !rc; v++)
			if ((tb[v] != 0) != (seen[v] != 0))
				rc = sw_errf(err, SW_EINVAL, "%s: tensor t2d[%d]: expected %s (target id %d is %s by d2t), found %s",
				             f->name, v, seen[v] ? "true" : "false", v, seen[v] ? "reached" : "not reached",
				             tb[v] ? "true" : "false");
		free(tb);
	}
out:
	free(buf);
	free(seen);
	return rc;
}

int rt_e3_config_load(const char *dir, const rt_config *tcfg, const char *tname, rt_e3_config *c, sw_err *err)
{
	char cpath[4096];
	size_t n;
	snprintf(cpath, sizeof(cpath), "%s/config.json", dir);
	char *text = sw_read_capped(cpath, SW_CAP_CONFIG, "an EAGLE-3 head's config.json", &n, err);
	if (!text)
		return sw_err_prefix(err, "%s: cannot read the EAGLE-3 head's config (expected a directory with "
		                     "config.json and model.safetensors)", cpath);
	int rc = parse_config(text, n, cpath, tcfg, tname, c, err);
	free(text);
	if (rc)
		return rc;
	/* which optional tensors the file has (the engine's buffers follow) */
	char wpath[4096];
	safetensors_file *f = NULL;
	snprintf(wpath, sizeof(wpath), "%s/model.safetensors", dir);
	if ((rc = safetensors_open(wpath, &f, err)))
		return rc;
	c->own_embd = safetensors_find(f, "embed_tokens.weight") != NULL;
	c->has_d2t = safetensors_find(f, "d2t") != NULL;
	safetensors_free(f);
	if (!c->own_embd && c->head.dim != tcfg->dim)
		return sw_errf(err, SW_EINVAL, "%s: tensor embed_tokens.weight: missing, and the target's embedding is %d wide, the head %d (expected its own embedding, shape [%d, %d])",
		               wpath, tcfg->dim, c->head.dim, c->head.vocab, c->head.dim);
	return 0;
}

int rt_e3_config_shape(const char *dir, const rt_config *tcfg, const char *tname, rt_e3_config *c, sw_err *err)
{
	char cpath[4096];
	size_t n;
	snprintf(cpath, sizeof(cpath), "%s/config.json", dir);
	char *text = sw_read_capped(cpath, SW_CAP_CONFIG, "an EAGLE-3 head's config.json", &n, err);
	if (!text)
		return sw_err_prefix(err, "%s: cannot read the EAGLE-3 head's config", cpath);
	int rc = parse_config(text, n, cpath, tcfg, tname, c, err);
	free(text);
	if (rc)
		return rc;
	/* the public heads' tensors: the target's embedding where the widths
	 * agree, d2t where the draft vocabulary is smaller */
	c->own_embd = c->head.dim != tcfg->dim;
	c->has_d2t = c->draft_vocab != c->head.vocab;
	return 0;
}

const float *rt_e3_weight(const rt_eagle3 *h, const char *field, size_t *n)
{
	const rt_config *c = &h->cfg.head;
	const size_t D = (size_t)c->dim, qd = (size_t)c->n_heads * c->head_dim,
	             kvd = (size_t)c->n_kv_heads * c->head_dim, F = (size_t)c->ffn_dim;
	const size_t V = (size_t)c->vocab, Vd = (size_t)h->cfg.draft_vocab;
	const struct {
		const char *f;
		const float *p;
		size_t n;
	} t[] = {
		{"tok_embd", h->tok_embd, V * D}, {"fc", h->fc, D * RT_E3_TAPS * (size_t)h->cfg.target_dim},
		{"in_norm", h->input_norm, D}, {"hid_norm", h->hidden_norm, D}, {"wq", h->wq, qd * 2 * D},
		{"wk", h->wk, kvd * 2 * D}, {"wv", h->wv, kvd * 2 * D}, {"wo", h->wo, D * qd},
		{"ffn_norm", h->post_norm, D}, {"w_gate", h->w_gate, F * D}, {"w_up", h->w_up, F * D},
		{"w_down", h->w_down, D * F}, {"out_norm", h->out_norm, D}, {"lm_head", h->lm_head, Vd * D},
		{"d2t", h->map_f, Vd}, {"t2d", h->map_f + Vd, V}, {"inv_freq", h->inv_freq, (size_t)c->head_dim / 2},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i].f, field)) {
			*n = t[i].n;
			return t[i].p;
		}
	*n = 0;
	return NULL;
}

rt_eagle3 *rt_eagle3_load(const char *dir, const rt_model *tm, sw_err *err)
{
	char cpath[4096], wpath[4096];
	snprintf(cpath, sizeof(cpath), "%s/config.json", dir);
	snprintf(wpath, sizeof(wpath), "%s/model.safetensors", dir);
	if (tm->kind != RT_MODEL_LLAMA || tm->n_layers_run != tm->cfg.n_layers) {
		sw_errf(err, SW_EINVAL, "%s: an EAGLE-3 head needs a full transformer target (its hidden states are tapped); %s is not one",
		        dir, tm->name);
		return NULL;
	}
	size_t n;
	char *text = sw_read_capped(cpath, SW_CAP_CONFIG, "an EAGLE-3 head's config.json", &n, err);
	if (!text) {
		sw_err_prefix(err, "%s: cannot read the EAGLE-3 head's config (expected a directory with "
		              "config.json and model.safetensors)", cpath);
		return NULL;
	}
	rt_eagle3 *h = calloc(1, sizeof(*h));
	safetensors_file *f = NULL;
	if (!h) {
		free(text);
		sw_errf(err, SW_ENOMEM, "%s: out of memory", dir);
		return NULL;
	}
	snprintf(h->name, sizeof(h->name), "%s", dir);
	rt_e3_config *c = &h->cfg;
	int rc = parse_config(text, n, cpath, &tm->cfg, tm->name, c, err);
	free(text);
	if (rc || safetensors_open(wpath, &f, err))
		goto out_free_h;
	const rt_config *hc = &c->head;
	const int dim = hc->dim, qd = hc->n_heads * hc->head_dim, kvd = hc->n_kv_heads * hc->head_dim;
	const int V = hc->vocab, Vd = c->draft_vocab, ffn = hc->ffn_dim;
	const char *pre = safetensors_find(f, "layers.0.hidden_norm.weight") ? "layers.0." : "midlayer.";
	float *lm = NULL, *embd = NULL;
	c->own_embd = safetensors_find(f, "embed_tokens.weight") != NULL;
	c->has_d2t = safetensors_find(f, "d2t") != NULL;
	if (!c->own_embd && dim != tm->cfg.dim) {
		sw_errf(err, SW_EINVAL, "%s: tensor embed_tokens.weight: missing, and the target's embedding is %d wide, the head %d (expected its own embedding, shape [%d, %d])",
		        wpath, tm->cfg.dim, dim, V, dim);
		goto out_free_f;
	}
	struct {
		const char *k;
		float **dst;
		int64_t d0, d1;
	} lw[] = {
		{ "input_layernorm.weight", &h->input_norm, dim, 0 },
		{ "hidden_norm.weight", &h->hidden_norm, dim, 0 },
		{ "self_attn.q_proj.weight", &h->wq, qd, 2 * dim },
		{ "self_attn.k_proj.weight", &h->wk, kvd, 2 * dim },
		{ "self_attn.v_proj.weight", &h->wv, kvd, 2 * dim },
		{ "self_attn.o_proj.weight", &h->wo, dim, qd },
		{ "post_attention_layernorm.weight", &h->post_norm, dim, 0 },
		{ "mlp.gate_proj.weight", &h->w_gate, ffn, dim },
		{ "mlp.up_proj.weight", &h->w_up, ffn, dim },
		{ "mlp.down_proj.weight", &h->w_down, dim, ffn },
	};
	enum { NL = sizeof(lw) / sizeof(lw[0]) };
	char names[NL][96];
	struct want w[NL + 4];
	int nw = 0;
	w[nw++] = (struct want){ "fc.weight", &h->fc, dim, (int64_t)RT_E3_TAPS * c->target_dim, false };
	for (int i = 0; i < NL; i++) {
		snprintf(names[i], sizeof(names[i]), "%s%s", pre, lw[i].k);
		w[nw++] = (struct want){ names[i], lw[i].dst, lw[i].d0, lw[i].d1, false };
	}
	w[nw++] = (struct want){ "norm.weight", &h->out_norm, dim, 0, false };
	w[nw++] = (struct want){ "lm_head.weight", &lm, Vd, dim, c->tied };
	w[nw++] = (struct want){ "embed_tokens.weight", &embd, V, dim, true };
	/* A tensor the format does not have means the file is something else. */
	for (size_t i = 0; i < f->n_tensors; i++) {
		const char *tn = f->tensors[i].name;
		bool known = !strcmp(tn, "d2t") || !strcmp(tn, "t2d");
		/* NAME_scale: the scales of an I8 weight NAME (take_i8) */
		const size_t tl = strlen(tn), sl = strlen("_scale");
		const bool scale = tl > sl && !strcmp(tn + tl - sl, "_scale");
		for (int k = 0; k < nw && !known; k++) {
			known = !strcmp(tn, w[k].name);
			if (!known && scale && strlen(w[k].name) == tl - sl && !strncmp(tn, w[k].name, tl - sl)) {
				const safetensors_tensor *q = safetensors_find(f, w[k].name);
				if (!q || q->dtype != SAFETENSORS_I8) {
					sw_errf(err, SW_EINVAL, "%s: tensor %s: scales for an I8 weight, but %s is %s", wpath, tn,
					        w[k].name, q ? safetensors_dtype_name(q->dtype) : "missing");
					goto out_free_f;
				}
				known = true;
			}
		}
		if (!known) {
			sw_errf(err, SW_EINVAL, "%s: tensor %s: not part of an EAGLE-3 head (expected fc, %s{input_layernorm, hidden_norm, self_attn.*, post_attention_layernorm, mlp.*}, norm, lm_head, d2t, t2d, embed_tokens; NAME_scale beside an I8 NAME)",
			        wpath, tn, pre);
			goto out_free_f;
		}
	}
	sw_wscan_cost cost = {0};
	if (safetensors_check_finite(f, &cost, err))
		goto out_free_f;
	size_t total = 0;
	for (int k = 0; k < nw; k++)
		total += (size_t)w[k].d0 * (size_t)(w[k].d1 ? w[k].d1 : 1);
	h->arena = malloc(total * sizeof(float) + (size_t)Vd * sizeof(int32_t));
	h->inv_freq = malloc((size_t)hc->head_dim / 2 * sizeof(float));
	if (!h->arena || !h->inv_freq) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory for %zu weights", dir, total);
		goto out_free_f;
	}
	float *cur = h->arena;
	for (int k = 0; k < nw; k++)
		if (take(f, &w[k], &cur, err))
			goto out_free_f;
	h->d2t = (int32_t *)((float *)h->arena + total);
	if (take_maps(f, h, err))
		goto out_free_f;
	if (rt_hf_permute_qk(h->wq, hc->n_heads, hc->head_dim, 2 * dim, err) ||
	    rt_hf_permute_qk(h->wk, hc->n_kv_heads, hc->head_dim, 2 * dim, err)) {
		sw_err_prefix(err, "%s", wpath);
		goto out_free_f;
	}
	safetensors_free(f);
	/* the engine's maps (rt_e3_weight): d2t's target ids, t2d's draft id
	 * of each target id or -1, as floats */
	if (!(h->map_f = malloc(((size_t)Vd + (size_t)V) * sizeof(float)))) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory", dir);
		goto out_free_h;
	}
	for (int v = 0; v < V; v++)
		h->map_f[Vd + v] = -1.0f;
	for (int i = 0; i < Vd; i++) {
		h->map_f[i] = (float)h->d2t[i];
		h->map_f[Vd + h->d2t[i]] = (float)i;
	}
	h->tok_embd = embd ? embd : tm->w.tok_embd;
	h->lm_head = lm ? lm : h->tok_embd;
	ref_rope_freqs(h->inv_freq, hc->head_dim, hc->rope_theta, hc->rope_scaling, hc->rope_factor,
	               hc->rope_low_freq_factor, hc->rope_high_freq_factor, hc->rope_orig_ctx);
	rt_load_note(wpath, &cost);
	return h;
out_free_f:
	safetensors_free(f);
out_free_h:
	rt_eagle3_free(h);
	return NULL;
}

void rt_eagle3_free(rt_eagle3 *h)
{
	if (!h)
		return;
	free(h->arena);
	free(h->inv_freq);
	free(h->map_f);
	free(h);
}

/* ---- state and forward ---- */

static size_t kv_dim(const rt_eagle3 *h) { return (size_t)h->cfg.head.n_kv_heads * h->cfg.head.head_dim; }

/* Scratch floats for R rows: x2 2R*dim, q and att R*qd each, res, o, x R*dim
 * each, mlp 2R*ffn, attention max_ctx + max_rows, fused + lm-head norm R*dim. */
static size_t scratch_floats(const rt_eagle3 *h, int R, int slots)
{
	const rt_config *c = &h->cfg.head;
	size_t dim = (size_t)c->dim, qd = (size_t)c->n_heads * c->head_dim;
	return 2 * R * dim + 2 * R * qd + 4 * R * dim + 2 * (size_t)R * c->ffn_dim + (size_t)slots + dim;
}

rt_e3_state *rt_e3_state_new(const rt_eagle3 *h, int max_ctx, int max_rows, sw_err *err)
{
	rt_e3_state *s = calloc(1, sizeof(*s));
	if (!s || max_ctx < 1 || max_rows < 1) {
		free(s);
		sw_errf(err, max_ctx < 1 || max_rows < 1 ? SW_ERANGE : SW_ENOMEM,
		        "%s: EAGLE-3 state for %d committed and %d staged rows (expected >= 1 each)", h->name, max_ctx,
		        max_rows);
		return NULL;
	}
	s->h = h;
	s->max_ctx = max_ctx;
	s->max_rows = max_rows;
	size_t slots = (size_t)max_ctx + (size_t)max_rows;
	s->k_cache = malloc(slots * kv_dim(h) * sizeof(float));
	s->v_cache = malloc(slots * kv_dim(h) * sizeof(float));
	s->scratch = malloc(scratch_floats(h, max_rows, (int)slots) * sizeof(float));
	if (!s->k_cache || !s->v_cache || !s->scratch) {
		rt_e3_state_free(s);
		sw_errf(err, SW_ENOMEM, "%s: cannot allocate the EAGLE-3 state for context %d", h->name, max_ctx);
		return NULL;
	}
	return s;
}

void rt_e3_state_free(rt_e3_state *s)
{
	if (!s)
		return;
	free(s->k_cache);
	free(s->v_cache);
	free(s->scratch);
	free(s);
}

void rt_e3_truncate(rt_e3_state *s, int n)
{
	if (n < s->len)
		s->len = n < 0 ? 0 : n;
	s->blk_T = 0;
}

struct rows {
	float *x2, *q, *att, *res, *o, *x, *mlp, *att_scratch, *tmp;
};

static struct rows carve(const rt_e3_state *s, int R)
{
	const rt_config *c = &s->h->cfg.head;
	size_t dim = (size_t)c->dim, qd = (size_t)c->n_heads * c->head_dim;
	struct rows r;
	r.x2 = s->scratch;
	r.q = r.x2 + 2 * (size_t)R * dim;
	r.att = r.q + (size_t)R * qd;
	r.res = r.att + (size_t)R * qd;
	r.o = r.res + (size_t)R * dim;
	r.x = r.o + (size_t)R * dim;
	r.tmp = r.x + (size_t)R * dim;
	r.mlp = r.tmp + (size_t)R * dim;
	r.att_scratch = r.mlp + 2 * (size_t)R * c->ffn_dim;
	return r;
}

/* The layer's input of one row: x2 = [input_norm(embed(tok)) ; hidden_norm(f)]
 * and the residual (f, or hidden_norm(f) with norm_before_residual); K and V
 * (RoPE'd at pos) into slot `slot` of the cache; q (qd) unless NULL. */
static int row_in(rt_e3_state *s, const float *f, int32_t tok, int32_t pos, size_t slot, float *x2, float *res,
                  float *q, sw_err *err)
{
	const rt_eagle3 *h = s->h;
	const rt_config *c = &h->cfg.head;
	const int dim = c->dim, kvd = (int)kv_dim(h);
	if (tok < 0 || tok >= c->vocab)
		return sw_errf(err, SW_EINVAL, "%s: token %d outside the vocabulary [0, %d)", h->name, tok, c->vocab);
	ref_rmsnorm(x2, h->tok_embd + (size_t)tok * dim, h->input_norm, 1, dim, c->norm_eps);
	ref_rmsnorm(x2 + dim, f, h->hidden_norm, 1, dim, c->norm_eps);
	memcpy(res, h->cfg.norm_before_residual ? x2 + dim : f, (size_t)dim * sizeof(float));
	float *kc = s->k_cache + slot * kvd, *vc = s->v_cache + slot * kvd;
	rt_matmul(kc, x2, h->wk, 1, 2 * dim, kvd);
	rt_matmul(vc, x2, h->wv, 1, 2 * dim, kvd);
	ref_rope(kc, &pos, 1, c->n_kv_heads, c->head_dim, c->head_dim, h->inv_freq);
	if (q) {
		rt_matmul(q, x2, h->wq, 1, 2 * dim, c->n_heads * c->head_dim);
		ref_rope(q, &pos, 1, c->n_heads, c->head_dim, c->head_dim, h->inv_freq);
	}
	return 0;
}

/* The rest of the layer for T rows whose q and residual are in r: attention
 * over n_ctx committed slots and the last T of n_blk staged ones (mask as
 * ref_attention_append), o_proj, residual, MLP; hidden (T, dim) and logits
 * (T, Vd) when non-NULL. */
static int rows_out(rt_e3_state *s, struct rows *r, int T, int n_ctx, int n_blk, const uint64_t *mask,
                    float *hidden, float *logits, const int32_t *pos, sw_err *err)
{
	const rt_eagle3 *h = s->h;
	const rt_config *c = &h->cfg.head;
	const int dim = c->dim, qd = c->n_heads * c->head_dim;
	ref_attention_append(r->att, r->q, s->k_cache, s->v_cache, T, n_ctx, n_blk, c->n_heads, c->n_kv_heads,
	                     c->head_dim, mask, r->att_scratch);
	rt_matmul(r->o, r->att, h->wo, T, qd, dim);
	ref_add(r->x, r->res, r->o, (size_t)T * dim);
	ref_rmsnorm(r->tmp, r->x, h->post_norm, T, dim, c->norm_eps);
	rt_mlp_swiglu(r->o, r->tmp, h->w_gate, h->w_up, h->w_down, T, dim, c->ffn_dim, r->mlp);
	ref_add(r->x, r->x, r->o, (size_t)T * dim);
	if (hidden)
		memcpy(hidden, r->x, (size_t)T * dim * sizeof(float));
	if (!logits)
		return 0;
	rt_lm_head(logits, r->x, h->out_norm, h->lm_head, T, dim, h->cfg.draft_vocab, c->norm_eps, r->tmp);
	return rt_logits_check(logits, T, h->cfg.draft_vocab, (size_t)h->cfg.draft_vocab, h->name,
	                       "EAGLE-3 lm_head (draft ids)", ++s->n_fwd, pos, err);
}

int rt_e3_commit(rt_e3_state *s, const float *feat, const int32_t *tok, int n, float *hidden, float *logits,
                 sw_err *err)
{
	const rt_eagle3 *h = s->h;
	const int dim = h->cfg.head.dim, in = RT_E3_TAPS * h->cfg.target_dim;
	s->blk_T = 0;
	if (n < 0 || s->len + n > s->max_ctx)
		return sw_errf(err, SW_ERANGE, "%s: %d + %d committed rows exceed the head's state of %d", h->name, s->len, n,
		               s->max_ctx);
	if (n == 0 && (hidden || logits))
		return sw_errf(err, SW_EINVAL, "%s: an output asked of a commit of no rows", h->name);
	struct rows r = carve(s, 1);
	/* fc's output (dim) lives in r.o until row_in has read it */
	for (int i = 0; i < n; i++) {
		int32_t pos = s->len + i;
		bool last = i + 1 == n && (hidden || logits);
		rt_matmul(r.o, feat + (size_t)i * in, h->fc, 1, in, dim);
		int rc = row_in(s, r.o, tok[i], pos, (size_t)pos, r.x2, r.res, last ? r.q : NULL, err);
		if (rc)
			return rc;
	}
	s->len += n;
	const int32_t last = s->len - 1;
	if (hidden || logits)
		return rows_out(s, &r, 1, s->len - 1, 1, NULL, hidden, logits, &last, err);
	return 0;
}

int rt_e3_step(rt_e3_state *s, const float *feat, const int32_t *tok, const int32_t *pos, int R,
               const uint64_t *mask, float *hidden, float *logits, sw_err *err)
{
	const rt_eagle3 *h = s->h;
	const int dim = h->cfg.head.dim;
	if (R < 1 || s->blk_T + R > s->max_rows)
		return sw_errf(err, SW_ERANGE, "%s: %d + %d staged rows exceed the head's %d", h->name, s->blk_T, R,
		               s->max_rows);
	struct rows r = carve(s, R);
	const int qd = h->cfg.head.n_heads * h->cfg.head.head_dim;
	for (int i = 0; i < R; i++) {
		size_t slot = (size_t)s->len + (size_t)s->blk_T + (size_t)i;
		int rc = row_in(s, feat + (size_t)i * dim, tok[i], pos[i], slot, r.x2 + (size_t)i * 2 * dim,
		                r.res + (size_t)i * dim, r.q + (size_t)i * qd, err);
		if (rc)
			return rc;
	}
	s->blk_T += R;
	return rows_out(s, &r, R, s->len, s->blk_T, mask, hidden, logits, pos, err);
}

/* Block drafter: loading with validation, the fused-context cache and the
 * forward pass on the host, composed from the kernels/ref ops (see
 * block_drafter.h for the definition). Not the drafting loop: that is
 * runtime/decode/block_decode.c. */
#include "block_drafter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "formats/safetensors.h"
#include "gemm.h"
#include "kernels/ref/ref.h"

static const char *const CONFIG_KEYS[] = {
	"format", "version", "conditioning", "block", "draft_vocab", "target", "taps", "window",
	"block_attention", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "norm_eps",
	"rope_theta", "dtype", "steps", "training", "d2t", NULL,
};
static const char *const TARGET_KEYS[] = { "dim", "vocab", "n_layers", NULL };
/* A spec's shape-only drafter: config.json's keys but format, version,
 * target and the training record. */
static const char *const SHAPE_KEYS[] = {
	"conditioning", "block", "draft_vocab", "taps", "window", "block_attention", "n_layers", "n_heads",
	"n_kv_heads", "head_dim", "ffn_dim", "norm_eps", "rope_theta", NULL,
};

static int get_int(const json_value *o, const char *key, const char *path, int64_t lo, int64_t hi, int *out,
                   sw_err *err)
{
	int64_t v;
	int rc = json_get_int(o, key, path, lo, hi, &v, err);
	if (!rc)
		*out = (int)v;
	return rc;
}

/* The config alone, then against the target. */
/* root: config.json's object (P "$"), or (shape) a spec's drafter shape
 * object at path P: the same keys but format, version and target (the
 * spec's target is the target). */
static int parse_config_value(const json_value *root, const char *file, const char *P, bool shape,
                              const rt_config *tcfg, const char *tname, rt_bd_config *c, sw_err *err)
{
	int rc;
	const char *s;
	const json_value *tg, *taps;
	double num;
	memset(c, 0, sizeof(*c));
	if ((rc = json_as_object(root, P, err)) ||
	    (rc = json_check_keys(root, P, shape ? SHAPE_KEYS : CONFIG_KEYS, err)))
		goto out;
	if (!shape) {
		if ((rc = json_get_string(root, "format", P, &s, err)))
			goto out;
		if (strcmp(s, "specwright-block-drafter")) {
			rc = sw_errf(err, SW_EINVAL, "%s: %s.format: expected \"specwright-block-drafter\", found \"%s\"", file, P, s);
			goto out;
		}
		int version;
		if ((rc = get_int(root, "version", P, 1, 1, &version, err)))
			goto out;
	}
	if ((rc = json_get_string(root, "conditioning", P, &s, err)))
		goto out;
	if (!strcmp(s, "features")) {
		c->cond = RT_BD_FEATURES;
	} else if (!strcmp(s, "tokens")) {
		c->cond = RT_BD_TOKENS;
	} else {
		rc = sw_errf(err, SW_EINVAL, "%s: %s.conditioning: expected \"features\" or \"tokens\", found \"%s\"", file, P, s);
		goto out;
	}
	if ((rc = get_int(root, "block", P, 2, RT_BD_MAX_BLOCK, &c->block, err)) ||
	    (rc = get_int(root, "n_layers", P, 1, RT_BD_MAX_LAYERS, &c->n_layers, err)) ||
	    (rc = get_int(root, "n_heads", P, 1, 1024, &c->n_heads, err)) ||
	    (rc = get_int(root, "n_kv_heads", P, 1, 1024, &c->n_kv_heads, err)) ||
	    (rc = get_int(root, "head_dim", P, 2, 1024, &c->head_dim, err)) ||
	    (rc = get_int(root, "ffn_dim", P, 1, 1 << 20, &c->ffn_dim, err)))
		goto out;
	if ((rc = json_get_number(root, "norm_eps", P, 1e-12, 1.0, &num, err)))
		goto out;
	c->norm_eps = (float)num;
	if ((rc = json_get_number(root, "rope_theta", P, 1.0, 1e9, &num, err)))
		goto out;
	c->rope_theta = (float)num;
	if (c->n_heads % c->n_kv_heads || c->head_dim % 2) {
		rc = sw_errf(err, SW_EINVAL, "%s: %s.n_heads %d / n_kv_heads %d / head_dim %d: expected n_heads a multiple of n_kv_heads and an even head_dim",
		             file, P, c->n_heads, c->n_kv_heads, c->head_dim);
		goto out;
	}
	if ((rc = json_get_string(root, "block_attention", P, &s, err)))
		goto out;
	if (!strcmp(s, "bidirectional")) {
		c->block_attn = RT_BD_BIDIRECTIONAL;
	} else if (!strcmp(s, "causal")) {
		c->block_attn = RT_BD_CAUSAL;
	} else {
		rc = sw_errf(err, SW_EINVAL, "%s: %s.block_attention: expected \"bidirectional\" or \"causal\", found \"%s\"",
		             file, P, s);
		goto out;
	}
	if (shape) {
		c->dim = tcfg->dim;
		c->vocab = tcfg->vocab;
		c->target_layers = tcfg->n_layers;
	} else if ((rc = json_get_object(root, "target", P, &tg, err)) ||
	           (rc = json_check_keys(tg, "$.target", TARGET_KEYS, err)) ||
	           (rc = get_int(tg, "dim", "$.target", 1, 1 << 20, &c->dim, err)) ||
	           (rc = get_int(tg, "vocab", "$.target", 1, 1 << 30, &c->vocab, err)) ||
	           (rc = get_int(tg, "n_layers", "$.target", 1, 1 << 16, &c->target_layers, err))) {
		goto out;
	}
	/* Against the target: the drafter shares its width, embedding and head. */
	if (c->dim != tcfg->dim) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.target.dim: expected %d (the width of the target %s), found %d", file,
		             tcfg->dim, tname, c->dim);
		goto out;
	}
	if (c->vocab != tcfg->vocab) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.target.vocab: expected %d (the vocabulary of the target %s), found %d",
		             file, tcfg->vocab, tname, c->vocab);
		goto out;
	}
	if (c->target_layers != tcfg->n_layers) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.target.n_layers: expected %d (the layers of the target %s), found %d",
		             file, tcfg->n_layers, tname, c->target_layers);
		goto out;
	}
	if ((rc = get_int(root, "draft_vocab", P, 1, c->vocab, &c->draft_vocab, err)))
		goto out;
	if (!shape && json_get(root, "d2t") && (rc = json_get_bool(root, "d2t", P, &c->has_map, err)))
		goto out;
	if (c->cond == RT_BD_FEATURES) {
		if ((rc = json_get_array(root, "taps", P, 1, RT_MAX_TAPS, &taps, err)))
			goto out;
		c->n_taps = (int)taps->n;
		for (int i = 0; i < c->n_taps; i++) {
			char p[192];
			int64_t v;
			snprintf(p, sizeof(p), "%s.taps[%d]", P, i);
			if ((rc = json_as_int(taps->items[i], p, 0, c->target_layers - 1, &v, err)))
				goto out;
			c->taps[i] = (int)v;
			if (i > 0 && c->taps[i] <= c->taps[i - 1]) {
				rc = sw_errf(err, SW_EINVAL, "%s: %s: expected a layer above the previous tap %d (taps increase), found %d",
				             file, p, c->taps[i - 1], c->taps[i]);
				goto out;
			}
		}
	} else {
		if ((rc = get_int(root, "window", P, 1, RT_BD_MAX_WINDOW, &c->window, err)))
			goto out;
	}
	rc = 0;
out:
	return rc;
}

static int parse_config(const char *text, size_t n, const char *file, const rt_config *tcfg, const char *tname,
                        rt_bd_config *c, sw_err *err)
{
	json_value *root = json_parse(text, n, file, err);
	if (!root)
		return err->code ? err->code : SW_EINVAL;
	int rc = parse_config_value(root, file, "$", false, tcfg, tname, c, err);
	json_free(root);
	return rc;
}

int rt_bd_config_shape(const json_value *shape, const char *file, const char *path, const rt_config *tcfg,
                       rt_bd_config *c, sw_err *err)
{
	return parse_config_value(shape, file, path, true, tcfg, "(the spec's target)", c, err);
}

struct want {
	const char *name;
	float **dst;
	int64_t d0, d1; /* d1 = 0: a vector */
};

static int take_tensor(const safetensors_file *f, const struct want *w, float **cursor, sw_err *err)
{
	const safetensors_tensor *t = safetensors_find(f, w->name);
	int nd = w->d1 ? 2 : 1;
	if (!t)
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: missing (expected shape [%lld%s%lld])", f->name, w->name,
		               (long long)w->d0, w->d1 ? ", " : "", w->d1 ? (long long)w->d1 : 0LL);
	if (t->n_dims != nd || t->shape[0] != w->d0 || (nd == 2 && t->shape[1] != w->d1)) {
		char found[128];
		int k = snprintf(found, sizeof(found), "[");
		for (int i = 0; i < t->n_dims && k < (int)sizeof(found) - 24; i++)
			k += snprintf(found + k, sizeof(found) - (size_t)k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
		snprintf(found + k, sizeof(found) - (size_t)k, "]");
		if (w->d1)
			return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected shape [%lld, %lld], found %s", f->name, w->name,
			               (long long)w->d0, (long long)w->d1, found);
		return sw_errf(err, SW_EINVAL, "%s: tensor %s: expected shape [%lld], found %s", f->name, w->name,
		               (long long)w->d0, found);
	}
	int rc = safetensors_numeric(f, t, err);
	if (rc)
		return rc;
	*w->dst = *cursor;
	safetensors_to_f32(t, *cursor);
	*cursor += t->numel;
	return 0;
}

/* d2t (absolute target ids) from the file's offsets when mapped, else the
 * identity; checked: in range and distinct. */
static int bd_take_map(const safetensors_file *f, const rt_bd_config *c, int32_t *d2t, sw_err *err)
{
	const int Vd = c->draft_vocab, V = c->vocab;
	if (!c->has_map) {
		for (int i = 0; i < Vd; i++)
			d2t[i] = i;
		return 0;
	}
	const safetensors_tensor *t = safetensors_find(f, "d2t");
	if (!t)
		return sw_errf(err, SW_EINVAL, "%s: tensor d2t: missing (expected shape [%d], I64, with \"d2t\": true)", f->name, Vd);
	if (t->dtype != SAFETENSORS_I64 || t->n_dims != 1 || t->shape[0] != Vd)
		return sw_errf(err, SW_EINVAL, "%s: tensor d2t: expected I64 of shape [%d], found %s of %d dimensions (first %lld)",
		               f->name, Vd, safetensors_dtype_name(t->dtype), t->n_dims, t->n_dims ? (long long)t->shape[0] : 0LL);
	int64_t *off = malloc((size_t)Vd * sizeof(*off));
	uint8_t *seen = calloc((size_t)V, 1);
	int rc = 0;
	if (!off || !seen) {
		rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", f->name);
		goto out;
	}
	safetensors_to_i64(t, off);
	for (int i = 0; i < Vd && !rc; i++) {
		int64_t tid = (int64_t)i + off[i];
		if (tid < 0 || tid >= V)
			rc = sw_errf(err, SW_EINVAL, "%s: tensor d2t[%d]: expected an offset to a target id in [0, %d), found %lld (target id %lld)",
			             f->name, i, V, (long long)off[i], (long long)tid);
		else if (seen[tid])
			rc = sw_errf(err, SW_EINVAL, "%s: tensor d2t[%d]: expected distinct target ids, found target id %lld twice",
			             f->name, i, (long long)tid);
		else
			seen[tid] = 1, d2t[i] = (int32_t)tid;
	}
out:
	free(off);
	free(seen);
	return rc;
}

int rt_bd_config_load(const char *dir, const rt_config *tcfg, const char *tname, rt_bd_config *c, sw_err *err)
{
	char cpath[4096];
	snprintf(cpath, sizeof(cpath), "%s/config.json", dir);
	size_t n;
	char *text = sw_read_capped(cpath, SW_CAP_CONFIG, "a block drafter's config", &n, err);
	if (!text)
		return sw_err_prefix(err, "cannot read the block drafter's config (expected a directory with config.json and "
		                     "model.safetensors)"), err->code;
	int rc = parse_config(text, n, cpath, tcfg, tname, c, err);
	free(text);
	return rc;
}

rt_block_drafter *rt_block_drafter_load(const char *dir, const rt_model *tm, sw_err *err)
{
	char cpath[4096], wpath[4096];
	snprintf(cpath, sizeof(cpath), "%s/config.json", dir);
	snprintf(wpath, sizeof(wpath), "%s/model.safetensors", dir);
	size_t n;
	char *text = sw_read_capped(cpath, SW_CAP_CONFIG, "a block drafter's config", &n, err);
	if (!text) {
		sw_err_prefix(err, "cannot read the block drafter's config (expected a directory with config.json and "
		              "model.safetensors)");
		return NULL;
	}
	rt_block_drafter *d = calloc(1, sizeof(*d));
	safetensors_file *f = NULL;
	if (!d) {
		free(text);
		sw_errf(err, SW_ENOMEM, "%s: out of memory", dir);
		return NULL;
	}
	snprintf(d->name, sizeof(d->name), "%s", dir);
	rt_bd_config *c = &d->cfg;
	int rc;
	if (tm->kind != RT_MODEL_LLAMA) {
		free(text);
		rc = sw_errf(err, SW_EINVAL, "%s: a block drafter needs a transformer target (shared embedding and LM head); %s is not one",
		             cpath, tm->name);
		goto out_free_d;
	}
	rc = parse_config(text, n, cpath, &tm->cfg, tm->name, c, err);
	free(text);
	if (rc)
		goto out_free_d;
	if (safetensors_open(wpath, &f, err))
		goto out_free_d;
	int dim = c->dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
	struct want w[8 + 9 * RT_BD_MAX_LAYERS];
	char names[9 * RT_BD_MAX_LAYERS][64];
	int nw = 0;
	w[nw++] = (struct want){ "mask_embd", &d->mask_embd, c->block - 1, dim };
	if (c->cond == RT_BD_FEATURES) {
		w[nw++] = (struct want){ "fc", &d->fc, dim, (int64_t)c->n_taps * dim };
		w[nw++] = (struct want){ "fc_norm", &d->fc_norm, dim, 0 };
	}
	w[nw++] = (struct want){ "out_norm", &d->out_norm, dim, 0 };
	for (int l = 0; l < c->n_layers; l++) {
		rt_layer_weights *L = &d->layers[l];
		struct { const char *k; float **dst; int64_t d0, d1; } lw[] = {
			{ "attn_norm", &L->attn_norm, dim, 0 }, { "wq", &L->wq, qd, dim }, { "wk", &L->wk, kvd, dim },
			{ "wv", &L->wv, kvd, dim }, { "wo", &L->wo, dim, qd }, { "ffn_norm", &L->ffn_norm, dim, 0 },
			{ "w_gate", &L->w_gate, c->ffn_dim, dim }, { "w_up", &L->w_up, c->ffn_dim, dim },
			{ "w_down", &L->w_down, dim, c->ffn_dim },
		};
		for (size_t i = 0; i < sizeof(lw) / sizeof(lw[0]); i++) {
			char *nm = names[l * 9 + (int)i];
			snprintf(nm, 64, "layers.%d.%s", l, lw[i].k);
			w[nw++] = (struct want){ nm, lw[i].dst, lw[i].d0, lw[i].d1 };
		}
	}
	if (c->has_map)
		w[nw++] = (struct want){ "d2t", NULL, c->draft_vocab, 0 };
	/* Every tensor in the file must be one the config asks for: a stray
	 * tensor means the config and the weights disagree (e.g. fc in a tokens
	 * drafter, a layer beyond n_layers). */
	for (size_t i = 0; i < f->n_tensors; i++) {
		bool known = false;
		for (int k = 0; k < nw && !known; k++)
			known = !strcmp(f->tensors[i].name, w[k].name);
		if (!known) {
			sw_errf(err, SW_EINVAL, "%s: tensor %s: not expected by %s (conditioning %s, %d layers)", wpath,
			        f->tensors[i].name, cpath, c->cond == RT_BD_FEATURES ? "features" : "tokens", c->n_layers);
			goto out_free_f;
		}
	}
	sw_wscan_cost cost = {0};
	if (safetensors_check_finite(f, &cost, err))
		goto out_free_f;
	size_t total = 0;
	for (int k = 0; k < nw; k++)
		total += (size_t)w[k].d0 * (size_t)(w[k].d1 ? w[k].d1 : 1);
	if (c->has_map) /* the gathered LM head rows */
		total += (size_t)c->draft_vocab * dim;
	d->arena = malloc(total * sizeof(float) + (size_t)c->draft_vocab * sizeof(int32_t));
	d->inv_freq = malloc((size_t)c->head_dim / 2 * sizeof(float));
	if (!d->arena || !d->inv_freq) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory for %zu weights", dir, total);
		goto out_free_f;
	}
	float *cur = d->arena;
	for (int k = 0; k < nw; k++)
		if (w[k].dst && take_tensor(f, &w[k], &cur, err))
			goto out_free_f;
	d->d2t = (int32_t *)((float *)d->arena + total);
	if (bd_take_map(f, c, d->d2t, err))
		goto out_free_f;
	safetensors_free(f);
	d->tok_embd = tm->w.tok_embd;
	d->lm_head = tm->w.lm_head;
	if (c->has_map) {
		for (int i = 0; i < c->draft_vocab; i++)
			memcpy(cur + (size_t)i * dim, tm->w.lm_head + (size_t)d->d2t[i] * dim, (size_t)dim * sizeof(float));
		d->lm_head = cur;
		/* the maps as an engine uploads them (rt_bd_weight "d2t", "t2d") */
		d->d2t_f = malloc(((size_t)c->draft_vocab + (size_t)c->vocab) * sizeof(float));
		if (!d->d2t_f) {
			sw_errf(err, SW_ENOMEM, "%s: out of memory for the draft map", dir);
			goto out_free_d;
		}
		d->t2d_f = d->d2t_f + c->draft_vocab;
		for (int v = 0; v < c->vocab; v++)
			d->t2d_f[v] = -1.0f;
		for (int i = 0; i < c->draft_vocab; i++) {
			d->d2t_f[i] = (float)d->d2t[i];
			d->t2d_f[d->d2t[i]] = (float)i;
		}
	}
	ref_rope_freqs(d->inv_freq, c->head_dim, c->rope_theta, 0, 1.0f, 0, 0, 0);
	rt_load_note(wpath, &cost);
	return d;
out_free_f:
	safetensors_free(f);
out_free_d:
	rt_block_drafter_free(d);
	return NULL;
}

void rt_block_drafter_free(rt_block_drafter *d)
{
	if (!d)
		return;
	free(d->arena);
	free(d->inv_freq);
	free(d->d2t_f);
	free(d);
}

const float *rt_bd_weight(const rt_block_drafter *d, const char *field, int layer, size_t *n)
{
	const rt_bd_config *c = &d->cfg;
	const size_t D = (size_t)c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim,
	             F = (size_t)c->ffn_dim;
	const bool feat = c->cond == RT_BD_FEATURES;
	if (layer < 0) {
		struct { const char *k; const float *p; size_t n; } g[] = {
			{ "mask_embd", d->mask_embd, (size_t)(c->block - 1) * D },
			{ "fc", feat ? d->fc : NULL, D * (size_t)c->n_taps * D },
			{ "fc_norm", feat ? d->fc_norm : NULL, D },
			{ "out_norm", d->out_norm, D },
			{ "inv_freq", d->inv_freq, (size_t)c->head_dim / 2 },
			/* mapped only: the gathered head rows, and the maps as ids in
			 * floats (what an engine uploads as i32) */
			{ "lm_head", c->has_map ? d->lm_head : NULL, (size_t)c->draft_vocab * D },
			{ "d2t", c->has_map ? d->d2t_f : NULL, (size_t)c->draft_vocab },
			{ "t2d", c->has_map ? d->t2d_f : NULL, (size_t)c->vocab },
		};
		for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++)
			if (!strcmp(field, g[i].k)) {
				*n = g[i].n;
				return g[i].p;
			}
		return NULL;
	}
	if (layer >= c->n_layers)
		return NULL;
	const rt_layer_weights *L = &d->layers[layer];
	struct { const char *k; const float *p; size_t n; } g[] = {
		{ "attn_norm", L->attn_norm, D }, { "wq", L->wq, qd * D }, { "wk", L->wk, kvd * D },
		{ "wv", L->wv, kvd * D }, { "wo", L->wo, D * qd }, { "ffn_norm", L->ffn_norm, D },
		{ "w_gate", L->w_gate, F * D }, { "w_up", L->w_up, F * D }, { "w_down", L->w_down, D * F },
	};
	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++)
		if (!strcmp(field, g[i].k)) {
			*n = g[i].n;
			return g[i].p;
		}
	return NULL;
}

static size_t bd_kv_dim(const rt_bd_config *c) { return (size_t)c->n_kv_heads * c->head_dim; }

rt_bd_state *rt_bd_state_new(const rt_block_drafter *d, int max_ctx, sw_err *err)
{
	const rt_bd_config *c = &d->cfg;
	rt_bd_state *s = calloc(1, sizeof(*s));
	if (!s) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory", d->name);
		return NULL;
	}
	s->d = d;
	s->max_ctx = max_ctx;
	s->max_rows = c->block + (c->cond == RT_BD_TOKENS ? c->window : 0);
	size_t R = (size_t)s->max_rows, dim = (size_t)c->dim, qd = (size_t)c->n_heads * c->head_dim;
	size_t slots = (c->cond == RT_BD_FEATURES ? (size_t)max_ctx : 0) + R;
	size_t kv = (size_t)c->n_layers * slots * bd_kv_dim(c);
	size_t ctxw = c->cond == RT_BD_FEATURES ? (size_t)max_ctx : 0;
	/* x, h, o: R*dim; q, att: R*qd; mlp: 2*R*ffn; attention: ctx + R;
	 * fusion: a row of n_taps*dim is read in place, dim out */
	size_t sc = 3 * R * dim + 2 * R * qd + 2 * R * (size_t)c->ffn_dim + ctxw + R + 2 * dim + R * 2;
	s->k_cache = malloc(kv * sizeof(float));
	s->v_cache = malloc(kv * sizeof(float));
	s->scratch = malloc(sc * sizeof(float));
	if (!s->k_cache || !s->v_cache || !s->scratch) {
		rt_bd_state_free(s);
		sw_errf(err, SW_ENOMEM, "%s: cannot allocate the drafter state for context %d", d->name, max_ctx);
		return NULL;
	}
	return s;
}

void rt_bd_state_free(rt_bd_state *s)
{
	if (!s)
		return;
	free(s->k_cache);
	free(s->v_cache);
	free(s->scratch);
	free(s);
}

/* Slots per layer in the K/V caches. */
static size_t bd_slots(const rt_bd_state *s)
{
	return (s->d->cfg.cond == RT_BD_FEATURES ? (size_t)s->max_ctx : 0) + (size_t)s->max_rows;
}

int rt_bd_append(rt_bd_state *s, const float *feat, int n, sw_err *err)
{
	const rt_block_drafter *d = s->d;
	const rt_bd_config *c = &d->cfg;
	if (c->cond != RT_BD_FEATURES)
		return sw_errf(err, SW_EINVAL, "%s: a tokens-conditioned drafter takes no target features", d->name);
	if (n < 0 || s->len + n > s->max_ctx)
		return sw_errf(err, SW_ERANGE, "%s: %d + %d context positions exceed the drafter state's %d", d->name, s->len,
		               n, s->max_ctx);
	int dim = c->dim, in = c->n_taps * dim;
	size_t kvd = bd_kv_dim(c);
	float *f = s->scratch, *h = f + dim;
	for (int i = 0; i < n; i++) {
		int32_t pos = s->len + i;
		rt_matmul(h, feat + (size_t)i * in, d->fc, 1, in, dim);
		ref_rmsnorm(f, h, d->fc_norm, 1, dim, c->norm_eps);
		for (int l = 0; l < c->n_layers; l++) {
			const rt_layer_weights *L = &d->layers[l];
			float *kc = s->k_cache + ((size_t)l * bd_slots(s) + (size_t)pos) * kvd;
			float *vc = s->v_cache + ((size_t)l * bd_slots(s) + (size_t)pos) * kvd;
			rt_matmul(kc, f, L->wk, 1, dim, (int)kvd);
			rt_matmul(vc, f, L->wv, 1, dim, (int)kvd);
			ref_rope(kc, &pos, 1, c->n_kv_heads, c->head_dim, c->head_dim, d->inv_freq);
		}
	}
	s->len += n;
	return 0;
}

int rt_bd_forward(rt_bd_state *s, const int32_t *blk, int pos0, const int32_t *win, int n_win, float *logits,
                  sw_err *err)
{
	const rt_block_drafter *d = s->d;
	const rt_bd_config *c = &d->cfg;
	const int B = c->block, dim = c->dim, nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
	const int qd = nh * hd, kvd = nkv * hd;
	int n_ctx = 0;
	if (c->cond == RT_BD_FEATURES) {
		if (s->len != pos0)
			return sw_errf(err, SW_EINVAL, "%s: the context holds %d positions, the anchor is at %d (expected equal)",
			               d->name, s->len, pos0);
		n_win = 0;
		n_ctx = s->len;
	} else if (n_win < 0 || n_win > c->window || n_win > pos0) {
		return sw_errf(err, SW_ERANGE, "%s: window of %d tokens before position %d, expected 0..%d", d->name, n_win,
		               pos0, c->window);
	}
	const int R = n_win + B;
	float *x = s->scratch;
	float *h = x + (size_t)R * dim;
	float *o = h + (size_t)R * dim;
	float *q = o + (size_t)R * dim;
	float *att = q + (size_t)R * qd;
	float *mlp = att + (size_t)R * qd;
	float *att_scratch = mlp + 2 * (size_t)R * c->ffn_dim;
	enum { MAX_R = RT_BD_MAX_BLOCK + RT_BD_MAX_WINDOW };
	int32_t pos[MAX_R];
	uint64_t mask[MAX_R * ((MAX_R + 63) / 64)];
	const int words = (R + 63) / 64;

	for (int i = 0; i < R; i++) {
		int j = i - n_win; /* block row, or < 0 for the window */
		int32_t t = j < 0 ? win[i] : j == 0 ? blk[0] : blk[j];
		pos[i] = pos0 - n_win + i;
		if (j > 0 && t < 0) {
			memcpy(x + (size_t)i * dim, d->mask_embd + (size_t)(j - 1) * dim, (size_t)dim * sizeof(float));
			continue;
		}
		if (t < 0 || t >= c->vocab)
			return sw_errf(err, SW_EINVAL, "%s: token %d at drafter row %d outside the vocabulary [0, %d)", d->name, t,
			               i, c->vocab);
		memcpy(x + (size_t)i * dim, d->tok_embd + (size_t)t * dim, (size_t)dim * sizeof(float));
	}
	/* Row visibility over the R staged entries: everything, except block
	 * rows later than a block row under causal block attention. */
	for (int i = 0; i < R; i++) {
		uint64_t *row = mask + (size_t)i * words;
		memset(row, 0, (size_t)words * sizeof(*row));
		for (int k = 0; k < R; k++) {
			bool vis = !(c->block_attn == RT_BD_CAUSAL && i >= n_win && k >= n_win && k > i);
			if (vis)
				row[k / 64] |= 1ull << (k % 64);
		}
	}
	for (int l = 0; l < c->n_layers; l++) {
		const rt_layer_weights *L = &d->layers[l];
		float *kc = s->k_cache + (size_t)l * bd_slots(s) * kvd;
		float *vc = s->v_cache + (size_t)l * bd_slots(s) * kvd;
		float *kb = kc + (size_t)n_ctx * kvd, *vb = vc + (size_t)n_ctx * kvd;
		ref_rmsnorm(h, x, L->attn_norm, R, dim, c->norm_eps);
		rt_matmul(q, h, L->wq, R, dim, qd);
		rt_matmul(kb, h, L->wk, R, dim, kvd);
		rt_matmul(vb, h, L->wv, R, dim, kvd);
		ref_rope(q, pos, R, nh, hd, hd, d->inv_freq);
		ref_rope(kb, pos, R, nkv, hd, hd, d->inv_freq);
		ref_attention_append(att, q, kc, vc, R, n_ctx, R, nh, nkv, hd, mask, att_scratch);
		rt_matmul(o, att, L->wo, R, qd, dim);
		ref_add(x, x, o, (size_t)R * dim);
		ref_rmsnorm(h, x, L->ffn_norm, R, dim, c->norm_eps);
		rt_mlp_swiglu(o, h, L->w_gate, L->w_up, L->w_down, R, dim, c->ffn_dim, mlp);
		ref_add(x, x, o, (size_t)R * dim);
	}
	rt_lm_head(logits, x + (size_t)n_win * dim, d->out_norm, d->lm_head, B, dim, c->draft_vocab, c->norm_eps, h);
	return rt_logits_check(logits, B, c->draft_vocab, (size_t)c->draft_vocab, d->name,
	                       "block drafter lm_head (draft ids)", ++s->n_fwd, pos + n_win, err);
}

/* Engine spec parsing and validation (spec.h). Structure first (unknown keys,
 * types, ranges, via runtime/json.h), then cross-field rules (verification
 * pair, GQA, context vs tree), each with its own message. "$.draft" and the
 * rules of each kind of drafter are its file's (gen/drafter.h), found in the
 * registry (gen/drafters.h); the gen_spec_* helpers here serve their parse. */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "formats/gguf.h"
#include "core/json.h"
#include "model/model_gguf.h"
#include "model/model_hf.h"
#include "arch.h"
#include "drafter.h"
#include "spec.h"
#include "core/tree_rules.h"

const char *gen_dtype_name(int dtype)
{
	return dtype == GEN_DTYPE_FP16 ? "fp16" : dtype == GEN_DTYPE_Q8_0 ? "q8_0"
	       : dtype == GEN_DTYPE_Q8_0_A8 ? "q8_0_a8" : dtype == GEN_DTYPE_GGUF_A8 ? "gguf_a8"
	       : "bf16";
}

int gen_dtype_act(int dtype)
{
	return dtype == GEN_DTYPE_Q8_0 || dtype == GEN_DTYPE_Q8_0_A8 || dtype == GEN_DTYPE_GGUF_A8
	       ? GEN_DTYPE_FP16 : dtype;
}

const char *const gen_wfield_names[GEN_WT_N] = {"wq", "wk", "wv", "wo", "w_gate", "w_up",
                                                  "w_down", "lm_head"};

const char *gen_wtype_name(int t)
{
	return t == GGML_T_Q8_0 ? "q8_0" : t == GGML_T_Q4_0 ? "q4_0" : t == GGML_T_Q4_1 ? "q4_1"
	       : t == GGML_T_Q5_0 ? "q5_0" : t == GGML_T_Q4_K ? "q4_k" : t == GGML_T_Q6_K ? "q6_k"
	       : NULL;
}

int gen_wtype_block(int t, int *bytes)
{
	*bytes = t == GGML_T_Q8_0 ? 34 : t == GGML_T_Q4_0 ? 18 : t == GGML_T_Q4_1 ? 20
	         : t == GGML_T_Q5_0 ? 22 : t == GGML_T_Q4_K ? 144 : t == GGML_T_Q6_K ? 210 : 0;
	return !*bytes ? 0 : t == GGML_T_Q4_K || t == GGML_T_Q6_K ? 256 : 32;
}


/* gguf_a8: the target file's GEMM weight types, each layer's tensor a
 * supported type of its own (a Q4_K_M file mixes Q4_K and Q6_K within a
 * field), each k a whole number of its blocks; wtype[w] the field's type
 * with the most bytes an element (its buffer's layer stride). */
static int gguf_wtypes(gen_model_src *src, const json_value *v, sw_err *err)
{
	static const char *const tname[GEN_WT_N] = {"attn_q", "attn_k", "attn_v", "attn_output",
	                                            "ffn_gate", "ffn_up", "ffn_down", NULL};
	const rt_config *c = &src->cfg;
	struct stat st;
	if (src->from_shape || stat(src->path, &st) || S_ISDIR(st.st_mode))
		return json_refuse(err, v, "$.dtype", "a target GGUF file (the weights keep its types)",
		           "\"gguf_a8\" with a target %s", src->from_shape ? "given by shape"
		           : "that is not a GGUF file");
	gguf_file *f = gguf_open(src->path, err);
	if (!f)
		return sw_err_prefix(err, "%s:%d:%d: $.dtype", v->file, v->line, v->col);
	int rc = 0;
	if (c->n_layers > GEN_SPEC_MAX_LAYERS)
		rc = json_refuse(err, v, "$.dtype", "a target of at most 512 layers",
		                 "\"gguf_a8\" with %s's %d layers", src->path, c->n_layers);
	for (int w = 0; w < GEN_WT_N && !rc; w++) {
		const int k = w == GEN_WT_WO ? c->n_heads * c->head_dim
		              : w == GEN_WT_DOWN ? c->ffn_dim : c->dim;
		for (int l = 0; l < (w == GEN_WT_LM_HEAD ? 1 : c->n_layers) && !rc; l++) {
			char name[64];
			if (w == GEN_WT_LM_HEAD)
				snprintf(name, sizeof(name), "%s",
				         c->tied_embd ? "token_embd.weight" : "output.weight");
			else
				snprintf(name, sizeof(name), "blk.%d.%s.weight", l, tname[w]);
			const gguf_tensor *t = gguf_tensor_find(f, name);
			int bytes;
			const int blk = t ? gen_wtype_block((int)t->type, &bytes) : 0;
			if (!t)
				rc = json_refuse(err, v, "$.dtype", "a GGUF with every GEMM weight",
				         "\"gguf_a8\" with %s, which has no tensor '%s'", src->path, name);
			else if (!blk)
				rc = json_refuse(err, v, "$.dtype",
				         "GEMM weights of type Q8_0, Q4_0, Q4_1, Q5_0, Q4_K or Q6_K",
				         "\"gguf_a8\" with %s's tensor '%s' of type %s", src->path, name,
				         ggml_dtype_name(t->type));
			else if (k % blk)
				rc = json_refuse(err, v, "$.dtype", "a GEMM weight whose rows are whole blocks",
				         "\"gguf_a8\" with %s's tensor '%s' of type %s (blocks of %d) and "
				         "rows of %d", src->path, name, ggml_dtype_name(t->type), blk, k);
			else {
				int ob = 0;
				const int ob_blk = l ? gen_wtype_block(src->wtype[w], &ob) : 0;
				src->wtype_l[w][l] = (unsigned char)t->type;
				if (l && (int)t->type != src->wtype[w])
					src->wmixed[w] = true;
				/* the widest: most bytes an element (bytes/blk > ob/ob_blk) */
				if (!l || (int64_t)bytes * ob_blk > (int64_t)ob * blk)
					src->wtype[w] = (int)t->type;
			}
		}
	}
	/* the embedding gathered in its own type where it has planes; else a
	 * 16-bit table (gen/plan.c embd_dtype) */
	const gguf_tensor *te = rc ? NULL : gguf_tensor_find(f, "token_embd.weight");
	int eb;
	const int eblk = te ? gen_wtype_block((int)te->type, &eb) : 0;
	src->embd_wtype = eblk && c->dim % eblk == 0 ? (int)te->type : 0;
	gguf_close(f);
	return rc;
}

int gen_dtype_weights(int dtype)
{
	return dtype == GEN_DTYPE_Q8_0_A8 ? GEN_DTYPE_Q8_0 : dtype;
}

int gen_dtype_size(int dtype)
{
	(void)dtype;
	return 2;
}


/* A weights path (a model file, an HF or drafter directory) as the spec
 * gives it, made absolute against the current directory, where `build`
 * runs: the engine records where its weights are, so it runs from any
 * directory (engine.json's $.spec.*.path). Lexical, not realpath: a path
 * through a symbolic link (models/cache) keeps the link. "./" prefixes
 * dropped. out holds n bytes (sizeof gen_model_src.path); a path that
 * does not fit is refused at v, kp. */
int gen_spec_abs_path(const json_value *v, const char *kp, const char *p, char *out, size_t n,
                      sw_err *err)
{
	char cwd[4096];
	while (p[0] == '.' && p[1] == '/')
		for (p += 2; *p == '/'; p++)
			;
	if (p[0] == '/') {
		if (strlen(p) >= n)
			return json_refuse(err, v, kp, "a path shorter than 512 bytes", "%zu bytes", strlen(p));
		snprintf(out, n, "%s", p);
		return 0;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return json_refuse(err, v, kp, "a path that can be made absolute", "\"%s\" (the current "
		                   "directory: %s)", p, strerror(errno));
	const bool here = !p[0] || !strcmp(p, ".");
	if (strlen(cwd) + 1 + strlen(p) >= n)
		return json_refuse(err, v, kp, "a path shorter than 512 bytes once made absolute",
		                   "\"%s/%s\" (%zu bytes)", cwd, p, strlen(cwd) + 1 + strlen(p));
	snprintf(out, n, here ? "%s" : "%s/%s", cwd, p);
	return 0;
}

/* Shapes from a model file's metadata (no weights read). */
int gen_spec_model_from_path(const json_value *v, const char *path, const char *mpath,
                             rt_config *cfg, sw_err *err)
{
	struct stat st;
	char p[600];
	int rc;

	if (stat(mpath, &st))
		return json_refuse(err, v, path, "a GGUF file or an HF model directory", "\"%s\" (%s)", mpath,
		           strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		size_t n = 0;
		snprintf(p, sizeof(p), "%s/config.json", mpath);
		char *t = sw_read_capped(p, SW_CAP_CONFIG, "an HF config.json", &n, err);
		if (!t)
			return err->code == SW_EINVAL /* too big, or not a file: named */
			       ? err->code
			       : json_refuse(err, v, path, "an HF directory with config.json", "\"%s\" without one", mpath);
		rc = rt_llama_config_from_hf_json(t, n, p, cfg, err);
		free(t);
	} else {
		gguf_file *f = gguf_open(mpath, err);
		if (!f)
			return sw_err_prefix(err, "%s:%d:%d: %s", v->file, v->line, v->col, path);
		rc = rt_llama_config_from_gguf(f, cfg, err);
		gguf_close(f);
	}
	if (rc)
		return sw_err_prefix(err, "%s:%d:%d: %s", v->file, v->line, v->col, path);
	/* every family the loaders take has its planner file (gen/arch.h) */
	if (!gen_arch_of(cfg->arch))
		return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: %s: \"%s\": architecture: expected llama, "
		               "qwen2, qwen3 or gemma3 (a family the generator has a file for), found %s",
		               v->file, v->line, v->col, path, mpath, rt_arch_name(cfg->arch));
	return 0;
}

static int get_int(const json_value *o, const char *key, const char *path, int64_t lo, int64_t hi,
                   int *out, sw_err *err)
{
	int64_t x;
	int rc = json_get_int(o, key, path, lo, hi, &x, err);
	if (!rc)
		*out = (int)x;
	return rc;
}

static int opt_int(const json_value *o, const char *key, const char *path, int64_t lo, int64_t hi,
                   int *out, sw_err *err)
{
	return json_get(o, key) ? get_int(o, key, path, lo, hi, out, err) : 0;
}

/* Gemma 3's fields of a shape (Gemma3TextConfig's names and defaults:
 * sliding_window 4096, a global layer every 6, local RoPE base 10000,
 * query_pre_attn_scalar = head_dim), the embedding scale sqrt(dim); tied
 * unless tied_embd says otherwise, rope_theta 1e6 unless given. */
static int gemma_shape(const json_value *sh, const char *path, rt_config *c, sw_err *err)
{
	double d = 10000.0, q = c->head_dim;
	int rc;
	c->swa_window = 4096;
	c->swa_pattern = 6;
	if ((rc = opt_int(sh, "sliding_window", path, 1, 1 << 24, &c->swa_window, err)) ||
	    (rc = opt_int(sh, "sliding_window_pattern", path, 1, 4096, &c->swa_pattern, err)) ||
	    (json_get(sh, "rope_local_base_freq") &&
	     (rc = json_get_number(sh, "rope_local_base_freq", path, 1.0, 1e12, &d, err))) ||
	    (json_get(sh, "query_pre_attn_scalar") &&
	     (rc = json_get_number(sh, "query_pre_attn_scalar", path, 1e-3, 1e6, &q, err))))
		return rc;
	c->rope_theta_local = (float)d;
	c->query_scalar = (float)q;
	c->embd_scale = sqrtf((float)c->dim);
	if (!json_get(sh, "tied_embd"))
		c->tied_embd = true;
	if (!json_get(sh, "rope_theta"))
		c->rope_theta = 1e6f;
	return 0;
}

static int shape_parse(const json_value *sh, const char *path, rt_config *c, sw_err *err)
{
	static const char *const keys[] = {"arch", "n_layers", "dim", "n_heads", "n_kv_heads", "head_dim",
	                                   "ffn_dim", "vocab", "rope_theta", "norm_eps",
	                                   "tied_embd", "max_ctx", "sliding_window",
	                                   "sliding_window_pattern", "rope_local_base_freq",
	                                   "query_pre_attn_scalar", NULL};
	static const char *const gemma_keys[] = {"sliding_window", "sliding_window_pattern",
	                                         "rope_local_base_freq", "query_pre_attn_scalar"};
	char kp[256];
	double d;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = json_as_object(sh, path, err)) || (rc = json_check_keys(sh, path, keys, err)) ||
	    (rc = get_int(sh, "n_layers", path, 1, GEN_SPEC_MAX_LAYERS, &c->n_layers, err)) ||
	    (rc = get_int(sh, "dim", path, 1, 1 << 16, &c->dim, err)) ||
	    (rc = get_int(sh, "n_heads", path, 1, 1024, &c->n_heads, err)) ||
	    (rc = get_int(sh, "ffn_dim", path, 1, 1 << 18, &c->ffn_dim, err)) ||
	    (rc = get_int(sh, "vocab", path, 2, 1 << 22, &c->vocab, err)))
		return rc;
	c->n_kv_heads = c->n_heads;
	c->head_dim = c->dim / c->n_heads;
	c->rope_theta = 10000.0f;
	c->norm_eps = 1e-5f;
	c->max_ctx = 0;
	c->bos_id = c->eos_id = -1;
	if ((rc = opt_int(sh, "n_kv_heads", path, 1, 1024, &c->n_kv_heads, err)) ||
	    (rc = opt_int(sh, "head_dim", path, 2, 1024, &c->head_dim, err)) ||
	    (rc = opt_int(sh, "max_ctx", path, 1, 1 << 24, &c->max_ctx, err)))
		return rc;
	if (json_get(sh, "rope_theta")) {
		if ((rc = json_get_number(sh, "rope_theta", path, 1.0, 1e12, &d, err)))
			return rc;
		c->rope_theta = (float)d;
	}
	if (json_get(sh, "norm_eps")) {
		if ((rc = json_get_number(sh, "norm_eps", path, 1e-12, 1.0, &d, err)))
			return rc;
		c->norm_eps = (float)d;
	}
	if (json_get(sh, "tied_embd") && (rc = json_get_bool(sh, "tied_embd", path, &c->tied_embd, err)))
		return rc;
	if (json_get(sh, "arch")) { /* the family: llama (default), qwen2, qwen3, gemma3 */
		const json_value *a = json_get(sh, "arch");
		int k = -1;
		for (int i = RT_ARCH_LLAMA; i <= RT_ARCH_GEMMA3; i++)
			if (a->type == JSON_STRING && !strcmp(a->str, rt_arch_name(i)))
				k = i;
		if (k < 0)
			return json_refuse(err, a, json_path_key(kp, sizeof(kp), path, "arch"),
			                   "\"llama\", \"qwen2\", \"qwen3\" or \"gemma3\"", "%s",
			                   a->type == JSON_STRING ? a->str : "not a string");
		c->arch = k;
	}
	for (size_t i = 0; c->arch != RT_ARCH_GEMMA3 && i < sizeof(gemma_keys) / sizeof(*gemma_keys); i++)
		if (json_get(sh, gemma_keys[i]))
			return json_refuse(err, json_get(sh, gemma_keys[i]),
			                   json_path_key(kp, sizeof(kp), path, gemma_keys[i]),
			                   "the key only with \"arch\": \"gemma3\"", "it with arch %s",
			                   rt_arch_name(c->arch));
	if (c->arch == RT_ARCH_GEMMA3 && (rc = gemma_shape(sh, path, c, err)))
		return rc;
	if (!json_get(sh, "head_dim") && c->dim % c->n_heads)
		return json_refuse(err, json_get(sh, "dim"), json_path_key(kp, sizeof(kp), path, "dim"),
		           "a multiple of n_heads (or give head_dim)", "%d with n_heads %d", c->dim,
		           c->n_heads);
	return 0;
}

/* Shape rules every model must meet, whether read from a file or the spec. */
int gen_spec_shape_check(const json_value *v, const char *path, const rt_config *c, sw_err *err)
{
	if (c->n_heads % c->n_kv_heads)
		return json_refuse(err, v, path, "n_heads a multiple of n_kv_heads (GQA)",
		           "n_heads %d, n_kv_heads %d", c->n_heads, c->n_kv_heads);
	if (c->head_dim % 2)
		return json_refuse(err, v, path, "an even head_dim (RoPE rotates pairs)", "head_dim %d",
		           c->head_dim);
	return 0;
}

/* {"path": P} or {"shape": {...}}, exactly one. */
int gen_spec_model_parse(const json_value *m, const char *path, gen_model_src *src, sw_err *err)
{
	char kp[256];
	const char *p;
	int rc;
	const json_value *pv = json_get(m, "path"), *sv = json_get(m, "shape");

	memset(src, 0, sizeof(*src));
	if (pv && sv)
		return json_refuse(err, m, path, "exactly one of \"path\" and \"shape\"", "both");
	if (!pv && !sv)
		return json_refuse(err, m, path, "exactly one of \"path\" and \"shape\"", "neither");
	if (sv) {
		src->from_shape = true;
		if ((rc = shape_parse(sv, json_path_key(kp, sizeof(kp), path, "shape"), &src->cfg, err)))
			return rc;
		return gen_spec_shape_check(sv, kp, &src->cfg, err);
	}
	if ((rc = json_get_string(m, "path", path, &p, err)))
		return rc;
	json_path_key(kp, sizeof(kp), path, "path");
	if ((rc = gen_spec_abs_path(pv, kp, p, src->path, sizeof(src->path), err)))
		return rc;
	if ((rc = gen_spec_model_from_path(pv, kp, src->path, &src->cfg, err)))
		return rc;
	return gen_spec_shape_check(pv, kp, &src->cfg, err);
}

/* $.draft.path of a drafter kept in a directory (config.json and
 * model.safetensors): a string, short enough, a directory; sets the draft
 * path. what names the directory in the refusal. */
int gen_spec_draft_dir(const json_value *d, gen_spec *sp, const char *what, const char **dir,
                       const json_value **pv, sw_err *err)
{
	int rc;
	if ((rc = json_get_string(d, "path", "$.draft", dir, err)))
		return rc;
	*pv = json_get(d, "path");
	char abs[sizeof(sp->draft.path)];
	if ((rc = gen_spec_abs_path(*pv, "$.draft.path", *dir, abs, sizeof(abs), err)))
		return rc;
	struct stat st;
	char expected[160];
	snprintf(expected, sizeof(expected), "%s (config.json, model.safetensors)", what);
	if (stat(abs, &st) || !S_ISDIR(st.st_mode))
		return json_refuse(err, *pv, "$.draft.path", expected, "\"%s\" (%s)", *dir,
		                   stat(abs, &st) ? strerror(errno) : "not a directory");
	memset(&sp->draft, 0, sizeof(sp->draft));
	snprintf(sp->draft.path, sizeof(sp->draft.path), "%s", abs);
	*dir = sp->draft.path;
	return 0;
}

int gen_spec_gguf_a8_refuse(const json_value *v, const char *what, sw_err *err)
{
	return json_refuse(err, v, "$.dtype", "an n-gram, layer-skip or EAGLE-3 draft with \"gguf_a8\" "
	                   "(the target's weights in the file's blocks, an EAGLE-3 head's in Q8_0)",
	                   "a draft %s", what);
}

static bool draft_reads(const gen_drafter *dr, const char *key)
{
	for (const char *const *k = dr->keys; k && *k; k++)
		if (!strcmp(*k, key))
			return true;
	return false;
}

/* How many drafters read a "$.draft" key. */
static int draft_readers(const char *key)
{
	int n = 0;
	for (int i = 0; i < GEN_DRAFT_N; i++)
		n += gen_drafter_of(i) && draft_reads(gen_drafter_of(i), key);
	return n;
}

/* Appends s to buf (n bytes) after the separator sep when buf has text. */
static void cat(char *buf, size_t n, const char *sep, const char *s)
{
	const size_t l = strlen(buf);
	snprintf(buf + l, n - l, "%s%s", l ? sep : "", s);
}

/* "$.draft": a method string or an object {"method": ...} with the keys
 * the drafters read; the drafter the method names (gen/drafters.h) parses
 * the rest. A key one drafter alone reads is refused with another method,
 * naming that one; a key its drafter does not read, naming the first that
 * reads it. */
static int draft_parse(const json_value *root, gen_spec *sp, sw_err *err)
{
	const char *keys[32] = {"method"};
	int nk = 1;
	const json_value *d = json_get(root, "draft");
	const char *method;
	char mp[64] = "$.draft";
	int rc;

	for (int i = 0; i < GEN_DRAFT_N; i++)
		for (const char *const *k = gen_drafter_of(i) ? gen_drafter_of(i)->keys : NULL;
		     k && *k && nk < 31; k++) {
			bool seen = false;
			for (int j = 0; j < nk; j++)
				seen |= !strcmp(keys[j], *k);
			if (!seen)
				keys[nk++] = *k;
		}
	keys[nk] = NULL;
	if (!d)
		return json_get_object(root, "draft", "$", &d, err); /* the "missing" message */
	if (d->type == JSON_STRING) {
		method = d->str;
	} else {
		if (d->type != JSON_OBJECT)
			return json_refuse(err, d, "$.draft", "an object or a string", "%s", json_type_name(d->type));
		if ((rc = json_check_keys(d, "$.draft", keys, err)) ||
		    (rc = json_get_string(d, "method", "$.draft", &method, err)))
			return rc;
		snprintf(mp, sizeof(mp), "$.draft.method");
	}
	const json_value *mv = d->type == JSON_STRING ? d : json_get(d, "method");
	snprintf(sp->draft_method, sizeof(sp->draft_method), "%s", method);

	/* a key one drafter alone reads, with another method */
	for (int i = 0; i < GEN_DRAFT_N && d->type == JSON_OBJECT; i++) {
		const gen_drafter *dr = gen_drafter_of(i);
		if (!dr || gen_drafter_takes(dr, method))
			continue;
		char own[160] = "", exp[320], kp[64];
		for (const char *const *k = dr->keys; k && *k; k++)
			if (draft_readers(*k) == 1) {
				char q[40];
				bool more = false; /* another of its own after this one */
				for (const char *const *l = k + 1; *l; l++)
					more |= draft_readers(*l) == 1;
				snprintf(q, sizeof(q), "\"%s\"", *k);
				cat(own, sizeof(own), more ? ", " : " and ", q);
			}
		snprintf(exp, sizeof(exp), "%s only with method \"%s\"%s%s", own, dr->methods[0],
		         dr->keys_why ? " " : "", dr->keys_why ? dr->keys_why : "");
		for (const char *const *k = dr->keys; k && *k; k++)
			if (draft_readers(*k) == 1 && json_get(d, *k))
				return json_refuse(err, json_get(d, *k),
				                   json_path_key(kp, sizeof(kp), "$.draft", *k), exp,
				                   "it with \"%s\"", method);
	}

	const int kind = gen_draft_kind_of(method);
	const gen_drafter *dr = gen_drafter_of(kind);
	if (!dr) {
		char forms[512] = "";
		const char *last = NULL;
		for (int i = 0; i < GEN_DRAFT_N; i++)
			for (const char *const *m = gen_drafter_of(i) ? gen_drafter_of(i)->methods : NULL;
			     m && *m; m++) {
				if (last)
					cat(forms, sizeof(forms), ", ", last);
				last = *m;
			}
		if (last)
			cat(forms, sizeof(forms), " or ", last);
		return json_refuse(err, mv, mp, forms, "\"%s\"", method);
	}
	sp->draft_kind = kind;

	/* a key its drafter does not read that several others do (another's
	 * "path" or "shape"; one only another reads was refused above) */
	if (d->type == JSON_OBJECT) {
		char lacks[160] = "";
		bool present = false;
		int n = 0;
		for (int j = 1; j < nk; j++)
			if (!draft_reads(dr, keys[j]) && draft_readers(keys[j]) > 1) {
				char q[40];
				snprintf(q, sizeof(q), "\"%s\"", keys[j]);
				cat(lacks, sizeof(lacks), "/", q);
				present |= json_get(d, keys[j]) != NULL;
				n++;
			}
		if (present) {
			const gen_drafter *other = NULL;
			for (int i = 0; i < GEN_DRAFT_N && !other; i++) {
				bool all = gen_drafter_of(i) != NULL;
				for (int j = 1; j < nk && all; j++)
					all = draft_reads(dr, keys[j]) || draft_readers(keys[j]) < 2 ||
					      draft_reads(gen_drafter_of(i), keys[j]);
				if (all)
					other = gen_drafter_of(i);
			}
			char exp[320], with[80] = "another method";
			if (other)
				snprintf(with, sizeof(with), "method \"%s\"", other->methods[0]);
			snprintf(exp, sizeof(exp), "%s only with %s", lacks, with);
			return json_refuse(err, d, "$.draft", exp, "%s with \"%s\"", n > 1 ? "them" : "it",
			                   method);
		}
	}
	const gen_draft_in in = {.d = d, .mv = mv, .method = method, .mp = mp};
	return dr->parse(&in, sp, err);
}

const char *gen_gemm_choice_name(int c)
{
	static const char *const names[] = {"auto", "cublaslt", "gemv16"};
	return c >= 0 && c <= GEN_GEMM_GEMV16 ? names[c] : "?";
}

static int arch_ok(const char *a)
{
	size_t n = strlen(a);
	if (n < 5 || n > 7 || strncmp(a, "sm_", 3))
		return 0;
	for (size_t i = 3; i < n; i++)
		if (!isdigit((unsigned char)a[i]) && !(i == n - 1 && a[i] == 'a' && i > 4))
			return 0;
	return atoi(a + 3) >= 70;
}

int gen_spec_parse(const char *text, size_t n, const char *file, const char *trees_dir,
                   gen_spec *sp, sw_err *err)
{
	static const char *const keys[] = {"name", "target", "draft", "tree", "verify", "sampling",
	                                   "max_context", "prefill_chunk", "dtype", "archs",
	                                   "allow_spills", "fuse", "gemm", "roofline", "adaptive",
	                                   "control",
	                                   NULL};
	json_value *root;
	const json_value *o, *v;
	const char *s;
	char kp[256];
	int rc;

	memset(sp, 0, sizeof(*sp));
	snprintf(sp->file, sizeof(sp->file), "%s", file);
	root = json_parse(text, n, file, err);
	if (!root)
		return err ? err->code : SW_EINVAL;
	if ((rc = json_as_object(root, "$", err)) || (rc = json_check_keys(root, "$", keys, err)))
		goto out_free;

	snprintf(sp->name, sizeof(sp->name), "engine");
	if ((v = json_get(root, "name"))) {
		if ((rc = json_get_string(root, "name", "$", &s, err)))
			goto out_free;
		size_t l = strlen(s), ok = l > 0 && l < sizeof(sp->name);
		for (size_t i = 0; i < l && ok; i++)
			ok = isalnum((unsigned char)s[i]) || strchr("_.-", s[i]);
		if (!ok) {
			rc = json_refuse(err, v, "$.name", "1-63 characters from [A-Za-z0-9_.-]", "\"%.80s\"", s);
			goto out_free;
		}
		snprintf(sp->name, sizeof(sp->name), "%s", s);
	}

	static const char *const tkeys[] = {"path", "shape", NULL};
	if ((rc = json_get_object(root, "target", "$", &o, err)) ||
	    (rc = json_check_keys(o, "$.target", tkeys, err)) ||
	    (rc = gen_spec_model_parse(o, "$.target", &sp->target, err)))
		goto out_free;
	if ((rc = draft_parse(root, sp, err)))
		goto out_free;
	const gen_drafter *dr = gen_drafter_of(sp->draft_kind);

	if ((rc = json_get_string(root, "tree", "$", &s, err)))
		goto out_free;
	snprintf(sp->tree_spec, sizeof(sp->tree_spec), "%s", s);
	if ((rc = rt_tree_parse(s, trees_dir, &sp->tree, err))) {
		v = json_get(root, "tree");
		sw_err_prefix(err, "%s:%d:%d: $.tree", v->file, v->line, v->col);
		goto out_free;
	}
	if (sp->tree.n < 2) {
		rc = json_refuse(err, json_get(root, "tree"), "$.tree", "a tree with at least one draft node",
		         "\"%s\" (root only)", s);
		goto out_free;
	}

	static const char *const vkeys[] = {"method", "expand", NULL};
	const char *ms, *es;
	if ((rc = json_get_object(root, "verify", "$", &o, err)) ||
	    (rc = json_check_keys(o, "$.verify", vkeys, err)) ||
	    (rc = json_get_string(o, "method", "$.verify", &ms, err)) ||
	    (rc = json_get_string(o, "expand", "$.verify", &es, err)))
		goto out_free;
	sp->verify_method = rt_verify_method_parse(ms);
	sp->expand_rule = rt_expand_rule_parse(es);
	if (sp->verify_method < 0) {
		rc = json_refuse(err, json_get(o, "method"), "$.verify.method",
		         "greedy, rrs, rrsw, spechub or onehot", "\"%s\"", ms);
		goto out_free;
	}
	if (sp->expand_rule < 0) {
		rc = json_refuse(err, json_get(o, "expand"), "$.verify.expand",
		         "topk, sample, sample-wor or spechub", "\"%s\"", es);
		goto out_free;
	}

	sp->top_p = 1.0f;
	if ((o = json_get(root, "sampling"))) {
		static const char *const skeys[] = {"temperature", "top_k", "top_p", NULL};
		double d;
		if ((rc = json_as_object(o, "$.sampling", err)) ||
		    (rc = json_check_keys(o, "$.sampling", skeys, err)))
			goto out_free;
		if (json_get(o, "temperature")) {
			if ((rc = json_get_number(o, "temperature", "$.sampling", 0.0, 100.0, &d, err)))
				goto out_free;
			sp->temperature = (float)d;
		}
		if ((rc = opt_int(o, "top_k", "$.sampling", 0, 1 << 22, &sp->top_k, err)))
			goto out_free;
		if (json_get(o, "top_p")) {
			if ((rc = json_get_number(o, "top_p", "$.sampling", 0.0, 1.0, &d, err)))
				goto out_free;
			if (d <= 0.0) {
				rc = json_refuse(err, json_get(o, "top_p"), "$.sampling.top_p", "0 < top_p <= 1",
				         "%g", d);
				goto out_free;
			}
			sp->top_p = (float)d;
		}
	}
	bool greedy = sp->temperature == 0.0f;
	if (!rt_verify_compatible(sp->expand_rule, sp->verify_method, greedy)) {
		o = json_get(root, "verify");
		rc = json_refuse(err, o, "$.verify", "an exact (expand, method) pair: sample+rrs, "
		         "sample-wor+rrsw, spechub+spechub, any+onehot, any+greedy at temperature 0",
		         "expand \"%s\" with method \"%s\" at temperature %g", es, ms,
		         (double)sp->temperature);
		goto out_free;
	}
	/* the trees and verification its drafter drafts for */
	if (dr->tree_check && (rc = dr->tree_check(root, sp, err)))
		goto out_free;

	if ((rc = get_int(root, "max_context", "$", 16, 1 << 20, &sp->max_context, err)))
		goto out_free;
	v = json_get(root, "max_context");
	if (sp->target.cfg.max_ctx > 0 && sp->max_context > sp->target.cfg.max_ctx) {
		rc = json_refuse(err, v, "$.max_context", "at most the target's trained context",
		         "%d (trained %d)", sp->max_context, sp->target.cfg.max_ctx);
		goto out_free;
	}
	if (sp->max_context < 2 * sp->tree.n) {
		rc = json_refuse(err, v, "$.max_context", "room for at least two trees of nodes",
		         "%d with a %d-node tree", sp->max_context, sp->tree.n);
		goto out_free;
	}
	sp->prefill_chunk = sp->max_context < 128 ? sp->max_context : 128;
	if ((rc = opt_int(root, "prefill_chunk", "$", 1, 1 << 20, &sp->prefill_chunk, err)))
		goto out_free;
	if (sp->prefill_chunk < dr->prefill_min) {
		char least[256];
		snprintf(least, sizeof(least), "at least %d %s", dr->prefill_min, dr->prefill_why);
		rc = json_refuse(err, json_get(root, "prefill_chunk"), "$.prefill_chunk", least, "%d",
		                 sp->prefill_chunk);
		goto out_free;
	}
	if (sp->prefill_chunk > sp->max_context) {
		rc = json_refuse(err, json_get(root, "prefill_chunk"), "$.prefill_chunk",
		         "at most max_context", "%d (max_context %d)", sp->prefill_chunk, sp->max_context);
		goto out_free;
	}

	if ((rc = json_get_string(root, "dtype", "$", &s, err)))
		goto out_free;
	if (!strcmp(s, "bf16")) {
		sp->dtype = GEN_DTYPE_BF16;
	} else if (!strcmp(s, "fp16")) {
		sp->dtype = GEN_DTYPE_FP16;
	} else if (!strcmp(s, "q8_0") || !strcmp(s, "q8_0_a8")) {
		/* every GEMM's k (dim, ffn_dim, n_heads x head_dim) in whole Q8_0 blocks */
		sp->dtype = strcmp(s, "q8_0") ? GEN_DTYPE_Q8_0_A8 : GEN_DTYPE_Q8_0;
		if (dr->dtype_check && (rc = dr->dtype_check(sp, json_get(root, "dtype"), err)))
			goto out_free;
		for (int mi = 0; mi < 2; mi++) {
			const rt_config *c = mi ? &sp->draft.cfg : &sp->target.cfg;
			if (mi && !sp->draft.cfg.n_layers) /* no draft model */
				break;
			const int q = c->n_heads * c->head_dim;
			if (c->dim % 32 || c->ffn_dim % 32 || q % 32) {
				rc = json_refuse(err, json_get(root, "dtype"), "$.dtype", "a model whose dim, ffn_dim "
				         "and n_heads x head_dim are multiples of 32 (q8_0 blocks)",
				         "\"%s\" with the %s's %d, %d and %d", gen_dtype_name(sp->dtype),
				         mi ? "draft" : "target",
				         c->dim, c->ffn_dim, q);
				goto out_free;
			}
		}
	} else if (!strcmp(s, "gguf_a8")) {
		sp->dtype = GEN_DTYPE_GGUF_A8;
		if (dr->dtype_check && (rc = dr->dtype_check(sp, json_get(root, "dtype"), err)))
			goto out_free;
		if ((rc = gguf_wtypes(&sp->target, json_get(root, "dtype"), err)))
			goto out_free;
	} else {
		rc = json_refuse(err, json_get(root, "dtype"), "$.dtype",
		         "\"bf16\", \"fp16\", \"q8_0\", \"q8_0_a8\" or \"gguf_a8\"",
		         "\"%.40s\"", s);
		goto out_free;
	}

	/* what a family's engine cannot run (gen/arch.h check: Gemma 3's
	 * sliding window beyond max_context, ...) */
	for (int mi = 0; mi < 2 && (!mi || sp->draft.cfg.n_layers); mi++) {
		const rt_config *c = mi ? &sp->draft.cfg : &sp->target.cfg;
		const gen_arch *fa = gen_arch_of(c->arch);
		gen_arch_refusal r = {0};
		if (fa && fa->check && fa->check(c, mi ? "draft" : "target", sp, &r)) {
			char key[64];
			snprintf(key, sizeof(key), "$.%s", r.key);
			rc = json_refuse(err, json_get(root, r.key) ? json_get(root, r.key) : root, key,
			                 r.expected, "%s", r.found);
			goto out_free;
		}
	}

	if ((v = json_get(root, "archs"))) {
		const json_value *a;
		if ((rc = json_get_array(root, "archs", "$", 1, GEN_SPEC_MAX_ARCHS, &a, err)))
			goto out_free;
		for (size_t i = 0; i < a->n; i++) {
			json_path_index(kp, sizeof(kp), "$.archs", i);
			if ((rc = json_as_string(a->items[i], kp, &s, err)))
				goto out_free;
			if (!arch_ok(s)) {
				rc = json_refuse(err, a->items[i], kp, "an NVRTC real arch sm_XX (XX >= 70, e.g. "
				         "sm_80, sm_90, sm_90a)", "\"%.40s\"", s);
				goto out_free;
			}
			for (int j = 0; j < sp->n_archs; j++)
				if (!strcmp(sp->archs[j], s)) {
					rc = json_refuse(err, a->items[i], kp, "each arch once", "\"%s\" again", s);
					goto out_free;
				}
			snprintf(sp->archs[sp->n_archs++], sizeof(sp->archs[0]), "%s", s);
		}
	} else {
		snprintf(sp->archs[0], sizeof(sp->archs[0]), "sm_80");
		snprintf(sp->archs[1], sizeof(sp->archs[1]), "sm_90");
		sp->n_archs = 2;
	}
	if (json_get(root, "allow_spills") &&
	    (rc = json_get_bool(root, "allow_spills", "$", &sp->allow_spills, err)))
		goto out_free;
	sp->fuse = true;
	if (json_get(root, "fuse") && (rc = json_get_bool(root, "fuse", "$", &sp->fuse, err)))
		goto out_free;
	sp->gemm = GEN_GEMM_DEFAULT;
	if ((v = json_get(root, "gemm"))) {
		if ((rc = json_get_string(root, "gemm", "$", &s, err)))
			goto out_free;
		sp->gemm = -1;
		for (int g = GEN_GEMM_AUTO; g <= GEN_GEMM_GEMV16; g++)
			if (!strcmp(s, gen_gemm_choice_name(g)))
				sp->gemm = g;
		if (sp->gemm < 0) {
			rc = json_refuse(err, v, "$.gemm", "\"auto\", \"cublaslt\" or \"gemv16\"", "\"%s\"",
			                 s);
			goto out_free;
		}
		if (sp->gemm == GEN_GEMM_GEMV16 && sp->dtype != GEN_DTYPE_BF16 &&
		    sp->dtype != GEN_DTYPE_FP16) {
			rc = json_refuse(err, v, "$.gemm", "\"auto\" or \"cublaslt\" (gemv16 reads bf16 or fp16 "
			                 "weights)", "\"%s\" with dtype \"%s\"", s, gen_dtype_name(sp->dtype));
			goto out_free;
		}
	}

	if ((o = json_get(root, "adaptive"))) {
		static const char *const akeys[] = {"h", "min", "max", NULL};
		double h = 0;
		if ((rc = json_as_object(o, "$.adaptive", err)) ||
		    (rc = json_check_keys(o, "$.adaptive", akeys, err)) ||
		    (rc = json_get_number(o, "h", "$.adaptive", 0.0, 1.0, &h, err)))
			goto out_free;
		sp->adaptive = true;
		sp->adapt_h = (float)h;
		sp->adapt_min = 1;
		sp->adapt_max = sp->tree.depth_max;
		if ((rc = opt_int(o, "min", "$.adaptive", 1, sp->tree.depth_max, &sp->adapt_min, err)) ||
		    (rc = opt_int(o, "max", "$.adaptive", sp->adapt_min, sp->tree.depth_max,
		                  &sp->adapt_max, err)))
			goto out_free;
		bool chain = true;
		for (int i = 0; i < sp->tree.n; i++)
			chain &= sp->tree.n_children[i] <= 1;
		if (!chain || !dr->adaptive) {
			rc = json_refuse(err, o, "$.adaptive", "a chain tree drafted by a model (layerskip or "
			         "model)", "tree \"%s\" with draft \"%s\"", sp->tree_spec,
			         sp->draft_method);
			goto out_free;
		}
	}

	if ((rc = gen_ctrl_parse(root, sp->ngram_max > 0, sp->verify_method == RT_VERIFY_GREEDY,
	                         sp->tree.depth_max, sp->e3_levels, &sp->ctrl, err)))
		goto out_free;

	sp->est_context = sp->max_context / 2;
	if ((o = json_get(root, "roofline"))) {
		static const char *const rkeys[] = {"tau", "context", NULL};
		if ((rc = json_as_object(o, "$.roofline", err)) ||
		    (rc = json_check_keys(o, "$.roofline", rkeys, err)))
			goto out_free;
		if (json_get(o, "tau")) {
			double lim = sp->tree.depth_max + 1;
			if ((rc = json_get_number(o, "tau", "$.roofline", 1.0, lim, &sp->tau, err)))
				goto out_free;
		}
		if ((rc = opt_int(o, "context", "$.roofline", 1, sp->max_context, &sp->est_context,
		                  err)))
			goto out_free;
	}
	rc = 0;
out_free:
	json_free(root);
	return rc;
}

int gen_spec_load(const char *path, const char *trees_dir, gen_spec *s, sw_err *err)
{
	size_t n = 0;
	char *t = sw_read_capped(path, SW_CAP_CONFIG, "a spec", &n, err);
	if (!t)
		return sw_err_prefix(err, "%s: cannot read the spec", path);
	int rc = gen_spec_parse(t, n, path, trees_dir, s, err);
	free(t);
	return rc;
}

/* Engine spec parsing and validation (spec.h). Structure first (unknown keys,
 * types, ranges, via runtime/json.h), then cross-field rules (verification
 * pair, GQA, layer lists, context vs tree), each with its own message. */
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
#include "plan.h"
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
	       : t == GGML_T_Q4_K ? "q4_k" : t == GGML_T_Q6_K ? "q6_k" : NULL;
}

int gen_wtype_block(int t, int *bytes)
{
	*bytes = t == GGML_T_Q8_0 ? 34 : t == GGML_T_Q4_0 ? 18 : t == GGML_T_Q4_1 ? 20
	         : t == GGML_T_Q4_K ? 144 : t == GGML_T_Q6_K ? 210 : 0;
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
				         "GEMM weights of type Q8_0, Q4_0, Q4_1, Q4_K or Q6_K",
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
static int abs_path(const json_value *v, const char *kp, const char *p, char *out, size_t n,
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
static int model_from_path(const json_value *v, const char *path, const char *mpath,
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
static int shape_check(const json_value *v, const char *path, const rt_config *c, sw_err *err)
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
static int model_parse(const json_value *m, const char *path, gen_model_src *src, sw_err *err)
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
		return shape_check(sv, kp, &src->cfg, err);
	}
	if ((rc = json_get_string(m, "path", path, &p, err)))
		return rc;
	json_path_key(kp, sizeof(kp), path, "path");
	if ((rc = abs_path(pv, kp, p, src->path, sizeof(src->path), err)))
		return rc;
	if ((rc = model_from_path(pv, kp, src->path, &src->cfg, err)))
		return rc;
	return shape_check(pv, kp, &src->cfg, err);
}

/* "N" (first N layers) or "a-b,c,..." (increasing), optionally "@V". */
static int layerskip_parse(const json_value *v, const char *path, const char *s, int n_layers,
                           int vocab, gen_spec *sp, sw_err *err)
{
	const char *at = strchr(s, '@');
	char list[256];
	size_t ln = at ? (size_t)(at - s) : strlen(s);
	int prev = -1;

	sp->n_skip_layers = 0;
	sp->draft_vocab = vocab;
	if (ln == 0 || ln >= sizeof(list))
		return json_refuse(err, v, path, "layerskip:N or layerskip:a-b,c,...[@V]", "\"layerskip:%s\"", s);
	memcpy(list, s, ln);
	list[ln] = 0;
	if (at) {
		char *e;
		long vl = strtol(at + 1, &e, 10);
		if (*e || e == at + 1 || vl < 2 || vl > vocab)
			return json_refuse(err, v, path, "a vocabulary limit @V with 2 <= V <= the target vocab",
			           "\"@%s\" (vocab %d)", at + 1, vocab);
		sp->draft_vocab = (int)vl;
	}
	if (!strpbrk(list, "-,")) {
		char *e;
		long k = strtol(list, &e, 10);
		if (*e || k < 1 || k >= n_layers)
			return json_refuse(err, v, path, "a layer count 1 <= N < the target's layers",
			           "\"%s\" (target has %d layers)", list, n_layers);
		for (int i = 0; i < k; i++)
			sp->skip_layers[sp->n_skip_layers++] = i;
		return 0;
	}
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		char *e;
		long a = strtol(tok, &e, 10), b = a;
		if (e == tok)
			goto out_bad;
		if (*e == '-') {
			char *f = e + 1;
			b = strtol(f, &e, 10);
			if (e == f)
				goto out_bad;
		}
		if (*e)
			goto out_bad;
		if (a < 0 || b >= n_layers || b < a || a <= prev)
			return json_refuse(err, v, path, "increasing layer ids in [0, n_layers)",
			           "\"%s\" in \"%s\" (target has %d layers)", tok, s, n_layers);
		for (long i = a; i <= b; i++)
			sp->skip_layers[sp->n_skip_layers++] = (int)i;
		prev = (int)b;
	}
	if (sp->n_skip_layers >= n_layers)
		return json_refuse(err, v, path, "a proper subset of the target's layers",
		           "all %d layers", n_layers);
	return 0;
out_bad:
	return json_refuse(err, v, path, "layerskip:N or layerskip:a-b,c,...[@V]", "\"layerskip:%s\"", s);
}

/* $.draft.path of a drafter kept in a directory (config.json and
 * model.safetensors): a string, short enough, a directory; sets the draft
 * kind and path. what names the directory in the refusal. */
static int draft_dir(const json_value *d, gen_spec *sp, int kind, const char *what,
                     const char **dir, const json_value **pv, sw_err *err)
{
	int rc;
	if ((rc = json_get_string(d, "path", "$.draft", dir, err)))
		return rc;
	*pv = json_get(d, "path");
	char abs[sizeof(sp->draft.path)];
	if ((rc = abs_path(*pv, "$.draft.path", *dir, abs, sizeof(abs), err)))
		return rc;
	struct stat st;
	char expected[160];
	snprintf(expected, sizeof(expected), "%s (config.json, model.safetensors)", what);
	if (stat(abs, &st) || !S_ISDIR(st.st_mode))
		return json_refuse(err, *pv, "$.draft.path", expected, "\"%s\" (%s)", *dir,
		                   stat(abs, &st) ? strerror(errno) : "not a directory");
	sp->draft_kind = kind;
	memset(&sp->draft, 0, sizeof(sp->draft));
	snprintf(sp->draft.path, sizeof(sp->draft.path), "%s", abs);
	*dir = sp->draft.path;
	return 0;
}

/* {"method": "block", "path": DIR, "steps": S}: the drafter's config.json
 * against the target (width, vocabulary, layers, taps). */
static int block_parse(const json_value *d, gen_spec *sp, sw_err *err)
{
	const char *dir;
	int rc;
	if (d->type != JSON_OBJECT)
		return json_refuse(err, d, "$.draft", "{\"method\": \"block\", \"path\": DIR, \"steps\": S}",
		           "the string \"block\"");
	const json_value *sv = json_get(d, "shape");
	if (sv && json_get(d, "path"))
		return json_refuse(err, d, "$.draft", "exactly one of \"path\" and \"shape\"", "both");
	sp->block_steps = 1;
	if ((rc = opt_int(d, "steps", "$.draft", 1, 16, &sp->block_steps, err)))
		return rc;
	if (sv) {
		/* a drafter by shape (planning, NVRTC and inspect without weights):
		 * config.json's keys, the spec's target as its target */
		sp->draft_kind = GEN_DRAFT_BLOCK;
		memset(&sp->draft, 0, sizeof(sp->draft));
		sp->draft.from_shape = true;
		if ((rc = rt_bd_config_shape(sv, sv->file, "$.draft.shape", &sp->target.cfg, &sp->block,
		                             err)))
			return rc;
		if (sp->block.cond != RT_BD_FEATURES)
			return json_refuse(err, sv, "$.draft.shape.conditioning", "\"features\" (the engine keeps "
			           "no token window)", "\"tokens\"");
		sp->draft_vocab = sp->block.draft_vocab;
		return 0;
	}
	const json_value *pv;
	if ((rc = draft_dir(d, sp, GEN_DRAFT_BLOCK, "a block drafter directory", &dir, &pv, err)))
		return rc;
	const char *tname = sp->target.from_shape ? "(the spec's target shape)" : sp->target.path;
	if ((rc = rt_bd_config_load(dir, &sp->target.cfg, tname, &sp->block, err)))
		return sw_err_prefix(err, "%s:%d:%d: $.draft.path", pv->file, pv->line, pv->col);
	if (sp->block.cond != RT_BD_FEATURES)
		return json_refuse(err, pv, "$.draft.path", "a features-conditioned block drafter (config.json "
		           "$.conditioning \"features\"; the engine keeps no token window)",
		           "\"%s\": $.conditioning \"tokens\"", dir);
	sp->draft_vocab = sp->block.draft_vocab;
	return 0;
}

/* {"method": "eagle3", "path": DIR}: an EAGLE-3 head's config.json against
 * the target (runtime/model/eagle3.h rt_e3_config_load: width, vocabulary,
 * layer count, the three tapped layers, Vd). Over a target shape DIR may
 * hold config.json alone (rt_e3_config_shape: a shape-only head). */
/* "MIN:MAX" n-gram lengths (the method "ngram:MIN:MAX" after its prefix, and
 * an EAGLE-3 draft's "ngram"): 1 <= MIN <= MAX <= 16, nothing after them.
 * Returns true and sets sp's range, or false. */
static bool ngram_range(const char *str, gen_spec *sp)
{
	char tail = 0;
	return sscanf(str, "%d:%d%c", &sp->ngram_min, &sp->ngram_max, &tail) == 2 &&
	       sp->ngram_min >= 1 && sp->ngram_max >= sp->ngram_min && sp->ngram_max <= 16;
}

static int eagle3_parse(const json_value *d, gen_spec *sp, sw_err *err)
{
	const char *dir;
	int rc;
	if (d->type != JSON_OBJECT)
		return json_refuse(err, d, "$.draft", "{\"method\": \"eagle3\", \"path\": DIR}",
		           "the string \"eagle3\"");
	if (json_get(d, "shape"))
		return json_refuse(err, json_get(d, "shape"), "$.draft.shape", "no \"shape\" with method "
		           "\"eagle3\" (the head's config.json is its shape: give \"path\")", "a shape");
	const json_value *pv;
	if ((rc = draft_dir(d, sp, GEN_DRAFT_EAGLE3, "an EAGLE-3 head directory", &dir, &pv, err)))
		return rc;
	struct stat st;
	const char *tname = sp->target.from_shape ? "(the spec's target shape)" : sp->target.path;
	/* over a target shape, a head directory with config.json alone is a
	 * head by shape (no weights anywhere: timed with --random-weights) */
	char wpath[600];
	snprintf(wpath, sizeof(wpath), "%s/model.safetensors", dir);
	const bool shape_only = sp->target.from_shape && stat(wpath, &st) && errno == ENOENT;
	if ((rc = shape_only ? rt_e3_config_shape(dir, &sp->target.cfg, tname, &sp->eagle3, err)
	                     : rt_e3_config_load(dir, &sp->target.cfg, tname, &sp->eagle3, err)))
		return sw_err_prefix(err, "%s:%d:%d: $.draft.path", pv->file, pv->line, pv->col);
	const rt_config *h = &sp->eagle3.head;
	if (h->head_dim % 8 || h->n_heads % h->n_kv_heads)
		return json_refuse(err, pv, "$.draft.path", "a head whose head_dim is a multiple of 8 and "
		           "whose n_heads is a multiple of n_kv_heads (the engine's tree attention)",
		           "\"%s\": head_dim %d, %d heads, %d KV heads", dir, h->head_dim, h->n_heads,
		           h->n_kv_heads);
	sp->draft_vocab = sp->eagle3.draft_vocab;
	/* "ngram": "MIN:MAX": an n-gram match of the context drafts first (the
	 * n-gram engine's lookup and controller), the head drafts "levels"
	 * tokens (default 1) in the iterations where that drafts none */
	const json_value *nv = json_get(d, "ngram"), *lv = json_get(d, "levels");
	if (lv && !nv)
		return json_refuse(err, lv, "$.draft.levels", "\"levels\" only with \"ngram\" (the "
		           "head's levels when the n-gram lookup drafts none)", "\"levels\" alone");
	if (!nv)
		return 0;
	if (nv->type != JSON_STRING || !ngram_range(nv->str, sp))
		return json_refuse(err, nv, "$.draft.ngram", "\"MIN:MAX\" with 1 <= MIN <= MAX <= 16",
		           "%s%s%s", nv->type == JSON_STRING ? "\"" : "",
		           nv->type == JSON_STRING ? nv->str : json_type_name(nv->type),
		           nv->type == JSON_STRING ? "\"" : "");
	sp->e3_ngram = true;
	sp->e3_levels = 1;
	if (lv) {
		int64_t L = 0;
		if ((rc = json_get_int(d, "levels", "$.draft", 1, 64, &L, err)))
			return rc;
		sp->e3_levels = (int)L;
	}
	return 0;
}

static int draft_parse(const json_value *root, gen_spec *sp, sw_err *err)
{
	static const char *const keys[] = {"method", "path", "shape", "steps", "ngram", "levels",
	                                   NULL};
	const json_value *d = json_get(root, "draft");
	const char *method;
	char mp[64] = "$.draft";
	int rc;

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
	bool has_src = d->type == JSON_OBJECT && (json_get(d, "path") || json_get(d, "shape"));
	if (d->type == JSON_OBJECT && json_get(d, "steps") && strcmp(method, "block"))
		return json_refuse(err, json_get(d, "steps"), "$.draft.steps", "\"steps\" only with method "
		           "\"block\"", "it with \"%s\"", method);
	for (int i = 0; d->type == JSON_OBJECT && i < 2; i++) {
		const char *k = i ? "levels" : "ngram";
		if (json_get(d, k) && strcmp(method, "eagle3"))
			return json_refuse(err, json_get(d, k), i ? "$.draft.levels" : "$.draft.ngram",
			           "\"ngram\" and \"levels\" only with method \"eagle3\" (an n-gram "
			           "lookup before the head)", "it with \"%s\"", method);
	}
	if (!strcmp(method, "block"))
		return block_parse(d, sp, err);
	if (!strcmp(method, "eagle3"))
		return eagle3_parse(d, sp, err);

	if (!strncmp(method, "layerskip:", 10) || !strncmp(method, "ngram", 5)) {
		if (has_src)
			return json_refuse(err, d, "$.draft", "\"path\"/\"shape\" only with method \"model\"",
			           "them with \"%s\"", method);
	}
	if (!strncmp(method, "layerskip:", 10)) {
		sp->draft_kind = GEN_DRAFT_LAYERSKIP;
		return layerskip_parse(mv, mp, method + 10, sp->target.cfg.n_layers,
		                       sp->target.cfg.vocab, sp, err);
	}
	if (!strcmp(method, "ngram") || !strncmp(method, "ngram:", 6)) {
		sp->draft_kind = GEN_DRAFT_NGRAM;
		sp->ngram_min = 1;
		sp->ngram_max = 3;
		if (method[5] == ':' && !ngram_range(method + 6, sp))
			return json_refuse(err, mv, mp, "ngram or ngram:MIN:MAX with 1 <= MIN <= MAX <= 16",
			           "\"%s\"", method);
		sp->draft_vocab = 0;
		return 0;
	}
	if (!strcmp(method, "model") || !strncmp(method, "model:", 6)) {
		sp->draft_kind = GEN_DRAFT_MODEL;
		if (method[5] == ':') {
			if (has_src)
				return json_refuse(err, d, "$.draft", "the model given once", "\"%s\" and a "
				           "path/shape field", method);
			json_value fake = *mv;
			memset(&sp->draft, 0, sizeof(sp->draft));
			if ((rc = abs_path(mv, mp, method + 6, sp->draft.path, sizeof(sp->draft.path), err)))
				return rc;
			/* the echo names the absolute path too (an engine runs from
			 * any directory) */
			if (strlen(sp->draft.path) + 7 > sizeof(sp->draft_method))
				return json_refuse(err, mv, mp, "model:PATH shorter than 256 bytes once made "
				                   "absolute", "\"model:%s\"", sp->draft.path);
			memcpy(sp->draft_method + 6, sp->draft.path, strlen(sp->draft.path) + 1);
			if ((rc = model_from_path(&fake, mp, sp->draft.path, &sp->draft.cfg, err)) ||
			    (rc = shape_check(mv, mp, &sp->draft.cfg, err)))
				return rc;
		} else {
			if (d->type != JSON_OBJECT)
				return json_refuse(err, d, "$.draft", "model:PATH or {\"method\": \"model\", \"path\" | "
				           "\"shape\": ...}", "\"model\"");
			if ((rc = model_parse(d, "$.draft", &sp->draft, err)))
				return rc;
		}
		/* the target's vocabulary or a prefix of it (Qwen2-0.5B's 151936
		 * under Qwen2-7B's 152064): q = 0 beyond it, and the draft embeds
		 * the ids beyond it the target commits as a zero row (gen/plan.c) */
		if (sp->draft.cfg.vocab > sp->target.cfg.vocab)
			return json_refuse(err, d, "$.draft", "a draft vocabulary at most the target's (the "
			           "target's or a prefix of it)", "%d (target %d)", sp->draft.cfg.vocab,
			           sp->target.cfg.vocab);
		if ((rc = rt_draft_vocab_check(sp->target.path, sp->target.cfg.vocab, sp->draft.path,
		                               sp->draft.cfg.vocab, err)))
			return sw_err_prefix(err, "%s:%d:%d: $.draft", d->file, d->line, d->col);
		sp->draft_vocab = sp->draft.cfg.vocab;
		return 0;
	}
	return json_refuse(err, mv, mp, "layerskip:LAYERS, model, model:PATH, ngram, ngram:MIN:MAX, block or eagle3",
	           "\"%s\"", method);
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
	                                   "allow_spills", "roofline", "adaptive", "control", NULL};
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
	    (rc = model_parse(o, "$.target", &sp->target, err)))
		goto out_free;
	if ((rc = draft_parse(root, sp, err)))
		goto out_free;

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
	if (sp->draft_kind == GEN_DRAFT_NGRAM || sp->e3_ngram) {
		for (int i = 0; i < sp->tree.n; i++)
			if (sp->tree.n_children[i] > 1) {
				rc = json_refuse(err, json_get(root, "tree"), "$.tree", "a chain (ngram drafts one "
				         "continuation)", "\"%s\" (node %d has %d children)", sp->tree_spec, i,
				         sp->tree.n_children[i]);
				goto out_free;
			}
		if (sp->verify_method != RT_VERIFY_GREEDY && sp->verify_method != RT_VERIFY_ONEHOT) {
			rc = json_refuse(err, json_get(root, "verify"), "$.verify.method", "greedy or onehot "
			         "(ngram drafts have no draft distribution)", "\"%s\"", ms);
			goto out_free;
		}
		const json_value *lv = json_get(json_get(root, "draft"), "levels");
		if (sp->e3_ngram && (sp->tree.depth_max < 1 || sp->e3_levels > sp->tree.depth_max)) {
			rc = json_refuse(err, lv ? lv : json_get(root, "tree"),
			                 "$.draft.levels", "at most the chain's depth (the head drafts "
			                 "nodes 1 .. levels)", "%d with tree \"%s\" of depth %d",
			                 sp->e3_levels, sp->tree_spec, sp->tree.depth_max);
			goto out_free;
		}
	}

	if (sp->draft_kind == GEN_DRAFT_BLOCK) {
		const int B = sp->block.block;
		bool chain = true;
		for (int i = 0; i < sp->tree.n; i++)
			chain &= sp->tree.n_children[i] <= 1;
		if (sp->tree.depth_max > B) {
			rc = json_refuse(err, json_get(root, "tree"), "$.tree", "a tree of depth at most the block "
			         "drafter's B (one pass drafts B positions)", "\"%s\" of depth %d with "
			         "B = %d (%s/config.json $.block)", sp->tree_spec, sp->tree.depth_max, B,
			         sp->draft.path);
			goto out_free;
		}
		if (sp->block_steps > 1 && !chain) {
			rc = json_refuse(err, json_get(json_get(root, "draft"), "steps"), "$.draft.steps",
			         "1 with a tree (a tree is drafted from one pass; steps > 1 need a chain)",
			         "%d with tree \"%s\"", sp->block_steps, sp->tree_spec);
			goto out_free;
		}
	}

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
	if (sp->draft_kind == GEN_DRAFT_EAGLE3 && sp->prefill_chunk < 2) {
		rc = json_refuse(err, json_get(root, "prefill_chunk"), "$.prefill_chunk", "at least 2 with "
		         "an EAGLE-3 head (a chunk's head rows pair each position with the next token)",
		         "%d", sp->prefill_chunk);
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
		if (sp->draft_kind == GEN_DRAFT_BLOCK || sp->draft_kind == GEN_DRAFT_EAGLE3) {
			rc = json_refuse(err, json_get(root, "dtype"), "$.dtype",
			         sp->draft_kind == GEN_DRAFT_BLOCK
			         ? "\"bf16\" or \"fp16\" with a block drafter"
			         : "\"bf16\", \"fp16\" or \"gguf_a8\" with an EAGLE-3 head",
			         "\"%s\"", gen_dtype_name(sp->dtype));
			goto out_free;
		}
		for (int mi = 0; mi < 2; mi++) {
			const rt_config *c = mi ? &sp->draft.cfg : &sp->target.cfg;
			if (mi && sp->draft_kind != GEN_DRAFT_MODEL)
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
		if (sp->draft_kind == GEN_DRAFT_BLOCK || sp->draft_kind == GEN_DRAFT_MODEL) {
			rc = json_refuse(err, json_get(root, "dtype"), "$.dtype", "an n-gram, layer-skip or "
			         "EAGLE-3 draft with \"gguf_a8\" (the target's weights in the file's "
			         "blocks, an EAGLE-3 head's in Q8_0)", "a draft %s",
			         sp->draft_kind == GEN_DRAFT_BLOCK ? "block drafter" : "model");
			goto out_free;
		}
		if (sp->draft_kind == GEN_DRAFT_EAGLE3 &&
		    (rc = gen_plan_eagle3_a8_check(sp, json_get(root, "dtype"), err)))
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
	for (int mi = 0; mi < 2 && (!mi || sp->draft_kind == GEN_DRAFT_MODEL); mi++) {
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
		if (!chain || sp->draft_kind == GEN_DRAFT_NGRAM || sp->draft_kind == GEN_DRAFT_BLOCK ||
		    sp->draft_kind == GEN_DRAFT_EAGLE3) {
			rc = json_refuse(err, o, "$.adaptive", "a chain tree drafted by a model (layerskip or "
			         "model)", "tree \"%s\" with draft \"%s\"", sp->tree_spec,
			         sp->draft_method);
			goto out_free;
		}
	}

	if ((rc = gen_ctrl_parse(root, sp->draft_kind == GEN_DRAFT_NGRAM || sp->e3_ngram,
	                         sp->verify_method == RT_VERIFY_GREEDY, sp->tree.depth_max,
	                         sp->e3_ngram ? sp->e3_levels : 0, &sp->ctrl, err)))
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

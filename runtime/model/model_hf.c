/* HF checkpoint loader for the Llama family: config.json validation and the
 * safetensors tensors of LlamaForCausalLM (q/k rows permuted to the GGUF
 * RoPE order), Qwen2ForCausalLM (q/k/v biases), Qwen3ForCausalLM (q/k
 * norms; q/k rows of both Qwen kept in HF order for NeoX RoPE) and
 * Gemma3ForCausalLM (model_type gemma3_text: pre/post norms, stored as
 * 1 + w, q/k norms, rows in HF order), converted to f32 in one arena.
 * Refuses anything else (a bias it would not add, another
 * model_type, sliding windows, unknown RoPE scaling) rather than loading it
 * half right. */
#include "core/fileio.h"
#include "model_hf.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "formats/safetensors.h"

#define MAX_CONFIG_BYTES (4u << 20)

/* An optional integer: absent or null gives def. */
static int opt_int(const json_value *root, const char *key, int64_t def, int64_t min,
		   int64_t max, int64_t *out, sw_err *err)
{
	const json_value *v = json_get(root, key);
	if (!v || v->type == JSON_NULL) {
		*out = def;
		return 0;
	}
	return json_get_int(root, key, "$", min, max, out, err);
}

static int opt_number(const json_value *root, const char *key, double def, double min,
		      double max, double *out, sw_err *err)
{
	const json_value *v = json_get(root, key);
	if (!v || v->type == JSON_NULL) {
		*out = def;
		return 0;
	}
	return json_get_number(root, key, "$", min, max, out, err);
}

/* bos/eos: an int, an array of ints (the first is used: Llama 3.1 lists
 * several eos ids, the first is the canonical one), or null/absent -> -1. */
static int token_id(const json_value *root, const char *key, int64_t vocab, int *out,
		    sw_err *err)
{
	const json_value *v = json_get(root, key);
	char path[64];
	int64_t id;
	int rc;

	*out = -1;
	if (!v || v->type == JSON_NULL)
		return 0;
	snprintf(path, sizeof(path), "$.%s", key);
	if (v->type == JSON_ARRAY) {
		if (!v->n)
			return 0;
		for (size_t i = 0; i < v->n; i++) {
			char ep[80];
			json_path_index(ep, sizeof(ep), path, i);
			if ((rc = json_as_int(v->items[i], ep, 0, vocab - 1, &id, err)))
				return rc;
			if (i == 0)
				*out = (int)id;
		}
		return 0;
	}
	if ((rc = json_as_int(v, path, 0, vocab - 1, &id, err)))
		return rc;
	*out = (int)id;
	return 0;
}

static int parse_rope_scaling(const json_value *root, rt_config *cfg, sw_err *err)
{
	const json_value *rs = json_get(root, "rope_scaling");
	const char *path = "$.rope_scaling";
	const char *type = NULL, *t2 = NULL;
	double d;
	int64_t i64;
	int rc;

	cfg->rope_scaling = RT_ROPE_SCALING_NONE;
	cfg->rope_factor = 1.0f;
	cfg->rope_low_freq_factor = cfg->rope_high_freq_factor = 0.0f;
	cfg->rope_orig_ctx = 0;
	if (!rs || rs->type == JSON_NULL)
		return 0;
	if ((rc = json_as_object(rs, path, err)))
		return rc;
	/* transformers renamed "type" to "rope_type"; both appear in the wild. */
	if (json_get(rs, "rope_type") && (rc = json_get_string(rs, "rope_type", path, &type, err)))
		return rc;
	if (json_get(rs, "type") && (rc = json_get_string(rs, "type", path, &t2, err)))
		return rc;
	if (type && t2 && strcmp(type, t2))
		return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: \"rope_type\" (%s) and \"type\" (%s) disagree",
			       rs->file, rs->line, rs->col, path, type, t2);
	if (!type)
		type = t2;
	if (!type)
		return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: missing required field \"rope_type\" (or \"type\")",
			       rs->file, rs->line, rs->col, path);

	if (!strcmp(type, "default"))
		return 0;
	if (!strcmp(type, "linear")) {
		if ((rc = json_get_number(rs, "factor", path, 1e-6, 1e6, &d, err)))
			return rc;
		cfg->rope_scaling = RT_ROPE_SCALING_LINEAR;
		cfg->rope_factor = (float)d;
		return 0;
	}
	if (!strcmp(type, "llama3")) {
		double lo, hi;
		if ((rc = json_get_number(rs, "factor", path, 1e-6, 1e6, &d, err)) ||
		    (rc = json_get_number(rs, "low_freq_factor", path, 1e-6, 1e6, &lo, err)) ||
		    (rc = json_get_number(rs, "high_freq_factor", path, 1e-6, 1e6, &hi, err)) ||
		    (rc = json_get_int(rs, "original_max_position_embeddings", path, 1, INT32_MAX, &i64, err)))
			return rc;
		/* The smoothing term divides by (high - low). */
		if (!(hi > lo))
			return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: expected high_freq_factor > low_freq_factor, found %g <= %g",
				       rs->file, rs->line, rs->col, path, hi, lo);
		cfg->rope_scaling = RT_ROPE_SCALING_LLAMA3;
		cfg->rope_factor = (float)d;
		cfg->rope_low_freq_factor = (float)lo;
		cfg->rope_high_freq_factor = (float)hi;
		cfg->rope_orig_ctx = (int)i64;
		return 0;
	}
	return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: %s: rope scaling \"%.32s\" is not supported (supported: default, linear, llama3)",
		       rs->file, rs->line, rs->col, path, type);
}

/* model_type -> family and its architectures[] class */
static const struct hf_family {
	const char *model_type;
	int arch;
	const char *cls;
	int64_t def_ctx;    /* max_position_embeddings when absent, as the HF config class */
} families[] = {
	{ "llama", RT_ARCH_LLAMA, "LlamaForCausalLM", 2048 },
	{ "qwen2", RT_ARCH_QWEN2, "Qwen2ForCausalLM", 32768 },
	{ "qwen3", RT_ARCH_QWEN3, "Qwen3ForCausalLM", 32768 },
	{ "gemma3_text", RT_ARCH_GEMMA3, "Gemma3ForCausalLM", 131072 },
};

/* An optional bool that must be false (absent and null are false). */
static int must_be_false(const json_value *root, const char *key, const char *why, sw_err *err)
{
	const json_value *v = json_get(root, key);
	bool b;
	int rc;
	if (!v || v->type == JSON_NULL)
		return 0;
	if ((rc = json_get_bool(root, key, "$", &b, err)))
		return rc;
	if (b)
		return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: $.%s: expected false (%s), found true",
		               v->file, v->line, v->col, key, why);
	return 0;
}

/* archs: the accepted $.architectures of a Llama config (EAGLE-3 heads), or
 * NULL: any family above under its own class. *fam receives the family. */
static int check_arch(const json_value *root, const char *const *archs, const struct hf_family **fam,
                      sw_err *err)
{
	const json_value *v;
	const char *mt, *act;
	int rc;

	if ((rc = json_get_string(root, "model_type", "$", &mt, err)))
		return rc;
	*fam = NULL;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		if (!strcmp(mt, families[i].model_type) && (!archs || families[i].arch == RT_ARCH_LLAMA))
			*fam = &families[i];
	if (!*fam) {
		v = json_get(root, "model_type");
		return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: $.model_type: expected %s, found \"%.32s\"",
			       v->file, v->line, v->col,
			       archs ? "\"llama\" (LlamaForCausalLM without biases)"
			             : "\"llama\" (without biases), \"qwen2\", \"qwen3\" or \"gemma3_text\"", mt);
	}
	const char *const own[] = { (*fam)->cls, NULL };
	if (!archs)
		archs = own;
	v = json_get(root, "architectures");
	if (v && v->type != JSON_NULL) {
		bool found = false;
		if ((rc = json_as_array(v, "$.architectures", 1, 64, err)))
			return rc;
		for (size_t i = 0; i < v->n; i++)
			for (const char *const *a = archs; *a; a++)
				if (v->items[i]->type == JSON_STRING && !strcmp(v->items[i]->str, *a))
					found = true;
		if (!found) {
			char f[96];
			snprintf(f, sizeof(f), "%s", v->items[0]->type == JSON_STRING ? v->items[0]->str : "?");
			return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: $.architectures: expected [\"%s\"], found \"%.64s\"",
				       v->file, v->line, v->col, archs[0], f);
		}
	}
	switch ((*fam)->arch) {
	case RT_ARCH_LLAMA:
		if ((rc = must_be_false(root, "attention_bias", "biases are not supported for llama", err)) ||
		    (rc = must_be_false(root, "mlp_bias", "biases are not supported for llama", err)))
			return rc;
		break;
	case RT_ARCH_QWEN3: /* Qwen3Attention gives q/k/v/o biases by attention_bias */
		if ((rc = must_be_false(root, "attention_bias", "qwen3 without biases", err)))
			return rc;
		/* fall through */
	case RT_ARCH_QWEN2: /* Qwen2: q/k/v biases always, whatever attention_bias says */
		if ((rc = must_be_false(root, "use_sliding_window", "sliding-window attention is not supported", err)))
			return rc;
		v = json_get(root, "layer_types");
		if (v && v->type != JSON_NULL) {
			if ((rc = json_as_array(v, "$.layer_types", 0, 4096, err)))
				return rc;
			for (size_t i = 0; i < v->n; i++)
				if (v->items[i]->type != JSON_STRING || strcmp(v->items[i]->str, "full_attention"))
					return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: $.layer_types[%zu]: expected \"full_attention\", found %s%.32s%s",
					               v->items[i]->file, v->items[i]->line, v->items[i]->col, i,
					               v->items[i]->type == JSON_STRING ? "\"" : "",
					               v->items[i]->type == JSON_STRING ? v->items[i]->str : "another type",
					               v->items[i]->type == JSON_STRING ? "\"" : "");
		}
		break;
	case RT_ARCH_GEMMA3:
		if ((rc = must_be_false(root, "attention_bias", "gemma3 without biases", err)))
			return rc;
		break;
	}
	/* Gemma3TextConfig's activation is hidden_activation (hidden_act is
	 * ignored by its MLP); the others' hidden_act */
	const bool gemma = (*fam)->arch == RT_ARCH_GEMMA3;
	const char *akey = gemma ? "hidden_activation" : "hidden_act", *want = gemma ? "gelu_pytorch_tanh" : "silu";
	v = json_get(root, akey);
	if (v && v->type != JSON_NULL) {
		if ((rc = json_get_string(root, akey, "$", &act, err)))
			return rc;
		if (strcmp(act, want))
			return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: $.%s: expected \"%s\", found \"%.32s\"",
				       v->file, v->line, v->col, akey, want, act);
	}
	return 0;
}

/* 16-bit rounding (to nearest even) of an fp32 value, back in fp32 */
static float round_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&x, &u, 4);
	return x;
}

static float round_f16(float x)
{
	/* |x| in fp16's normal range here (sqrt of a width): 10 mantissa bits */
	int e;
	double m = frexp((double)x, &e);           /* x = m 2^e, 0.5 <= m < 1 */
	return (float)ldexp(nearbyint(ldexp(m, 11)), e - 11);
}

/* Gemma3TextConfig's fields beyond the Llama ones (defaults as that class):
 * query_pre_attn_scalar (256), sliding_window (4096), the layer pattern
 * (layer_types when present, which must be one of period
 * sliding_window_pattern: transformers 4.51's rule (l + 1) % pattern;
 * else sliding_window_pattern, 6), rope_local_base_freq (10000),
 * final_logit_softcapping (null), attn_logit_softcapping (must be null).
 * The embedding scale is sqrt(hidden_size) in the checkpoint's torch_dtype,
 * as Gemma3TextScaledWordEmbedding casts it. */
static int gemma3_config(const json_value *root, rt_config *cfg, sw_err *err)
{
	int64_t win, pat;
	double qs, local, cap;
	const json_value *v;
	int rc;

	if ((rc = opt_number(root, "query_pre_attn_scalar", 256, 1e-6, 1e9, &qs, err)) ||
	    (rc = opt_int(root, "sliding_window", 4096, 1, INT32_MAX, &win, err)) ||
	    (rc = opt_int(root, "sliding_window_pattern", 6, 1, 4096, &pat, err)) ||
	    (rc = opt_number(root, "rope_local_base_freq", 10000.0, 1e-3, 1e12, &local, err)) ||
	    (rc = opt_number(root, "final_logit_softcapping", 0.0, 1e-6, 1e9, &cap, err)))
		return rc;
	v = json_get(root, "attn_logit_softcapping");
	if (v && v->type != JSON_NULL)
		return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: $.attn_logit_softcapping: expected null (gemma3 has no "
		               "attention softcap), found a value", v->file, v->line, v->col);
	v = json_get(root, "layer_types");
	if (v && v->type != JSON_NULL) {
		if ((rc = json_as_array(v, "$.layer_types", (size_t)cfg->n_layers, (size_t)cfg->n_layers, err)))
			return rc;
		/* the period: the first global layer's index + 1 */
		pat = 0;
		for (size_t i = 0; i < v->n && !pat; i++)
			if (v->items[i]->type == JSON_STRING && !strcmp(v->items[i]->str, "full_attention"))
				pat = (int64_t)i + 1;
		if (!pat)
			pat = cfg->n_layers + 1; /* all sliding */
		for (size_t i = 0; i < v->n; i++) {
			const char *want = ((int64_t)i + 1) % pat ? "sliding_attention" : "full_attention";
			const json_value *it = v->items[i];
			if (it->type != JSON_STRING || strcmp(it->str, want))
				return sw_errf(err, SW_ENOTSUP, "%s:%d:%d: $.layer_types[%zu]: expected \"%s\" (a global "
				               "layer every %" PRId64 "), found %s%.32s%s", it->file, it->line, it->col,
				               i, want, pat, it->type == JSON_STRING ? "\"" : "",
				               it->type == JSON_STRING ? it->str : "another type",
				               it->type == JSON_STRING ? "\"" : "");
		}
	}
	float scale = sqrtf((float)cfg->dim);
	v = json_get(root, "torch_dtype");
	if (v && v->type == JSON_STRING && !strcmp(v->str, "bfloat16"))
		scale = round_bf16(scale);
	else if (v && v->type == JSON_STRING && !strcmp(v->str, "float16"))
		scale = round_f16(scale);
	cfg->embd_scale = scale;
	cfg->query_scalar = (float)qs;
	cfg->swa_window = (int)win;
	cfg->swa_pattern = (int)pat;
	cfg->rope_theta_local = (float)local;
	cfg->final_softcap = (float)cap;
	return 0;
}

static int config_parse(const char *json_text, size_t n, const char *name, const char *const *archs,
                        rt_config *cfg, sw_err *err);

int rt_llama_config_from_hf_json(const char *json_text, size_t n, const char *name,
				 rt_config *cfg, sw_err *err)
{
	return config_parse(json_text, n, name, NULL, cfg, err);
}

int rt_llama_config_from_hf_json_as(const char *json_text, size_t n, const char *name,
				    const char *const *archs, rt_config *cfg, sw_err *err)
{
	return config_parse(json_text, n, name, archs, cfg, err);
}

static int config_parse(const char *json_text, size_t n, const char *name, const char *const *archs,
                        rt_config *cfg, sw_err *err)
{
	const struct hf_family *fam = NULL;
	int64_t dim, ffn, heads, kv, layers, hd, vocab, ctx;
	double eps, theta;
	const json_value *v;
	json_value *root;
	bool tied = false;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	/* Gemma3TextConfig ties by default; the other classes' absent key is
	 * settled by the checkpoint (no lm_head.weight: tied) */
	root = json_parse(json_text, n, name, err);
	if (!root)
		return err ? err->code : SW_EINVAL;
	if ((rc = json_as_object(root, "$", err)) || (rc = check_arch(root, archs, &fam, err)))
		goto out_free_root;

	/* Bounds keep every product below (vocab*dim, layers*ffn*dim) far from
	 * 64-bit overflow; real models are orders of magnitude inside them. */
	if ((rc = json_get_int(root, "hidden_size", "$", 1, 1 << 20, &dim, err)) ||
	    (rc = json_get_int(root, "intermediate_size", "$", 1, 1 << 22, &ffn, err)) ||
	    (rc = json_get_int(root, "num_attention_heads", "$", 1, 4096, &heads, err)) ||
	    (rc = opt_int(root, "num_key_value_heads", heads, 1, heads, &kv, err)) ||
	    (rc = json_get_int(root, "num_hidden_layers", "$", 1, 4096, &layers, err)) ||
	    (rc = json_get_int(root, "vocab_size", "$", 1, 1 << 24, &vocab, err)) ||
	    (rc = opt_int(root, "max_position_embeddings", fam->def_ctx, 1, INT32_MAX, &ctx, err)) ||
	    (rc = opt_number(root, "rms_norm_eps", 1e-6, 0.0, 1.0, &eps, err)) ||
	    (rc = opt_number(root, "rope_theta", fam->arch == RT_ARCH_GEMMA3 ? 1e6 : 10000.0, 1e-3, 1e12,
	                     &theta, err)))
		goto out_free_root;
	if (heads % kv) {
		v = json_get(root, "num_key_value_heads");
		rc = sw_errf(err, SW_EINVAL, "%s:%d:%d: $.num_key_value_heads: expected a divisor of num_attention_heads (%" PRId64 "), found %" PRId64,
			     v->file, v->line, v->col, heads, kv);
		goto out_free_root;
	}
	v = json_get(root, "head_dim");
	if (v && v->type != JSON_NULL) {
		if ((rc = json_get_int(root, "head_dim", "$", 2, 4096, &hd, err)))
			goto out_free_root;
	} else if (fam->arch == RT_ARCH_QWEN3 || fam->arch == RT_ARCH_GEMMA3) {
		/* Qwen3Config's and Gemma3TextConfig's defaults, independent of hidden_size */
		hd = fam->arch == RT_ARCH_QWEN3 ? 128 : 256;
	} else {
		if (dim % heads) {
			rc = sw_errf(err, SW_EINVAL, "%s: $.hidden_size (%" PRId64 ") is not a multiple of num_attention_heads (%" PRId64 ") and head_dim is absent",
				     root->file, dim, heads);
			goto out_free_root;
		}
		hd = dim / heads;
	}
	/* RoPE rotates pairs: an odd head_dim has no valid permutation. */
	if (hd % 2) {
		rc = sw_errf(err, SW_EINVAL, "%s: head_dim %" PRId64 " must be even (RoPE rotates pairs)",
			     root->file, hd);
		goto out_free_root;
	}
	tied = fam->arch == RT_ARCH_GEMMA3;
	v = json_get(root, "tie_word_embeddings");
	if (v && v->type != JSON_NULL && (rc = json_get_bool(root, "tie_word_embeddings", "$", &tied, err)))
		goto out_free_root;

	cfg->arch = fam->arch;
	cfg->n_layers = (int)layers;
	cfg->dim = (int)dim;
	cfg->n_heads = (int)heads;
	cfg->n_kv_heads = (int)kv;
	cfg->head_dim = (int)hd;
	cfg->ffn_dim = (int)ffn;
	cfg->vocab = (int)vocab;
	cfg->max_ctx = (int)ctx;
	cfg->rope_theta = (float)theta;
	cfg->norm_eps = (float)eps;
	cfg->tied_embd = tied;
	if ((rc = parse_rope_scaling(root, cfg, err)) ||
	    (rc = token_id(root, "bos_token_id", vocab, &cfg->bos_id, err)) ||
	    (rc = token_id(root, "eos_token_id", vocab, &cfg->eos_id, err)))
		goto out_free_root;
	if (fam->arch == RT_ARCH_GEMMA3 && (rc = gemma3_config(root, cfg, err)))
		goto out_free_root;
	rc = 0;

out_free_root:
	json_free(root);
	if (rc)
		memset(cfg, 0, sizeof(*cfg));
	return rc;
}

int rt_hf_permute_qk(float *w, int n_head, int head_dim, int dim, sw_err *err)
{
	size_t half = (size_t)head_dim / 2, row = (size_t)dim;
	float *tmp;

	if (n_head <= 0 || head_dim <= 0 || head_dim % 2 || dim <= 0)
		return sw_errf(err, SW_EINVAL, "q/k permutation: bad shape n_head=%d head_dim=%d dim=%d",
			       n_head, head_dim, dim);
	tmp = malloc((size_t)head_dim * row * sizeof(*tmp));
	if (!tmp)
		return sw_errf(err, SW_ENOMEM, "q/k permutation: out of memory");
	for (size_t h = 0; h < (size_t)n_head; h++) {
		float *head = w + h * (size_t)head_dim * row;
		memcpy(tmp, head, (size_t)head_dim * row * sizeof(*tmp));
		/* out row (i, j) of (hd/2, 2) = in row (j, i) of (2, hd/2) */
		for (size_t i = 0; i < half; i++)
			for (size_t j = 0; j < 2; j++)
				memcpy(head + (2 * i + j) * row, tmp + (j * half + i) * row,
				       row * sizeof(*tmp));
	}
	free(tmp);
	return 0;
}

static int read_config(const char *dir, rt_config *cfg, sw_err *err)
{
	char path[4096];
	int rc;

	if (snprintf(path, sizeof(path), "%s/config.json", dir) >= (int)sizeof(path))
		return sw_errf(err, SW_EINVAL, "%s: path too long", dir);
	size_t n = 0;
	char *buf = sw_read_capped(path, MAX_CONFIG_BYTES, "an HF config.json", &n, err);
	if (!buf)
		return err->code;
	rc = rt_llama_config_from_hf_json(buf, n, path, cfg, err);
	free(buf);
	return rc;
}

/* One tensor to load: where it goes and the shape it must have. */
struct hf_slot {
	char name[96];
	float **dst;
	int n_dims;
	int64_t shape[2];
	int permute_heads; /* > 0: q/k with this many heads */
	bool add_one;      /* Gemma's norms: store 1 + w (Gemma3RMSNorm's factor) */
	size_t off;        /* in the arena, bytes */
};

static int load_slot(const safetensors_ckpt *c, const rt_config *cfg, struct hf_slot *s,
		     sw_err *err)
{
	const safetensors_tensor *t;
	const safetensors_file *f;
	char exp[64], got[160];
	int rc;

	if ((rc = safetensors_ckpt_find(c, s->name, &t, &f, err)))
		return rc;
	if (s->n_dims == 1)
		snprintf(exp, sizeof(exp), "[%" PRId64 "]", s->shape[0]);
	else
		snprintf(exp, sizeof(exp), "[%" PRId64 ", %" PRId64 "]", s->shape[0], s->shape[1]);
	if (!t)
		return sw_errf(err, SW_EINVAL, "%s: tensor \"%s\" not found (expected shape %s)",
			       c->dir, s->name, exp);
	if ((rc = safetensors_numeric(f, t, err)))
		return rc;
	bool same = t->n_dims == s->n_dims;
	for (int d = 0; same && d < s->n_dims; d++)
		same = t->shape[d] == s->shape[d];
	if (!same) {
		size_t len = 0;
		got[len++] = '[';
		got[len] = 0;
		for (int d = 0; d < t->n_dims && len < sizeof(got) - 24; d++)
			len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%" PRId64, d ? ", " : "", t->shape[d]);
		snprintf(got + len, sizeof(got) - len, "]");
		return sw_errf(err, SW_EINVAL, "%s: tensor \"%s\": expected shape %s, found %s",
			       f->name, s->name, exp, got);
	}
	safetensors_to_f32(t, *s->dst);
	if (s->add_one) /* in fp32, as Gemma3RMSNorm: 1.0 + weight.float() */
		for (int64_t i = 0; i < s->shape[0]; i++)
			(*s->dst)[i] += 1.0f;
	if (s->permute_heads)
		return rt_hf_permute_qk(*s->dst, s->permute_heads, cfg->head_dim, cfg->dim, err);
	return 0;
}

/* A bias the forward would not add is refused, never dropped: Qwen2 has
 * exactly model.layers.N.self_attn.{q,k,v}_proj.bias, Llama and Qwen3 none. */
static int check_biases(const safetensors_ckpt *c, int arch, sw_err *err)
{
	for (size_t i = 0; i < c->n_files; i++) {
		for (size_t k = 0; k < c->files[i]->n_tensors; k++) {
			const char *n = c->files[i]->tensors[k].name;
			size_t l = strlen(n);
			int layer, end = 0;
			char which;
			if (l < 5 || strcmp(n + l - 5, ".bias"))
				continue;
			if (arch == RT_ARCH_QWEN2 &&
			    sscanf(n, "model.layers.%d.self_attn.%c_proj.bias%n", &layer, &which, &end) == 2 &&
			    (size_t)end == l && (which == 'q' || which == 'k' || which == 'v'))
				continue;
			return sw_errf(err, SW_ENOTSUP, "%s: tensor \"%.128s\": expected no bias %s (model_type \"%s\"), found one",
				       c->files[i]->name, n,
				       arch == RT_ARCH_QWEN2 ? "but q_proj/k_proj/v_proj's" : "at all",
				       rt_arch_name(arch));
		}
	}
	return 0;
}

int rt_llama_load_hf(const char *dir, rt_config *cfg, rt_weights *w, sw_err *err)
{
	safetensors_ckpt *c = NULL;
	struct hf_slot *slots = NULL;
	rt_layer_weights *lw = NULL;
	const safetensors_tensor *lm;
	size_t n_slots = 0, bytes = 0;
	int rc;

	memset(w, 0, sizeof(*w));
	if ((rc = read_config(dir, cfg, err)))
		return rc;
	if ((rc = safetensors_ckpt_open(dir, &c, err)))
		return rc;
	if ((rc = check_biases(c, cfg->arch, err)))
		goto out_free_ckpt;
	sw_wscan_cost cost = {0};
	for (size_t i = 0; i < c->n_files; i++)
		if ((rc = safetensors_check_finite(c->files[i], &cost, err)))
			goto out_free_ckpt;
	if ((rc = safetensors_ckpt_find(c, "lm_head.weight", &lm, NULL, err)))
		goto out_free_ckpt;
	if (!lm)
		cfg->tied_embd = true;

	const int64_t dim = cfg->dim, ffn = cfg->ffn_dim, vocab = cfg->vocab;
	const int64_t q_rows = (int64_t)cfg->n_heads * cfg->head_dim;
	const int64_t kv_rows = (int64_t)cfg->n_kv_heads * cfg->head_dim;
	size_t max_slots = 3 + 14 * (size_t)cfg->n_layers;
	const bool gemma = cfg->arch == RT_ARCH_GEMMA3;
	/* Llama rows go to GGUF order; Qwen rows stay (NeoX RoPE, model.h) */
	const int perm_q = cfg->arch == RT_ARCH_LLAMA ? cfg->n_heads : 0;
	const int perm_k = cfg->arch == RT_ARCH_LLAMA ? cfg->n_kv_heads : 0;

	/* rt_weights_free releases only the arena, so the layer table lives in
	 * it too: staged here, copied to the arena's head once it exists. */
	lw = calloc((size_t)cfg->n_layers, sizeof(*lw));
	slots = calloc(max_slots, sizeof(*slots));
	if (!lw || !slots) {
		rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", dir);
		goto out_free_weights;
	}

#define SLOT(nm, dst_, nd, s0, s1, perm) do {                              \
		struct hf_slot *s_ = &slots[n_slots++];                            \
		snprintf(s_->name, sizeof(s_->name), "%s", nm);                    \
		s_->dst = (dst_);                                                   \
		s_->n_dims = (nd);                                                  \
		s_->shape[0] = (s0);                                                \
		s_->shape[1] = (s1);                                                \
		s_->permute_heads = (perm);                                         \
		s_->add_one = gemma && (nd) == 1;                                   \
	} while (0)

	SLOT("model.embed_tokens.weight", &w->tok_embd, 2, vocab, dim, 0);
	for (int l = 0; l < cfg->n_layers; l++) {
		rt_layer_weights *L = &lw[l];
		char nm[96];
#define LAYER(suffix, dst_, nd, s0, s1, perm) do {                                \
		snprintf(nm, sizeof(nm), "model.layers.%d.%s.weight", l, suffix);   \
		SLOT(nm, dst_, nd, s0, s1, perm);                                   \
	} while (0)
		LAYER("input_layernorm", &L->attn_norm, 1, dim, 0, 0);
		LAYER("self_attn.q_proj", &L->wq, 2, q_rows, dim, perm_q);
		LAYER("self_attn.k_proj", &L->wk, 2, kv_rows, dim, perm_k);
		LAYER("self_attn.v_proj", &L->wv, 2, kv_rows, dim, 0);
		LAYER("self_attn.o_proj", &L->wo, 2, dim, q_rows, 0);
		if (gemma) { /* post_attention_layernorm is the attention's post-norm */
			LAYER("post_attention_layernorm", &L->post_attn_norm, 1, dim, 0, 0);
			LAYER("pre_feedforward_layernorm", &L->ffn_norm, 1, dim, 0, 0);
			LAYER("post_feedforward_layernorm", &L->post_ffn_norm, 1, dim, 0, 0);
		} else {
			LAYER("post_attention_layernorm", &L->ffn_norm, 1, dim, 0, 0);
		}
		LAYER("mlp.gate_proj", &L->w_gate, 2, ffn, dim, 0);
		LAYER("mlp.up_proj", &L->w_up, 2, ffn, dim, 0);
		LAYER("mlp.down_proj", &L->w_down, 2, dim, ffn, 0);
#undef LAYER
#define VEC(suffix, dst_, len) do {                                                 \
		snprintf(nm, sizeof(nm), "model.layers.%d.%s", l, suffix);          \
		SLOT(nm, dst_, 1, len, 0, 0);                                       \
	} while (0)
		if (cfg->arch == RT_ARCH_QWEN2) {
			VEC("self_attn.q_proj.bias", &L->bq, q_rows);
			VEC("self_attn.k_proj.bias", &L->bk, kv_rows);
			VEC("self_attn.v_proj.bias", &L->bv, kv_rows);
		}
		if (cfg->arch == RT_ARCH_QWEN3 || gemma) {
			VEC("self_attn.q_norm.weight", &L->q_norm, cfg->head_dim);
			VEC("self_attn.k_norm.weight", &L->k_norm, cfg->head_dim);
		}
#undef VEC
	}
	SLOT("model.norm.weight", &w->out_norm, 1, dim, 0, 0);
	if (!cfg->tied_embd)
		SLOT("lm_head.weight", &w->lm_head, 2, vocab, dim, 0);
#undef SLOT

	/* Arena layout: every array 64-byte aligned. The config bounds keep each
	 * product far below 2^63; the running sum is still checked. */
	bytes = ((size_t)cfg->n_layers * sizeof(*lw) + 63) & ~(size_t)63;
	for (size_t i = 0; i < n_slots; i++) {
		uint64_t numel = (uint64_t)slots[i].shape[0] * (uint64_t)(slots[i].n_dims == 2 ? slots[i].shape[1] : 1);
		uint64_t nb = (numel * sizeof(float) + 63) & ~(uint64_t)63;
		if (nb > SIZE_MAX - bytes) {
			rc = sw_errf(err, SW_ENOMEM, "%s: weights do not fit in the address space", dir);
			goto out_free_weights;
		}
		slots[i].off = bytes;
		bytes += nb;
	}
	if (posix_memalign(&w->arena, 64, bytes ? bytes : 64)) {
		w->arena = NULL;
		rc = sw_errf(err, SW_ENOMEM, "%s: cannot allocate %zu bytes for f32 weights", dir, bytes);
		goto out_free_weights;
	}
	w->arena_bytes = bytes;
	for (size_t i = 0; i < n_slots; i++)
		*slots[i].dst = (float *)((char *)w->arena + slots[i].off);
	for (size_t i = 0; i < n_slots; i++)
		if ((rc = load_slot(c, cfg, &slots[i], err)))
			goto out_free_weights;
	if (cfg->tied_embd)
		w->lm_head = w->tok_embd;
	w->layers = w->arena;
	memcpy(w->layers, lw, (size_t)cfg->n_layers * sizeof(*lw));
	rt_load_note(dir, &cost);
	rc = 0;
	goto out_free_slots;

out_free_weights:
	free(w->arena);
	memset(w, 0, sizeof(*w));
out_free_slots:
	free(slots);
	free(lw);
out_free_ckpt:
	safetensors_ckpt_free(c);
	return rc;
}

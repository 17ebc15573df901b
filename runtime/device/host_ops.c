/* Native host ops (host_ops.h): a registry from op type to an adapter over
 * kernels/ref and the runtime's host specification. Each adapter reads the
 * same arguments, in the same order, as the kernel's template declares
 * (templates/<op>.cu.tmpl is the interface; its header comment the meaning),
 * so one resolved rt_op record runs on either side of the host backend.
 * Numerics follow the references, not the kernels' float order: native and
 * emulate agree on integers exactly and on floats to rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine_state.h"
#include "formats/gguf.h"
#include "host_attn.h"
#include "host_gemm.h"
#include "host_ops.h"
#include "kernels/ref/ref.h"
#include "decode/sampler.h"
#include "decode/tree.h"
#include "decode/tree_verify.h"

long long rt_op_param_i(const rt_op *op, const char *name, long long def)
{
	const rt_kernel_info *k = op->kinfo;
	for (int i = 0; k && i < k->n_params; i++)
		if (!strcmp(k->params[i].name, name))
			return k->params[i].i;
	return def;
}

double rt_op_param_f(const rt_op *op, const char *name, double def)
{
	const rt_kernel_info *k = op->kinfo;
	for (int i = 0; k && i < k->n_params; i++)
		if (!strcmp(k->params[i].name, name))
			return k->params[i].f;
	return def;
}

#define ARG(op, i, type) ((type)(uintptr_t)(op)->argval[i])
#define PI_(name) rt_op_param_i(op, name, 0)

static inline float from16(uint16_t h, int is_f16)
{
	return is_f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
}

static inline uint16_t to16(float f, int is_f16)
{
	return is_f16 ? gguf_f32_to_f16(f) : gguf_f32_to_bf16(f);
}

/* (y, s, x, r, w): s = x + r, y = rmsnorm(s) * w; rows = grid.x */
static int op_rmsnorm_residual(const rt_op *op, sw_err *err)
{
	float *y = ARG(op, 0, float *), *s = ARG(op, 1, float *);
	const float *x = ARG(op, 2, const float *), *r = ARG(op, 3, const float *);
	const float *w = ARG(op, 4, const float *);
	const int D = (int)PI_("DIM"), T = (int)op->grid[0];
	const float eps = (float)rt_op_param_f(op, "EPS", 1e-5);
	for (int t = 0; t < T; t++) {
		size_t o = (size_t)t * D;
		ref_add(s + o, x + o, r + o, (size_t)D);
		ref_rmsnorm(y + o, s + o, w, 1, D, eps);
	}
	return 0;
}

/* (dst, src): MODE 0 f32->bf16, 1 f32->f16, 2 bf16->f32, 3 f16->f32 */
static int op_cast(const rt_op *op, sw_err *err)
{
	const long long N = PI_("N"), mode = PI_("MODE");
	/* vectorised, bit for bit gguf_f32_to_f16/bf16 and back (host_gemm.h) */
	if (mode <= 1)
		hg_from_f32(ARG(op, 0, uint16_t *), ARG(op, 1, const float *), N, mode == 0);
	else
		hg_to_f32(ARG(op, 0, float *), ARG(op, 1, const uint16_t *), N, mode == 2);
	return 0;
}

/* (x, pos, inv_freq); rows = grid.x */
static int op_rope(const rt_op *op, sw_err *err)
{
	ref_rope(ARG(op, 0, float *), ARG(op, 1, const int32_t *), (int)op->grid[0],
	         (int)PI_("N_HEADS"), (int)PI_("HEAD_DIM"), (int)PI_("ROT_DIM"),
	         ARG(op, 2, const float *));
	return 0;
}

/* (y, gate, up); rows = grid.y */
static int op_swiglu(const rt_op *op, sw_err *err)
{
	ref_swiglu(ARG(op, 0, float *), ARG(op, 1, const float *), ARG(op, 2, const float *),
	           (size_t)PI_("FFN") * op->grid[1]);
	return 0;
}

/* Tree attention, exactly (no splits). _part (part_o, part_ml, q, k, v,
 * ctx_len) writes the finished fp32 rows (T, N_HEADS, HEAD_DIM) into part_o;
 * _merge (out, part_o, part_ml, ctx_len) rounds them into the 16-bit out.
 * The split/merge is the kernel's business; the pair's result is the same. */
static int op_tree_attention(const rt_op *op, sw_err *err)
{
	const int is_f16 = (int)PI_("IS_F16"), T = (int)PI_("T"), nb = (int)PI_("N_BLK");
	const int H = (int)PI_("N_HEADS"), KH = (int)PI_("N_KV_HEADS"), hd = (int)PI_("HEAD_DIM");
	const int mw = (int)PI_("MASK_WORDS"), masked = (int)PI_("MASKED");
	const bool merge = strstr(op->entry, "_merge") != NULL;

	if (merge) {
		uint16_t *out = ARG(op, 0, uint16_t *);
		const float *po = ARG(op, 1, const float *);
		hg_from_f32(out, po, (int64_t)T * H * hd, !is_f16);
		return 0;
	}
	if (masked && !op->kinfo->mask)
		return sw_errf(err, SW_EINVAL, "%s: masked tree attention without its mask table",
		               op->entry);
	/* the fast host kernel (host_attn.c): K/V widened once per (KV head, key block) */
	const int rc = ha_tree_attention(ARG(op, 0, float *), ARG(op, 2, const uint16_t *),
	                                 ARG(op, 3, const uint16_t *), ARG(op, 4, const uint16_t *), T,
	                                 *ARG(op, 5, const int32_t *), nb, H, KH, hd,
	                                 masked ? op->kinfo->mask : NULL, mw, is_f16, HG_PATH_AUTO, 0);
	return rc ? sw_errf(err, rc, "%s: tree attention failed (out of memory?)", op->entry) : 0;
}

/* (probs, logits); rows = grid.x */
static int op_logits_process(const rt_op *op, sw_err *err)
{
	const int V = (int)PI_("V");
	rt_sampling s = {.temperature = (float)rt_op_param_f(op, "TEMP", 1.0),
	                 .top_k = (int)PI_("TOP_K"), .top_p = (float)rt_op_param_f(op, "TOP_P", 1.0)};
	int *idx = malloc(sizeof(*idx) * (size_t)V);
	if (!idx)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", op->entry);
	float *probs = ARG(op, 0, float *);
	const float *logits = ARG(op, 1, const float *);
	for (unsigned r = 0; r < op->grid[0]; r++)
		rt_probs(probs + (size_t)r * V, logits + (size_t)r * V, V, &s, idx);
	free(idx);
	return 0;
}

/* (tok, q, tree, seed, iter): nodes LEVEL_BEGIN .. LEVEL_BEGIN + grid.x - 1 */
static int op_tree_expand(const rt_op *op, sw_err *err)
{
	const int N = (int)PI_("N_NODES"), V = (int)PI_("V"), rule = (int)PI_("RULE");
	const int l0 = (int)PI_("LEVEL_BEGIN");
	int32_t *tok = ARG(op, 0, int32_t *);
	const float *q = ARG(op, 1, const float *);
	const int32_t *tree = ARG(op, 2, const int32_t *);
	const uint64_t seed = op->argval[3];
	const uint32_t iter = *ARG(op, 4, const uint32_t *);
	for (int u = l0; u < l0 + (int)op->grid[0]; u++) {
		int32_t ch[GEN_TREE_MAX_NODES];
		const int k = tree[N + u];
		if (!k)
			continue;
		int rc = rt_expand_node(rule, q + (size_t)u * V, V, k, seed, iter, (uint32_t)u, ch, NULL,
		                        NULL);
		if (rc)
			return sw_errf(err, rc, "%s: expansion of node %d failed", op->entry, u);
		for (int i = 0; i < k; i++)
			tok[tree[3 * N + tree[2 * N + u] + i]] = ch[i];
	}
	return 0;
}

/* The tree behind a device tree table (parent row), via its paths. */
static int tree_from_table(const int32_t *tb, int N, gen_tree *t, sw_err *err)
{
	int path[GEN_TREE_MAX_NODES][GEN_TREE_MAX_DEPTH + 1], len[GEN_TREE_MAX_NODES];
	const int *paths[GEN_TREE_MAX_NODES];
	if (N < 1 || N > GEN_TREE_MAX_NODES)
		return sw_errf(err, SW_EINVAL, "tree table: %d nodes, expected 1..%d", N,
		               GEN_TREE_MAX_NODES);
	len[0] = 0;
	for (int i = 1; i < N; i++) {
		int p = tb[i], r = -1;
		if (p < 0 || p >= i)
			return sw_errf(err, SW_EINVAL, "tree table: node %d has parent %d", i, p);
		for (int c = 0; c < tb[N + p]; c++)
			if (tb[3 * N + tb[2 * N + p] + c] == i)
				r = c;
		if (r < 0 || len[p] >= GEN_TREE_MAX_DEPTH)
			return sw_errf(err, SW_EINVAL, "tree table: node %d not among its parent's children",
			               i);
		memcpy(path[i], path[p], sizeof(int) * (size_t)len[p]);
		path[i][len[p]] = r;
		len[i] = len[p] + 1;
		paths[i - 1] = path[i];
	}
	return gen_tree_from_paths(paths, len + 1, N - 1, "engine", t, err);
}

/* (out_path, out_tok, counts, tree, tok, p, q, scratch, seed, iter) */
static int op_verify(const rt_op *op, sw_err *err)
{
	const int N = (int)PI_("N_NODES"), V = (int)PI_("V"), method = (int)PI_("METHOD");
	int32_t *path = ARG(op, 0, int32_t *), *otok = ARG(op, 1, int32_t *);
	int32_t *counts = ARG(op, 2, int32_t *);
	const int32_t *tb = ARG(op, 3, const int32_t *), *tok = ARG(op, 4, const int32_t *);
	const float *p = ARG(op, 5, const float *), *q = ARG(op, 6, const float *);
	float *scratch = ARG(op, 7, float *);
	const uint64_t seed = op->argval[8];
	const uint32_t iter = *ARG(op, 9, const uint32_t *);
	if (method > RT_VERIFY_ONEHOT)
		return sw_errf(err, SW_ENOTSUP, "%s: METHOD %d has no native op (chain keying)",
		               op->entry, method);
	gen_tree *t = malloc(sizeof(*t));
	if (!t)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", op->entry);
	int rc = tree_from_table(tb, N, t, err);
	rt_tree_result res;
	if (!rc && (rc = rt_verify_tree(t, method, tok, p, q, V, seed, iter, &res, scratch)))
		rc = sw_errf(err, rc, "%s: verification failed (a token outside [0, %d)?)", op->entry, V);
	free(t);
	if (rc)
		return rc;
	for (int i = 0; i < res.n_path; i++)
		path[i] = res.path[i];
	for (int i = 1; i < res.n_path; i++)
		otok[i - 1] = tok[res.path[i]];
	otok[res.n_path - 1] = res.final;
	counts[0] = res.n_path - 1;
	counts[1] = res.n_path;
	counts[2] = res.final;
	counts[3] += res.n_path - 1;
	counts[4] += res.n_path - 1;
	return 0;
}

/* (k, v, keep, n_acc, len, done): the accepted rows len + keep[i] -> len + i
 * in every layer, then len += n (kv_commit.cu.tmpl) */
static int op_kv_commit(const rt_op *op, sw_err *err)
{
	const int NL = (int)PI_("N_LAYERS"), MC = (int)PI_("MAX_CTX");
	const size_t row = (size_t)PI_("ROW_VEC") * 16;
	char *k = ARG(op, 0, char *), *v = ARG(op, 1, char *);
	const int32_t *keep = ARG(op, 2, const int32_t *);
	const int n = *ARG(op, 3, const int32_t *);
	int32_t *len = ARG(op, 4, int32_t *);
	for (int w = 0; w < 2; w++)
		for (int l = 0; l < NL; l++) {
			char *c = (w ? v : k) + ((size_t)l * MC + (size_t)*len) * row;
			for (int i = 0; i < n; i++)
				if (keep[i] != i)
					memmove(c + (size_t)i * row, c + (size_t)keep[i] * row, row);
		}
	*len += n;
	return 0;
}

/* (y, table16, tok, err); rows = grid.x */
static int op_embedding16(const rt_op *op, sw_err *err)
{
	if (ref_embedding16(ARG(op, 0, float *), ARG(op, 1, const uint16_t *),
	                    ARG(op, 2, const int32_t *), (int)op->grid[0], (int)PI_("DIM"),
	                    (int)PI_("N_ROWS"), (int)PI_("IS_F16"))) {
		int32_t *e = ARG(op, 3, int32_t *);
		*e = *e > 1 ? *e : 1; /* as the kernel's atomic max */
	}
	return 0;
}

/* (kc, vc, k, v, len): rows into the 16-bit cache at slot len + ROW0 + r */
static int op_kv_store(const rt_op *op, sw_err *err)
{
	ref_kv_store(ARG(op, 0, uint16_t *), ARG(op, 1, uint16_t *), ARG(op, 2, const float *),
	             ARG(op, 3, const float *), *ARG(op, 4, const int32_t *), (int)PI_("ROWS"),
	             (int)PI_("KVD"), (int)PI_("ROW0"), (int)PI_("MAX_CTX"), (int)PI_("IS_F16"));
	return 0;
}

/* (state, iter, tree_tokens, pos, tokens, tree_table, counts, accept_path,
 * emitted, hist): the engine's bookkeeping (runtime/engine_state.h) */
static int op_step(const rt_op *op, sw_err *err)
{
	ref_step((int)PI_("MODE"), (int)PI_("N_NODES"), (int)PI_("RING"), (int)PI_("MAX_CTX"),
	         (int)PI_("HAS_HIST"), ARG(op, 0, int32_t *), ARG(op, 1, int32_t *),
	         ARG(op, 2, int32_t *), ARG(op, 3, int32_t *), ARG(op, 4, int32_t *),
	         ARG(op, 5, const int32_t *), ARG(op, 6, int32_t *), ARG(op, 7, const int32_t *),
	         ARG(op, 8, const int32_t *), ARG(op, 9, int32_t *));
	return 0;
}

/* (out, hist, state): prompt lookup over hist[0 .. TLEN] */
static int op_ngram_lookup(const rt_op *op, sw_err *err)
{
	const int32_t *state = ARG(op, 2, const int32_t *);
	ref_ngram_lookup(ARG(op, 0, int32_t *), ARG(op, 1, const int32_t *), state[RT_ST_TLEN] + 1,
	                 (int)PI_("MIN_N"), (int)PI_("MAX_N"), (int)PI_("N_DRAFT"));
	return 0;
}

/* (go, cum, tree_tokens, draft_probs, tree_table): SpecDec++ stop decision
 * after draft level LEVEL of a chain */
static int op_adapt(const rt_op *op, sw_err *err)
{
	ref_adapt((int)PI_("LEVEL"), (int)PI_("N_NODES"), (int)PI_("DEPTH"), (int)PI_("V"),
	          (int)PI_("MIN_STEPS"), (int)PI_("MAX_STEPS"), (float)rt_op_param_f(op, "H", 0.0),
	          ARG(op, 0, int32_t *), ARG(op, 1, float *), ARG(op, 2, int32_t *),
	          ARG(op, 3, const float *));
	return 0;
}

typedef struct host_op_entry {
	const char *op;
	int (*run)(const rt_op *op, sw_err *err);
} host_op_entry;

static const host_op_entry registry[] = {
	{"rmsnorm_residual", op_rmsnorm_residual},
	{"cast", op_cast},
	{"rope", op_rope},
	{"swiglu", op_swiglu},
	{"tree_attention", op_tree_attention},
	{"logits_process", op_logits_process},
	{"tree_expand", op_tree_expand},
	{"verify", op_verify},
	{"kv_commit", op_kv_commit},
	{"embedding16", op_embedding16},
	{"kv_store", op_kv_store},
	{"step", op_step},
	{"ngram_lookup", op_ngram_lookup},
	{"adapt", op_adapt},
};

static const host_op_entry *lookup(const rt_op *op)
{
	for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
		if (!strcmp(registry[i].op, op->op))
			return &registry[i];
	return NULL;
}

bool rt_host_native_supports(const rt_op *op)
{
	return op->kind == RT_OP_KERNEL && lookup(op) != NULL;
}

int rt_host_native_run(const rt_op *op, sw_err *err)
{
	const host_op_entry *e = lookup(op);
	if (!e)
		return sw_errf(err, SW_ENOTSUP, "host native: no implementation of op type \"%s\" (%s)",
		               op->op, op->name);
	return e->run(op, err);
}

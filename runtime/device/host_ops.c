/* Native host ops (host_ops.h): a registry from op type to a thin adapter
 * over the op's specification, kernels/ref/<op>.c (named like its template,
 * templates/<op>.cu.tmpl). Each adapter reads the same arguments, in the
 * same order, as the kernel's template declares (the template is the
 * interface; its header comment the meaning), takes the template constants
 * from the kernel's parameters, and makes one kernels/ref call, so one
 * resolved rt_op record runs on either side of the host backend. Numerics
 * follow the references, not the kernels' float order: native and emulate
 * agree on integers exactly and on floats to rounding.
 *
 * Adding an op: its row in kernels/ops.def, then the compiler asks for its
 * op_<name> below. A faster host implementation of an op: its adapter
 * calls it instead of the reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_argmax.h"
#include "host_attn.h"
#include "host_gemm.h"
#include "host_ops.h"
#include "host_rowops.h"
#include "host_verify.h"
#include "core/wformat.h"
#include "kernels/engine_state.h"
#include "kernels/ops.h"
#include "kernels/ref/ref.h"

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
#define PF_(name, def) rt_op_param_f(op, name, def)

/* Rows inside a rows region (device.h rt_op.rows_live): a row count r
 * equal to the region's planned rows becomes the live rows; an element
 * count of whole planned rows (r * X) becomes the live rows' share. Any
 * other count (an op not shaped by the tree) runs as planned. */
static long long live_rows(const rt_op *op, long long r)
{
	return op->rows_live && r == op->rows_full ? op->rows_live : r;
}

static long long live_elems(const rt_op *op, long long n)
{
	return op->rows_live && n % op->rows_full == 0 ? n / op->rows_full * op->rows_live : n;
}

/* A kernels/ref refusal as an error of this op. */
static int refused(const rt_op *op, const char *why, sw_err *err)
{
	return sw_errf(err, SW_EINVAL, "%s: %s", op->entry, why ? why : "invalid arguments");
}

/* The Philox seed the sampling kernels read from device memory: words
 * RT_SP_SEED_LO and RT_SP_SEED_HI of the engine's "sampling" buffer. */
static uint64_t seed_of(const uint32_t *w)
{
	return (uint64_t)w[0] | (uint64_t)w[1] << 32;
}

/* (y, s, x, r, w); rows = grid.x: ref_rmsnorm_residual bit for bit, the
 * rows' sums of squares as independent chains (host_rowops.h) */
static int op_rmsnorm_residual(const rt_op *op, sw_err *err)
{
	hr_rmsnorm_residual(ARG(op, 0, float *), ARG(op, 1, float *), ARG(op, 2, const float *),
	                    ARG(op, 3, const float *), ARG(op, 4, const float *),
	                    (int)live_rows(op, op->grid[0]), (int)PI_("DIM"), (float)PF_("EPS", 1e-5),
	                    HG_PATH_AUTO);
	return 0;
}

/* (dst, src) */
static int op_cast(const rt_op *op, sw_err *err)
{
	const long long N = live_elems(op, PI_("N")), mode = PI_("MODE");
	if (mode < 0 || mode > 3)
		return refused(op, "cast MODE outside 0..3", err);
	/* vectorised, bit for bit kernels/ref cast (host_gemm.h; test_host_gemm) */
	if (mode <= 1)
		hg_from_f32(ARG(op, 0, uint16_t *), ARG(op, 1, const float *), N, mode == 0);
	else
		hg_to_f32(ARG(op, 0, float *), ARG(op, 1, const uint16_t *), N, mode == 2);
	return 0;
}

/* (dst, n, seed, buf, mode, a_bits, c_bits): scalars by value */
static int op_fill_random(const rt_op *op, sw_err *err)
{
	float a, c;
	const uint32_t ab = (uint32_t)op->argval[5], cb = (uint32_t)op->argval[6];
	memcpy(&a, &ab, 4);
	memcpy(&c, &cb, 4);
	if (ref_fill_random(ARG(op, 0, void *), op->argval[1], (int)op->argval[4], op->argval[2],
	                    (uint32_t)op->argval[3], a, c))
		return refused(op, "fill_random mode outside 0..2", err);
	return 0;
}

/* The rotation angles' cos and sin of one position: every layer's rope_q
 * and rope_k of a step rotate by the same ones, so they are kept (per
 * thread, ROPE_CACHE_POS positions by pos modulo it, a tree's consecutive
 * ones side by side), keyed by the position and the inv_freq values. */
#define ROPE_CACHE_HALF 128
#define ROPE_CACHE_POS 16
typedef struct rope_cs {
	int half; /* 0: empty */
	int32_t pos;
	float inv_freq[ROPE_CACHE_HALF];
	double c[ROPE_CACHE_HALF], s[ROPE_CACHE_HALF];
} rope_cs;

static const rope_cs *rope_angles(rope_cs *cs, int32_t pos, const float *inv_freq, int half)
{
	if (cs->half != half || cs->pos != pos ||
	    memcmp(cs->inv_freq, inv_freq, sizeof(*inv_freq) * (size_t)half)) {
		for (int i = 0; i < half; i++) { /* ref_rope's angle, cos and sin */
			const double a = (double)pos * inv_freq[i];
			cs->c[i] = cos(a);
			cs->s[i] = sin(a);
		}
		memcpy(cs->inv_freq, inv_freq, sizeof(*inv_freq) * (size_t)half);
		cs->pos = pos;
		cs->half = half;
	}
	return cs;
}

/* (x, pos, inv_freq); rows = grid.x: ref_rope, the same double angle, cos,
 * sin and rotation (hr_rope_rotate, four pairs a step on AVX2), with each
 * position's cos and sin computed once a step instead of once a layer and
 * op (test_host_ops: bit for bit ref_rope) */
static int op_rope(const rt_op *op, sw_err *err)
{
	static _Thread_local rope_cs cache[ROPE_CACHE_POS];
	float *x = ARG(op, 0, float *);
	const int32_t *pos = ARG(op, 1, const int32_t *);
	const float *inv_freq = ARG(op, 2, const float *);
	const int T = (int)live_rows(op, op->grid[0]), H = (int)PI_("N_HEADS");
	const int hd = (int)PI_("HEAD_DIM"), half = (int)PI_("ROT_DIM") / 2;
	if (half > ROPE_CACHE_HALF) {
		ref_rope(x, pos, T, H, hd, 2 * half, inv_freq);
		return 0;
	}
	for (int t = 0; t < T; t++) {
		float *xt = x + (size_t)t * H * hd;
		const rope_cs *cs = rope_angles(&cache[(uint32_t)pos[t] % ROPE_CACHE_POS], pos[t],
		                                inv_freq, half);
		hr_rope_rotate(xt, H, hd, half, cs->c, cs->s, HG_PATH_AUTO); /* host_rowops.h */
	}
	return 0;
}

/* (y16, s, x, r, w, a8); rows = grid.x: the unfused ops' host code one
 * after another (op_rmsnorm_residual's hr_rmsnorm_residual, op_cast's
 * hg_from_f32), so the same bits; A8: ref_quant_a8 of the 16-bit rows (read
 * by no host GEMM: they round their fp16 input themselves) */
static int op_rmsnorm_cast(const rt_op *op, sw_err *err)
{
	const int T = (int)live_rows(op, op->grid[0]), D = (int)PI_("DIM");
	float *tmp = hg_thread_scratch(sizeof(*tmp) * (size_t)T * (size_t)D);
	if (!tmp && T > 0)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", op->entry);
	uint16_t *y = ARG(op, 0, uint16_t *);
	hr_rmsnorm_residual(tmp, ARG(op, 1, float *), ARG(op, 2, const float *),
	                    ARG(op, 3, const float *), ARG(op, 4, const float *), T, D,
	                    (float)PF_("EPS", 1e-5), HG_PATH_AUTO);
	hg_from_f32(y, tmp, (int64_t)T * D, !PI_("IS_F16"));
	if (PI_("A8") && ref_quant_a8(ARG(op, 5, void *), y, T, D))
		return refused(op, "rmsnorm_cast: A8 with DIM not a multiple of 32", err);
	return 0;
}

/* (y16, gate, up, a8); rows = grid.y: op_swiglu's host code (hr_swiglu, or
 * ref_geglu_tanh for ACT 1) row by row over the LD-strided rows, then
 * op_cast's hg_from_f32: the unfused ops' bits; A8 as op_rmsnorm_cast */
static int op_swiglu_cast(const rt_op *op, sw_err *err)
{
	const int T = (int)live_rows(op, op->grid[1]), F = (int)PI_("FFN");
	const long long ld = PI_("LD"), act = PI_("ACT");
	if (act < 0 || act > 1 || ld < F)
		return refused(op, "swiglu_cast: ACT outside 0..1 or LD below FFN", err);
	float *tmp = hg_thread_scratch(sizeof(*tmp) * (size_t)F);
	if (!tmp)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", op->entry);
	uint16_t *y = ARG(op, 0, uint16_t *);
	const float *g = ARG(op, 1, const float *), *u = ARG(op, 2, const float *);
	for (int t = 0; t < T; t++) {
		if (act)
			ref_geglu_tanh(tmp, g + t * ld, u + t * ld, (size_t)F);
		else
			hr_swiglu(tmp, g + t * ld, u + t * ld, (size_t)F, HG_PATH_AUTO);
		hg_from_f32(y + (int64_t)t * F, tmp, F, !PI_("IS_F16"));
	}
	if (PI_("A8") && ref_quant_a8(ARG(op, 3, void *), y, T, F))
		return refused(op, "swiglu_cast: A8 with FFN not a multiple of 32", err);
	return 0;
}

/* (x, pos, inv_freq, b, w); rows = grid.x; b, w, inv_freq read only when
 * BIAS, NORM, ROPE say so; SCALE (Gemma 3's q; 1 when absent) */
static int op_head_prep(const rt_op *op, sw_err *err)
{
	(void)err;
	ref_head_prep(ARG(op, 0, float *), ARG(op, 1, const int32_t *),
	              (int)live_rows(op, op->grid[0]), (int)PI_("N_HEADS"), (int)PI_("HEAD_DIM"),
	              PI_("BIAS") ? ARG(op, 3, const float *) : NULL,
	              PI_("NORM") ? ARG(op, 4, const float *) : NULL, (float)PF_("EPS", 1e-6),
	              (int)PI_("ROPE"), ARG(op, 2, const float *), (float)PF_("SCALE", 1.0));
	return 0;
}

/* (q16, kc, vc, q, k, v, pos, inv_freq, len, wq, wk, wv); rows = grid.x:
 * on a copy of each row, the unfused ops' host code (op_rope's cached
 * angles and hr_rope_rotate for ROPE 1, ref_head_prep for the rest; v's
 * bias by ref_add, as ref_head_prep adds it), then op_cast's and
 * op_kv_store's hg_from_f32: the unfused ops' bits (ref_qkv_rope's) */
static int op_qkv_rope(const rt_op *op, sw_err *err)
{
	static _Thread_local rope_cs cache[ROPE_CACHE_POS];
	const int T = (int)live_rows(op, op->grid[0]), H = (int)PI_("N_HEADS");
	const int KH = (int)PI_("N_KV_HEADS"), hd = (int)PI_("HEAD_DIM"), half = hd / 2;
	const int bias = (int)PI_("BIAS"), norm = (int)PI_("NORM"), rope = (int)PI_("ROPE");
	const float eps = (float)PF_("EPS", 1e-6), scale = (float)PF_("SCALE", 1.0);
	const int64_t qd = (int64_t)H * hd, kvd = (int64_t)KH * hd;
	const int64_t ldq = PI_("FUSED") ? qd + 2 * kvd : qd, ldkv = PI_("FUSED") ? qd + 2 * kvd : kvd;
	const int bf16 = !PI_("IS_F16");
	if (rope < 0 || rope > 2 || (rope && hd % 2) || (rope == 1 && (bias || norm || scale != 1.0f)) ||
	    (bias && norm))
		return refused(op, "qkv_rope: ROPE outside 0..2, or steps it does not take together", err);
	uint16_t *q16 = ARG(op, 0, uint16_t *), *kc = ARG(op, 1, uint16_t *);
	uint16_t *vc = ARG(op, 2, uint16_t *);
	const float *q = ARG(op, 3, const float *), *k = ARG(op, 4, const float *);
	const float *v = ARG(op, 5, const float *), *inv_freq = ARG(op, 7, const float *);
	const float *wq = ARG(op, 9, const float *), *wk = ARG(op, 10, const float *);
	const float *wv = ARG(op, 11, const float *);
	const int32_t *pos = ARG(op, 6, const int32_t *);
	const long long len = *ARG(op, 8, const int32_t *);
	const long long room = PI_("MAX_CTX") - len - PI_("ROW0");
	float *tq = hg_thread_scratch(sizeof(*tq) * (size_t)(qd + kvd));
	if (!tq)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", op->entry);
	float *tk = tq + qd;
	for (int t = 0; t < T; t++) {
		memcpy(tq, q + t * ldq, sizeof(*tq) * (size_t)qd);
		memcpy(tk, k + t * ldkv, sizeof(*tk) * (size_t)kvd);
		if (rope == 1 && half <= ROPE_CACHE_HALF) {
			const rope_cs *cs = rope_angles(&cache[(uint32_t)pos[t] % ROPE_CACHE_POS], pos[t],
			                                inv_freq, half);
			hr_rope_rotate(tq, H, hd, half, cs->c, cs->s, HG_PATH_AUTO);
			hr_rope_rotate(tk, KH, hd, half, cs->c, cs->s, HG_PATH_AUTO);
		} else if (rope == 1) {
			ref_rope(tq, pos + t, 1, H, hd, hd, inv_freq);
			ref_rope(tk, pos + t, 1, KH, hd, hd, inv_freq);
		} else {
			ref_head_prep(tq, pos + t, 1, H, hd, bias ? wq : NULL, norm ? wq : NULL, eps,
			              rope == 2, inv_freq, scale);
			ref_head_prep(tk, pos + t, 1, KH, hd, bias ? wk : NULL, norm ? wk : NULL, eps,
			              rope == 2, inv_freq, 1.0f);
		}
		hg_from_f32(q16 + t * qd, tq, qd, bf16);
		if (t >= room)
			continue; /* past the cache: as kv_store, never written */
		memcpy(tq, v + t * ldkv, sizeof(*tq) * (size_t)kvd);
		if (bias)
			ref_add(tq, tq, wv, (size_t)kvd);
		hg_from_f32(kc + (len + t) * kvd, tk, kvd, bf16);
		hg_from_f32(vc + (len + t) * kvd, tq, kvd, bf16);
	}
	return 0;
}

/* (y, gate, up); rows = grid.y; ACT 0 (or absent): SwiGLU, 1: GeGLU with
 * the tanh GELU (Gemma) */
static int op_swiglu(const rt_op *op, sw_err *err)
{
	const size_t n = (size_t)PI_("FFN") * (size_t)live_rows(op, op->grid[1]);
	const long long act = PI_("ACT");
	if (act < 0 || act > 1)
		return refused(op, "swiglu ACT outside 0..1", err);
	if (act) /* GeGLU: kernels/ref's, libm's tanhf */
		ref_geglu_tanh(ARG(op, 0, float *), ARG(op, 1, const float *), ARG(op, 2, const float *), n);
	else /* SwiGLU: ref_swiglu's operations with host_exp.h's exp (host_rowops.h) */
		hr_swiglu(ARG(op, 0, float *), ARG(op, 1, const float *), ARG(op, 2, const float *), n,
		          HG_PATH_AUTO);
	return 0;
}

/* _part (part_o, part_ml, q, k, v, ctx_len): the finished fp32 rows (T,
 * N_HEADS, HEAD_DIM) into part_o; _merge (out, part_o, part_ml, ctx_len):
 * them rounded into the 16-bit out. The split/merge is the kernel's
 * business; the pair's result is the same. */
static int op_tree_attention(const rt_op *op, sw_err *err)
{
	/* a rows region: the first T' queries over the first T' tree entries
	 * (queries are the last T of the N_BLK entries: all of them here) */
	const int T0 = (int)PI_("T"), nb0 = (int)PI_("N_BLK");
	const int T = (int)live_rows(op, T0), nb = T0 == nb0 ? T : nb0;
	const int is_f16 = (int)PI_("IS_F16");
	const int H = (int)PI_("N_HEADS"), KH = (int)PI_("N_KV_HEADS"), hd = (int)PI_("HEAD_DIM");

	if (strstr(op->entry, "_merge")) {
		hg_from_f32(ARG(op, 0, uint16_t *), ARG(op, 1, const float *), (int64_t)T * H * hd, !is_f16);
		return 0;
	}
	const bool masked = PI_("MASKED") != 0;
	if (masked && !op->kinfo->mask)
		return sw_errf(err, SW_EINVAL, "%s: masked tree attention without its mask table",
		               op->entry);
	/* the fast host kernel (host_attn.c): K/V widened once per (KV head, key
	 * block); test_host_attn holds it to kernels/ref tree_attention's bound */
	const int rc = ha_tree_attention_window(ARG(op, 0, float *), ARG(op, 2, const uint16_t *),
	                                        ARG(op, 3, const uint16_t *),
	                                        ARG(op, 4, const uint16_t *), T,
	                                        *ARG(op, 5, const int32_t *), nb, H, KH, hd,
	                                        masked ? op->kinfo->mask : NULL,
	                                        (int)PI_("MASK_WORDS"), is_f16, (int)PI_("WINDOW"),
	                                        HG_PATH_AUTO, 0);
	return rc ? sw_errf(err, rc, "%s: tree attention failed (out of memory?)", op->entry) : 0;
}

/* (probs, logits, params, scratch); rows = grid.y (grid.x: the kernel's
 * phases x slices; the scratch is its own, not read here); params: temperature (f32 bits),
 * top-k, top-p (f32 bits), read at run time (kernels/engine_state.h);
 * greedy: a one-hot at the argmax; T > 0 without truncation:
 * hr_softmax_temp; with top-k / top-p hr_logits_truncate (host_rowops.h) */
static int op_logits_process(const rt_op *op, sw_err *err)
{
	const int V = (int)PI_("V");
	const int32_t *prm = ARG(op, 2, const int32_t *);
	float temp, top_p;
	memcpy(&temp, &prm[0], sizeof(temp));
	memcpy(&top_p, &prm[2], sizeof(top_p));
	const int T = (int)live_rows(op, op->grid[1]);
	float *probs = ARG(op, 0, float *);
	const float *logits = ARG(op, 1, const float *);
	if (!(temp > 0.0f)) { /* greedy (NaN too): ref_logits_process_row's one-hot */
		for (int t = 0; t < T; t++) {
			float *p = probs + (size_t)t * V;
			memset(p, 0, sizeof(*p) * (size_t)V);
			p[hg_argmax_row(logits + (size_t)t * V, V, HG_PATH_AUTO)] = 1.0f;
		}
		return 0;
	}
	if (!((prm[1] > 0 && prm[1] < V) || top_p < 1.0f)) { /* no truncation: host_rowops.h's
	                                                       * vectorised softmax */
		for (int t = 0; t < T; t++)
			hr_softmax_temp(probs + (size_t)t * V, logits + (size_t)t * V, (size_t)V, temp,
			                HG_PATH_AUTO);
		return 0;
	}
	int *idx = malloc(sizeof(*idx) * (size_t)V);
	if (!idx)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", op->entry);
	for (int t = 0; t < T; t++) /* the sorted prefix the truncation keeps */
		hr_logits_truncate(probs + (size_t)t * V, logits + (size_t)t * V, V, temp, prm[1], top_p,
		                   idx, HG_PATH_AUTO);
	free(idx);
	return 0;
}

/* (out, x); rows = grid.x */
static int op_argmax(const rt_op *op, sw_err *err)
{
	const int T = (int)live_rows(op, op->grid[0]), N = (int)PI_("N");
	int32_t *out = ARG(op, 0, int32_t *);
	const float *x = ARG(op, 1, const float *);
	for (int t = 0; t < T; t++) /* ref_argmax's rows, vectorised (host_argmax.h) */
		out[t] = hg_argmax_row(x + (size_t)t * N, N, HG_PATH_AUTO);
	return 0;
}

/* (tok, q, tree, seed, iter, ids, scratch): seed = two words (low, high);
 * nodes LEVEL_BEGIN .. LEVEL_BEGIN + grid.y - 1 (grid.x: the kernel's
 * vocabulary slices); Q_BY_DEPTH: q row depth(u) instead of u; MAPPED:
 * entry v of q is id ids[v] (else ids unread); the scratch is the kernel's
 * own (kernels/sample_layout.h), not read here */
static int op_tree_expand(const rt_op *op, sw_err *err)
{
	const char *why = NULL;
	if (ref_tree_expand_map(ARG(op, 0, int32_t *), ARG(op, 1, const float *),
	                        PI_("MAPPED") ? ARG(op, 5, const int32_t *) : NULL,
	                        ARG(op, 2, const int32_t *), seed_of(ARG(op, 3, const uint32_t *)),
	                        *ARG(op, 4, const uint32_t *), (int)PI_("N_NODES"), (int)PI_("V"),
	                        (int)PI_("RULE"), (int)PI_("LEVEL_BEGIN"), (int)op->grid[1],
	                        (int)PI_("Q_BY_DEPTH"), &why))
		return refused(op, why, err);
	return 0;
}

/* (out_path, out_tok, counts, tree, tok, p, q, scratch, seed, iter), seed
 * as for tree_expand; the chain mode (METHOD 5) reads q only with CHAIN_Q
 * (else a one-hot draft); q rows have VQ entries (a draft vocabulary prefix;
 * V when absent), row depth(u) for node u with Q_BY_DEPTH */
static int op_verify(const rt_op *op, sw_err *err)
{
	const int method = (int)PI_("METHOD");
	const bool one_hot = method == REF_VERIFY_CHAIN && !rt_op_param_i(op, "CHAIN_Q", 1);
	const char *why = NULL;
	if (method == REF_VERIFY_GREEDY) { /* the argmax vectorised, same outputs (host_verify.h) */
		if (hv_verify_greedy(ARG(op, 0, int32_t *), ARG(op, 1, int32_t *), ARG(op, 2, int32_t *),
		                     ARG(op, 3, const int32_t *), ARG(op, 4, const int32_t *),
		                     ARG(op, 5, const float *), ARG(op, 6, const float *),
		                     (int)PI_("N_NODES"), (int)PI_("V"),
		                     (int)rt_op_param_i(op, "VQ", PI_("V")), HG_PATH_AUTO, &why))
			return refused(op, why, err);
		return 0;
	}
	if (ref_verify_q(ARG(op, 0, int32_t *), ARG(op, 1, int32_t *), ARG(op, 2, int32_t *),
	                 ARG(op, 3, const int32_t *), ARG(op, 4, const int32_t *),
	                 ARG(op, 5, const float *), one_hot ? NULL : ARG(op, 6, const float *),
	                 ARG(op, 7, float *), seed_of(ARG(op, 8, const uint32_t *)),
	                 *ARG(op, 9, const uint32_t *), (int)PI_("N_NODES"), (int)PI_("V"),
	                 (int)rt_op_param_i(op, "VQ", PI_("V")), method, (int)PI_("Q_BY_DEPTH"), &why))
		return refused(op, why, err);
	return 0;
}

/* (k, v, keep, n_acc, len, done): the accepted rows len + keep[i] -> len + i
 * in every layer, then len += n; done is the kernel's own counter */
static int op_kv_commit(const rt_op *op, sw_err *err)
{
	ref_kv_commit(ARG(op, 0, void *), ARG(op, 1, void *), ARG(op, 2, const int32_t *),
	              *ARG(op, 3, const int32_t *), ARG(op, 4, int32_t *), (int)PI_("N_LAYERS"),
	              (int)PI_("MAX_CTX"), (size_t)PI_("ROW_VEC") * 16);
	return 0;
}

/* (y, table, tok, err); rows = grid.x; an id out of range sets *err to 1 */
static int op_embedding(const rt_op *op, sw_err *err)
{
	if (ref_embedding(ARG(op, 0, float *), ARG(op, 1, const float *), ARG(op, 2, const int32_t *),
	                  (int)live_rows(op, op->grid[0]), (int)PI_("DIM"), (int)PI_("N_ROWS")))
		*ARG(op, 3, int32_t *) = 1;
	return 0;
}

/* (y, table16, tok, err); rows = grid.x; ids in [N_ROWS, N_IDS) embed as
 * zero (an engine built before N_IDS existed has none: N_IDS = N_ROWS);
 * rows times SCALE (Gemma 3's sqrt(dim); 1 when absent) */
static int op_embedding16(const rt_op *op, sw_err *err)
{
	const int n_rows = (int)PI_("N_ROWS");
	if (ref_embedding16(ARG(op, 0, float *), ARG(op, 1, const uint16_t *),
	                    ARG(op, 2, const int32_t *), (int)live_rows(op, op->grid[0]),
	                    (int)PI_("DIM"), n_rows, (int)rt_op_param_i(op, "N_IDS", n_rows),
	                    (int)PI_("IS_F16"), (float)PF_("SCALE", 1.0))) {
		int32_t *e = ARG(op, 3, int32_t *);
		*e = *e > 1 ? *e : 1; /* as the kernel's atomic max */
	}
	return 0;
}

/* (y, table, tok, err): the token rows of a GGUF-typed table, rows times
 * SCALE, ids in [N_ROWS, N_IDS) as zero rows, an id out of range sets *err
 * to 1 (ref_embedding_gguf). The table is the gemv_gguf kernels' planes,
 * or where the device keeps the file's blocks (rt_dev.gguf_blocks: the
 * engine sets op->wtype, runtime/engine/engine.c resolve_one) those
 * blocks, each row dequantized by the format table (core/wformat.h), whose
 * values the planes' dequantization equals bit for bit (the check at bind,
 * runtime/engine/wplanes.h), then scaled as the reference does. */
static int op_embedding_gguf(const rt_op *op, sw_err *err)
{
	float *y = ARG(op, 0, float *);
	const int32_t *tok = ARG(op, 2, const int32_t *);
	const int T = (int)live_rows(op, op->grid[0]), dim = (int)PI_("DIM");
	const int n_rows = (int)PI_("N_ROWS"), n_ids = (int)PI_("N_IDS"), wt = (int)PI_("WTYPE");
	const float scale = (float)PF_("SCALE", 1.0);
	int bad = 0;
	if (op->wtype < 0) {
		bad = ref_embedding_gguf(y, ARG(op, 1, const void *), tok, T, dim, n_rows, n_ids, wt, scale);
		if (bad < 0)
			return refused(op, "embedding_gguf: WTYPE, DIM, N_ROWS or N_IDS outside what the op "
			               "accepts", err);
	} else {
		const uint64_t row_bytes = sw_wformat_nbytes((uint32_t)wt, (uint64_t)dim);
		if (wt != op->wtype || !row_bytes || n_ids < n_rows || !ref_wplanes_block(wt))
			return refused(op, "embedding_gguf: WTYPE, DIM, N_ROWS or N_IDS outside what the op "
			               "accepts", err);
		const char *W = ARG(op, 1, const char *);
		for (int t = 0; t < T; t++) {
			float *dst = y + (size_t)t * dim;
			if (tok[t] < 0 || tok[t] >= n_ids) {
				bad = 1;
				continue;
			}
			if (tok[t] >= n_rows) {
				memset(dst, 0, (size_t)dim * sizeof(*dst));
				continue;
			}
			if (sw_wformat_dequant((uint32_t)wt, W + (size_t)tok[t] * row_bytes, (uint64_t)dim, dst))
				return refused(op, "embedding_gguf: a table type without a dequantizer", err);
			if (scale != 1.0f)
				for (int i = 0; i < dim; i++)
					dst[i] *= scale;
		}
	}
	if (bad) {
		int32_t *e = ARG(op, 3, int32_t *);
		*e = *e > 1 ? *e : 1; /* as the kernel's atomic max */
	}
	return 0;
}

/* (y, tok_embd, mask_embd, blk_tok, root, blk_pos, len, err): the block
 * drafter's B input rows; a token out of range sets *err to 1 */
static int op_block_embed(const rt_op *op, sw_err *err)
{
	if (ref_block_embed(ARG(op, 0, float *), ARG(op, 1, const uint16_t *),
	                    ARG(op, 2, const uint16_t *), ARG(op, 3, int32_t *),
	                    *ARG(op, 4, const int32_t *), ARG(op, 5, int32_t *),
	                    *ARG(op, 6, const int32_t *), (int)PI_("B"), (int)PI_("DIM"),
	                    (int)PI_("N_ROWS"), (int)PI_("IS_F16"), (int)PI_("FIRST"))) {
		int32_t *e = ARG(op, 7, int32_t *);
		*e = *e > 1 ? *e : 1; /* as the kernel's atomic max */
	}
	return 0;
}

/* (taps, h, delta): slot SLOT of ROWS feature rows = h + delta */
static int op_feature_tap(const rt_op *op, sw_err *err)
{
	ref_feature_tap(ARG(op, 0, float *), ARG(op, 1, const float *), ARG(op, 2, const float *),
	                (int)PI_("ROWS"), (int)PI_("DIM"), (int)PI_("N_TAPS"), (int)PI_("SLOT"));
	return 0;
}

/* (blk_tok, probs, seed, iter, d2t): the block drafter's S > 1 step (FINAL
 * 0) or its final Z and draws (FINAL 1); seed as for tree_expand; d2t read
 * only with MAPPED */
static int op_block_unmask(const rt_op *op, sw_err *err)
{
	if (ref_block_unmask_map(ARG(op, 0, int32_t *), ARG(op, 1, float *),
	                         PI_("MAPPED") ? ARG(op, 4, const int32_t *) : NULL, (int)PI_("B"),
	                         (int)PI_("VD"), (int)PI_("PASS"), (int)PI_("STEPS"), (int)PI_("FINAL"),
	                         seed_of(ARG(op, 2, const uint32_t *)), *ARG(op, 3, const uint32_t *)))
		return refused(op, "block_unmask: B, VD, PASS or STEPS outside what the op accepts", err);
	return 0;
}

/* (x2, res, embd, tok, feat, tree, w_in, w_hid): an EAGLE-3 head's layer
 * input; FEAT_TREE 1 reads node LEVEL_BEGIN + r's token and its parent's row
 * of the previous level, as the template does */
static int op_eagle3_in(const rt_op *op, sw_err *err)
{
	const int R = (int)PI_("ROWS"), D = (int)PI_("DIM"), tree_mode = (int)PI_("FEAT_TREE");
	const int lb = (int)PI_("LEVEL_BEGIN"), pb = (int)PI_("PREV_BEGIN");
	if (R < 1 || D < 1)
		return refused(op, "eagle3_in: ROWS or DIM outside what the op accepts", err);
	const int32_t *tree = ARG(op, 5, const int32_t *), *tok = ARG(op, 3, const int32_t *);
	float *tmp = malloc(2 * (size_t)D * sizeof(*tmp) + (size_t)R * sizeof(int32_t));
	if (!tmp)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	int32_t *frow = (int32_t *)(tmp + 2 * (size_t)D);
	for (int r = 0; r < R && tree_mode; r++)
		frow[r] = tree[lb + r] - pb;
	int rc = ref_eagle3_in(ARG(op, 0, uint16_t *), ARG(op, 1, float *), ARG(op, 2, const uint16_t *),
	                       tree_mode ? tok + lb : tok, ARG(op, 4, const float *), tree_mode ? frow : NULL,
	                       ARG(op, 6, const float *), ARG(op, 7, const float *), R, D, (int)PI_("N_IDS"),
	                       (int)PI_("N_FEAT"), (int)PI_("IS_F16"), (int)PI_("NORM_BEFORE_RES"),
	                       (float)PF_("EPS", 1e-5), tmp);
	free(tmp);
	return rc ? refused(op, "eagle3_in: a feature row outside [0, N_FEAT)", err) : 0;
}

/* (out, q, t2d): a mapped draft vocabulary's q over the target's ids */
static int op_q_target(const rt_op *op, sw_err *err)
{
	if (ref_q_target(ARG(op, 0, float *), ARG(op, 1, const float *), ARG(op, 2, const int32_t *),
	                 (int)PI_("DEPTHS"), (int)PI_("VD"), (int)PI_("V")))
		return refused(op, "q_target: DEPTHS, VD, V or a t2d entry outside what the op accepts", err);
	return 0;
}

/* (kc, vc, k, v, len): ref_kv_store's rows (row r to slot len + r, the rows
 * from len + ROW0 + r = MAX_CTX on dropped), contiguous in the cache, each
 * converted as the cast op converts (hg_from_f32: bit for bit kernels/half.h's
 * sw_f32_to_half, NaN included; test_host_ops) */
static int op_kv_store(const rt_op *op, sw_err *err)
{
	const long long len = *ARG(op, 4, const int32_t *), rows = live_rows(op, PI_("ROWS"));
	const long long kvd = PI_("KVD"), room = PI_("MAX_CTX") - len - PI_("ROW0");
	const long long n = room < 0 ? 0 : room < rows ? room : rows;
	const bool bf16 = !PI_("IS_F16");
	if (n > 0 && kvd > 0) {
		hg_from_f32(ARG(op, 0, uint16_t *) + len * kvd, ARG(op, 2, const float *), n * kvd, bf16);
		hg_from_f32(ARG(op, 1, uint16_t *) + len * kvd, ARG(op, 3, const float *), n * kvd, bf16);
	}
	return 0;
}

/* (state, iter, tree_tokens, pos, tokens, tree_table, counts, accept_path,
 * emitted, hist): the engine's bookkeeping (kernels/engine_state.h) */
static int op_step(const rt_op *op, sw_err *err)
{
	ref_step((int)PI_("MODE"), (int)PI_("N_NODES"), (int)PI_("RING"), (int)PI_("MAX_CTX"),
	         (int)PI_("HAS_HIST"), ARG(op, 0, int32_t *), ARG(op, 1, int32_t *),
	         ARG(op, 2, int32_t *), ARG(op, 3, int32_t *), ARG(op, 4, int32_t *),
	         ARG(op, 5, const int32_t *), ARG(op, 6, int32_t *), ARG(op, 7, const int32_t *),
	         ARG(op, 8, const int32_t *), ARG(op, 9, int32_t *));
	return 0;
}

/* (out, hist, state, info): prompt lookup over hist[0 .. TLEN] */
static int op_ngram_lookup(const rt_op *op, sw_err *err)
{
	const int32_t *state = ARG(op, 2, const int32_t *);
	int S = state[RT_ST_TLEN] + 1;
	const int mc = (int)PI_("MAX_CTX");
	S = S < mc ? S : mc; /* the kernel's clamp */
	ref_ngram_lookup_info(ARG(op, 0, int32_t *), ARG(op, 3, int32_t *),
	                      ARG(op, 1, const int32_t *), S, (int)PI_("MIN_N"), (int)PI_("MAX_N"),
	                      (int)PI_("N_DRAFT"));
	return 0;
}

/* (ctrl, tokens, info, state, cost): the draft-length controller */
static int op_draft_ctrl(const rt_op *op, sw_err *err)
{
	ref_draft_ctrl((int)PI_("N_DRAFT"), (int)PI_("N_CLASS"), (int)PI_("MIN_N"), (int)PI_("HEAD"),
	               (int)PI_("PROBE"),
	               (int)PI_("PROBE_MAX"), (int32_t)PI_("PRIOR_A"), (int32_t)PI_("PRIOR_W"),
	               (int32_t)PI_("PRIOR1_A"), (int32_t)PI_("PRIOR1_W"), (int32_t)PI_("DECAY"),
	               ARG(op, 0, int32_t *), ARG(op, 1, int32_t *), ARG(op, 2, const int32_t *),
	               ARG(op, 3, int32_t *), ARG(op, 4, const int32_t *));
	return 0;
}

/* (go, tree_tokens, state, ctrl): the n-gram-first drafter's pick, ctrl
 * read when CTRL */
static int op_draft_pick(const rt_op *op, sw_err *err)
{
	(void)err;
	ref_draft_pick((int)PI_("LEVELS"), ARG(op, 0, int32_t *), ARG(op, 1, const int32_t *),
	               ARG(op, 2, int32_t *), PI_("CTRL") ? ARG(op, 3, const int32_t *) : NULL);
	return 0;
}

/* (go, cum, tree_tokens, draft_probs, tree_table): SpecDec++ stop decision
 * after draft level LEVEL of a chain */
static int op_adapt(const rt_op *op, sw_err *err)
{
	ref_adapt((int)PI_("LEVEL"), (int)PI_("N_NODES"), (int)PI_("DEPTH"), (int)PI_("V"),
	          (int)PI_("MIN_STEPS"), (int)PI_("MAX_STEPS"), (float)PF_("H", 0.0),
	          ARG(op, 0, int32_t *), ARG(op, 1, float *), ARG(op, 2, int32_t *),
	          ARG(op, 3, const float *));
	return 0;
}

/* (a8, a16): the GEMM inputs' int8 blocks (ref_quant_a8) of the live
 * rows; the a8 layout follows the row count, which the gemv_gguf reading
 * it takes alike (both have M rows) */
static int op_quant_a8(const rt_op *op, sw_err *err)
{
	if (ref_quant_a8(ARG(op, 0, void *), ARG(op, 1, const uint16_t *),
	                 (int)live_rows(op, PI_("M")), (int)PI_("K")))
		return refused(op, "quant_a8: K not a multiple of 32", err);
	return 0;
}

/* (C, A, W): the 16-bit GEMV in the kernel's order (ref_gemv16's bits
 * through hg_gemv16, tests/test_kern_gemv16.c), so the host backend's
 * engines give the generated kernel's results */
static int op_gemv16(const rt_op *op, sw_err *err)
{
	const int rc = hg_gemv16(ARG(op, 0, float *), ARG(op, 1, const uint16_t *),
	                         ARG(op, 2, const uint16_t *), live_rows(op, PI_("M")), PI_("N"),
	                         PI_("K"), PI_("IS_F16") == 1, (int)PI_("KS"), 0);
	if (rc == SW_ENOMEM)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", op->entry);
	if (rc || (PI_("IS_F16") != 0 && PI_("IS_F16") != 1))
		return refused(op, "gemv16: M, N, K, IS_F16 or KS outside what the op accepts", err);
	return 0;
}

/* (C, a16, a8, W): C = a8's rows times W's planes (ref_gemv_gguf), where
 * the engine uploaded planes. The host backend's native mode takes the
 * file's blocks instead and runs these ops as its own GEMM on a16
 * (runtime/engine/engine.c resolve_one, rt_dev.gguf_blocks), so this is
 * the specification run in place: tests and a host bound to planes. */
static int op_gemv_gguf(const rt_op *op, sw_err *err)
{
	if (ref_gemv_gguf(ARG(op, 0, float *), ARG(op, 2, const void *), ARG(op, 3, const void *),
	                  (int)live_rows(op, PI_("M")), (int)PI_("N"), (int)PI_("NW"), (int)PI_("K"),
	                  (int)PI_("WTYPE")))
		return refused(op, "gemv_gguf: WTYPE, N, NW or K outside what the op accepts", err);
	return 0;
}

/* The adapters by op: kernels/ops.def's rows, each demanding its op_<name>
 * above (a row without one does not compile, nor does an adapter without a
 * row: it would be an unused static function). */
static const rt_host_native_fn registry[] = {
#define SW_OP(name, n_args, philox, ref, planned) [SW_OP_##name] = op_##name,
#include "kernels/ops.def"
#undef SW_OP
};
_Static_assert(sizeof(registry) / sizeof(registry[0]) == SW_OP_COUNT,
               "host_ops.c: one adapter per row of kernels/ops.def");

static rt_host_native_fn lookup(const rt_op *op)
{
	const int id = sw_op_find(op->op);
	return id >= 0 ? registry[id] : NULL;
}

rt_host_native_fn rt_host_native_find(const rt_op *op)
{
	return op->kind == RT_OP_KERNEL ? lookup(op) : NULL;
}

bool rt_host_native_supports(const rt_op *op)
{
	return op->kind == RT_OP_KERNEL && lookup(op) != NULL;
}

int rt_host_native_run(const rt_op *op, sw_err *err)
{
	const rt_host_native_fn run = lookup(op);
	if (!run)
		return sw_errf(err, SW_ENOTSUP, "host native: no implementation of op type \"%s\" (%s)",
		               op->op, op->name);
	return run(op, err);
}

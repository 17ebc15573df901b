/* tree_attention template (both kernels: per-split partials on the tensor
 * cores, log-sum-exp merge) in the emulator, where every mma and ldmatrix
 * is a warp collective computed lane by lane and cp.async copies land at
 * their wait, vs an exact (double) attention on the dequantised bf16/fp16
 * inputs, with a per-element bound derived from the dtype (P rounded to 16
 * bits before P.V, base-2 exponentials; see exact_attention), and
 * ref_attention_append on the same inputs within the bound of fp32 P.
 * Awkward cases: T = 1 (one warp, and four with three idle), chains, every
 * tree preset, kary:2:6 (127 nodes: two mask words, block keys spanning
 * tiles), a tree level drafted over staged levels (T < N_BLK), causal
 * prefill chunks, GQA 1, 2, 3, 4, 8 (a token's rows straddling 16-row
 * fragments), head dims 40 (padded to 48), 64, 80, 96, 128, 256, one and two
 * fragments per warp (ROW_BLOCKS; a warp whose second fragment is all
 * padding), run as sm_90 (together) and as sm_80 (one per pass), contexts
 * 0, 1, 37, 300, 513, 900 with splits of 64, 128 and 512 (the last live
 * split taking the block keys, context tiles straddling into block keys),
 * bf16 and fp16; sliding windows (WINDOW, Gemma 3's local layers: query
 * at ctx + depth sees slots above ctx + depth - WINDOW) smaller than, equal
 * to and larger than the context, with splits wholly outside the window,
 * against the exact attention and kernels/ref's ref_tree_attention_window.
 * Unused cache slots and the partial buffers start as NaN
 * (emu_alloc), so a read of a dead split or slot shows. Then NVRTC for
 * sm_80 and sm_90, relocatable as engines are built, on every emulated
 * variant and on real shapes (Llama-2-7B, Llama-3-8B with eagle25 /
 * sequoia63 / a 256-token prefill chunk / a decode step, GQA 8; head dims
 * 64, 80, 96, 256, 136; the Qwen2-7B and Gemma-2B prefill chunks), in the
 * planner's shapes): zero spills and zero stack, registers printed.
 * CMOCKA_FILTER='*nvrtc' (a cmocka glob) runs one test. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "gen/attn_cost.h"
#include "gen/jit/nvrtc.h"
#include "kernels/ref/ref.h"
#include "gen/jit/emu_build.h"
#include "core/tree.h"

#include "core/fileio.h"
#include "core/hash.h"
#include "op_harness.h"

/* One specialisation. tree: a rt_tree spec, "root" (T = 1, the root alone)
 * or NULL (causal prefill chunk of n_blk tokens). level >= 0: draft that tree
 * level over the levels before it (T < N_BLK). */
typedef struct acase {
	const char *tree;
	int level;
	int n_blk_causal;
	int nh, nkv, hd, f16, split, max_ctx, warps, rb;
	int arch; /* emulated as sm_80 (800: one fragment per pass) or sm_90 (0) */
	int window; /* WINDOW: a sliding window (0: none, and no key entry) */
} acase;

typedef struct aspec { /* the case made concrete */
	int T, n_blk, mw;
	uint64_t mask[RT_TREE_MAX_NODES * RT_TREE_WORDS]; /* T rows of mw words */
	char tree_id[64];
} aspec;

static void make_spec(const acase *c, aspec *s)
{
	memset(s, 0, sizeof(*s));
	if (!c->tree) {
		s->T = s->n_blk = c->n_blk_causal;
		snprintf(s->tree_id, sizeof(s->tree_id), "causal");
	} else if (!strcmp(c->tree, "root")) {
		s->T = s->n_blk = 1;
		s->mask[0] = 1;
		snprintf(s->tree_id, sizeof(s->tree_id), "root");
	} else {
		rt_tree *t = malloc(sizeof(*t));
		sw_err err = {0};
		char dir[512];
		snprintf(dir, sizeof(dir), "%s/models/trees", src_root());
		if (rt_tree_parse(c->tree, dir, t, &err))
			fail_msg("%s", err.msg);
		int first = 0;
		s->n_blk = t->n;
		if (c->level >= 0) {
			first = t->level_start[c->level];
			s->n_blk = t->level_start[c->level + 1];
		}
		s->T = s->n_blk - first;
		s->mw = (s->n_blk + 63) / 64;
		for (int r = 0; r < s->T; r++)
			for (int j = 0; j < s->n_blk; j++)
				if (rt_tree_visible(t, first + r, j))
					s->mask[r * s->mw + j / 64] |= 1ull << (j % 64);
		int k = 0;
		for (const char *p = c->tree; *p && k < 40; p++)
			s->tree_id[k++] = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ? *p : '_';
		if (c->level >= 0)
			k += snprintf(s->tree_id + k, sizeof(s->tree_id) - (size_t)k, "_lv%d", c->level);
		free(t);
	}
	s->mw = (s->n_blk + 63) / 64;
}

#define NPARAM 16

static void fill_params(const acase *c, const aspec *s, gen_param *p)
{
	gen_param q[NPARAM] = {
		OH_NAME,
		{.name = "TREE", .type = GEN_PARAM_IDENT, .s = s->tree_id},
		OH_I("MASKED", c->tree != NULL),
		OH_I("IS_F16", c->f16),
		OH_I("HEAD_DIM", c->hd),
		OH_I("N_HEADS", c->nh),
		OH_I("N_KV_HEADS", c->nkv),
		OH_I("T", s->T),
		OH_I("N_BLK", s->n_blk),
		OH_I("MASK_WORDS", s->mw),
		OH_I("SPLIT", c->split),
		OH_I("MAX_CTX", c->max_ctx),
		OH_I("WARPS", c->warps),
		OH_I("ROW_BLOCKS", c->rb),
		OH_I("MBLOCK", 128),
		{.name = "WINDOW", .type = GEN_PARAM_INT, .i = c->window, .key_omit_zero = true},
	};
	memcpy(p, q, sizeof(q));
}

/* Rendered source: the generated-from line, the baked mask table, the rest. */
static char *render_case(const acase *c, const aspec *s, char *key, size_t nkey, char *uri,
                         size_t nuri)
{
	gen_param p[NPARAM];
	char path[512];
	sw_err err = {0};
	char *src = NULL;

	fill_params(c, s, p);
	assert_int_equal(gen_key(key, nkey, "tree_attn", p, NPARAM), 0);
	/* The key is the identity, but gen_render cuts identifiers at 63
	 * characters (its literal buffer), and these keys run to ~110: the
	 * kernel name is the op plus a 64-bit FNV-1a of the key. */
	if (uri)
		snprintf(uri, nuri, "%s", key);
	uint64_t hsh = sw_fnv1a64(SW_FNV64_BASIS, key, strlen(key));
	snprintf(key, nkey, "tree_attn_%016llx", (unsigned long long)hsh);
	p[0].s = key;
	snprintf(path, sizeof(path), "%s/templates/%s", src_root(),
	         sw_op_get(SW_OP_tree_attention)->tmpl);
	if (gen_render_file(path, p, NPARAM, &src, &err))
		fail_msg("%s", err.msg);
	if (!c->tree)
		return src;
	size_t cap = strlen(src) + 64 + (size_t)s->T * s->mw * 24 + strlen(key), k = 0;
	char *out = malloc(cap);
	const char *nl = strchr(src, '\n');
	size_t head = nl ? (size_t)(nl - src) + 1 : 0;
	memcpy(out, src, head);
	k = head;
	k += (size_t)snprintf(out + k, cap - k, "DEV_CONST uint64_t %s_mask[%d] = {", key, s->T * s->mw);
	for (int i = 0; i < s->T * s->mw; i++)
		k += (size_t)snprintf(out + k, cap - k, "%s0x%llxull", i ? ", " : "",
		                      (unsigned long long)s->mask[i]);
	k += (size_t)snprintf(out + k, cap - k, "};\n");
	snprintf(out + k, cap - k, "%s", src + head);
	free(src);
	return out;
}

static void load_case(const acase *c, const aspec *s, const emu_kernel **part,
                      const emu_kernel **merge)
{
	char key[256], kdir[512], cache[512], sym[300];
	const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
	sw_err err = {0};
	void *h = NULL;
	char *src = render_case(c, s, key, sizeof(key), NULL, 0);
	if (c->arch) { /* the template's sm_80 path (SW_ARCH in the preludes) */
		char *a = malloc(strlen(src) + 64);
		sprintf(a, "#undef SW_ARCH\n#define SW_ARCH %d\n%s", c->arch, src);
		free(src);
		src = a;
	}

	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	snprintf(cache, sizeof(cache), "%s/gen/emu", build);
	if (gen_emu_module_build(src, key, kdir, cache, &h, &err))
		fail_msg("%s", err.msg);
	free(src);
	snprintf(sym, sizeof(sym), "%s_part_emu", key);
	*part = dlsym(h, sym);
	snprintf(sym, sizeof(sym), "%s_merge_emu", key);
	*merge = dlsym(h, sym);
	if (!*part || !*merge)
		fail_msg("%s: missing kernel symbols", key);
}

static uint16_t to16(int f16, float x)
{
	return f16 ? gguf_f32_to_f16(x) : gguf_f32_to_bf16(x);
}

static float from16(int f16, uint16_t h)
{
	return f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
}

/* Arithmetic of one run, for the bound: R rescales per split, n_splits
 * partials merged, the output's unit roundoff u_out, the rounding of the
 * weights P to the 16-bit dtype before P.V (u_p relative, eta_p absolute in
 * the subnormal range; 0, 0 for a reference that keeps P in fp32), and
 * base2: the weights are 2^(fma(s, c, -fl(m c))), c = fl(fl(1/sqrt(hd))
 * log2(e)) (the kernel), not e^(s scale - m) (the host reference). */
typedef struct anum {
	int R, n_splits, base2;
	double u_out, u_p, eta_p;
} anum;

/* mma sums: any order, each addition off by <= 2u (round to nearest gives
 * u; 2u admits tensor cores that truncate), Higham's gamma with 2u. */
static double gamma2(int n)
{
	return n * 2.0 * U32 / (1.0 - n * 2.0 * U32);
}

/* The bound, per output element, against the exact attention of the
 * dequantised inputs (see the file header of the template for the kernel's
 * arithmetic). Scores: Q.K^T on the tensor cores, hd exact products summed
 * in fp32 in an unspecified order (gamma2_hd * sum |q k|), times the fp32
 * scale (u |s|). Each weight e^(s_j - m) then passes through at most R + 2
 * exponentials/rescales (one per softmax step of a split, the first exp,
 * the merge): each rounds its argument (|arg| <= 2 S, S = max |s_j|: u 2S),
 * errs by up to 2 ulp (CUDA expf and exp2f; <= 4u relative) and is
 * multiplied in (u). In base 2 (the kernel) the argument is in log2 units
 * (|arg| <= 2 S log2 e, an error x in it is x ln 2 relative, so again 2Su),
 * and a rescale by 2^(mc_old - mc_new) reuses the rounded fl(m c) the
 * earlier weights were taken against, so those roundings cancel; if the
 * compiler contracts m c - mc into one fma they do not: Su more per step,
 * (3S + 5)u in all. c itself is off log2(e) / sqrt(hd) by <= 2u (+u^2):
 * every weight is e^((s_j - m) scale (1 + 2u)), 4Su once. So a relative
 * error <= eps = expm1(delta + (R + 2)(2S + 5)u), or expm1(delta + (R +
 * 2)(3S + 5)u + 4Su) in base 2. Rounding p to the
 * 16-bit dtype before P.V multiplies it by (1 + d), |d| <= u_p (2^-8 bf16,
 * 2^-11 fp16), or in the subnormal range adds up to eta_p (half the
 * spacing: 2^-25 fp16, 2^-134 bf16); later rescales are <= 1 (running max),
 * so the final weight is w_j (1 + e_j) + n_j, |e_j| <= eps' = (1 + eps)(1 +
 * u_p) - 1, |n_j| <= eta' = eta_p (1 + eps). Both the numerator (mma) and l
 * sum exactly these weights, so the kernel's ratio moves by
 *   sum (w'_j - w_j)(v_j - o) / sum w'_j
 *     <= [2 eps' A + eta' (V1 + N A) / W] / (1 - eps' - N eta' / W) =: e_w,
 * with W = sum w_j >= 1 (the max weight is 1), A = sum w_j |v_j| / W >= |o|,
 * V1 = sum |v_j| over the N visible keys. The fp32 sums add gamma2_Nt
 * (numerator, mma) and gamma_Nt (l) relative to A + e_w, Nt = N + n_splits
 * additions per chain, the final 1/l and product 2u; all of it inflated by
 * (1 + 2 eps' + 2 gamma2_Nt) for second-order terms. Then the output rounds
 * to the 16-bit dtype: u_out (|o| + that), plus 2^-25 for fp16's subnormal
 * spacing. */
static void exact_attention(double *ref, double *bound, const float *qf, const float *kf,
                            const float *vf, int T, int ctx, int n_blk, int nh, int nkv, int hd,
                            const uint64_t *mask, int mw, int window, const anum *an)
{
	const int G = nh / nkv, first = n_blk - T;
	const float scale = 1.0f / sqrtf((float)hd);
	const size_t kv_row = (size_t)nkv * hd;
	double *s = malloc((size_t)(ctx + n_blk) * sizeof(*s)), *dl = malloc((size_t)(ctx + n_blk) * sizeof(*dl));
	char *vis = malloc((size_t)(ctx + n_blk));

	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			const float *q = qf + ((size_t)t * nh + h) * hd;
			const size_t kh = (size_t)(h / G) * hd;
			double m = -INFINITY, S = 0.0, delta = 0.0;
			int N = 0, depth = -1; /* t's block keys seen, less itself */
			for (int b = 0; b < n_blk; b++)
				depth += mask ? (int)((mask[t * mw + b / 64] >> (b % 64)) & 1) : b <= first + t;
			for (int j = 0; j < ctx + n_blk; j++) {
				int b = j - ctx;
				/* position ctx + depth sees slot j when ctx + depth - j < window */
				vis[j] = b < 0 ? !window || ctx + depth - j < window
				               : (mask ? (mask[t * mw + b / 64] >> (b % 64)) & 1 : b <= first + t);
				if (!vis[j])
					continue;
				double dot = 0.0, adot = 0.0;
				for (int d = 0; d < hd; d++) {
					dot += (double)q[d] * kf[j * kv_row + kh + d];
					adot += fabs((double)q[d] * kf[j * kv_row + kh + d]);
				}
				s[j] = dot * scale;
				dl[j] = gamma2(hd) * adot * scale + U32 * fabs(s[j]);
				m = fmax(m, s[j]);
				S = fmax(S, fabs(s[j]));
				delta = fmax(delta, dl[j]);
				N++;
			}
			const int Nt = N + an->n_splits;
			const double eps = an->base2
			                   ? expm1(delta + (an->R + 2) * (3.0 * S + 5.0) * U32 + 4.0 * S * U32)
			                   : expm1(delta + (an->R + 2) * (2.0 * S + 5.0) * U32);
			const double epsp = (1.0 + eps) * (1.0 + an->u_p) - 1.0, etap = an->eta_p * (1.0 + eps);
			for (int d = 0; d < hd; d++) {
				double num = 0.0, den = 0.0, a = 0.0, v1 = 0.0;
				for (int j = 0; j < ctx + n_blk; j++) {
					if (!vis[j])
						continue;
					double w = exp(s[j] - m), vv = vf[j * kv_row + kh + d];
					num += w * vv;
					den += w;
					a += w * fabs(vv);
					v1 += fabs(vv);
				}
				size_t i = ((size_t)t * nh + h) * hd + d;
				ref[i] = N ? num / den : 0.0;
				double e = 0.0;
				if (N) {
					const double A = a / den;
					const double ew = (2.0 * epsp * A + etap * (v1 + N * A) / den) /
					                  (1.0 - epsp - N * etap / den);
					e = (ew + (gamma2(Nt) + gamma_n(Nt) + 2.0 * U32) * (A + ew)) *
					    (1.0 + 2.0 * epsp + 2.0 * gamma2(Nt));
				}
				bound[i] = e + an->u_out * (fabs(ref[i]) + e) + (an->u_out < 0x1p-9 ? 0x1p-25 : 0.0);
			}
		}
	free(s);
	free(dl);
	free(vis);
}

static void run_case(const acase *c, const int *ctxs, int n_ctxs)
{
	aspec *s = malloc(sizeof(*s));
	const emu_kernel *kp, *km;
	make_spec(c, s);
	load_case(c, s, &kp, &km);

	const int T = s->T, nb = s->n_blk, nh = c->nh, nkv = c->nkv, hd = c->hd;
	const int ctx_splits = (c->max_ctx + c->split - 1) / c->split;
	/* the last live context split also takes the block's keys */
	const int n_splits = ctx_splits;
	const size_t nq = (size_t)T * nh * hd, kv_row = (size_t)nkv * hd;
	/* the kernel: P rounded to the dtype; the host reference: fp32 P */
	/* softmax steps of 16 or 32 keys, the last split up to SPLIT + N_BLK keys */
	const int R = (c->split + nb + 15) / 16;
	const anum an_k = {.R = R, .n_splits = n_splits, .base2 = 1, .u_out = c->f16 ? 0x1p-11 : 0x1p-8,
	                   .u_p = c->f16 ? 0x1p-11 : 0x1p-8, .eta_p = c->f16 ? 0x1p-25 : 0x1p-134};
	const anum an_r = {.R = R, .n_splits = n_splits};
	uint16_t *q = emu_alloc(nq * 2, "q"), *out = emu_alloc(nq * 2, "out");
	uint16_t *k = emu_alloc((size_t)c->max_ctx * kv_row * 2, "k_cache");
	uint16_t *v = emu_alloc((size_t)c->max_ctx * kv_row * 2, "v_cache");
	float *po = emu_alloc((size_t)n_splits * nq * sizeof(float), "part_o");
	float *pml = emu_alloc((size_t)n_splits * T * nh * 2 * sizeof(float), "part_ml");
	int32_t *ctx_len = emu_alloc(sizeof(int32_t), "ctx_len");
	float *qf = malloc(nq * sizeof(float)), *got = malloc(nq * sizeof(float));
	float *rout = malloc(nq * sizeof(float));
	double *ref = malloc(nq * sizeof(double)), *bound = malloc(nq * sizeof(double));

	for (int ci = 0; ci < n_ctxs; ci++) {
		const int ctx = ctxs[ci], nk = ctx + nb;
		char what[400];
		assert_true(nk <= c->max_ctx);
		float *kf = malloc((size_t)nk * kv_row * sizeof(float)), *vf = malloc((size_t)nk * kv_row * sizeof(float));
		float *scratch = malloc((size_t)nk * sizeof(float));
		/* Scores of a few units (q, k ~ 1.5 * sqrt(3) * U[-1,1)): a real
		 * softmax, neither flat nor one-hot. Fresh NaN in every unused slot. */
		memset(k, 0xff, (size_t)c->max_ctx * kv_row * 2);
		memset(v, 0xff, (size_t)c->max_ctx * kv_row * 2);
		memset(out, 0xff, nq * 2);
		memset(po, 0xff, (size_t)n_splits * nq * sizeof(float));
		memset(pml, 0xff, (size_t)n_splits * T * nh * 2 * sizeof(float));
		for (size_t i = 0; i < nq; i++) {
			q[i] = to16(c->f16, (float)(2.6 * rnd()));
			qf[i] = from16(c->f16, q[i]);
		}
		for (size_t i = 0; i < (size_t)nk * kv_row; i++) {
			k[i] = to16(c->f16, (float)(2.6 * rnd()));
			v[i] = to16(c->f16, (float)rnd());
			kf[i] = from16(c->f16, k[i]);
			vf[i] = from16(c->f16, v[i]);
		}
		*ctx_len = ctx;
		void *pa[] = {&po, &pml, &q, &k, &v, &ctx_len};
		const int rows = T * (nh / nkv), wrows = 16 * c->rb; /* query rows per warp */
		const unsigned zt = (unsigned)((rows + wrows * c->warps - 1) / (wrows * c->warps));
		launch(kp, d3((unsigned)nkv, (unsigned)n_splits, zt), d3(32u * (unsigned)c->warps, 1, 1), pa);
		void *ma[] = {&out, &po, &pml, &ctx_len};
		launch(km, d3((unsigned)T, (unsigned)((nh * hd / 4 + 127) / 128), 1), d3(128, 1, 1), ma);
		assert_int_equal(*ctx_len, ctx);

		const uint64_t *mask = c->tree ? s->mask : NULL;
		exact_attention(ref, bound, qf, kf, vf, T, ctx, nb, nh, nkv, hd, mask, s->mw, c->window,
		                &an_k);
		for (size_t i = 0; i < nq; i++)
			got[i] = from16(c->f16, out[i]);
		snprintf(what, sizeof(what), "%s ctx %d", kp->name, ctx);
		kern_out o = {.name = "out", .type = KERN_F32, .got = got, .ref = ref, .bound = bound,
		              .n = nq, .dims = {T, nh, hd}};
		kern_expect(what, &o);
		double worst = 0.0; /* how much of the derived bound the kernel uses */
		for (size_t i = 0; i < nq; i++)
			worst = fmax(worst, fabs(got[i] - ref[i]) / bound[i]);
		print_message("  %-16s T %3d G %d hd %3d %s rb %d%s ctx %4d win %d: max |err| / bound = %.3f\n",
		              s->tree_id, T, nh / nkv, hd, c->f16 ? "f16 " : "bf16", c->rb,
		              c->arch == 800 ? " sm_80" : "", ctx, c->window, worst);
		/* The fp32 host reference on the same inputs, within the bound
		 * without the output rounding and with P in fp32 (an_r). */
		exact_attention(ref, bound, qf, kf, vf, T, ctx, nb, nh, nkv, hd, mask, s->mw, c->window,
		                &an_r);
		if (c->window) { /* kernels/ref's windowed tree attention (16-bit inputs) */
			void *rs = malloc(ref_tree_attention_scratch(ctx, nb, hd));
			ref_tree_attention_window(rout, q, k, v, ctx, T, nb, nh, nkv, hd, mask, s->mw, c->f16,
			                          c->window, rs);
			free(rs);
		} else {
			ref_attention_append(rout, qf, kf, vf, T, ctx, nb, nh, nkv, hd, mask, scratch);
		}
		snprintf(what, sizeof(what), "kernels/ref vs exact, %s ctx %d window %d", s->tree_id, ctx,
		         c->window);
		kern_out r = {.name = "out", .type = KERN_F32, .got = rout, .ref = ref, .bound = bound,
		              .n = nq, .dims = {T, nh, hd}};
		kern_expect(what, &r);
		free(kf);
		free(vf);
		free(scratch);
	}
	emu_free(q);
	emu_free(out);
	emu_free(k);
	emu_free(v);
	emu_free(po);
	emu_free(pml);
	emu_free(ctx_len);
	free(qf);
	free(got);
	free(rout);
	free(ref);
	free(bound);
	free(s);
}

/* The emulated cases, one table per test; the NVRTC test compiles all of
 * them. Fields: tree, level, causal n_blk, n_heads, n_kv_heads, head_dim,
 * f16, split, max_ctx, warps, row blocks (16-row fragments per warp),
 * emulated arch (0: sm_90's path, 800: sm_80's). */

/* T = 1 (the root alone: a decode step), every context edge, GQA 1 and 4,
 * both head dims, both dtypes, one warp (the planner's choice) and four
 * (three of them without rows), one fragment per warp and two (the second
 * all padding). */
static const acase single_cases[] = {
	{"root", -1, 0, 4, 4, 64, 0, 64, 384, 1, 1, 0, 0},
	{"root", -1, 0, 4, 4, 64, 1, 64, 384, 4, 2, 0, 0},
	{"root", -1, 0, 4, 1, 128, 0, 64, 384, 4, 1, 0, 0},
	{"root", -1, 0, 4, 1, 128, 1, 64, 384, 1, 2, 0, 0},
};

/* Chains and every preset; GQA 4 over one KV head (rows of 4 tokens per
 * 16-row fragment; eagle25: 104 rows, 7 fragments: with two per warp the
 * last warp's second is padding); split 64 and 128; eagle25 once more as
 * sm_80 runs it (the fragments in two passes, the last one idle). */
static const acase preset_cases[] = {
	{"chain:5", -1, 0, 4, 1, 64, 0, 128, 448, 4, 1, 0, 0},
	{"eagle25", -1, 0, 4, 1, 128, 1, 64, 448, 4, 2, 0, 0},
	{"sequoia63", -1, 0, 4, 1, 64, 0, 128, 448, 4, 2, 0, 0},
	{"medusa63", -1, 0, 4, 1, 128, 0, 64, 448, 4, 1, 0, 0},
	{"biseq8", -1, 0, 4, 1, 64, 1, 128, 448, 4, 2, 0, 0},
	{"biseq16", -1, 0, 4, 1, 128, 0, 64, 448, 4, 2, 0, 0},
	{"eagle25", -1, 0, 4, 1, 128, 0, 64, 448, 4, 2, 800, 0},
};

/* kary:2:6: 127 nodes, two mask words per row, 127 block keys in the last
 * split of 64 (four tiles of them); chain:64: deep, 65 nodes, GQA 1. */
static const acase wide_cases[] = {
	{"kary:2:6", -1, 0, 2, 1, 64, 0, 64, 448, 4, 2, 0, 0},
	{"chain:64", -1, 0, 1, 1, 64, 1, 64, 192, 2, 1, 0, 0},
};

/* GQA 8 and 3 (rows of a token straddle fragments), head dims 80 and 40
 * (40: padded to 48 with zero dims), one and two warps per block, 80 also
 * as sm_80 (steps of 32 keys instead of 16). */
static const acase gqa_cases[] = {
	{"eagle25", -1, 0, 8, 1, 64, 1, 64, 192, 4, 2, 0, 0},
	{"biseq8", -1, 0, 6, 2, 128, 0, 128, 256, 2, 2, 0, 0},
	{"chain:3", -1, 0, 3, 1, 80, 0, 64, 192, 1, 2, 0, 0},
	{"chain:3", -1, 0, 4, 2, 40, 1, 64, 192, 1, 1, 0, 0},
	{"chain:3", -1, 0, 3, 1, 80, 1, 64, 192, 1, 2, 800, 0},
};

/* GQA 8 at T = 64 with head dim 128 and the real shapes' split of 512:
 * 32 softmax steps per split, 512 rows per KV head (4 blocks of 4 warps of
 * 2 fragments), as sm_90 and as sm_80 runs it. */
static const acase long_cases[] = {
	{"sequoia63", -1, 0, 8, 1, 128, 0, 512, 1024, 4, 2, 0, 0},
	{"sequoia63", -1, 0, 8, 1, 128, 1, 512, 1024, 4, 2, 800, 0},
};

/* Head dim 96, both paths and dtypes (emulated and NVRTC). */
static const acase hd_cases[] = {
	{"chain:3", -1, 0, 6, 2, 96, 1, 64, 192, 2, 2, 0, 0},
	{"chain:3", -1, 0, 6, 2, 96, 0, 64, 192, 2, 2, 800, 0},
};

/* Above 128 dims the output goes in parts of <= 128 dims, a pass each:
 * head dim 256 (Gemma-2B's; two parts of 16 n-tiles), both paths and
 * dtypes, and 136 (padded to 144: 18 n-tiles in parts of 10, the second
 * short by two, skipped), in the NVRTC matrix too. */
static const acase hd256_cases[] = {
	{"eagle25", -1, 0, 4, 1, 256, 0, 64, 192, 2, 2, 0, 0},
	{"biseq8", -1, 0, 8, 1, 256, 1, 64, 192, 1, 1, 800, 0},
	{"chain:3", -1, 0, 3, 1, 136, 1, 64, 192, 1, 2, 0, 0},
	{NULL, -1, 37, 2, 1, 136, 0, 64, 256, 2, 1, 800, 0},
};

/* A draft level over the staged levels (T < N_BLK), and causal prefill. */
static const acase append_cases[] = {
	{"eagle25", 2, 0, 4, 1, 64, 0, 64, 256, 4, 1, 0, 0},
	{NULL, -1, 37, 4, 2, 64, 1, 64, 256, 4, 2, 0, 0},
	{NULL, -1, 1, 2, 1, 128, 0, 128, 256, 4, 1, 0, 0},
};

/* Sliding windows (Gemma 3's local layers): WINDOW 40 and 100 over splits
 * of 64 (contexts 37..300: windows smaller than, equal to (ctx 40 - depth)
 * and larger than the context; splits wholly below the window, whose
 * partials must merge as empty; window edges inside a tile), a tree
 * (per-node depths), a tree level over staged levels, causal prefill chunks
 * (depth = the row), head dim 256 as sm_80, GQA 4 two fragments a warp. */
static const acase window_cases[] = {
	{"eagle25", -1, 0, 4, 1, 64, 0, 64, 448, 4, 2, 0, 40},
	{"sequoia63", -1, 0, 4, 1, 64, 1, 64, 448, 4, 1, 0, 100},
	{"eagle25", 2, 0, 4, 1, 64, 1, 64, 448, 4, 1, 0, 40},
	{NULL, -1, 37, 4, 2, 64, 0, 64, 448, 4, 2, 0, 40},
	{NULL, -1, 37, 2, 1, 256, 1, 64, 448, 2, 1, 800, 100},
	{"root", -1, 0, 4, 1, 128, 0, 64, 448, 1, 1, 0, 40},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void run_table(const acase *cs, size_t n, const int *ctxs, int n_ctxs)
{
	for (size_t i = 0; i < n; i++)
		run_case(&cs[i], ctxs, n_ctxs);
}

static void test_tree_attention_window(void **state)
{
	static const int ctxs[] = {0, 13, 40, 64, 150, 300};
	(void)state;
	run_table(window_cases, N_OF(window_cases), ctxs, 6);
}

static void test_tree_attention_single(void **state)
{
	static const int ctxs[] = {0, 1, 37, 64, 300};
	(void)state;
	run_table(single_cases, N_OF(single_cases), ctxs, 5);
}

static void test_tree_attention_presets(void **state)
{
	static const int ctxs[] = {0, 37, 300};
	(void)state;
	run_table(preset_cases, N_OF(preset_cases), ctxs, 3);
}

static void test_tree_attention_wide(void **state)
{
	static const int ctxs[] = {1, 300};
	(void)state;
	run_case(&wide_cases[0], ctxs, 2);
	run_case(&wide_cases[1], ctxs, 1);
}

static void test_tree_attention_gqa(void **state)
{
	static const int ctxs[] = {0, 37, 130};
	(void)state;
	run_table(gqa_cases, N_OF(gqa_cases), ctxs, 3);
}

static void test_tree_attention_long(void **state)
{
	static const int ctxs[] = {513, 900};
	(void)state;
	run_table(long_cases, N_OF(long_cases), ctxs, 2);
}

static void test_tree_attention_head_dims(void **state)
{
	static const int ctxs[] = {0, 37, 130};
	(void)state;
	run_table(hd_cases, N_OF(hd_cases), ctxs, 3);
	run_table(hd256_cases, N_OF(hd256_cases), ctxs, 3);
}

static void test_tree_attention_append_causal(void **state)
{
	static const int ctxs[] = {0, 37, 100};
	(void)state;
	run_table(append_cases, N_OF(append_cases), ctxs, 3);
}

/* ---- NVRTC ---- */
/* Every case above and the real shapes, rendered into ONE program per
 * architecture (each specialisation has its own names), the two
 * architectures compiled on two threads (ptxas dominates: ~1 s per mma
 * specialisation); results checked on the main thread. */
typedef struct nvrtc_job {
	gen_nvrtc *nv;
	const char *prelude, *src, *arch;
	gen_kernel_res *res;
	int max_res, n, rc;
	sw_err err;
} nvrtc_job;

static void *nvrtc_job_run(void *p)
{
	nvrtc_job *j = p;
	/* relocatable, as gen/build.c compiles engines (nvJitLink links them):
	 * ptxas allocates registers differently there (tighter on sm_80) */
	j->rc = gen_nvrtc_compile_x(j->nv, j->prelude, j->src, "tree_attn_matrix", j->arch, true,
	                            NULL, NULL, j->res, j->max_res, &j->n, NULL, &j->err);
	return NULL;
}

static void test_tree_attention_nvrtc(void **state)
{
	static const char *archs[] = {"sm_80", "sm_90"};
	/* real shapes in the planner's launch shapes (gen/attn_cost.h at 2-4K cached
	 * keys): Llama-2-7B (GQA 1), Llama-3-8B (GQA 4, and 8), 8K context */
	static const acase real_cases[] = {
		{"chain:5", -1, 0, 32, 32, 128, 0, 512, 8192, 1, 1, 0, 0},
		{"eagle25", -1, 0, 32, 8, 128, 0, 512, 8192, 4, 1, 0, 0},
		{"sequoia63", -1, 0, 32, 8, 128, 1, 512, 8192, 2, 2, 0, 0},
		{"sequoia63", -1, 0, 32, 4, 128, 0, 512, 8192, 4, 2, 0, 0}, /* GQA 8 */
		{NULL, -1, 256, 32, 8, 128, 0, 1024, 8192, 4, 2, 0, 0},
		{"root", -1, 0, 32, 8, 128, 0, 256, 8192, 1, 1, 0, 0}, /* T = 1 decode */
		/* head dims 64 / 80 / 96 / 256 (Gemma-2B: 8 heads, 1 KV head) */
		{"sequoia63", -1, 0, 32, 8, 64, 0, 512, 8192, 2, 2, 0, 0},
		{"sequoia63", -1, 0, 32, 8, 80, 0, 512, 8192, 2, 2, 0, 0},
		{"sequoia63", -1, 0, 28, 4, 96, 0, 512, 8192, 2, 2, 0, 0},
		/* Qwen2-7B's prefill (GQA 7, T 128): the planner's shape in
		 * test_build, where the step-loop SYNCWARP()s of 14383d4 spilled */
		{NULL, -1, 128, 28, 4, 128, 0, 512, 4096, 4, 2, 0, 0},
		{"eagle25", -1, 0, 8, 1, 256, 0, 512, 8192, 4, 2, 0, 0},
		{NULL, -1, 128, 8, 1, 256, 0, 512, 8192, 4, 2, 0, 0},
		/* Gemma 3 local layers: 270M (4 heads, 1 KV head, window 512) and
		 * 4B (8 heads, 4 KV heads, window 1024), a tree and a prefill chunk */
		{"eagle25", -1, 0, 4, 1, 256, 0, 512, 2048, 4, 1, 0, 512},
		{NULL, -1, 128, 4, 1, 256, 0, 512, 2048, 4, 2, 0, 512},
		{"sequoia63", -1, 0, 8, 4, 256, 0, 512, 8192, 2, 2, 0, 1024},
		{NULL, -1, 128, 8, 4, 256, 1, 512, 8192, 4, 2, 0, 1024},
	};
	const struct {
		const acase *c;
		size_t n;
	} tables[] = {{single_cases, N_OF(single_cases)}, {preset_cases, N_OF(preset_cases)},
	              {wide_cases, N_OF(wide_cases)},     {gqa_cases, N_OF(gqa_cases)},
	              {long_cases, N_OF(long_cases)},     {append_cases, N_OF(append_cases)},
	              {hd_cases, N_OF(hd_cases)},         {hd256_cases, N_OF(hd256_cases)},
	              {window_cases, N_OF(window_cases)}, {real_cases, N_OF(real_cases)}};
	(void)state;
	gen_nvrtc *nv = nvrtc_or_skip("test_kern_tree_attention");
	char *prelude = load_prelude_cuda();
	size_t cap = 1, len = 0;
	char *all = calloc(1, 1);
	int n_kernels = 0;
	for (size_t t = 0; t < N_OF(tables); t++)
		for (size_t i = 0; i < tables[t].n; i++) {
			aspec *s = malloc(sizeof(*s));
			char key[256], uri[256];
			make_spec(&tables[t].c[i], s);
			char *src = render_case(&tables[t].c[i], s, key, sizeof(key), uri, sizeof(uri));
			print_message("  %s = %s\n", key, uri);
			size_t n = strlen(src);
			if (len + n + 2 > cap) {
				cap = 2 * (len + n + 2);
				all = realloc(all, cap);
				assert_non_null(all);
			}
			memcpy(all + len, src, n);
			len += n;
			all[len++] = '\n';
			all[len] = 0;
			n_kernels += 2;
			free(src);
			free(s);
		}
	nvrtc_job jobs[2];
	pthread_t th[2];
	for (int a = 0; a < 2; a++) {
		memset(&jobs[a], 0, sizeof(jobs[a]));
		jobs[a].nv = nv;
		jobs[a].prelude = prelude;
		jobs[a].src = all;
		jobs[a].arch = archs[a];
		jobs[a].max_res = n_kernels + 1;
		jobs[a].res = calloc((size_t)n_kernels + 1, sizeof(gen_kernel_res));
		assert_non_null(jobs[a].res);
		assert_int_equal(pthread_create(&th[a], NULL, nvrtc_job_run, &jobs[a]), 0);
	}
	for (int a = 0; a < 2; a++)
		pthread_join(th[a], NULL);
	int n_bad = 0; /* every result printed before failing */
	for (int a = 0; a < 2; a++) {
		const gen_kernel_res *res = jobs[a].res;
		if (jobs[a].rc)
			fail_msg("%s", jobs[a].err.msg);
		assert_int_equal(jobs[a].n, n_kernels);
		for (int i = 0; i < jobs[a].n; i++) {
			/* headroom (issue 14 item 5): below the 255-register cap, where
			 * any later change would spill */
			const int spills = res[i].spill_stores || res[i].spill_loads || res[i].stack;
			const int full = res[i].regs > GEN_ATTN_REG_HEADROOM;
			const int bad = spills || full;
			print_message("  %-5s %-30s %3d regs %4d B stack %5d B smem, spills %d/%d%s\n", archs[a],
			              res[i].name, res[i].regs, res[i].stack, res[i].smem,
			              res[i].spill_stores, res[i].spill_loads,
			              spills ? "  <- SPILLS" : full ? "  <- NO REGISTER HEADROOM" : "");
			n_bad += bad;
		}
	}
	if (n_bad)
		fail_msg("%d kernels spill, use stack or sit above %d registers (marked above)", n_bad,
		         GEN_ATTN_REG_HEADROOM);
	free(jobs[0].res);
	free(jobs[1].res);
	free(all);
	free(prelude);
	gen_nvrtc_close(nv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tree_attention_single),
		cmocka_unit_test(test_tree_attention_presets),
		cmocka_unit_test(test_tree_attention_wide),
		cmocka_unit_test(test_tree_attention_gqa),
		cmocka_unit_test(test_tree_attention_long),
		cmocka_unit_test(test_tree_attention_head_dims),
		cmocka_unit_test(test_tree_attention_append_causal),
		cmocka_unit_test(test_tree_attention_window),
		cmocka_unit_test(test_tree_attention_nvrtc),
	};
	/* e.g. CMOCKA_FILTER='*nvrtc' (TEST_FILTER is tests/run_all.sh's, by binary) */
	if (getenv("CMOCKA_FILTER") && *getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Engine executor (engine.h). engine.json is the only interface to the
 * generator (read by manifest.c): this file never calls gen/, model/ or
 * decode/, so an engine directory plus the weights is all a deployment
 * needs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "formats/engine_files.h"
#include "weights_gguf.h"
#include "wplanes.h"
#include "core/wformat.h"
#include "random_weights.h"
#include "ctrl.h"
#include "kernels/engine_state.h"
#include "core/timing.h"
#include "formats/gguf.h"
#include "core/digest.h"
#include "core/wparts.h"

rt_engine *rt_engine_load(const char *dir, sw_err *err)
{
	rt_manifest *m = rt_manifest_load(dir, err);
	if (!m)
		return NULL;
	if (rt_engine_files_check(dir, err)) { /* the directory is what the build wrote */
		rt_manifest_free(m);
		return NULL;
	}
	rt_engine *e = calloc(1, sizeof(*e));
	if (!e) {
		rt_manifest_free(m);
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	e->man = m;
	return e;
}

void rt_engine_free(rt_engine *e)
{
	if (!e)
		return;
	if (e->dev) {
		if (e->graph)
			e->dev->ops->graph_free(e->dev, e->graph);
		if (e->arena)
			e->dev->ops->free(e->dev, e->arena);
		if (e->host_state) {
			if (e->dev->ops->free_host)
				e->dev->ops->free_host(e->dev, e->host_state);
			else
				free(e->host_state);
		}
	}
	rt_manifest_free(e->man);
	free(e->ops);
	free(e->op_cost);
	free(e);
}

int rt_engine_reseed(rt_engine *e, uint64_t seed, sw_err *err)
{
	if (!e->dev)
		return sw_errf(err, SW_EINVAL, "%s: engine not bound to a device", e->man->dir);
	e->seed = seed; /* uploaded with the other sampling words by generate */
	return 0;
}

bool rt_engine_samples(const rt_engine *e)
{
	/* the verify kernel's METHOD (what runs; 0 is greedy), not the spec's
	 * echo of it */
	const rt_manifest *m = e->man;
	for (int i = 0; i < m->n_ops; i++)
		if (!strcmp(m->ops[i].op, "verify") && m->ops[i].kernel >= 0) {
			const rt_kernel_info *k = &m->kernels[m->ops[i].kernel];
			for (int p = 0; p < k->n_params; p++)
				if (!strcmp(k->params[p].name, "METHOD"))
					return k->params[p].i != 0;
		}
	return false;
}

int rt_engine_check_sampling(const rt_engine *e, const rt_engine_sampling *s, sw_err *err)
{
	const char *d = e->man->dir;
	if (!(s->temperature >= 0.0f && s->temperature <= 100.0f))
		return sw_errf(err, SW_EINVAL, "%s: temperature %g, expected 0 (greedy) to 100", d,
		               (double)s->temperature);
	if (s->top_k < 0)
		return sw_errf(err, SW_EINVAL, "%s: top-k %d, expected >= 0 (0: off)", d, s->top_k);
	if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
		return sw_errf(err, SW_EINVAL, "%s: top-p %g, expected 0 < top-p <= 1 (1: off)", d,
		               (double)s->top_p);
	if (s->temperature > 0.0f && !rt_engine_samples(e))
		return sw_errf(err, SW_ENOTSUP, "%s: temperature %g cannot be honoured: the engine "
		               "verifies greedily (%s/engine.json $.spec.verify.method \"greedy\"), which "
		               "is exact at temperature 0 only; use temperature 0, or build the engine "
		               "with a sampling method (rrs, rrsw, spechub or onehot)", d,
		               (double)s->temperature, d);
	return 0;
}

/* The lowest temperature the draft's q is taken at: drawing k children
 * without replacement (or a SpecHub pair) needs k tokens with q > 0, and
 * expf((z - max) / T) underflows to 0 beyond a gap of ~103 T nats; at 0.5 a
 * draft would need its runner-up ~50 nats below its best. */
#define DRAFT_T_MIN 0.5f

/* The sampling words (kernels/engine_state.h) for s: the target's p at s;
 * the draft's q, which any value keeps exact (the verifier divides by the
 * q the children were drawn from), at s's temperature, at least
 * DRAFT_T_MIN; a greedy request drafts at the spec's temperature (or 1),
 * and top-k drafting (greedy engines) ranks by q at 1 as before. */
static void sampling_words(const rt_engine *e, const rt_engine_sampling *s, int32_t *w)
{
	const float spec_t = e->man->samp.temperature;
	float dt = s->temperature > 0.0f ? s->temperature : spec_t > 0.0f ? spec_t : 1.0f;
	const float one = 1.0f;
	dt = dt < DRAFT_T_MIN ? DRAFT_T_MIN : dt;
	if (!rt_engine_samples(e))
		dt = 1.0f;
	memset(w, 0, sizeof(*w) * RT_SP_WORDS);
	memcpy(&w[RT_SP_TEMP], &s->temperature, 4);
	w[RT_SP_TOP_K] = s->top_k;
	memcpy(&w[RT_SP_TOP_P], &s->top_p, 4);
	memcpy(&w[RT_SP_DRAFT], &dt, 4);
	w[RT_SP_DRAFT + 1] = 0;
	memcpy(&w[RT_SP_DRAFT + 2], &one, 4);
	w[RT_SP_SEED_LO] = (int32_t)(uint32_t)e->seed;
	w[RT_SP_SEED_HI] = (int32_t)(uint32_t)(e->seed >> 32);
}

rt_dptr rt_engine_buf_addr(const rt_engine *e, const char *name)
{
	int b = rt_manifest_buf_find(e->man, name);
	return b < 0 || !e->arena ? 0 : e->arena + (rt_dptr)e->man->bufs[b].offset;
}

/* Every host<->device copy of the executor goes through here: bytes
 * [off, off + n) of buffer `name`, refused unless inside the buffer's
 * bytes as engine.json declares them (whatever another field says: a
 * prefill chunk, a tree size, a prompt length), so no copy reaches a
 * neighbouring buffer of the arena. */
static int buf_copy(rt_engine *e, const char *name, int64_t off, void *host, size_t n, bool up,
                    sw_err *err)
{
	const int b = rt_manifest_buf_find(e->man, name);
	if (b < 0 || !e->arena)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: no buffer %s", e->man->dir, name);
	const int64_t size = e->man->bufs[b].bytes;
	if (off < 0 || (uint64_t)n > (uint64_t)size || off > size - (int64_t)n)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: buffer %s (%lld bytes): %s of %zu bytes at "
		               "offset %lld would pass its end (an engine.json whose parts disagree: "
		               "rebuild the engine)", e->man->dir, name, (long long)size,
		               up ? "an upload" : "a download", n, (long long)off);
	const rt_dptr p = e->arena + (rt_dptr)(e->man->bufs[b].offset + off);
	return up ? e->dev->ops->upload(e->dev, p, host, n, err)
	          : e->dev->ops->download(e->dev, host, p, n, err);
}

/* --- binding: arena, weights, resolved ops ------------------------------ */

static int64_t el_bytes(const char *dt)
{
	return !strcmp(dt, "f32") || !strcmp(dt, "i32") ? 4 : !strcmp(dt, "u64") ? 8 : 2;
}

/* Bytes of n elements of dt (GGUF block types: q8_0 34 per block of 32,
 * ..., n whole blocks). */
static int64_t n_bytes(const char *dt, int64_t n)
{
	const int wt = rt_manifest_wtype(dt);
	const int64_t blk = wt >= 0 ? sw_wformat_block(wt) : 0;
	return blk ? (n % blk ? -1 : n / blk * sw_wformat_block_bytes(wt)) : n * el_bytes(dt);
}

/* gguf_a8: the file's blocks of field/layer into stage (per bytes), checked
 * to be the type the engine was built for and to dequantize to exactly the
 * src floats the source gave (those the digest covers). */
static int upload_raw(rt_engine *e, const rt_engine_buf *b, const rt_engine_weights *raw,
                      const char *field, int layer, const float *src, size_t n, void *stage,
                      int64_t per, sw_err *err)
{
	const void *data = NULL;
	size_t bytes = 0;
	int type = -1, rc;
	if ((rc = raw->get_raw(raw->user, field, layer, &data, &bytes, &type, err)))
		return rc;
	const int want = rt_manifest_buf_wtype(b, layer);
	const int64_t wblk = sw_wformat_block(want);
	const int64_t wb = wblk ? (int64_t)n / wblk * sw_wformat_block_bytes(want) : -1;
	if (type != want || (int64_t)bytes != wb || wb > per)
		return sw_errf(err, SW_EINVAL, "%s: weight %s (layer %d) is %s (%zu bytes), engine "
		               "%s/engine.json buffer %s expects %s (%lld bytes): the engine keeps the "
		               "file's own types; rebuild it for this file", raw->name, field, layer,
		               ggml_dtype_name((uint32_t)type), bytes, e->man->dir, b->name,
		               sw_wformat_gemm_name(want) ? sw_wformat_gemm_name(want) : b->dtype, (long long)wb);
	float *chk = malloc(sizeof(*chk) * n);
	if (!chk)
		return sw_errf(err, SW_ENOMEM, "out of memory checking %s", b->name);
	rc = gguf_dequantize((uint32_t)type, data, n, chk);
	const bool same = !rc && !memcmp(chk, src, sizeof(*chk) * n);
	free(chk);
	if (!same)
		return sw_errf(err, SW_EINVAL, "%s: weight %s (layer %d): the file's %s blocks are not "
		               "the weights the source gives (another file?)", raw->name, field, layer,
		               b->dtype);
	memcpy(stage, data, bytes);
	memset((char *)stage + bytes, 0, (size_t)(per - (int64_t)bytes)); /* a narrower layer */
	return 0;
}

static int check_model(const rt_engine *e, const rt_engine_weights *w, const rt_engine_shape *want,
                       const char *role, sw_err *err)
{
	const rt_engine_shape *c = &w->shape;
#define CHK(f)                                                                               \
	if (c->f != want->f)                                                                 \
		return sw_errf(err, SW_EINVAL, "%s: %s " #f " %d, engine %s/engine.json expects %d", \
		               w->name, role, (int)c->f, e->man->dir, (int)want->f);
	if (c->arch != want->arch)
		return sw_errf(err, SW_EINVAL, "%s: %s architecture %s, engine %s/engine.json expects %s",
		               w->name, role, rt_manifest_arch_name(c->arch), e->man->dir,
		               rt_manifest_arch_name(want->arch));
	CHK(n_layers) CHK(dim) CHK(n_heads) CHK(n_kv_heads) CHK(head_dim) CHK(ffn_dim) CHK(vocab)
#undef CHK
	if (c->tied_embd != want->tied_embd)
		return sw_errf(err, SW_EINVAL, "%s: %s tied_embd %d, engine expects %d", w->name, role,
		               c->tied_embd, want->tied_embd);
	/* engine.json writes both with 9 significant digits (exact for a
	 * float); the kernels bake norm_eps in, so a model that differs would
	 * run with the wrong one */
	if (c->norm_eps != want->norm_eps || c->rope_theta != want->rope_theta)
		return sw_errf(err, SW_EINVAL, "%s: %s norm_eps %.9g, rope_theta %.9g; engine "
		               "%s/engine.json expects %.9g, %.9g", w->name, role, (double)c->norm_eps,
		               (double)c->rope_theta, e->man->dir, (double)want->norm_eps,
		               (double)want->rope_theta);
	return 0;
}

/* What the repack into the GPU kernels' planes did at bind (said once). */
typedef struct planes_cost {
	int64_t bytes;
	int weights;
	double repack_s, check_s;
} planes_cost;

/* Layer l of GGUF-typed buffer b, staged in the file's blocks (its type's
 * bytes, then zeros to the layer stride), into the planes gemv_gguf reads
 * (runtime/engine/wplanes.h), checked against the blocks bit for bit. */
static int stage_planes(rt_engine *e, const rt_engine_buf *b, int layer, int64_t per,
                        void *stage, planes_cost *pc, sw_err *err)
{
	const int t = rt_manifest_buf_wtype(b, layer);
	const int64_t rows = b->shape[b->rank - 2], k = b->shape[b->rank - 1];
	const int64_t lb = (int64_t)sw_wformat_nbytes((uint32_t)t, (uint64_t)(rows * k));
	const int64_t at = b->offset + (layer > 0 ? layer : 0) * per;
	if (at % 16 || lb <= 0 || lb > per)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: buffer %s layer %d at arena byte %lld "
		               "(%lld bytes of %s): the GPU's GGUF kernels read 16-byte aligned "
		               "planes; a layer stride that is not a multiple of 16 bytes (rows x "
		               "blocks of %s) is not one they can read", e->man->dir, b->name, layer,
		               (long long)at, (long long)lb, sw_wformat_gemm_name(t) ? sw_wformat_gemm_name(t)
		               : b->dtype, b->dtype);
	void *pl = malloc((size_t)lb);
	if (!pl)
		return sw_errf(err, SW_ENOMEM, "out of memory repacking %s", b->name);
	char what[1200];
	snprintf(what, sizeof(what), "%.1024s/engine.json: buffer %.64s layer %d", e->man->dir, b->name,
	         layer);
	double t0 = sw_now_s();
	int rc = rt_wplanes_repack(pl, stage, t, rows, k);
	pc->repack_s += sw_now_s() - t0;
	t0 = sw_now_s();
	if (rc)
		rc = sw_errf(err, rc, "%s: %s has no planes", what, b->dtype);
	else
		rc = rt_wplanes_check(pl, stage, t, rows, k, what, err);
	pc->check_s += sw_now_s() - t0;
	if (!rc) {
		memcpy(stage, pl, (size_t)lb);
		pc->bytes += lb;
		pc->weights++;
	}
	free(pl);
	return rc;
}

/* src (n floats of field, layer) in b's dtype into stage (room bytes);
 * *wrote: the bytes. raw (gguf_a8): the file's blocks instead, checked to
 * be those floats (upload_raw, which zeroes the rest of the room). */
static int stage_part(rt_engine *e, const rt_engine_buf *b, const rt_engine_weights *m,
                      const rt_engine_weights *raw, const char *field, int layer, const float *src,
                      size_t n, void *stage, int64_t room, int64_t *wrote, sw_err *err)
{
	const int64_t es = el_bytes(b->dtype);
	int rc;
	*wrote = n_bytes(b->dtype, (int64_t)n);
	if (raw && rt_manifest_wtype(b->dtype) >= 0) {
		if ((rc = upload_raw(e, b, raw, field, layer, src, n, stage, room, err)))
			return rc;
		const int t = rt_manifest_buf_wtype(b, layer);
		*wrote = (int64_t)n / sw_wformat_block(t) * sw_wformat_block_bytes(t);
	} else if (!strcmp(b->dtype, "i32")) {
		/* an id map (a mapped draft vocabulary's d2t, t2d): ids in
		 * floats, exact below 2^24; -1 marks an unmapped id */
		int32_t *d = stage;
		for (size_t i = 0; i < n; i++)
			if (!(src[i] >= -1.0f && src[i] < 16777216.0f) || src[i] != (float)(int32_t)src[i])
				return sw_errf(err, SW_EINVAL, "%s: %s[%zu]: expected an id (an integer in [-1, "
				               "2^24)), found %g", m->name, b->name, i, (double)src[i]);
			else
				d[i] = (int32_t)src[i];
	} else if (es == 4) {
		memcpy(stage, src, sizeof(*src) * n);
	} else if (!strcmp(b->dtype, "q8_0")) { /* GGUF Q8_0, as ggml's reference quantizer */
		gguf_quantize(GGML_T_Q8_0, src, n, stage);
	} else {
		uint16_t *h = stage;
		const bool f16 = !strcmp(b->dtype, "fp16");
		for (size_t i = 0; i < n; i++)
			h[i] = f16 ? gguf_f32_to_f16(src[i]) : gguf_f32_to_bf16(src[i]);
	}
	return 0;
}

/* raw: where a gguf_a8 engine takes its GGUF-typed buffers' blocks (m
 * itself, or the GGUF file m names), NULL for other engines; planes: the
 * buffer goes to the device as the gemv_gguf kernels' planes (pc: their
 * cost), else as the file's blocks. A fused buffer (core/wparts.h) is its
 * parts' rows one after another in each layer, each part taken and checked
 * as a buffer of its own would be; the digest reads each part over every
 * layer in turn, as the build did (gen/build.c), so it is the unfused
 * engine's. */
static int upload_weights(rt_engine *e, const rt_engine_buf *b, const rt_engine_weights *m,
                          const rt_engine_weights *raw, bool planes, planes_cost *pc,
                          sw_digest *dg, sw_err *err)
{
	const char *field = strchr(b->name, '.') + 1;
	const char *parts[SW_WPARTS_MAX];
	int np = sw_wparts(field, parts);
	if (!np) {
		parts[0] = field;
		np = 1;
	}
	const bool layered = rt_manifest_field_layered(field);
	const int nl = layered ? (int)b->shape[0] : 1;
	const int64_t per = b->bytes / nl, k = b->rank ? b->shape[b->rank - 1] : 1;
	int rc = 0;
	/* a fused buffer's digest first: part by part (get's floats stay valid
	 * only until the next call) */
	for (int p = 0; p < np && np > 1 && !rc; p++)
		for (int l = 0; l < nl && !rc; l++) {
			size_t n = 0;
			const float *src = NULL;
			if (!(rc = m->get(m->user, parts[p], layered ? l : -1, &src, &n, err)))
				sw_digest_weight(dg, parts[p], layered ? l : -1, src, n);
		}
	void *stage = rc ? NULL : malloc((size_t)per);
	if (!rc && !stage)
		return sw_errf(err, SW_ENOMEM, "out of memory staging %s", b->name);
	for (int l = 0; l < nl && !rc; l++) {
		int64_t off = 0, planned = 0;
		for (int p = 0; p < np && !rc; p++) {
			size_t n = 0;
			const float *src = NULL;
			if ((rc = m->get(m->user, parts[p], layered ? l : -1, &src, &n, err)))
				break;
			const int64_t nb = src ? n_bytes(b->dtype, (int64_t)n) : -1;
			if (!src || nb < 0 || (np > 1 && (int64_t)n % k) || planned + nb > per) {
				rc = sw_errf(err, SW_EINVAL, "%s/engine.json: buffer %s (%lld bytes per %s) does "
				             "not match %s (%s%s: %zu elements)", e->man->dir, b->name,
				             (long long)per, layered ? "layer" : "buffer", m->name,
				             np > 1 ? "its part " : "", parts[p], n);
				break;
			}
			planned += nb;
			/* what is uploaded is what the build digested (gen/build.c) */
			if (np == 1)
				sw_digest_weight(dg, field, layered ? l : -1, src, n);
			int64_t wrote = 0;
			rc = stage_part(e, b, m, raw, parts[p], layered ? l : -1, src, n, (char *)stage + off,
			                per - off, &wrote, err);
			off += wrote;
		}
		if (!rc && planned != per)
			rc = sw_errf(err, SW_EINVAL, "%s/engine.json: buffer %s (%lld bytes per %s) does not "
			             "match %s (%lld bytes of its %s)", e->man->dir, b->name, (long long)per,
			             layered ? "layer" : "buffer", m->name, (long long)planned,
			             np > 1 ? "parts" : "weight");
		if (!rc && planes)
			rc = stage_planes(e, b, layered ? l : -1, per, stage, pc, err);
		if (!rc)
			rc = e->dev->ops->upload(e->dev, e->arena + (rt_dptr)(b->offset + l * per), stage,
			                         (size_t)per, err);
	}
	free(stage);
	return rc;
}

/* Launch record n: planned op x for its l-th repetition. */
static int resolve_one(rt_engine *e, const rt_engine_pop *x, int l, int n, sw_err *err)
{
	e->op_cost[2 * n] = x->est_bytes;
	e->op_cost[2 * n + 1] = x->est_flops;
	rt_op *o = &e->ops[n];
	o->kind = x->exec == RT_EXEC_KERNEL     ? RT_OP_KERNEL
	          : x->exec == RT_EXEC_CUBLASLT ? RT_OP_GEMM : RT_OP_MEMSET;
	snprintf(o->name, sizeof(o->name), "%s", x->name);
	snprintf(o->op, sizeof(o->op), "%s", x->op);
	snprintf(o->entry, sizeof(o->entry), "%s", x->entry);
	o->kinfo = x->kernel >= 0 ? &e->man->kernels[x->kernel] : NULL;
	memcpy(o->grid, x->grid, sizeof(o->grid));
	memcpy(o->block, x->block, sizeof(o->block));
	o->m = x->m;
	o->n = x->n;
	o->k = x->k;
	o->dtype = e->man->dtype;
	o->wtype = o->kind == RT_OP_GEMM && o->dtype == RT_GGUF_A8 && x->arg_buf[2] >= 0
	           ? rt_manifest_wtype(e->man->bufs[x->arg_buf[2]].dtype) : -1;
	o->bytes = x->bytes;
	o->dyn_smem = o->kinfo ? (unsigned)o->kinfo->dyn_smem : 0;
	o->layer = x->layers ? x->layer0 + l : -1;
	o->n_args = x->n_args;
	rt_op_fix_argv(o);
	for (int a = 0; a < x->n_args; a++) {
		if (x->arg_buf[a] < 0) /* extent.c refuses it: no kernel takes a scalar */
			return sw_errf(err, SW_EINVAL, "%s/engine.json: op %s args[%d]: a scalar, expected "
			               "a buffer", e->man->dir, x->name, a);
		const rt_engine_buf *b = &e->man->bufs[x->arg_buf[a]];
		rt_dptr p = e->arena + (rt_dptr)(b->offset + x->arg_off[a]);
		bool w = !strcmp(b->kind, "weight"), kv = !strcmp(b->kind, "kv");
		if (x->layers && (kv || (w && rt_manifest_field_layered(strchr(b->name, '.') + 1)))) {
			/* weights through the draft's layer map, caches by run layer */
			const int run = x->layer0 + l;
			int id = w && x->layers == 2 &&
			                 e->man->draft_kind == RT_ENGINE_DRAFT_LAYERSKIP
			             ? e->man->skip_layers[run] : run;
			if (id >= b->shape[0])
				return sw_errf(err, SW_EINVAL, "%s/engine.json: op %s layer %d: "
				               "buffer %s has %lld layers", e->man->dir, x->name, id,
				               b->name, (long long)b->shape[0]);
			p += (rt_dptr)(id * (b->bytes / b->shape[0]));
			if (a == 2 && o->wtype >= 0) /* gguf_a8: the layer's own type */
				o->wtype = rt_manifest_buf_wtype(b, id);
		}
		o->argval[a] = p;
	}
	if (e->dev->gguf_blocks && o->kind == RT_OP_KERNEL && !strcmp(x->op, "gemv_gguf") &&
	    o->n_args == 4) {
		/* (C, a16, a8, W): the device's own GEMM on the file's blocks, from
		 * the fp16 rows (it rounds them to int8 by quant_a8's rule itself) */
		int64_t kp[4] = {0, 0, 0, -1};
		static const char *const names[4] = {"M", "N", "K", "WTYPE"};
		for (int i = 0; o->kinfo && i < o->kinfo->n_params; i++)
			for (int j = 0; j < 4; j++)
				if (!strcmp(o->kinfo->params[i].name, names[j]))
					kp[j] = o->kinfo->params[i].i;
		o->kind = RT_OP_GEMM;
		o->dtype = RT_GGUF_A8;
		o->m = kp[0];
		o->n = kp[1];
		o->k = kp[2];
		o->wtype = (int)kp[3];
		o->argval[2] = o->argval[3];
		o->argval[3] = 0;
		o->n_args = 3;
		o->kinfo = NULL;
		o->entry[0] = 0;
	}
	if (e->dev->gguf_blocks && o->kind == RT_OP_KERNEL && !strcmp(x->op, "embedding_gguf")) {
		/* the table stays in the file's blocks there (upload_weights): the
		 * host adapter reads them so when wtype says their type */
		for (int i = 0; o->kinfo && i < o->kinfo->n_params; i++)
			if (!strcmp(o->kinfo->params[i].name, "WTYPE"))
				o->wtype = (int)o->kinfo->params[i].i;
	}
	return 0;
}

static int resolve_ops(rt_engine *e, sw_err *err)
{
	const rt_manifest *pl = e->man;
	int total = 0;
	for (int i = 0; i < pl->n_ops; i++)
		total += pl->ops[i].repeat;
	e->ops = calloc(total ? (size_t)total : 1, sizeof(*e->ops));
	e->op_cost = calloc(total ? (size_t)total : 1, 2 * sizeof(double));
	if (!e->ops || !e->op_cost)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	int n = 0;
	for (int ph = 0; ph < e->man->n_phases; ph++) {
		const rt_engine_phase *P = &e->man->phases[ph];
		int first = n;
		/* a run of consecutive per-layer ops (same repeat, same model) is
		 * one transformer block: executed layer by layer, each op of the
		 * block once per layer in plan order */
		for (int i0 = P->first; i0 < P->first + P->n;) {
			int i1 = i0 + 1;
			while (pl->ops[i0].repeat > 1 && i1 < P->first + P->n &&
			       pl->ops[i1].repeat == pl->ops[i0].repeat &&
			       pl->ops[i1].layers == pl->ops[i0].layers &&
			       pl->ops[i1].layer0 == pl->ops[i0].layer0)
				i1++;
			for (int l = 0; l < pl->ops[i0].repeat; l++)
				for (int i = i0; i < i1; i++) {
					const rt_engine_pop *x = &pl->ops[i];
					int rc = resolve_one(e, x, l, n, err);
					if (rc)
						return rc;
					n++;
				}
			i0 = i1;
		}
		e->ph_ops[ph].first = first;
		e->ph_ops[ph].n = n - first;
	}
	e->n_ops = n;
	return 0;
}

/* wseed NULL: the weights come from target (and draft); else they are
 * filled on the device from *wseed (random_weights.h), after the kernels
 * are loaded. */
static int bind(rt_engine *e, rt_dev *dev, const rt_engine_weights *target,
                const rt_engine_weights *draft, const uint64_t *wseed, uint64_t seed, sw_err *err)
{
	int rc;
	if (e->dev)
		return sw_errf(err, SW_EINVAL, "%s: engine already bound to a device", e->man->dir);
	/* the driver floor of the kernels' compiler (gen/build.c) */
	const int dv = dev->driver_version, need = e->man->min_driver;
	if (dv > 0 && need > 0 && dv < need)
		return sw_errf(err, SW_ENOTSUP, "%s/engine.json: the kernels were compiled by NVRTC %s "
		               "($.toolkit), whose cubins and PTX need a CUDA driver %d.%d or newer "
		               "($.toolkit.min_driver %d); this driver is %d.%d (cuDriverGetVersion %d): "
		               "update the driver, or rebuild the engine with a CUDA toolkit no newer "
		               "than %d.%d", e->man->dir, e->man->nvrtc_version, need / 1000,
		               need % 1000 / 10, need, dv / 1000, dv % 1000 / 10, dv, dv / 1000,
		               dv % 1000 / 10);
	if (wseed && (rc = rt_engine_random_check(e, err)))
		return rc;
	if (!wseed && (rc = check_model(e, target, &e->man->tcfg, "target", err)))
		return rc;
	const int dk = e->man->draft_kind;
	if (!wseed && (dk == RT_ENGINE_DRAFT_MODEL || dk == RT_ENGINE_DRAFT_BLOCK ||
	               dk == RT_ENGINE_DRAFT_EAGLE3)) {
		if (!draft)
			return sw_errf(err, SW_EINVAL, "%s: the engine drafts with %s: give its weights "
			               "(%s)", e->man->dir, dk == RT_ENGINE_DRAFT_BLOCK ? "a block drafter"
			               : dk == RT_ENGINE_DRAFT_EAGLE3 ? "an EAGLE-3 head" : "a separate model",
			               dk == RT_ENGINE_DRAFT_MODEL ? "--draft-model PATH"
			               : "its directory, $.spec.draft.path");
		if ((rc = check_model(e, draft, &e->man->dcfg, "draft", err)))
			return rc;
	}
	e->dev = dev;
	e->seed = seed;
	if ((rc = dev->ops->alloc(dev, (size_t)e->man->arena_bytes, &e->arena, err)))
		return sw_err_prefix(err, "%s: arena of %lld bytes", e->man->dir,
		                     (long long)e->man->arena_bytes);
	size_t hs = sizeof(int32_t) * (size_t)(RT_ST_WORDS + e->man->ring);
	e->host_state = dev->ops->alloc_host ? dev->ops->alloc_host(dev, hs) : malloc(hs);
	if (!e->host_state)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	sw_digest dg[2]; /* target, draft */
	sw_digest_init(&dg[0]);
	sw_digest_init(&dg[1]);
	/* gguf_a8: the target's blocks as its file stores them (a source
	 * without get_raw, such as a loaded model of any family, is read again
	 * from the GGUF file it names, for the blocks alone) */
	rt_engine_weights rawsrc = {0};
	rt_engine_gguf *rawg = NULL;
	const rt_engine_weights *raw = NULL;
	if (e->man->dtype == RT_GGUF_A8 && !wseed) {
		if (target->get_raw) {
			raw = target;
		} else if ((rawg = rt_engine_gguf_open_raw(target->name, &target->shape, &rawsrc, err))) {
			raw = &rawsrc;
		} else {
			return sw_err_prefix(err, "%s/engine.json: $.spec.dtype \"gguf_a8\" uploads the "
			                     "target GGUF's own blocks", e->man->dir);
		}
	}
	/* the weights the generated gemv_gguf and embedding_gguf kernels read
	 * (W, the table: one buffer for a tied head) go up as their planes,
	 * unless the device runs those ops itself on the file's blocks (host
	 * native: resolve_one) */
	bool *planes = calloc((size_t)e->man->n_bufs + 1, sizeof(*planes));
	planes_cost pc = {0};
	if (!planes) {
		rt_engine_gguf_close(rawg);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	for (int i = 0; i < e->man->n_ops && !dev->gguf_blocks; i++)
		if (!strcmp(e->man->ops[i].op, "gemv_gguf") && e->man->ops[i].n_args == 4 &&
		    e->man->ops[i].arg_buf[3] >= 0)
			planes[e->man->ops[i].arg_buf[3]] = true;
		else if (!strcmp(e->man->ops[i].op, "embedding_gguf") && e->man->ops[i].n_args == 4 &&
		         e->man->ops[i].arg_buf[1] >= 0)
			planes[e->man->ops[i].arg_buf[1]] = true;
	for (int i = 0; i < e->man->n_bufs && !wseed; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (strcmp(b->kind, "weight"))
			continue;
		const bool is_draft = !strncmp(b->name, "draft.", 6);
		const rt_engine_weights *m = is_draft ? draft : target;
		if (!strchr(b->name, '.') || !m) {
			rt_engine_gguf_close(rawg);
			free(planes);
			return sw_errf(err, SW_EINVAL, "%s/engine.json: weight buffer %s has no source",
			               e->man->dir, b->name);
		}
		if ((rc = upload_weights(e, b, m, is_draft ? NULL : raw,
		                         planes[i] && rt_manifest_wtype(b->dtype) >= 0, &pc,
		                         &dg[is_draft], err))) {
			rt_engine_gguf_close(rawg);
			free(planes);
			return rc;
		}
	}
	rt_engine_gguf_close(rawg);
	free(planes);
	if (pc.weights)
		fprintf(stderr, "specwright: %s: %d GGUF weights (%.1f MB) repacked into the GPU "
		        "kernels' planes in %.0f ms, each checked against the file's blocks in %.0f ms\n",
		        e->man->dir, pc.weights, (double)pc.bytes / 1e6, pc.repack_s * 1e3,
		        pc.check_s * 1e3);
	for (int r = 0; r < 2 && !wseed; r++) {
		const char *want = r ? e->man->draft_digest : e->man->target_digest;
		char got[32];
		sw_digest_format(&dg[r], got, sizeof(got));
		if (want[0] && strcmp(want, got))
			return sw_errf(err, SW_EINVAL, "%s: %s weights digest %s, but engine %s/engine.json "
			               "was built for %s ($.spec.%s.digest): other weights than the "
			               "engine's (same shapes, different values); give the model it was "
			               "built from, or rebuild the engine for this one",
			               (r ? draft : target)->name, r ? "draft" : "target", got, e->man->dir,
			               want, r ? "draft" : "target");
	}
	if ((rc = buf_copy(e, "tree_table", 0, e->man->tree_table,
	                   sizeof(int32_t) * 5 * (size_t)e->man->n_nodes, true, err)))
		return rc;
	if ((rc = resolve_ops(e, err)))
		return rc;
	for (int i = 0; i < e->n_ops; i++) {
		const rt_op *o = &e->ops[i];
		if (!dev->ops->supports_op || dev->ops->supports_op(dev, o))
			continue;
		/* an 8-bit GEMM: say which dtype only the host runs */
		const char *q8 = o->kind != RT_OP_GEMM || (!rt_dtype_q8(o->dtype) && o->dtype != RT_GGUF_A8)
		                 ? NULL
		                 : o->dtype == RT_GGUF_A8 ? "\"gguf_a8\" with its GEMMs as host GEMM ops "
		                                            "(an engine built before the GPU's gemv_gguf "
		                                            "kernels: rebuild it)"
		                 : o->dtype == RT_Q8_0_A8 ? "\"q8_0_a8\" (int8 GEMM activations)" : "\"q8_0\"";
		return sw_errf(err, SW_ENOTSUP, "%s: backend %s cannot run op %s (%s)%s%s%s", e->man->dir,
		               dev->desc, o->name, o->op, q8 ? ": engine.json $.spec.dtype is " : "",
		               q8 ? q8 : "", q8 && o->dtype != RT_GGUF_A8
		                             ? ", which only the host backend runs (build a bf16, fp16 or "
		                               "gguf_a8 engine for this backend)" : "");
	}
	if ((rc = dev->ops->load_kernels(dev, e->man->dir, e->ops, e->n_ops, err)))
		return rc;
	if (wseed && (rc = rt_engine_random_fill(e, *wseed, err)))
		return rc;
	/* gated phases on a device without conditional graph regions: every
	 * iteration runs eagerly, each gated phase after reading its flag
	 * (rt_engine_generate); said once, here */
	int gated = 0;
	for (int ph = e->man->ph_iter_first; ph < e->man->n_phases; ph++)
		gated += e->man->phases[ph].gate_buf >= 0;
	if (gated && dev->no_cond) {
		e->eager_gates = true;
		snprintf(e->notice, sizeof(e->notice), "%.200s: %.120s: conditional graph regions "
		         "unavailable (%.500s): the iteration runs eagerly, each of its %d gated phases "
		         "after reading its flag from the device", e->man->dir, dev->desc, dev->no_cond,
		         gated);
		fprintf(stderr, "specwright: note: %s\n", e->notice);
	}
	return rt_engine_ctrl_bind(e, err);
}

int rt_engine_bind(rt_engine *e, rt_dev *dev, const rt_engine_weights *target,
                   const rt_engine_weights *draft, uint64_t seed, sw_err *err)
{
	return bind(e, dev, target, draft, NULL, seed, err);
}

int rt_engine_bind_random(rt_engine *e, rt_dev *dev, uint64_t wseed, uint64_t seed, sw_err *err)
{
	return bind(e, dev, NULL, NULL, &wseed, seed, err);
}

/* --- running ------------------------------------------------------------- */

/* Runs (or, while capturing, records) phases [ph0, ph1). A gated phase is
 * a conditional region of the graph; run eagerly, its flag is read first.
 * The target's tree forward (phase "verify") is a rows region where the
 * device has them (device.h): the host sizes it to the nodes present.
 * target_only (eager): before it, only the bookkeeping (step) ops run and
 * every node but the root is made absent, so the forward is one row and
 * verification emits the target's own next token. */
int rt_engine_run_phases(rt_engine *e, int ph0, int ph1, bool target_only, int cap, sw_err *err)
{
	rt_dev *d = e->dev;
	const int ph_fwd = rt_manifest_phase_find(e->man, "verify"), nn = e->man->n_nodes;
	const rt_dptr tree_tok = rt_engine_buf_addr(e, "tree_tokens");
	for (int ph = ph0; ph < ph1; ph++) {
		const rt_engine_phase *P = &e->man->phases[ph];
		const bool skip_draft = target_only && ph < ph_fwd;
		const bool rows = ph == ph_fwd && d->ops->rows_begin && tree_tok && P->rows == nn;
		int rc = 0;
		if (target_only && ph == ph_fwd && nn > 1) {
			int32_t *none = malloc(sizeof(*none) * (size_t)(nn - 1));
			if (!none)
				return sw_errf(err, SW_ENOMEM, "out of memory");
			for (int i = 0; i < nn - 1; i++)
				none[i] = -1;
			rc = buf_copy(e, "tree_tokens", 4, none, sizeof(*none) * (size_t)(nn - 1), true, err);
			free(none);
			if (rc)
				return rc;
		}
		if (P->gate_buf >= 0) {
			rt_dptr flag = e->arena + (rt_dptr)(e->man->bufs[P->gate_buf].offset + 4 * P->gate_word);
			if (d->capturing) {
				if (!d->ops->graph_if_begin)
					return sw_errf(err, SW_ENOTSUP, "backend %s has no conditional graph "
					               "regions (phase %s)", d->desc, P->name);
				if ((rc = d->ops->graph_if_begin(d, flag, err)))
					return sw_err_prefix(err, "phase %s", P->name);
			} else {
				int32_t go = 0;
				if ((rc = d->ops->download(d, &go, flag, sizeof(go), err)))
					return rc;
				if (!go)
					continue;
			}
		}
		if (rows && (rc = d->ops->rows_begin(d, tree_tok, nn, cap > 0 && cap < nn ? cap : nn, err)))
			return sw_err_prefix(err, "phase %s", P->name);
		const rt_engine_span *S = &e->ph_ops[ph];
		for (int i = S->first; i < S->first + S->n && !rc; i++) {
			if (i + 1 < e->n_ops) /* the next op's record, read under this op */
				rt_op_prefetch(&e->ops[i + 1]);
			if ((!skip_draft || !strcmp(e->ops[i].op, "step")) &&
			    (rc = d->ops->launch(d, &e->ops[i], err)))
				return sw_err_prefix(err, "phase %s, op %s", P->name, e->ops[i].name);
		}
		if (rows && (rc = d->ops->rows_end(d, err)))
			return sw_err_prefix(err, "phase %s", P->name);
		if (P->gate_buf >= 0 && d->capturing && (rc = d->ops->graph_if_end(d, err)))
			return sw_err_prefix(err, "phase %s", P->name);
	}
	return 0;
}

/* The op writing buffer b (its first argument) in the iteration's phases,
 * as "lm_head (phase verify)" or "lm_head (phases draft_0 .. draft_4)". */
static void writer_name(const rt_engine *e, int b, char *out, size_t n)
{
	const rt_manifest *m = e->man;
	int first = -1, last = -1, op = -1;
	for (int ph = m->ph_iter_first; ph < m->n_phases; ph++)
		for (int i = m->phases[ph].first; i < m->phases[ph].first + m->phases[ph].n; i++)
			if (m->ops[i].n_args > 0 && m->ops[i].arg_buf[0] == b) {
				if (first < 0)
					first = ph, op = i;
				last = ph;
			}
	if (op < 0)
		snprintf(out, n, "none of this iteration's ops");
	else if (first == last)
		snprintf(out, n, "op %s (phase %s)", m->ops[op].name, m->phases[first].name);
	else
		snprintf(out, n, "op %s (phases %s .. %s)", m->ops[op].name, m->phases[first].name,
		         m->phases[last].name);
}

/* Host backends, after each iteration: the logits it computed are finite.
 * A NaN or an inf would otherwise be drawn as some token by the verify and
 * expansion kernels without a word (a weight that passed the load scan can
 * still overflow in the forward). The target's rows are those the verify
 * forward ran (through the last present tree node), a draft's its whole
 * buffer (rows of earlier levels were finite when checked). Read in place:
 * the host backend's device addresses are host addresses (dev_host.c
 * host_alloc_fn), and a copy would cost more than the scan (some 20 GB/s,
 * 70 us for SmolLM2's 7 verify rows here). Not on cuda: the copy each
 * iteration would cost more than the iteration's GEMVs. */
static int check_logits(rt_engine *e, int iter, sw_err *err)
{
	static const char *const names[] = {"logits", "draft_logits"};
	if (strcmp(e->dev->ops->name, "host"))
		return 0;
	const sw_wformat *f32 = sw_wformat_get(SW_WT_F32);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		const int b = rt_manifest_buf_find(e->man, names[k]);
		if (b < 0 || strcmp(e->man->bufs[b].dtype, "f32") || e->man->bufs[b].rank != 2)
			continue;
		const int64_t V = e->man->bufs[b].shape[1];
		int64_t rows = e->man->bufs[b].shape[0];
		const rt_dptr tt = rt_engine_buf_addr(e, "tree_tokens");
		if (k == 0 && tt) {
			const int32_t *tok = (const int32_t *)(uintptr_t)tt;
			int last = 0;
			for (int i = e->man->n_nodes - 1; i > 0; i--)
				if (tok[i] >= 0) {
					last = i;
					break;
				}
			rows = last + 1 < rows ? last + 1 : rows;
		}
		const float *x = (const float *)(uintptr_t)rt_engine_buf_addr(e, names[k]);
		const int64_t bad = sw_wformat_find_nonfinite(f32, x, (uint64_t)(rows * V));
		if (bad < 0)
			continue;
		char by[160];
		writer_name(e, b, by, sizeof(by));
		return sw_errf(err, SW_EINVAL, "%s: iteration %d: non-finite logit %g in buffer %s (row "
		               "%lld, token id %lld), written by %s: no token is drawn from a NaN or an "
		               "infinity", e->man->dir, iter, (double)x[bad], names[k],
		               (long long)(bad / V), (long long)(bad % V), by);
	}
	return 0;
}

static int upload_i32(rt_engine *e, const char *buf, int64_t word, const int32_t *v, int n,
                      sw_err *err)
{
	return buf_copy(e, buf, 4 * word, (void *)v, sizeof(*v) * (size_t)n, true, err);
}

/* The prompt's first n_pre tokens in chunks of C rows. An EAGLE-3 engine
 * (gen/drafter_eagle3.c) commits head rows r < C - 1 of a chunk (each needs
 * the token after it), so its chunks step by C - 1, and *hrow gets the row
 * of the last chunk whose features the first root row reads. */
static int prefill(rt_engine *e, const int32_t *prompt, int n_pre, int32_t *hrow, sw_err *err)
{
	const int C = e->man->chunk;
	const bool e3 = e->man->draft_kind == RT_ENGINE_DRAFT_EAGLE3;
	int32_t *tok = malloc(sizeof(*tok) * (size_t)C * 2), *pos = tok + C;
	int rc = 0;
	if (!tok)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	for (int done = 0; done < n_pre && !rc;) {
		/* a short tail re-runs the chunk ending at n_pre (recomputing rows
		 * the cache already holds, identically) rather than run past it */
		int start = done + C > n_pre && n_pre >= C ? n_pre - C : done;
		int real = n_pre - start < C ? n_pre - start : C;
		for (int i = 0; i < C; i++) {
			tok[i] = i < real ? prompt[start + i] : prompt[n_pre - 1];
			pos[i] = start + i;
		}
		int32_t lens[2] = {start, start};
		if ((rc = upload_i32(e, "tokens", 0, tok, C, err)) || (rc = upload_i32(e, "pos", 0, pos, C, err)) ||
		    (rc = upload_i32(e, "state", RT_ST_TLEN, lens, 2, err)) ||
		    (e3 && (rc = upload_i32(e, "state", RT_ST_HLEN, &start, 1, err))))
			break;
		rc = rt_engine_run_phases(e, e->man->ph_prefill, e->man->ph_prefill + 1, false, 0, err);
		*hrow = real - 1;
		if (e3 && start + real >= n_pre)
			break;
		done = e3 ? start + real - 1 : start + real;
	}
	free(tok);
	return rc;
}

int rt_engine_generate(rt_engine *e, const rt_engine_run *r, int32_t *out, rt_engine_stats *st,
                       sw_err *err)
{
	rt_dev *d = e->dev;
	int rc;
	memset(st, 0, sizeof(*st));
	if (!d)
		return sw_errf(err, SW_EINVAL, "%s: engine not bound to a device", e->man->dir);
	const int P = r->n_prompt;
	if (P < 1)
		return sw_errf(err, SW_EINVAL, "empty prompt: need at least one token");
	if (r->max_new < 1)
		return sw_errf(err, SW_EINVAL, "max_new %d: need at least 1", r->max_new);
	if (P + e->man->n_nodes > e->man->max_ctx)
		return sw_errf(err, SW_ERANGE, "prompt of %d tokens plus the %d-node tree exceeds the "
		               "engine's max_context %d (%s/engine.json): shorten the prompt or build "
		               "with a larger max_context", P, e->man->n_nodes, e->man->max_ctx, e->man->dir);
	for (int i = 0; i < P; i++)
		if (r->prompt[i] < 0 || r->prompt[i] >= e->man->tcfg.vocab)
			return sw_errf(err, SW_EINVAL, "prompt token %d: id %d outside the vocabulary [0, %d)",
			               i, r->prompt[i], e->man->tcfg.vocab);
	if (r->target_only && rt_manifest_phase_find(e->man, "verify") < 0)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: target-only decoding needs the target's "
		               "tree forward, phase \"verify\"; the engine has none", e->man->dir);
	const rt_engine_sampling *samp = r->samp ? r->samp : &e->man->samp;
	if ((rc = rt_engine_check_sampling(e, samp, err)))
		return rc;
	int32_t sw[RT_SP_WORDS];
	sampling_words(e, samp, sw);
	if ((rc = upload_i32(e, "sampling", 0, sw, RT_SP_WORDS, err)))
		return rc;
	st->n_prompt = P;
	const double ops0 = d->stats.seconds_ops;
	double t0 = sw_now_s();
	const bool e3 = e->man->draft_kind == RT_ENGINE_DRAFT_EAGLE3;
	if (e3 && e->man->chunk < 2)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: $.spec.prefill_chunk: expected at least 2 "
		               "in an EAGLE-3 engine (a chunk's head rows pair each position with the next "
		               "token), found %d", e->man->dir, e->man->chunk);
	/* an EAGLE-3 engine on a one-token prompt has no features to draft
	 * from: its first iteration runs target-only (eagerly), which computes
	 * the root's features, and the head's length is set to TLEN - 1 after it */
	bool e3_first = e3 && P == 1;
	int32_t hrow = 0;
	if ((rc = prefill(e, r->prompt, P - 1, &hrow, err)))
		return rc;
	int32_t hdr[RT_ST_WORDS] = {0}, zero[8] = {0};
	hdr[RT_ST_TLEN] = hdr[RT_ST_DLEN] = P - 1;
	hdr[RT_ST_HLEN] = P >= 2 ? P - 2 : 0; /* EAGLE-3: the head's rows whose token is committed */
	hdr[RT_ST_HROW] = hrow;
	hdr[RT_ST_ROOT] = r->prompt[P - 1];
	hdr[RT_ST_LAST] = P >= 2 ? r->prompt[P - 2] : -1;
	hdr[RT_ST_MAXNEW] = r->max_new;
	hdr[RT_ST_EOS] = r->eos;
	if ((rc = upload_i32(e, "state", 0, hdr, RT_ST_WORDS, err)) ||
	    (rc = upload_i32(e, "iter", 0, zero, 1, err)) ||
	    (rc = upload_i32(e, "counts", 0, zero, 5, err)) ||
	    (rc = upload_i32(e, "kv_done", 0, zero, 2, err)))
		return rc;
	if (rt_engine_buf_addr(e, "ngram_hist") && (rc = upload_i32(e, "ngram_hist", 0, r->prompt, P, err)))
		return rc;
	if ((rc = rt_engine_ctrl_reset(e, err))) /* per request: nothing that ran before counts */
		return rc;
	st->ctrl = e->man->ctrl != RT_CTRL_NONE;
	st->ngram_first = rt_manifest_buf_find(e->man, "e3_go") >= 0;
	if ((rc = d->ops->sync(d, err)))
		return rc;
	st->t_prefill = sw_now_s() - t0;

	const int ph0 = e->man->ph_iter_first, ph1 = e->man->n_phases;
	const bool eager = r->eager || r->target_only || e->eager_gates;
	if (!eager && !e->graph) {
		double tc = sw_now_s();
		if ((rc = d->ops->graph_begin(d, err)))
			return rc;
		rc = rt_engine_run_phases(e, ph0, ph1, false, 0, err);
		rt_graph *g = NULL;
		int rc2 = d->ops->graph_end(d, &g, rc ? NULL : err);
		if (rc || rc2) {
			if (g)
				d->ops->graph_free(d, g);
			return rc ? rc : rc2;
		}
		e->graph = g;
		st->t_capture = sw_now_s() - tc;
	}

	const double ops1 = d->stats.seconds_ops;
	t0 = sw_now_s();
	int n_out = 0, stop = 0;
	const size_t hbytes = sizeof(int32_t) * (size_t)(RT_ST_WORDS + e->man->ring);
	while (!stop) {
		rc = eager || e3_first ? rt_engine_run_phases(e, ph0, ph1, r->target_only || e3_first, 0, err)
		                       : d->ops->graph_launch(d, e->graph, err);
		if (!rc && e3_first) { /* its commit advanced the head's length from 0: TLEN - 1 = 0 */
			const int32_t zero1 = 0;
			rc = upload_i32(e, "state", RT_ST_HLEN, &zero1, 1, err);
		}
		if (rc || (rc = check_logits(e, st->n_iters + 1, err)) ||
		    (rc = buf_copy(e, "state", 0, e->host_state, hbytes, false, err)))
			return rc;
		const int32_t *hs = e->host_state, *ring = hs + RT_ST_WORDS;
		const int nout = hs[RT_ST_NOUT];
		if (nout <= n_out || nout - n_out > e->man->depth + 1)
			return sw_errf(err, SW_EINVAL, "iteration %d: the device reported %d tokens after %d "
			               "(a kernel broke the state invariant)", st->n_iters, nout, n_out);
		if (nout - n_out > e->man->ring)
			return sw_errf(err, SW_EINVAL, "output ring of %d overrun", e->man->ring);
		const int first = n_out, acc = nout - n_out - 1;
		/* depths tried: up to the first rejection, and with a controller
		 * only those it let the iteration draft */
		int kd = e->man->depth;
		if (st->ctrl) {
			kd = hs[RT_ST_DRAFTED] < 0 ? 0 : hs[RT_ST_DRAFTED] > kd ? kd : hs[RT_ST_DRAFTED];
			st->drafted[kd]++;
			if (acc > kd)
				return sw_errf(err, SW_EINVAL, "iteration %d: %d tokens accepted of %d "
				               "drafted (a kernel broke the state invariant)", st->n_iters,
				               acc, kd);
		}
		if (st->ngram_first && !r->target_only && !e3_first)
			st->by_head += hs[RT_ST_HEAD] != 0;
		if (r->trace && st->n_iters < r->trace_cap)
			r->trace[st->n_iters] = (int8_t)(st->ctrl ? kd : -1);
		for (int dd = 0; dd < kd && dd <= acc && dd < RT_ENGINE_MAX_DEPTH && !e3_first; dd++) {
			st->pos_tried[dd]++;
			st->pos_accepted[dd] += dd < acc;
		}
		for (; n_out < nout; n_out++) {
			out[n_out] = ring[n_out % e->man->ring];
			if (r->is_eog && r->is_eog(r->eog_user, out[n_out]) && !stop) {
				stop = RT_STOP_EOS;
				n_out++;
				break;
			}
		}
		st->n_iters++;
		e3_first = false;
		if (r->on_tokens) {
			/* the caller's streaming (detokenise, write) is not engine overhead */
			double tcb = sw_now_s();
			if (r->on_tokens(r->cb_user, out + first, n_out - first))
				stop = stop ? stop : RT_STOP_EOS;
			st->t_callback += sw_now_s() - tcb;
		}
		if (hs[RT_ST_STOP])
			stop = hs[RT_ST_STOP];
		if (n_out >= r->max_new)
			stop = stop ? stop : RT_STOP_MAXNEW;
	}
	st->t_decode = sw_now_s() - t0;
	st->t_ops = d->stats.seconds_ops - ops1;
	st->t_prefill -= 0; /* prefill op time stays inside t_prefill */
	(void)ops0;
	st->n_tokens = n_out;
	st->stop = stop;
	st->host_overhead_us =
		st->n_iters ? 1e6 * (st->t_decode - st->t_ops - st->t_callback) / st->n_iters : 0;
	return n_out;
}

/* --- profile ------------------------------------------------------------- */

typedef struct prof_row {
	char phase[32], name[48];
	int launches;
	double seconds, bytes, flops;
} prof_row;

int rt_engine_profile(rt_engine *e, const int32_t *prompt, int n_prompt, int iters, int rows,
                      const rt_engine_sampling *samp, FILE *f, sw_err *err)
{
	const int ph_v = rt_manifest_phase_find(e->man, "verify");
	const rt_dptr tree_tok = rt_engine_buf_addr(e, "tree_tokens");
	if (rows > 0 && (!e->dev->ops->rows_begin || ph_v < 0 || !tree_tok ||
	                 e->man->phases[ph_v].rows != e->man->n_nodes))
		return sw_errf(err, SW_EINVAL, "%s: --rows: the verify forward by rows needs a device "
		               "with rows regions (host) and an engine whose verify phase runs its %d "
		               "tree nodes; found %s%s", e->man->dir, e->man->n_nodes, e->dev->desc,
		               ph_v < 0 || !tree_tok ? ", no verify phase" : "");
	if (rows > e->man->n_nodes)
		return sw_errf(err, SW_EINVAL, "%s: --rows %d: the verify forward has %d rows (the "
		               "tree's nodes): expected 1 to %d", e->man->dir, rows, e->man->n_nodes,
		               e->man->n_nodes);
	rt_engine_stats st;
	int32_t *out = malloc(sizeof(*out) * 2);
	prof_row *tab = calloc((size_t)e->n_ops, sizeof(*tab));
	int n_tab = 0, rc;
	if (!out || !tab) {
		free(out);
		free(tab);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	/* prefill and state set-up through generate (one token), then eager
	 * iterations with a sync after every op; the device's own state keeps
	 * advancing, so every iteration is a real one */
	rt_engine_run r = {.prompt = prompt, .n_prompt = n_prompt, .max_new = 1 << 30, .eos = -1,
	                   .eager = true, .samp = samp};
	r.max_new = 1;
	if ((rc = rt_engine_generate(e, &r, out, &st, err)) < 0)
		goto out;
	int32_t big = 1 << 30;
	if ((rc = upload_i32(e, "state", RT_ST_MAXNEW, &big, 1, err)))
		goto out;
	int32_t zero = 0;
	if ((rc = upload_i32(e, "state", RT_ST_STOP, &zero, 1, err)))
		goto out;
	if (rows > 0) { /* every node present (token 0), as the bench's rows table */
		int32_t tok[RT_ENGINE_MAX_NODES] = {0};
		if ((rc = e->dev->ops->upload(e->dev, tree_tok, tok,
		                              sizeof(*tok) * (size_t)e->man->n_nodes, err)) ||
		    (rc = e->dev->ops->sync(e->dev, err)))
			goto out;
	}
	double t_all = 0;
	for (int it = 0; it < iters && !rc; it++) {
		if (rows > 0 && (rc = e->dev->ops->rows_begin(e->dev, tree_tok, e->man->n_nodes, rows,
		                                              err)))
			break;
		for (int ph = rows > 0 ? ph_v : e->man->ph_iter_first;
		     ph < (rows > 0 ? ph_v + 1 : e->man->n_phases) && !rc; ph++)
			for (int i = e->ph_ops[ph].first;
			     i < e->ph_ops[ph].first + e->ph_ops[ph].n; i++) {
				double t0 = sw_now_s();
				if ((rc = e->dev->ops->launch(e->dev, &e->ops[i], err)) ||
				    (rc = e->dev->ops->sync(e->dev, err)))
					break;
				double dt = sw_now_s() - t0;
				t_all += dt;
				int k = 0;
				while (k < n_tab && (strcmp(tab[k].phase, e->man->phases[ph].name) ||
				                      strcmp(tab[k].name, e->ops[i].name)))
					k++;
				if (k == n_tab) {
					snprintf(tab[k].phase, sizeof(tab[k].phase), "%s", e->man->phases[ph].name);
					snprintf(tab[k].name, sizeof(tab[k].name), "%s", e->ops[i].name);
					n_tab++;
				}
				tab[k].launches++;
				tab[k].seconds += dt;
				tab[k].bytes += e->op_cost[2 * i];
				tab[k].flops += e->op_cost[2 * i + 1];
			}
		if (rows > 0 && !rc)
			rc = e->dev->ops->rows_end(e->dev, err);
	}
	if (rc)
		goto out;
	if (rows > 0)
		fprintf(f, "profile of %s on %s: the verify forward at %d of its %d rows, %d replays, "
		        "per replay %.3f ms (synchronised after every op; GB/s and GFLOP/s from the "
		        "planned %d rows)\n", e->man->name, e->dev->desc, rows, e->man->n_nodes, iters,
		        iters ? 1e3 * t_all / iters : 0.0, e->man->n_nodes);
	else
		fprintf(f, "profile of %s on %s: %d iterations, per iteration %.3f ms (synchronised "
		        "after every op: launch latency included)\n", e->man->name, e->dev->desc,
		        iters, iters ? 1e3 * t_all / iters : 0.0);
	fprintf(f, "%-16s %-18s %8s %12s %10s %10s %6s\n", "phase", "op", "launches", "us/iter",
	        "GB/s", "GFLOP/s", "share");
	for (int k = 0; k < n_tab; k++) {
		const prof_row *w = &tab[k];
		fprintf(f, "%-16s %-18s %8d %12.2f %10.2f %10.2f %5.1f%%\n", w->phase, w->name,
		        w->launches / (iters ? iters : 1), 1e6 * w->seconds / (iters ? iters : 1),
		        w->seconds > 0 ? w->bytes / w->seconds * 1e-9 : 0.0,
		        w->seconds > 0 ? w->flops / w->seconds * 1e-9 : 0.0,
		        t_all > 0 ? 100.0 * w->seconds / t_all : 0.0);
	}
	rc = 0;
out:
	free(out);
	free(tab);
	return rc < 0 ? rc : 0;
}

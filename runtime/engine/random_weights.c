/* Random weights on the device for timing (random_weights.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/philox.h"
#include "random_weights.h"

/* The weight buffer's field (the name after "target." / "draft."). */
static const char *field_of(const rt_engine_buf *b)
{
	const char *dot = strchr(b->name, '.');
	return dot ? dot + 1 : b->name;
}

bool rt_engine_random_map(const rt_engine_buf *b)
{
	const char *f = field_of(b);
	return !strcmp(b->kind, "weight") && !strcmp(b->dtype, "i32") &&
	       (!strcmp(f, "d2t") || !strcmp(f, "t2d"));
}

bool rt_engine_random_has_maps(const rt_engine *e)
{
	for (int i = 0; i < e->man->n_bufs; i++)
		if (rt_engine_random_map(&e->man->bufs[i]))
			return true;
	return false;
}

int rt_engine_random_maps(uint64_t wseed, int Vd, int V, int32_t *d2t, int32_t *t2d)
{
	if (Vd < 1 || V < Vd)
		return -1;
	int32_t *perm = malloc(sizeof(*perm) * (size_t)V);
	if (!perm)
		return -1;
	for (int i = 0; i < V; i++)
		perm[i] = i;
	/* the first Vd steps of a Fisher-Yates shuffle: a uniform Vd-prefix */
	uint32_t w[4];
	for (int i = 0; i < Vd; i++) {
		if (i % 4 == 0)
			sw_rand_u32x4(wseed, (uint32_t)(i / 4), 0, SW_RNG_FILL, RT_RANDOM_MAP_LANE, w);
		const int j = i + (int)(w[i % 4] % (uint32_t)(V - i));
		const int32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int v = 0; v < V; v++)
		t2d[v] = -1;
	for (int i = 0; i < Vd; i++) {
		d2t[i] = perm[i];
		t2d[perm[i]] = i;
	}
	free(perm);
	return 0;
}

static const rt_kernel_info *fill_kernel(const rt_engine *e)
{
	static const char suffix[] = "fill_random.cu.tmpl";
	for (int i = 0; i < e->man->n_kernels; i++) {
		const char *t = e->man->kernels[i].tmpl;
		size_t n = strlen(t);
		if (n >= sizeof(suffix) - 1 && !strcmp(t + n - (sizeof(suffix) - 1), suffix))
			return &e->man->kernels[i];
	}
	return NULL;
}

int rt_engine_random_check(const rt_engine *e, sw_err *err)
{
	if (rt_dtype_q8(e->man->dtype))
		return sw_errf(err, SW_ENOTSUP, "%s/engine.json: $.spec.dtype is \"%s\": --random-weights "
		               "fills fp16, bf16 and f32 weights, not Q8_0 blocks (build a bf16 or fp16 "
		               "engine to time the shape)", e->man->dir,
		               e->man->dtype == RT_Q8_0_A8 ? "q8_0_a8" : "q8_0");
	if (!fill_kernel(e))
		return sw_errf(err, SW_EINVAL, "%s/engine.json: $.kernels has no fill_random kernel (the "
		               "engine was built before --random-weights existed): rebuild it with "
		               "`specwright build SPEC -o %s`", e->man->dir, e->man->dir);
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (!strcmp(b->kind, "weight") && strcmp(b->dtype, "f32") && strcmp(b->dtype, "fp16") &&
		    strcmp(b->dtype, "bf16") && !rt_engine_random_map(b))
			return sw_errf(err, SW_ENOTSUP, "%s/engine.json: weight buffer %s has dtype \"%s\": "
			               "--random-weights fills f32, fp16 and bf16 weights and the i32 id "
			               "maps d2t and t2d only", e->man->dir, b->name, b->dtype);
	}
	/* the maps come in pairs: d2t (Vd) with t2d (V), Vd <= V */
	const rt_engine_buf *d2t = NULL, *t2d = NULL;
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (rt_engine_random_map(b))
			*(!strcmp(field_of(b), "d2t") ? &d2t : &t2d) = b;
	}
	if ((d2t || t2d) && (!d2t || !t2d || d2t->bytes > t2d->bytes))
		return sw_errf(err, SW_EINVAL, "%s/engine.json: id maps: expected d2t (Vd ids) with t2d "
		               "(V >= Vd ids), found %s %lld bytes, %s %lld bytes", e->man->dir,
		               d2t ? d2t->name : "no d2t", d2t ? (long long)d2t->bytes : 0LL,
		               t2d ? t2d->name : "no t2d", t2d ? (long long)t2d->bytes : 0LL);
	return 0;
}

bool rt_engine_random_range(const rt_engine_buf *b, float *a, float *c)
{
	const char *field = field_of(b);
	if (!strcmp(field, "inv_freq") || !strcmp(field, "rope_freq") || rt_engine_random_map(b))
		return false;
	if (strstr(field, "norm")) {
		*c = 1.0f;
		*a = 0.0625f;
	} else {
		*c = 0.0f;
		*a = (float)(1.0 / sqrt((double)(b->rank > 0 ? b->shape[b->rank - 1] : 1)));
	}
	return true;
}

/* RoPE frequencies theta^(-2i/head_dim): inv_freq one table of n = head_dim / 2
 * (plain RoPE, no scaling); rope_freq (Gemma 3's per-layer tables, (layers,
 * head_dim / 2)) that table in every row, the global base's: the manifest
 * does not carry the local layers' base */
static int upload_inv_freq(rt_engine *e, const rt_engine_buf *b, sw_err *err)
{
	const bool draft = !strncmp(b->name, "draft.", 6);
	const rt_engine_shape *sh = draft && e->man->dcfg.head_dim ? &e->man->dcfg : &e->man->tcfg;
	const int64_t n = b->bytes / 4, row = b->rank >= 2 && b->shape[b->rank - 1] > 0
	                                      ? b->shape[b->rank - 1] : n;
	float *f = malloc(sizeof(*f) * (size_t)(n ? n : 1));
	if (!f)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	for (int64_t i = 0; i < n; i++)
		f[i] = (float)pow((double)sh->rope_theta, -2.0 * (double)(i % row) / (double)(2 * row));
	int rc = e->dev->ops->upload(e->dev, e->arena + (rt_dptr)b->offset, f, sizeof(*f) * (size_t)n, err);
	free(f);
	return rc;
}

/* d2t and t2d (checked as a pair by rt_engine_random_check): a valid map */
static int upload_maps(rt_engine *e, uint64_t wseed, sw_err *err)
{
	const rt_engine_buf *d2t = NULL, *t2d = NULL;
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (rt_engine_random_map(b))
			*(!strcmp(field_of(b), "d2t") ? &d2t : &t2d) = b;
	}
	if (!d2t)
		return 0;
	const int Vd = (int)(d2t->bytes / 4), V = (int)(t2d->bytes / 4);
	int32_t *d = malloc(sizeof(*d) * ((size_t)Vd + (size_t)V)), *t = d ? d + Vd : NULL;
	if (!d)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	int rc = rt_engine_random_maps(wseed, Vd, V, d, t);
	if (rc)
		rc = sw_errf(err, SW_EINVAL, "%s: id maps of %d draft and %d target ids", e->man->dir, Vd, V);
	if (!rc)
		rc = e->dev->ops->upload(e->dev, e->arena + (rt_dptr)d2t->offset, d, sizeof(*d) * (size_t)Vd, err);
	if (!rc)
		rc = e->dev->ops->upload(e->dev, e->arena + (rt_dptr)t2d->offset, t, sizeof(*t) * (size_t)V, err);
	free(d);
	return rc;
}

int rt_engine_random_fill(rt_engine *e, uint64_t wseed, sw_err *err)
{
	enum { BLOCK = 256, MAX_GRID = 65536 };
	const rt_kernel_info *k = fill_kernel(e);
	int rc;
	if (!k)
		return rt_engine_random_check(e, err);
	rt_op op;
	memset(&op, 0, sizeof(op));
	op.kind = RT_OP_KERNEL;
	snprintf(op.name, sizeof(op.name), "fill_random");
	snprintf(op.op, sizeof(op.op), "fill_random");
	snprintf(op.entry, sizeof(op.entry), "%s", k->uri);
	op.kinfo = k;
	op.block[0] = BLOCK;
	op.block[1] = op.block[2] = 1;
	op.grid[1] = op.grid[2] = 1;
	op.n_args = 7;
	op.layer = -1;
	rt_op_fix_argv(&op);
	if ((rc = e->dev->ops->load_kernels(e->dev, e->man->dir, &op, 1, err)))
		return rc;
	if ((rc = rt_engine_random_check(e, err)) || (rc = upload_maps(e, wseed, err)))
		return rc;
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		float a, c;
		if (strcmp(b->kind, "weight") || rt_engine_random_map(b))
			continue;
		if (!rt_engine_random_range(b, &a, &c)) {
			if ((rc = upload_inv_freq(e, b, err)))
				return rc;
			continue;
		}
		const bool f32 = !strcmp(b->dtype, "f32"), f16 = !strcmp(b->dtype, "fp16");
		const uint64_t n = (uint64_t)b->bytes / (f32 ? 4 : 2);
		const uint64_t groups = (n + 3) / 4, blocks = (groups + BLOCK - 1) / BLOCK;
		uint32_t ab, cb;
		memcpy(&ab, &a, 4);
		memcpy(&cb, &c, 4);
		op.grid[0] = (unsigned)(blocks < MAX_GRID ? (blocks ? blocks : 1) : MAX_GRID);
		op.argval[0] = e->arena + (rt_dptr)b->offset;
		op.argval[1] = n;
		op.argval[2] = wseed;
		op.argval[3] = (uint64_t)i;
		op.argval[4] = f32 ? 0 : f16 ? 1 : 2;
		op.argval[5] = ab;
		op.argval[6] = cb;
		if ((rc = e->dev->ops->launch(e->dev, &op, err)))
			return sw_err_prefix(err, "%s: filling %s", e->man->dir, b->name);
	}
	return e->dev->ops->sync(e->dev, err);
}

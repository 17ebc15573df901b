/* Random weights on the device for timing (random_weights.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "random_weights.h"

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
		    strcmp(b->dtype, "bf16"))
			return sw_errf(err, SW_ENOTSUP, "%s/engine.json: weight buffer %s has dtype \"%s\": "
			               "--random-weights fills f32, fp16 and bf16 only", e->man->dir, b->name,
			               b->dtype);
	}
	return 0;
}

bool rt_engine_random_range(const rt_engine_buf *b, float *a, float *c)
{
	const char *dot = strchr(b->name, '.');
	const char *field = dot ? dot + 1 : b->name;
	if (!strcmp(field, "inv_freq") || !strcmp(field, "rope_freq"))
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

/* RoPE frequencies theta^(-2i/head_dim), i < n (plain RoPE: timing only) */
static int upload_inv_freq(rt_engine *e, const rt_engine_buf *b, sw_err *err)
{
	const bool draft = !strncmp(b->name, "draft.", 6);
	const rt_engine_shape *sh = draft && e->man->dcfg.head_dim ? &e->man->dcfg : &e->man->tcfg;
	const int64_t n = b->bytes / 4;
	float *f = malloc(sizeof(*f) * (size_t)(n ? n : 1));
	if (!f)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	for (int64_t i = 0; i < n; i++)
		f[i] = (float)pow((double)sh->rope_theta, -2.0 * (double)i / (double)(2 * n));
	int rc = e->dev->ops->upload(e->dev, e->arena + (rt_dptr)b->offset, f, sizeof(*f) * (size_t)n, err);
	free(f);
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
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		float a, c;
		if (strcmp(b->kind, "weight"))
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

/* gguf_a8 weight buffers whose layers differ in GGUF type (a Q4_K_M file's
 * Q4_K and Q6_K layers of one field): engine.json's "layer_dtypes", read and
 * checked here (manifest.h rt_manifest_buf_wtype). The buffer's own dtype
 * is the layer stride's type (gen/plan_gguf.h): each layer's blocks must
 * fit its slice. */
#include <stdlib.h>
#include <string.h>

#include "core/wformat.h"
#include "manifest.h"

int rt_manifest_parse_ltypes(rt_engine_buf *x, const json_value *lt, const char *file,
                             const char *p, sw_err *err)
{
	if (!lt)
		return 0;
	if (lt->type != JSON_ARRAY)
		return sw_errf(err, SW_EINVAL, "%s: %s.layer_dtypes (%s): %s, expected an array of "
		               "GGUF block types", file, p, x->name, json_type_name(lt->type));
	const int wt = rt_manifest_wtype(x->dtype);
	if (wt < 0 || strcmp(x->kind, "weight") || x->rank != 3 || (int64_t)lt->n != x->shape[0])
		return sw_errf(err, SW_EINVAL, "%s: %s.layer_dtypes (%s): %zu types for a %s %s buffer "
		               "of rank %d, expected a layered GGUF-typed weight with one type a layer "
		               "(%lld)", file, p, x->name, lt->n, x->dtype, x->kind, x->rank,
		               (long long)(x->rank ? x->shape[0] : 0));
	int64_t stride;
	if (__builtin_mul_overflow(x->shape[1], x->shape[2] / sw_wformat_block(wt), &stride) ||
	    __builtin_mul_overflow(stride, sw_wformat_block_bytes(wt), &stride))
		return sw_errf(err, SW_EINVAL, "%s: %s.shape (%s): %lld x %lld, expected a layer of "
		               "fewer than 2^63 bytes", file, p, x->name, (long long)x->shape[1],
		               (long long)x->shape[2]);
	if (!(x->ltype = malloc(lt->n ? lt->n : 1)))
		return sw_errf(err, SW_ENOMEM, "out of memory");
	for (size_t l = 0; l < lt->n; l++) {
		const json_value *v = lt->items[l];
		const int t = v->type == JSON_STRING ? rt_manifest_wtype(v->str) : -1;
		if (t < 0)
			return sw_errf(err, SW_EINVAL, "%s: %s.layer_dtypes[%zu] (%s): expected \"q8_0\", "
			               "\"q4_0\", \"q4_1\", \"q5_0\", \"q4_k\" or \"q6_k\", found %s%s%s", file, p, l,
			               x->name, v->type == JSON_STRING ? "\"" : "",
			               v->type == JSON_STRING ? v->str : json_type_name(v->type),
			               v->type == JSON_STRING ? "\"" : "");
		const int64_t blk = sw_wformat_block(t);
		int64_t lb; /* this layer's bytes */
		if (x->shape[2] % blk ||
		    __builtin_mul_overflow(x->shape[1], x->shape[2] / blk, &lb) ||
		    __builtin_mul_overflow(lb, sw_wformat_block_bytes(t), &lb) || lb > stride)
			return sw_errf(err, SW_EINVAL, "%s: %s.layer_dtypes[%zu] (%s): %s, expected a type "
			               "whose blocks divide the rows of %lld and fit the %s layer stride "
			               "(%lld bytes)", file, p, l, x->name, v->str, (long long)x->shape[2],
			               x->dtype, (long long)stride);
		x->ltype[l] = (signed char)t;
	}
	return 0;
}

int rt_manifest_buf_wtype(const rt_engine_buf *b, int layer)
{
	if (b->ltype && layer >= 0 && layer < b->shape[0])
		return b->ltype[layer];
	return rt_manifest_wtype(b->dtype);
}

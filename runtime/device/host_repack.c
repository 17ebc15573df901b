/* The host backend's repack of Q4_0 / Q4_1 / Q8_0 GEMM weights at bind
 * (host_repack.h). A weight is repacked only when the engine's ops show
 * that GEMMs alone read it: a kernel reading the file's blocks (an
 * embedding gather on a tied table, say) would see the new order, so
 * any other op whose arguments reach into the weight's bytes leaves it as
 * the file has it. Repacking changes where bytes lie, never a result bit
 * (host_gemm.h). The gguf_a8 SmolLM2 engine's tied LM head is such a
 * weight: the plan gives the embedding its own fp16 table (the lookup
 * never reads the Q8_0 copy), so only the LM head's GEMMs read it. */
#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "host_gemm.h"
#include "host_repack.h"

static bool inside(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v >= lo && v < hi;
}

/* the bytes a GEMM's W spans (one byte where its type is unknown) */
static uint64_t w_bytes(const rt_op *o)
{
	const int64_t bl = o->dtype == RT_GGUF_A8 ? hg_gguf_block(o->wtype) : 0;
	const int64_t nk = o->n > 0 && o->k > 0 ? o->n * o->k : 0;
	const int64_t b = bl ? o->n * (o->k / bl) * hg_gguf_block_bytes(o->wtype)
	                  : rt_dtype_q8(o->dtype) ? nk / HG_Q8_BLOCK * HG_Q8_BYTES
	                  : o->dtype == RT_BF16 || o->dtype == RT_FP16 ? 2 * nk : 1;
	return b > 0 ? (uint64_t)b : 1;
}

/* the GGUF type a GEMM reads its W as: gguf_a8 its wtype, q8_0_a8 Q8_0
 * (Q8_0R once repacked); -1 for the other dtypes */
static int gemm_wtype(const rt_op *o)
{
	if (o->dtype == RT_GGUF_A8)
		return o->wtype;
	if (o->dtype == RT_Q8_0_A8)
		return o->wtype == HG_GGUF_Q8_0R ? HG_GGUF_Q8_0R : HG_GGUF_Q8_0;
	return -1;
}

/* whether op o leaves W's bytes [lo, hi) to GEMMs of dtype dt, n, k, wt
 * from lo */
static bool only_gemm(const rt_op *o, uint64_t lo, uint64_t hi, int dt, int64_t n, int64_t k,
                      int wt)
{
	switch (o->kind) {
	case RT_OP_GEMM: {
		if (inside(o->argval[0], lo, hi) || inside(o->argval[1], lo, hi))
			return false;
		const uint64_t w = o->argval[2];
		if (w >= hi || w + w_bytes(o) <= lo) /* another weight */
			return true;
		return w == lo && o->dtype == dt && gemm_wtype(o) == wt && o->n == n && o->k == k;
	}
	case RT_OP_MEMSET:
		return o->argval[0] >= hi || o->argval[0] + (uint64_t)o->bytes <= lo;
	default:
		for (int a = 0; a < o->n_args && a < RT_OP_MAX_ARGS; a++)
			if (inside(o->argval[a], lo, hi))
				return false;
		return true;
	}
}

/* whether weights of type wt are repacked on this CPU: Q4 where the
 * automatic path is AVX-512 (AVX2 restores the rows: slower), Q8_0 where
 * it is AVX-512 or AVX2 (both read it in place) */
static bool wanted(int wt, bool force)
{
	const int p = hg_i8_path_auto();
	if (wt == HG_GGUF_Q8_0)
		return force || p == HG_PATH_AVX512 || p == HG_PATH_AVX2;
	return (wt == HG_GGUF_Q4_0 || wt == HG_GGUF_Q4_1) && (force || p == HG_PATH_AVX512);
}

int rt_host_repack_weights(rt_op *ops, int n, bool force)
{
	int done = 0;
	for (int i = 0; i < n; i++) {
		const rt_op *g = &ops[i];
		const int wt = gemm_wtype(g);
		if (g->kind != RT_OP_GEMM || !wanted(wt, force) || g->n < 16 || g->k <= 0 ||
		    g->k % hg_gguf_block(wt))
			continue;
		const uint64_t lo = g->argval[2];
		const uint64_t hi = lo + (uint64_t)(g->n * (g->k / hg_gguf_block(wt)) *
		                                    hg_gguf_block_bytes(wt));
		bool ok = true;
		for (int j = 0; j < n && ok; j++)
			ok = only_gemm(&ops[j], lo, hi, g->dtype, g->n, g->k, wt);
		if (!ok)
			continue;
		const int64_t gn = g->n, gk = g->k;
		const int rt = hg_gguf_repack((void *)(uintptr_t)lo, gn, gk, wt);
		if (rt < 0)
			return rt;
		for (int j = 0; j < n; j++)
			if (ops[j].kind == RT_OP_GEMM && ops[j].argval[2] == lo)
				ops[j].wtype = rt;
		done++;
	}
	return done;
}

/* libFuzzer target for the engine manifest reader (runtime/engine/manifest.c):
 * arbitrary bytes as engine.json. Every field is range-checked against the others (buffers
 * inside the arena, args inside buffers, kernels named by ops, a BFS tree,
 * gates on existing words), so an accepted engine must be self-consistent:
 * checked here and abort() on a violation. test_engine checks messages.
 *
 * The bounds proof is re-checked independently of runtime/engine/extent.c:
 * below, what each host adapter (runtime/device/host_ops.c, dev_host.c's
 * GEMM and memset) dereferences, restated from those adapters, must lie in
 * the argument's buffer (its layer slice for a per-layer argument), and no
 * two buffers may share a byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/wformat.h"
#include "engine/manifest.h"
#include "kernels/engine_state.h"
#include "kernels/sample_layout.h"

static long long prm(const rt_kernel_info *k, const char *name)
{
	for (int i = 0; k && i < k->n_params; i++)
		if (!strcmp(k->params[i].name, name))
			return k->params[i].i;
	abort(); /* an accepted kernel op lacks a constant its adapter reads */
}

/* Bytes the host adapter of op x reads or writes through arg a (-1: none). */
static long long touched(const rt_manifest *e, const rt_engine_pop *x, int a)
{
	const rt_kernel_info *k = x->kernel >= 0 ? &e->kernels[x->kernel] : NULL;
	const long long g0 = x->grid[0], g1 = x->grid[1], N = e->n_nodes, MC = e->max_ctx;
	const char *op = x->op;
	if (x->exec == RT_EXEC_MEMSET)
		return x->bytes;
	if (x->exec == RT_EXEC_CUBLASLT) /* C = A W^T: (m, n) f32, (m, k) 16-bit, (n, k) 16-bit or q8_0 */
		return a == 0 ? x->m * x->n * 4 : a == 1 ? x->m * x->k * 2
		       : rt_dtype_q8(e->dtype) ? x->n * (x->k / 32) * 34 : x->n * x->k * 2;
	if (!strcmp(op, "rmsnorm_residual"))
		return a < 4 ? g0 * prm(k, "DIM") * 4 : prm(k, "DIM") * 4;
	if (!strcmp(op, "cast"))
		return prm(k, "N") * ((a == 0) == (prm(k, "MODE") <= 1) ? 2 : 4);
	if (!strcmp(op, "rope"))
		return a == 0 ? g0 * prm(k, "N_HEADS") * prm(k, "HEAD_DIM") * 4
		       : a == 1 ? g0 * 4 : prm(k, "ROT_DIM") / 2 * 4;
	if (!strcmp(op, "swiglu"))
		return prm(k, "FFN") * g1 * 4;
	if (!strcmp(op, "rmsnorm_cast")) { /* y 16-bit; s, x, r; w; A8: quant_a8's blocks */
		const long long D = prm(k, "DIM");
		return a == 0 ? g0 * D * 2 : a < 4 ? g0 * D * 4 : a == 4 ? D * 4
		       : prm(k, "A8") ? g0 * D + g0 * (D / 32) * 8 : -1;
	}
	if (!strcmp(op, "swiglu_cast")) { /* y 16-bit; gate, up rows LD apart; A8 */
		const long long F = prm(k, "FFN"), LD = prm(k, "LD");
		return a == 0 ? g1 * F * 2 : a < 3 ? (g1 ? ((g1 - 1) * LD + F) * 4 : 0)
		       : prm(k, "A8") ? g1 * F + g1 * (F / 32) * 8 : -1;
	}
	if (!strcmp(op, "qkv_rope")) { /* q16; the caches from slot ROW0; q, k, v rows LDQ / LDKV
	                                * apart; pos; inv_freq; len; the weights its steps read */
		const long long H = prm(k, "N_HEADS"), KH = prm(k, "N_KV_HEADS"), hd = prm(k, "HEAD_DIM");
		const long long qd = H * hd, kvd = KH * hd, fused = prm(k, "FUSED");
		const long long bias = prm(k, "BIAS"), norm = prm(k, "NORM");
		const long long ldq = fused ? qd + 2 * kvd : qd, ldkv = fused ? qd + 2 * kvd : kvd;
		return a == 0 ? g0 * qd * 2 : a < 3 ? (MC - prm(k, "ROW0")) * kvd * 2
		       : a == 3 ? (g0 ? ((g0 - 1) * ldq + qd) * 4 : 0)
		       : a < 6 ? (g0 ? ((g0 - 1) * ldkv + kvd) * 4 : 0) : a == 6 ? g0 * 4
		       : a == 7 ? (prm(k, "ROPE") ? hd / 2 * 4 : -1) : a == 8 ? 4
		       : a == 9 ? (bias ? qd * 4 : norm ? hd * 4 : -1)
		       : a == 10 ? (bias ? kvd * 4 : norm ? hd * 4 : -1) : bias ? kvd * 4 : -1;
	}
	if (!strcmp(op, "tree_attention")) {
		const long long T = prm(k, "T"), H = prm(k, "N_HEADS"), hd = prm(k, "HEAD_DIM");
		if (strstr(x->entry, "_merge"))
			return a == 0 ? T * H * hd * 2 : a == 1 ? T * H * hd * 4 : a == 3 ? 4 : -1;
		/* k, v: keys [0, ctx + N_BLK) with ctx + N_BLK <= MAX_CTX */
		return a == 0 ? T * H * hd * 4 : a == 2 ? T * H * hd * 2
		       : a == 3 || a == 4 ? prm(k, "MAX_CTX") * prm(k, "N_KV_HEADS") * hd * 2
		       : a == 5 ? 4 : -1;
	}
	if (!strcmp(op, "logits_process")) /* probs, logits: g1 rows of V; 3 sampling words;
	                                      * the scratch of sample_layout.h */
		return a == 2 ? 3 * 4 : a == 3 ? sw_logits_scratch_words(g1, g0 / SW_LOGITS_PHASES) * 4
		       : g1 * prm(k, "V") * 4;
	if (!strcmp(op, "tree_expand")) { /* grid SLICES x nodes; scratch: sample_layout.h */
		const long long l0 = prm(k, "LEVEL_BEGIN");
		long long rows = l0 + g1;
		if (a == 6)
			return sw_expand_scratch_words((int)prm(k, "RULE"), N, g1, prm(k, "SLICES"),
			                               prm(k, "KMAX"), prm(k, "BLOCK")) * 4;
		if (prm(k, "Q_BY_DEPTH")) { /* q row depth(u) of the level's nodes with children */
			rows = 0;
			for (long long u = l0; u < l0 + g1; u++)
				if (e->tree_table[N + u] > 0 && e->tree_table[4 * N + u] + 1 > rows)
					rows = e->tree_table[4 * N + u] + 1;
		}
		return a == 0 ? N * 4 : a == 1 ? rows * prm(k, "V") * 4
		       : a == 2 ? 5 * N * 4 : a == 4 ? 4
		       : a == 5 && prm(k, "MAPPED") ? prm(k, "V") * 4 : -1;
	}
	if (!strcmp(op, "verify")) {
		static const int words[10] = {-1, -1, 5, -5, -1, 0, 0, 0, 0, 1};
		const long long V = prm(k, "V");
		if (a == 6 && prm(k, "Q_BY_DEPTH")) /* row depth(u) of nodes with children */
			return (long long)e->depth * prm(k, "VQ") * 4;
		return a == 5 ? N * V * 4 : a == 6 ? N * prm(k, "VQ") * 4 : a == 7 ? 2 * V * 4 : a == 8 ? -1
		       : words[a] < 0 ? -words[a] * N * 4 : words[a] * 4;
	}
	if (!strcmp(op, "kv_commit")) /* every layer from the base; keep: the path */
		return a < 2 ? prm(k, "N_LAYERS") * MC * prm(k, "ROW_VEC") * 16 : a == 2 ? N * 4 : 4;
	if (!strcmp(op, "embedding_gguf")) /* y T rows of DIM f32; the table's N_ROWS x DIM in
	                                     * WTYPE's bytes (planes or the file's blocks); T ids;
	                                     * one error word */
		return a == 0 ? g0 * prm(k, "DIM") * 4
		       : a == 1 ? (long long)sw_wformat_nbytes((uint32_t)prm(k, "WTYPE"),
		                                               (uint64_t)(prm(k, "N_ROWS") * prm(k, "DIM")))
		       : a == 2 ? g0 * 4 : 4;
	if (!strcmp(op, "quant_a8")) /* int8 rows + 8 bytes a block of 32; fp16 (M, K) */
		return a == 0 ? prm(k, "M") * prm(k, "K") + prm(k, "M") * (prm(k, "K") / 32) * 8
		              : prm(k, "M") * prm(k, "K") * 2;
	if (!strcmp(op, "gemv16")) /* C (M, N) f32, A (M, K), W (N, K) 16-bit */
		return a == 0 ? prm(k, "M") * prm(k, "N") * 4 : a == 1 ? prm(k, "M") * prm(k, "K") * 2
		                                               : prm(k, "N") * prm(k, "K") * 2;
	if (!strcmp(op, "gemv_gguf")) /* C (M, N) f32, a16, a8 (quant_a8's), W NW x K planes */
		return a == 0 ? prm(k, "M") * prm(k, "N") * 4 : a == 1 ? prm(k, "M") * prm(k, "K") * 2
		       : a == 2 ? prm(k, "M") * prm(k, "K") + prm(k, "M") * (prm(k, "K") / 32) * 8
		       : (long long)sw_wformat_nbytes((uint32_t)prm(k, "WTYPE"),
		                                      (uint64_t)(prm(k, "NW") * prm(k, "K")));
	if (!strcmp(op, "embedding16"))
		return a == 0 ? g0 * prm(k, "DIM") * 4 : a == 1 ? prm(k, "N_ROWS") * prm(k, "DIM") * 2
		       : a == 2 ? g0 * 4 : 4;
	if (!strcmp(op, "block_embed")) { /* B rows; blk_tok B + 1 words */
		static const int words[8] = {0, 0, 0, 1, 1, 0, 1, 1};
		const long long B = prm(k, "B"), D = prm(k, "DIM");
		return a == 0 ? B * D * 4 : a == 1 ? prm(k, "N_ROWS") * D * 2 : a == 2 ? (B - 1) * D * 2
		       : a == 5 ? B * 4 : words[a] * (a == 3 ? B + 1 : 1) * 4;
	}
	if (!strcmp(op, "feature_tap"))
		return a == 0 ? prm(k, "ROWS") * prm(k, "N_TAPS") * prm(k, "DIM") * 4
		              : prm(k, "ROWS") * prm(k, "DIM") * 4;
	if (!strcmp(op, "block_unmask"))
		return a == 0 ? (prm(k, "B") + 1) * 4 : a == 1 ? prm(k, "B") * prm(k, "VD") * 4
		       : a == 2 ? 8 : 4;
	if (!strcmp(op, "kv_store")) /* rows len + r < MAX_CTX - ROW0 from the arg */
		return a < 2 ? (MC - prm(k, "ROW0")) * prm(k, "KVD") * 2
		       : a < 4 ? prm(k, "ROWS") * prm(k, "KVD") * 4 : 4;
	if (!strcmp(op, "step")) {
		static const int words[10] = {0, 1, -1, -1, 1, -5, 5, -1, -1, 0};
		return a == 0 ? (RT_ST_WORDS + prm(k, "RING")) * 4
		       : a == 9 ? (prm(k, "HAS_HIST") ? MC * 4 : 0)
		       : words[a] < 0 ? -words[a] * N * 4 : words[a] * 4;
	}
	if (!strcmp(op, "ngram_lookup"))
		return a == 0 ? prm(k, "N_DRAFT") * 4 : a == 1 ? MC * 4 : a == 2 ? RT_ST_WORDS * 4 : 8;
	if (!strcmp(op, "draft_ctrl")) { /* ref_draft_ctrl: ctrl's class rows (and the head's),
	                                  * tokens, info[0], state words ROOT, NOUT and DRAFTED,
	                                  * cost[0 .. N_DRAFT + HEAD] */
		const long long ND = prm(k, "N_DRAFT"), H = prm(k, "HEAD");
		return a == 0 ? (RT_CTRL_STATS + 2 * prm(k, "N_CLASS") * ND + (H ? 2 * H + 1 : 0)) * 4
		       : a == 1 ? ND * 4 : a == 2 ? 4 : a == 3 ? (RT_ST_DRAFTED + 1) * 4
		       : (ND + 1 + H) * 4;
	}
	if (!strcmp(op, "draft_pick")) /* ref_draft_pick: go[0 .. LEVELS), tokens 0..1, state
	                                 * words DRAFTED and HEAD, ctrl through HEAD_K with CTRL */
		return a == 0 ? prm(k, "LEVELS") * 4 : a == 1 ? 8 : a == 2 ? (RT_ST_HEAD + 1) * 4
		       : prm(k, "CTRL") ? (RT_CTRL_HEAD_K + 1) * 4 : -1;
	if (!strcmp(op, "adapt")) {
		const long long V = prm(k, "V");
		return a == 0 ? prm(k, "DEPTH") * 4 : a == 1 ? 4 : a == 2 ? N * 4
		       : a == 3 ? prm(k, "LEVEL") * V * 4 : 5 * N * 4;
	}
	abort(); /* an accepted op kind no host adapter runs */
}

/* An accepted engine whose op reaches past its argument: say which, then
 * abort (the fuzzer keeps the input; the message names the op to look at). */
static void violation(const rt_engine_pop *x, int a, long long t, long long room)
{
	fprintf(stderr, "fuzz_engine: op %s (%s) arg %d touches %lld bytes, %lld in its buffer\n", x->name,
	        x->op, a, t, room);
	abort();
}

static void check_bounds(const rt_manifest *e)
{
	for (int i = 0; i < e->n_bufs; i++)
		for (int j = i + 1; j < e->n_bufs; j++) {
			const rt_engine_buf *a = &e->bufs[i], *b = &e->bufs[j];
			if (a->bytes && b->bytes && a->offset < b->offset + b->bytes &&
			    b->offset < a->offset + a->bytes)
				abort();
		}
	for (int i = 0; i < e->n_ops; i++) {
		const rt_engine_pop *x = &e->ops[i];
		for (int a = 0; a < x->n_args; a++) {
			if (x->arg_buf[a] < 0)
				continue;
			const rt_engine_buf *b = &e->bufs[x->arg_buf[a]];
			const long long t = touched(e, x, a);
			const char *dot = strchr(b->name, '.');
			const int layered = x->layers && (!strcmp(b->kind, "kv") ||
			                                  (!strcmp(b->kind, "weight") && dot &&
			                                   rt_manifest_field_layered(dot + 1)));
			long long room = b->bytes - x->arg_off[a];
			if (layered) {
				/* the highest slice any repetition takes (engine.c resolve_one) */
				long long top = 0, slice = b->bytes / b->shape[0];
				for (int l = 0; l < x->repeat; l++) {
					long long id = x->layers == 2 && !strcmp(b->kind, "weight") &&
					                       e->draft_kind == RT_ENGINE_DRAFT_LAYERSKIP
					                   ? e->skip_layers[l] : l;
					if (id < 0 || id >= b->shape[0])
						abort();
					top = id > top ? id : top;
				}
				room = strcmp(x->op, "kv_commit") ? slice - x->arg_off[a]
				                                  : b->bytes - top * slice - x->arg_off[a];
			}
			if (t > room || t < -1)
				violation(x, a, t, room);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sw_err err;
	rt_manifest *e = rt_manifest_parse("fuzz", (const char *)data, size, &err);
	if (!e)
		return 0;
	for (int i = 0; i < e->n_bufs; i++)
		if (e->bufs[i].offset + e->bufs[i].bytes > e->arena_bytes)
			abort();
	for (int i = 1; i < e->n_nodes; i++)
		if (e->tree_table[i] < 0 || e->tree_table[i] >= i)
			abort();
	for (int p = 0; p < e->n_phases; p++)
		if (e->phases[p].gate_buf >= e->n_bufs || e->phases[p].n < 0 ||
		    e->phases[p].first < 0 || e->phases[p].first + e->phases[p].n > e->n_ops)
			abort();
	for (int i = 0; i < e->n_ops; i++)
		for (int a = 0; a < e->ops[i].n_args; a++)
			if (e->ops[i].arg_buf[a] >= e->n_bufs ||
			    (e->ops[i].arg_buf[a] >= 0 &&
			     e->ops[i].arg_off[a] > e->bufs[e->ops[i].arg_buf[a]].bytes))
				abort();
	if (e->ring < 8)
		abort();
	check_bounds(e);
	rt_manifest_free(e);
	return 0;
}

/* engine.json's parts against each other (manifest_check.h): what the
 * bounds proof (manifest.c check_op_bounds) cannot see, because an edit
 * that keeps every access inside its buffers can still make the engine
 * compute something else (a GEMM's n halved, a per-layer op one layer
 * short, two weights of one shape swapped, a prefill chunk the buffers
 * and the kernels were not planned for). Each rule is one the planner
 * (gen/plan.c) keeps by construction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest_check.h"
#include "device/host_ops.h"

/* The layer count of the model a "target."/"draft." name, or a per-layer
 * op's layers (1 target, 2 draft), refers to. */
static int model_layers(const rt_manifest *e, int layers)
{
	return layers == 2 ? e->dcfg.n_layers : e->tcfg.n_layers;
}

static int64_t buf_bytes(const rt_manifest *e, const char *name)
{
	const int i = rt_manifest_buf_find(e, name);
	return i < 0 ? -1 : e->bufs[i].bytes;
}

/* Host uploads the executor makes (engine.c): prompt chunks into tokens
 * and pos, the prompt into ngram_hist, the tree into tree_tokens. */
static int check_io_buffers(const rt_manifest *e, const char *file, sw_err *err)
{
	const rt_engine_phase *P = &e->phases[e->ph_prefill];
	if (P->rows != e->chunk)
		return sw_errf(err, SW_EINVAL, "%s: $.spec.prefill_chunk: %d, but the prefill phase "
		               "($.phases[%d].rows) was planned for chunks of %d rows", file, e->chunk,
		               e->ph_prefill, P->rows);
	static const char *const chunk_bufs[] = {"tokens", "pos"};
	for (int i = 0; i < 2; i++)
		if (buf_bytes(e, chunk_bufs[i]) < 4 * (int64_t)e->chunk)
			return sw_errf(err, SW_EINVAL, "%s: $.buffers (%s): %lld bytes, expected at least %lld "
			               "(a prefill chunk of %d i32)", file, chunk_bufs[i],
			               (long long)buf_bytes(e, chunk_bufs[i]), 4 * (long long)e->chunk, e->chunk);
	const int64_t nh = buf_bytes(e, "ngram_hist"), tt = buf_bytes(e, "tree_tokens");
	if (nh >= 0 && nh < 4 * (int64_t)e->max_ctx)
		return sw_errf(err, SW_EINVAL, "%s: $.buffers (ngram_hist): %lld bytes, expected at least "
		               "%lld (max_context %d i32)", file, (long long)nh, 4 * (long long)e->max_ctx,
		               e->max_ctx);
	if (tt >= 0 && tt < 4 * (int64_t)e->n_nodes)
		return sw_errf(err, SW_EINVAL, "%s: $.buffers (tree_tokens): %lld bytes, expected at least "
		               "%lld (%d tree nodes, i32)", file, (long long)tt, 4 * (long long)e->n_nodes,
		               e->n_nodes);
	return 0;
}

/* A layered weight's and a KV cache's leading dimension is its model's
 * layer count; a KV cache holds max_context rows. */
static int check_buffer_shapes(const rt_manifest *e, const char *file, sw_err *err)
{
	for (int i = 0; i < e->n_bufs; i++) {
		const rt_engine_buf *b = &e->bufs[i];
		const char *dot = strchr(b->name, '.');
		const bool kv = !strcmp(b->kind, "kv");
		if (!dot || (!kv && (strcmp(b->kind, "weight") || !rt_manifest_field_layered(dot + 1))))
			continue;
		const int nl = model_layers(e, strncmp(b->name, "draft.", 6) ? 1 : 2);
		if (b->shape[0] != nl || (kv && (b->rank < 2 || b->shape[1] < e->max_ctx)))
			return sw_errf(err, SW_EINVAL, "%s: $.buffers[%d].shape (%s): [%lld, %lld, ...], "
			               "expected %d layers (its model's $.shapes n_layers)%s", file, i, b->name,
			               (long long)b->shape[0], (long long)(b->rank > 1 ? b->shape[1] : 0), nl,
			               kv ? " of at least max_context rows" : "");
	}
	return 0;
}

/* A GEMM is the uri the plan named for its m, n, k; it multiplies by the
 * weight its name says (wq by wq; a block drafter's fuse_wk by wk; a tied
 * lm_head by tok_embd) and by all of it (n = the weight's rows; the LM
 * head may take a prefix of the vocabulary). */
static int check_gemm(const rt_manifest *e, const rt_engine_pop *x, const char *p, const char *uri,
                      const char *file, sw_err *err)
{
	static const char *const dt[] = {[RT_BF16] = "bf16", [RT_FP16] = "fp16", [RT_Q8_0] = "q8_0",
	                                 [RT_Q8_0_A8] = "q8_0_a8", [RT_GGUF_A8] = "gguf_a8"};
	char want[192];
	const char *dn = e->dtype >= 0 && e->dtype < (int)(sizeof(dt) / sizeof(dt[0])) && dt[e->dtype]
	                 ? dt[e->dtype] : "?";
	snprintf(want, sizeof(want), "gemm_%s_f32acc_m%lld_n%lld_k%lld", dn, (long long)x->m,
	         (long long)x->n, (long long)x->k);
	if (strcmp(uri, want))
		return sw_errf(err, SW_EINVAL, "%s: %s.gemm (op %s): m %lld, n %lld, k %lld, but its uri is "
		               "\"%s\": expected \"%s\" (the shape it was planned for)", file, p, x->name,
		               (long long)x->m, (long long)x->n, (long long)x->k, uri, want);
	if (x->n_args < 3 || x->arg_buf[2] < 0)
		return 0; /* check_op_bounds refuses it */
	const rt_engine_buf *w = &e->bufs[x->arg_buf[2]];
	const char *dot = strchr(w->name, '.'), *f = dot ? dot + 1 : w->name;
	const size_t nl = strlen(x->name), fl = strlen(f);
	const bool named = !strcmp(x->name, f) || (nl > fl && x->name[nl - fl - 1] == '_' &&
	                                           !strcmp(x->name + nl - fl, f)) ||
	                   (!strcmp(x->name, "lm_head") && !strcmp(f, "tok_embd"));
	if (!strcmp(w->kind, "weight") && !named)
		return sw_errf(err, SW_EINVAL, "%s: %s.args[2] (op %s): weight %s, expected the weight the "
		               "op is named for (%s)", file, p, x->name, w->name, x->name);
	const bool vocab = !strcmp(f, "lm_head") || !strcmp(f, "tok_embd");
	if (!strcmp(w->kind, "weight") && w->rank >= 2 && !vocab && w->shape[w->rank - 2] != x->n)
		return sw_errf(err, SW_EINVAL, "%s: %s.gemm.n (op %s): %lld, expected %lld (every row of "
		               "weight %s)", file, p, x->name, (long long)x->n,
		               (long long)w->shape[w->rank - 2], w->name);
	return 0;
}

/* A kernel's row constants are its phase's rows (an EAGLE-3 head's at most
 * them); kv_commit's N_LAYERS its
 * model's layers; per-layer ops of one name in a phase run every layer of
 * their model once, in order (segments of a block drafter's target split
 * included). */
static int check_schedule(const rt_manifest *e, const char *file, sw_err *err)
{
	for (int ph = 0; ph < e->n_phases; ph++) {
		const rt_engine_phase *P = &e->phases[ph];
		for (int i = P->first; i < P->first + P->n; i++) {
			const rt_engine_pop *x = &e->ops[i];
			char p[96];
			snprintf(p, sizeof(p), "$.phases[%d].ops[%d]", ph, i - P->first);
			if (x->kernel >= 0) {
				const rt_op probe = {.kinfo = &e->kernels[x->kernel]};
				static const char *const rows[] = {"ROWS", "T"};
				/* an EAGLE-3 head's rows may be a part of the phase's: a
				 * level of the verified tree, a chunk but its last row
				 * (gen/drafter_eagle3.c) */
				const bool part = e->draft_kind == RT_ENGINE_DRAFT_EAGLE3 && x->layers == 2;
				for (int r = 0; r < 2; r++) {
					const int64_t v = rt_op_param_i(&probe, rows[r], -1);
					if (v >= 0 && v != P->rows && !(part && v < P->rows))
						return sw_errf(err, SW_EINVAL, "%s: %s (op %s): kernel %s has %s %lld, "
						               "expected the phase's %d rows ($.phases[%d].rows)", file, p,
						               x->name, probe.kinfo->uri, rows[r], (long long)v, P->rows, ph);
				}
				if (!strcmp(x->op, "kv_commit") && x->layers) {
					const int64_t v = rt_op_param_i(&probe, "N_LAYERS", -1);
					if (v != model_layers(e, x->layers) || x->repeat != 1)
						return sw_errf(err, SW_EINVAL, "%s: %s (op %s): N_LAYERS %lld, repeat %d; "
						               "expected the %s's %d layers in one launch", file, p,
						               x->name, (long long)v, x->repeat,
						               x->layers == 2 ? "draft" : "target", model_layers(e, x->layers));
					continue;
				}
			}
			int rc;
			if (x->exec == RT_EXEC_CUBLASLT && (rc = check_gemm(e, x, p, x->gemm_uri, file, err)))
				return rc;
			if (!x->layers)
				continue;
			/* the first op of its (name, layers) in this phase checks them all */
			bool first = true;
			for (int k = P->first; k < i && first; k++)
				first = strcmp(e->ops[k].name, x->name) || e->ops[k].layers != x->layers;
			if (!first)
				continue;
			/* its segments, in phase order, tile the model's layers in order,
			 * once per pass (a block drafter's S denoising passes run its
			 * layers S times in one phase; the target's taps split them) */
			const int nl = model_layers(e, x->layers);
			int next = 0, passes = 0, total = 0; /* next: the layer the next segment starts at */
			bool in_order = true;
			for (int k = i; k < P->first + P->n; k++) {
				const rt_engine_pop *y = &e->ops[k];
				if (strcmp(y->name, x->name) || y->layers != x->layers)
					continue;
				if (y->layer0 != next || y->repeat < 1 || next + y->repeat > nl)
					in_order = false;
				next += y->repeat;
				total += y->repeat;
				if (next >= nl) {
					next = 0;
					passes++;
				}
			}
			if (!in_order || next != 0 || passes < 1)
				return sw_errf(err, SW_EINVAL, "%s: %s (op %s): its segments run %d of the %s's "
				               "%d layers: expected every layer once, in order, in each pass "
				               "($.shapes.%s.n_layers)", file, p, x->name, total,
				               x->layers == 2 ? "draft" : "target", nl,
				               x->layers == 2 ? "draft" : "target");
		}
	}
	return 0;
}

int rt_manifest_check_plan(const rt_manifest *e, const char *file, sw_err *err)
{
	int rc;
	if ((rc = check_io_buffers(e, file, err)) || (rc = check_buffer_shapes(e, file, err)) ||
	    (rc = check_schedule(e, file, err)))
		return rc;
	return 0;
}


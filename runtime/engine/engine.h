/* Engine executor: turns a built engine directory (engine.json + kernels)
 * and the model's weights into a running decoder on any rt_dev backend.
 * Loads the static plan, allocates the one arena, uploads the weights in the
 * engine's dtype, resolves every planned op into a launch record (final
 * addresses, per-layer slices), prefills the prompt in fixed chunks and then
 * replays ONE captured graph per iteration (draft catch-up, draft levels,
 * verify, fused verification, bookkeeping, KV commit). The host reads the
 * state header and output ring once per iteration and nothing else.
 * Not the planner (gen/plan.c) and not the backends (device.h). */
#ifndef RT_ENGINE_H
#define RT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/ctx.h"
#include "device/device.h"
#include "core/err.h"
#include "decode/chain.h"

#define RT_ENGINE_MAX_PHASES 48
#define RT_ENGINE_MAX_NODES 256

typedef struct rt_engine_buf {
	char name[48];
	char kind[16];      /* weight, kv, activation, state, const */
	char dtype[8];      /* bf16 fp16 f32 i32 u64 */
	int rank;
	int64_t shape[4];
	int64_t bytes, offset;
} rt_engine_buf;

typedef struct rt_engine_phase {
	char name[32];
	int rows;
	int first, n;       /* resolved ops [first, first + n) */
	int gate_buf;       /* -1, or the phase runs only when int32 word gate_word of */
	int gate_word;      /* buffer gate_buf is nonzero (SpecDec++ draft levels) */
} rt_engine_phase;

enum rt_draft_kind { RT_ENGINE_DRAFT_NGRAM = 0, RT_ENGINE_DRAFT_LAYERSKIP, RT_ENGINE_DRAFT_MODEL };

typedef struct rt_engine {
	char dir[1024];
	char name[128];
	/* spec echo */
	char target_path[1024], draft_path[1024];
	int draft_kind;           /* enum rt_draft_kind */
	int skip_layers[256], n_skip;
	int draft_vocab;
	char verify[16], expand[16];
	rt_sampling samp;
	int max_ctx, chunk, dtype; /* dtype: enum rt_dtype */
	/* shapes */
	rt_config tcfg, dcfg;
	int n_nodes, depth;
	int32_t tree_table[5 * RT_ENGINE_MAX_NODES]; /* parent, n_children, child_start, child_list, depth */
	int level_start[RT_ENGINE_MAX_NODES + 2];
	/* plan */
	int n_bufs, n_kernels, n_ops, n_phases;
	rt_engine_buf *bufs;
	rt_kernel_info *kernels;
	int64_t arena_bytes;
	rt_op *ops;               /* resolved launch records, phase by phase */
	double *op_cost;          /* (n_ops, 2): the planner's bytes and flops per launch */
	uint32_t *op_seed;        /* (n_ops): bit a set when argument a is the seed */
	rt_engine_phase phases[RT_ENGINE_MAX_PHASES];
	int ph_prefill, ph_iter_first; /* phases [ph_iter_first, n_phases) form one iteration */
	int ring;                 /* output ring entries */
	/* device side */
	rt_dev *dev;
	rt_dptr arena;
	rt_graph *graph;          /* the captured iteration */
	uint64_t seed;
	int32_t *host_state;      /* RT_ST_WORDS + ring, from alloc_host */
} rt_engine;

typedef struct rt_engine_stats {
	int n_prompt, n_tokens, n_iters;
	int stop;                 /* enum rt_stop */
	uint64_t pos_tried[RT_MAX_GAMMA], pos_accepted[RT_MAX_GAMMA]; /* by depth */
	double t_prefill, t_decode, t_capture;
	double t_ops;             /* host backends: seconds inside op execution */
	double t_callback;        /* inside the caller's on_tokens (streaming output) */
	double host_overhead_us;  /* per iteration: decode time minus op and callback time */
} rt_engine_stats;

/* Parses dir/engine.json (every field checked; messages name the file and
 * JSON path). */
rt_engine *rt_engine_load(const char *dir, sw_err *err);
/* The same from engine.json's text in memory (dir names it in messages). */
rt_engine *rt_engine_parse(const char *dir, const char *text, size_t len, sw_err *err);
void rt_engine_free(rt_engine *e);

/* Binds a loaded engine to a device: allocates the arena, uploads the
 * target's (and a separate draft's) weights converted to the engine dtype,
 * resolves the ops and loads the kernels. target must match the engine's
 * shapes (checked); draft is only for RT_ENGINE_DRAFT_MODEL. */
int rt_engine_bind(rt_engine *e, rt_dev *dev, const rt_model *target, const rt_model *draft,
                   uint64_t seed, sw_err *err);

typedef struct rt_engine_run {
	const int32_t *prompt;
	int n_prompt;
	int max_new;
	int32_t eos;              /* device-side stop token, -1 none */
	rt_eog_fn is_eog;         /* optional host-side extra end-of-generation test */
	const void *eog_user;
	rt_token_cb on_tokens;    /* optional streaming callback */
	void *cb_user;
	bool eager;               /* run each iteration op by op instead of the graph */
} rt_engine_run;

/* Prefill + iterations; writes the emitted tokens to out (cap >= max_new)
 * and returns their count or a negative error. */
int rt_engine_generate(rt_engine *e, const rt_engine_run *r, int32_t *out, rt_engine_stats *st,
                       sw_err *err);

/* Per-op timings: prefill, then `iters` iterations op by op with a sync
 * after each, aggregated by (phase, op) with the planner's bytes and flops
 * as achieved GB/s and GFLOP/s. */
int rt_engine_profile(rt_engine *e, const int32_t *prompt, int n_prompt, int iters, FILE *f,
                      sw_err *err);

/* A new Philox seed for the next generate (rewrites the launch records and
 * drops the captured graph, which is recaptured once). */
int rt_engine_reseed(rt_engine *e, uint64_t seed, sw_err *err);

/* The index of a phase by name, or -1. */
int rt_engine_phase_find(const rt_engine *e, const char *name);
/* The device address of buffer `name` (+0), or 0. */
rt_dptr rt_engine_buf_addr(const rt_engine *e, const char *name);

#endif

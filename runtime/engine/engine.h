/* Engine executor: turns a built engine directory (engine.json + kernels)
 * and the model's weights into a running decoder on any rt_dev backend.
 * Loads the static plan, allocates the one arena, uploads the weights in the
 * engine's dtype, resolves every planned op into a launch record (final
 * addresses, per-layer slices), prefills the prompt in fixed chunks and then
 * replays ONE captured graph per iteration (draft catch-up, draft levels,
 * verify, fused verification, bookkeeping, KV commit). The host reads the
 * state header and output ring once per iteration and nothing else.
 * Not the manifest reader (manifest.h), not the planner (gen/plan.c), not
 * the backends (device.h), and not a model: weights come through an
 * rt_engine_weights source (weights_gguf.h reads a GGUF; runtime/cli adapts
 * a loaded rt_model), so the deployable runtime needs no model/ or decode/. */
#ifndef RT_ENGINE_H
#define RT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "device/device.h"
#include "manifest.h"

#define RT_ENGINE_MAX_DEPTH 64 /* acceptance statistics kept for depths < this */

/* Where bind takes a model's weights from: fp32 arrays by field, in the
 * GGUF (llama.cpp) row order, Q/K rows included. Fields: "tok_embd" (vocab,
 * dim), "out_norm" (dim), "lm_head" (vocab, dim; tok_embd when tied),
 * "inv_freq" (head_dim/2 RoPE frequencies, scaling applied); per layer
 * "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up",
 * "w_down" (shapes as in model/model.h). */
typedef struct rt_engine_weights {
	const char *name;         /* file or description, for messages */
	rt_engine_shape shape;    /* checked against the engine's */
	/* Points *data at the n floats of field for layer (-1: not layered);
	 * valid until the next call. 0, or a negative error in err. */
	int (*get)(void *user, const char *field, int layer, const float **data, size_t *n,
	           sw_err *err);
	/* Optional (NULL: bind of a "gguf_a8" engine opens the GGUF file named
	 * `name` instead): points *data at the bytes of field for layer as the
	 * file stores them and *type at their enum ggml_dtype; valid until the
	 * next call. */
	int (*get_raw)(void *user, const char *field, int layer, const void **data, size_t *bytes,
	               int *type, sw_err *err);
	void *user;
} rt_engine_weights;

typedef struct rt_engine_span {
	int first, n;             /* launch records [first, first + n) of rt_engine.ops */
} rt_engine_span;

typedef struct rt_engine {
	rt_manifest *man;         /* engine.json, owned */
	/* resolved at bind */
	int n_ops;
	rt_op *ops;               /* launch records, phase by phase, layers unrolled */
	double *op_cost;          /* (n_ops, 2): the planner's bytes and flops per launch */
	rt_engine_span ph_ops[RT_ENGINE_MAX_PHASES]; /* each phase's launch records */
	/* device side */
	rt_dev *dev;
	rt_dptr arena;
	rt_graph *graph;          /* the captured iteration */
	uint64_t seed;            /* the next request's Philox seed (a run-time word) */
	int32_t *host_state;      /* RT_ST_WORDS + ring, from alloc_host */
	/* the device has no conditional graph regions (rt_dev.no_cond) and the
	 * engine gated phases: iterations run eagerly; notice says so (printed
	 * to stderr once, at bind) */
	bool eager_gates;
	char notice[1024];
	/* the draft-length controller's cost table in use (manifest ctrl != 0):
	 * an iteration drafting k tokens over one drafting none, k = 0..depth,
	 * then with an EAGLE-3 head behind the lookup one whose head drafts k =
	 * 1 .. levels (rt_engine_ctrl_levels); ctrl_cost_src says where it came
	 * from ("measured", "flat", "spec", "set") */
	double ctrl_cost[RT_CTRL_MAX_COST];
	const char *ctrl_cost_src;
} rt_engine;

typedef struct rt_engine_stats {
	int n_prompt, n_tokens, n_iters;
	int stop;                 /* enum rt_stop (kernels/engine_state.h) */
	uint64_t pos_tried[RT_ENGINE_MAX_DEPTH], pos_accepted[RT_ENGINE_MAX_DEPTH]; /* by depth */
	double t_prefill, t_decode, t_capture;
	double t_ops;             /* host backends: seconds inside op execution */
	double t_callback;        /* inside the caller's on_tokens (streaming output) */
	double host_overhead_us;  /* per iteration: decode time minus op and callback time */
	/* engines with a draft-length controller: iterations by the number of
	 * tokens it let them draft (0: a plain target step) */
	bool ctrl;
	uint64_t drafted[RT_ENGINE_MAX_DEPTH + 1];
	/* EAGLE-3 engines that look for an n-gram match first (buffer e3_go):
	 * the iterations whose chain the head drafted (state RT_ST_HEAD) */
	bool ngram_first;
	uint64_t by_head;
} rt_engine_stats;

/* Reads dir/engine.json (rt_manifest_load) into an unbound engine. */
rt_engine *rt_engine_load(const char *dir, sw_err *err);
void rt_engine_free(rt_engine *e);

/* Threads: an engine and its device may be used from any thread, one
 * thread at a time (the server binds on its main thread and generates on a
 * worker); the cuda backend makes its context current on each entry. */
/* Binds a loaded engine to a device: allocates the arena, uploads the
 * target's (and a separate draft's) weights converted to the engine dtype,
 * resolves the ops and loads the kernels. target must match the engine's
 * shapes (checked); draft is only for RT_ENGINE_DRAFT_MODEL. A CUDA driver
 * older than $.toolkit.min_driver is refused first (SW_ENOTSUP, naming both
 * versions). */
int rt_engine_bind(rt_engine *e, rt_dev *dev, const rt_engine_weights *target,
                   const rt_engine_weights *draft, uint64_t seed, sw_err *err);

/* Timing only: binds like rt_engine_bind, but every weight buffer (the
 * target's, a separate draft model's, a block drafter's) is filled ON THE
 * DEVICE from Philox keyed by wseed (the engine's fill_random kernel,
 * runtime/engine/random_weights.h) instead of read from a model: shape-only
 * engines can run. Refused (SW_EINVAL, saying to rebuild) for an engine built
 * without the fill kernel, and (SW_ENOTSUP, naming the dtype) for q8_0 ones. */
int rt_engine_bind_random(rt_engine *e, rt_dev *dev, uint64_t wseed, uint64_t seed, sw_err *err);
/* The draft-length controller's cost table (runtime/engine/ctrl.c): cost[k]
 * = an iteration drafting k tokens over one drafting none, k = 0..depth,
 * then (n = depth + 1 + levels, rt_engine_ctrl_levels) an iteration whose
 * EAGLE-3 head drafts 1 .. levels; cost[0] = 1, each in [1, 1000] (refused
 * otherwise); uploaded for the next request. rt_engine_bind sets it from $.spec.control.cost: the table, 1s
 * ("flat"), or ("measure") timed replays of the verify forward at each row
 * count where the device sizes it to the drafted rows (host), else 1s. */
int rt_engine_set_ctrl_cost(rt_engine *e, const double *cost, int n, sw_err *err);
/* Measures the table as bind does (host: the verify forward at 1 .. depth +
 * 1 rows in each of reps repetitions, 1 to 31, timed in process CPU
 * seconds; cost[k] the median over the repetitions of k + 1 rows over 1 row,
 * floored at 1 + 0.05 k; with a head, cost[depth + k] = cost[k] + the
 * median of its first k level phases over 1 row; elsewhere 1s) into
 * cost[0 .. depth + levels]. */
int rt_engine_ctrl_measure(rt_engine *e, int reps, double *cost, sw_err *err);
/* The levels of the EAGLE-3 head the controller weighs as one more class
 * (an n-gram-first engine with a controller: its e3_go words), else 0. */
int rt_engine_ctrl_levels(const rt_engine *e);
/* Runs (or records, while capturing) phases [ph0, ph1) as an iteration
 * does (engine.c); cap > 0 caps the verify forward's rows (calibration). */
int rt_engine_run_phases(rt_engine *e, int ph0, int ph1, bool target_only, int cap, sw_err *err);

/* Returns nonzero to stop generation after these tokens. */
typedef int (*rt_engine_token_fn)(void *user, const int32_t *tok, int n);
typedef bool (*rt_engine_eog_fn)(const void *user, int32_t tok);

typedef struct rt_engine_run {
	const int32_t *prompt;
	int n_prompt;
	int max_new;
	int32_t eos;              /* device-side stop token, -1 none */
	rt_engine_eog_fn is_eog;  /* optional host-side extra end-of-generation test */
	const void *eog_user;
	rt_engine_token_fn on_tokens; /* optional streaming callback */
	void *cb_user;
	bool eager;               /* run each iteration op by op instead of the graph */
	/* target-only decoding on the same engine and device (eager): no draft
	 * ops, every tree node but the root absent, so each iteration is one
	 * target forward (one row where the device sizes it: host) and emits
	 * one token; the output is the speculative run's (exactness) */
	bool target_only;
	/* temperature, top-k, top-p of this request, NULL: the engine's defaults
	 * ($.spec.sampling). Written to the device's sampling words before the
	 * prefill (kernels/engine_state.h): the captured graph reads them, so
	 * a change needs no rebuild and no recapture. Checked first
	 * (rt_engine_check_sampling): what the engine cannot honour is refused. */
	const rt_engine_sampling *samp;
	/* optional: the controller's decision (tokens drafted) of each
	 * iteration, the first trace_cap of them (-1 where the engine has none) */
	int8_t *trace;
	int trace_cap;
} rt_engine_run;

/* Whether the engine's verification family samples: every method but
 * greedy (RRS, RRSW, SpecHub, one-hot) is exact at any temperature, and at
 * temperature 0 the target's p is one-hot at its first argmax, so each of
 * them emits the greedy tokens. A greedy engine serves temperature 0 only. */
bool rt_engine_samples(const rt_engine *e);

/* 0 when the engine can honour s: temperature in [0, 100] (0: greedy; > 0
 * only on a sampling engine), top_k >= 0 (0: off), top_p in (0, 1] (1: off),
 * none NaN. Else an error naming the value, the allowed range or the
 * engine's family. */
int rt_engine_check_sampling(const rt_engine *e, const rt_engine_sampling *s, sw_err *err);

/* Prefill + iterations; writes the emitted tokens to out (cap >= max_new)
 * and returns their count or a negative error. */
int rt_engine_generate(rt_engine *e, const rt_engine_run *r, int32_t *out, rt_engine_stats *st,
                       sw_err *err);

/* Per-op timings: prefill, then `iters` iterations op by op with a sync
 * after each, aggregated by (phase, op) with the planner's bytes and flops
 * as achieved GB/s and GFLOP/s. rows > 0: instead of iterations, the
 * verify phase alone `iters` times as a rows region of `rows` rows (a
 * device with regions, the host's native ops) with every draft node
 * present, at the context the prompt left: what a verify of rows - 1
 * drafted tokens costs, op by op (the planner's bytes and flops are the
 * planned shape's). */
int rt_engine_profile(rt_engine *e, const int32_t *prompt, int n_prompt, int iters, int rows,
                      const rt_engine_sampling *samp, FILE *f, sw_err *err);

/* The Philox seed of the next generate: a run-time word the sampling kernels
 * read (no recapture). The same seed, prompt and sampling values give the
 * same tokens (the Philox counter restarts at every generate). */
int rt_engine_reseed(rt_engine *e, uint64_t seed, sw_err *err);

/* The device address of buffer `name` (+0), or 0. */
rt_dptr rt_engine_buf_addr(const rt_engine *e, const char *name);

#endif

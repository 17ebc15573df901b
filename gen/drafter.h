/* The planner's drafter interface: what one kind of drafter adds to the
 * static iteration whose phases gen_plan_build lays out (gen/plan_build.c,
 * the skeleton: prefill, the draft phases, verify, accept, commit). One
 * file per kind: drafter_ngram.c, drafter_model.c (a draft model and a
 * layer-skip draft), drafter_block.c, drafter_eagle3.c; plan_build.c's
 * table maps the spec's draft kind (gen_spec.draft_kind) to its
 * gen_drafter. A slot left NULL adds nothing. Internal to gen/plan*.c and
 * gen/drafter_*.c. */
#ifndef GEN_DRAFTER_H
#define GEN_DRAFTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "plan_int.h"

/* The q rows verification reads: buffer buf, vq entries a row (q = 0
 * beyond: a draft vocabulary prefix), one row per node or (by_depth) per
 * depth. */
typedef struct gp_q {
	int buf, vq;
	bool by_depth;
} gp_q;

/* The slots in the order gen_plan_build calls them. c->draft points at
 * state_bytes of the drafter's own (zeroed), c->a at the shared buffers. */
typedef struct gen_drafter {
	const char *name;
	size_t state_bytes;
	/* p->draft_cfg, the draft network's forward shapes; NULL: no draft
	 * network (engine.json's shapes.draft is null) */
	void (*shapes)(ctx *c);
	/* its weights and caches, after the target's (tm) */
	int (*weights)(ctx *c, const model_ix *tm);
	/* its rows, 16-bit GEMM input width and attention partials (dim: the
	 * activations' width, the widest model's) */
	void (*extents)(ctx *c, int64_t dim, gp_extents *e);
	/* its activations, after the target's logits and probabilities */
	int (*buffers)(ctx *c);
	/* its state words, after the engine's */
	int (*state)(ctx *c);
	/* the target layers whose outputs the target's forwards tap into
	 * c->a.taps (*taps, returns how many) */
	int (*taps)(const gen_spec *s, const int **taps);
	/* phase "prefill", after the target's chunk forward: its cache's rows */
	void (*prefill)(ctx *c);
	/* the draft phases before the levels (a catch-up, the n-gram lookup, a
	 * block's passes), each opened and closed with gp_phase_begin/_end */
	void (*draft)(ctx *c);
	/* phases draft_0 .. draft_{levels - 1}, one a tree level: draft_level
	 * emits level d's ops into the open phase (and may gate it) */
	int (*levels)(const gen_spec *s);
	void (*draft_level)(ctx *c, int d);
	/* phase "verify", after the target's tree forward and probabilities */
	void (*verify)(ctx *c);
	/* the q verification reads; NULL: none (greedy or one-hot over the
	 * target's own rows) */
	gp_q (*accept_q)(ctx *c);
	/* phase "commit", after the target's cache: its own */
	void (*commit)(ctx *c);
	/* its members of engine.json's $.spec.draft after "method" (what the
	 * runtime binds its weights by: path and digest, taps, vocabulary) */
	void (*echo)(const gen_plan *p, FILE *f);
} gen_drafter;

extern const gen_drafter gen_drafter_ngram, gen_drafter_model, gen_drafter_layerskip,
       gen_drafter_block, gen_drafter_eagle3;

/* The drafter of a spec's draft kind (enum gen_draft_kind). */
const gen_drafter *gen_drafter_of(int kind);

/* drafter_ngram.c: the n-gram lookup's buffers and ops, which an EAGLE-3
 * head with "ngram" runs in front of itself: the history and the pick's
 * signal; the controller's words and cost table (when on); the lookup and
 * the controller after tree_prep. */
int gp_ngram_history(ctx *c);
int gp_ngram_control(ctx *c);
void gp_op_ngram_draft(ctx *c);

#endif

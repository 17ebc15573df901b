/* The drafter interface: what one kind of drafter says of the spec (its
 * "$.draft" methods and keys, their parse, the trees, dtypes and prefill
 * chunks it takes: gen/spec.c asks), what it adds to the static iteration
 * whose phases gen_plan_build lays out (gen/plan_build.c, the skeleton:
 * prefill, the draft phases, verify, accept, commit), the weights and
 * files the engine binds (gen/build.c), and its "$.draft" written back
 * from engine.json's echo (gen/replan.c). One file per kind: drafter_ngram.c,
 * drafter_model.c (a draft model and a layer-skip draft), drafter_block.c,
 * drafter_eagle3.c; the registry (drafters.h) maps the spec's draft kind
 * (gen_spec.draft_kind) to its gen_drafter. A slot left NULL adds nothing;
 * methods and parse are required. Internal to gen/. */
#ifndef GEN_DRAFTER_H
#define GEN_DRAFTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/json.h"
#include "drafters.h"
#include "plan_int.h"

/* The q rows verification reads: buffer buf, vq entries a row (q = 0
 * beyond: a draft vocabulary prefix), one row per node or (by_depth) per
 * depth. */
typedef struct gp_q {
	int buf, vq;
	bool by_depth;
} gp_q;

/* "$.draft" as the spec gives it (gen/spec.c): d the string or the object,
 * method its method, mv and mp where the method stands ("$.draft" or
 * "$.draft.method"). */
typedef struct gen_draft_in {
	const json_value *d, *mv;
	const char *method, *mp;
} gen_draft_in;

/* The spec echo's "$.spec.draft" as the re-plan reads it (gen/replan.c):
 * d the object, dshape $.shapes.draft where d gives a "shape" (else NULL),
 * dpath the drafter's weights this run binds ("" for none). */
typedef struct gen_echo_in {
	const json_value *d, *dshape;
	const char *dpath;
} gen_echo_in;

/* Weights opened for build's digest (gen/build.c, engine.json's
 * $.spec.draft.digest), read by field and layer (-1: not layered) as the
 * runtime's upload reads them. */
typedef struct gen_weights_src {
	const char *path; /* the file or directory read, named in messages */
	void *h;          /* NULL: none bound (a drafter by shape) */
	const float *(*get)(const void *h, const char *field, int layer, size_t *n);
	void (*close)(void *h);
} gen_weights_src;

/* The slots, each part in the order its reader calls them. The planner's:
 * c->draft points at state_bytes of the drafter's own (zeroed), c->a at
 * the shared buffers. */
typedef struct gen_drafter {
	const char *name;
	/* what refusals call it ("a block drafter") */
	const char *noun;

	/* -- the spec (gen/spec.c) -- */
	/* the "$.draft" methods it answers to, as a refusal lists them: a form
	 * without ':' is the whole method ("block"), one with ':' a prefix
	 * through it ("layerskip:LAYERS" answers "layerskip:0-7"); NULL-ended */
	const char *const *methods;
	/* the keys of a "$.draft" object it reads beside "method" (NULL-ended,
	 * NULL: none). Any other is refused before parse, a key only it reads
	 * with any other method (keys_why: that refusal's reason, or NULL) */
	const char *const *keys;
	const char *keys_why;
	/* "$.draft" into s's draft fields (s->draft_kind is set) */
	int (*parse)(const gen_draft_in *in, gen_spec *s, sw_err *err);
	/* once the tree, the verification pair and sampling are parsed: the
	 * ones it drafts for (root: the spec) */
	int (*tree_check)(const json_value *root, const gen_spec *s, sw_err *err);
	/* the least prefill chunk it takes (0: any) and why, in its refusal
	 * ("at least 2 " prefill_why) */
	int prefill_min;
	const char *prefill_why;
	/* the engine's dtype, once parsed (s->dtype; v: $.dtype) */
	int (*dtype_check)(const gen_spec *s, const json_value *v, sw_err *err);
	/* it takes "adaptive" (SpecDec++: a chain drafted level by level, its
	 * q the stop rule's predictor) */
	bool adaptive;
	/* it embeds tokens by the target's table without the family's scale
	 * (gen_arch_block.embd_scale): a family that scales refuses it */
	bool embd_unscaled;

	/* -- the planner (gen/plan_build.c) -- */
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
	/* its forward runs the target's layers s->skip_layers (a layer-skip
	 * draft): its "draft" layers' weight types are those layers' */
	bool target_layers;
	/* it reads the target's embedding table as 16-bit rows (a block
	 * drafter's block_embed, an EAGLE-3 head without an embedding of its
	 * own: eagle3_in), which gguf_a8 then keeps 16-bit (plan.c
	 * embd_dtype); NULL: never */
	bool (*embd16)(const gen_spec *s);
	/* its members of engine.json's $.spec.draft after "method" (what the
	 * runtime binds its weights by: path and digest, taps, vocabulary) */
	void (*echo)(const gen_plan *p, FILE *f);

	/* -- the re-plan (gen/replan.c) -- */
	/* the spec's "$.draft" `build` read, written back from the spec echo's
	 * (in) to f; NULL: {"method": M}, the method alone */
	void (*echo_spec)(const gen_echo_in *in, FILE *f);

	/* -- build (gen/build.c) -- */
	/* the files of its directory (s->draft.path) engine.json's
	 * $.draft_files records, strdup'ed into names (at most max, in order; a
	 * NULL one: out of memory): how many, or a negative error. NULL: it
	 * binds no files (a path that is a file is recorded whole) */
	int (*files)(const gen_spec *s, char **names, int max, sw_err *err);
	/* its weights for the digest, *w (w->h NULL: none bound) */
	int (*weights_open)(const gen_spec *s, gen_weights_src *w, sw_err *err);
} gen_drafter;

/* spec.c's helpers for a drafter's parse (each refusal names the file, the
 * JSON path, what was expected and what was found): a weights path made
 * absolute against the current directory (out: n bytes); a model file's
 * or HF directory's shapes (metadata only); the shape rules every model
 * meets; {"path": P} or {"shape": {...}}; a drafter directory's
 * "$.draft.path" (config.json, model.safetensors; what names it), made
 * absolute into s->draft.path (*dir), its value *pv; gguf_a8's refusal of
 * a drafter its engines do not run (what: "block drafter"). */
int gen_spec_abs_path(const json_value *v, const char *kp, const char *p, char *out, size_t n,
                      sw_err *err);
int gen_spec_model_from_path(const json_value *v, const char *path, const char *mpath,
                             rt_config *cfg, sw_err *err);
int gen_spec_shape_check(const json_value *v, const char *path, const rt_config *c, sw_err *err);
int gen_spec_model_parse(const json_value *m, const char *path, gen_model_src *src, sw_err *err);
int gen_spec_draft_dir(const json_value *d, gen_spec *s, const char *what, const char **dir,
                       const json_value **pv, sw_err *err);
int gen_spec_gguf_a8_refuse(const json_value *v, const char *what, sw_err *err);

/* Whether dr answers to method (drafters.c): a form of its methods without
 * ':' is the whole method, one with ':' a prefix through it. */
bool gen_drafter_takes(const gen_drafter *dr, const char *method);

/* replan.c's writers for a drafter's echo_spec: s (n bytes) as a JSON
 * string; v as JSON (a number exactly as parsed); `"key": value` of o's
 * members named in keys (NULL-ended; those present), after sep; a model's
 * shape from $.shapes.<role> (the planner's) in the spec's shape keys. */
void gen_put_str(FILE *f, const char *s, size_t n);
void gen_put_value(FILE *f, const json_value *v);
void gen_put_members(FILE *f, const json_value *o, const char *const *keys, const char *sep);
void gen_put_shape(FILE *f, const json_value *cfg);

/* drafter_ngram.c: the n-gram lookup, which an EAGLE-3 head with "ngram"
 * runs in front of itself. Its lengths "MIN:MAX" (1 <= MIN <= MAX <= 16,
 * nothing after) into s->ngram_min, ngram_max: true, or false; the trees
 * and verification it drafts for (a chain, greedy or one-hot); its
 * buffers and ops: the history and the pick's signal; the controller's
 * words and cost table (when on); the lookup and the controller after
 * tree_prep. */
bool gen_ngram_range(const char *str, gen_spec *s);
int gen_ngram_tree_check(const json_value *root, const gen_spec *s, sw_err *err);
int gp_ngram_history(ctx *c);
int gp_ngram_control(ctx *c);
void gp_op_ngram_draft(ctx *c);

#endif

/* Decoding loops on the host: target-only generation and chain speculative
 * decoding (draft gamma tokens, verify them in one target forward, accept by
 * the exact rule of ALGORITHMS.txt 1a-1c, commit the accepted prefix). Plus
 * the drafters and the statistics the papers define. */
#ifndef RT_SPEC_H
#define RT_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "model/ctx.h"
#include "core/err.h"
#include "sampler.h"

#define RT_MAX_GAMMA 64

typedef struct rt_drafter rt_drafter;
struct rt_tree;
struct rt_drafter_ops {
	/* Proposes up to gamma tokens continuing hist[0..n_hist) (the whole
	 * sequence so far, its last token not yet in the target cache). Writes
	 * tok[0..k) and, unless the drafter is deterministic, q (k, vocab): the
	 * exact distributions the tokens were drawn from. Returns k >= 0 or a
	 * negative error. */
	int (*propose)(rt_drafter *d, const int32_t *hist, int n_hist, int gamma, const rt_sampling *s,
	               uint64_t seed, uint32_t iter, int32_t *tok, float *q, sw_err *err);
	void (*free)(rt_drafter *d);
	/* Optional (NULL: chains only): drafts the static tree t for the tree
	 * decoder (rt_generate_tree_drafter). tok (t->n): tok[0] =
	 * hist[n_hist-1], tok[u] node u's token (-1: absent); q (t->n, V): row u
	 * the distribution u's children were drawn from by `rule`, at the draft
	 * sampling sd (s: the request's). */
	int (*draft_tree)(rt_drafter *d, const struct rt_tree *t, int rule, const rt_sampling *sd,
	                  const rt_sampling *s, uint64_t seed, uint32_t iter, const int32_t *hist, int n_hist,
	                  int32_t *tok, float *q, sw_err *err);
};

struct rt_drafter {
	const struct rt_drafter_ops *ops;
	char name[64];
	bool deterministic; /* q is one-hot at the proposed token (ALGORITHMS.txt 1c) */
	uint64_t n_forwards; /* draft model forward passes */
	double t_seconds;    /* time spent proposing */
};

/* A draft model (separate model over the target's ids: rt_model_pad_vocab
 * when its vocabulary is a prefix of the target's; or a layer-skip view),
 * its own KV cache of max_ctx. */
rt_drafter *rt_drafter_model(const rt_model *dm, int max_ctx, sw_err *err);
/* Prompt lookup: the longest suffix n-gram (max_n down to min_n) that occurred
 * before; proposes the tokens that followed it. Deterministic. */
rt_drafter *rt_drafter_ngram(int min_n, int max_n, sw_err *err);
void rt_drafter_free(rt_drafter *d);

typedef struct rt_stats {
	uint64_t n_tokens;        /* N: emitted tokens */
	uint64_t n_iters;         /* speculative iterations */
	uint64_t n_target_calls;  /* N_target: target forwards after prefill */
	uint64_t n_draft_calls;   /* draft forwards (N_draft) */
	uint64_t n_drafted;       /* tokens proposed */
	uint64_t n_accepted;      /* proposed tokens accepted */
	uint64_t n_rejections;    /* iterations that ended in a rejection (not a bonus token) */
	uint64_t pos_tried[RT_MAX_GAMMA], pos_accepted[RT_MAX_GAMMA];
	uint64_t rank_accepted[8]; /* trees: accepted children by sibling rank (0 = first draft) */
	uint64_t rank_tried[8];    /* trees: siblings of that rank that were tested */
	double t_total, t_prefill, t_target, t_draft; /* seconds */
	double lossy_tv_sum;       /* lossy runs: sum over tested positions of the TV bias bound */
	int n_prompt;
	bool stopped_eos, stopped_ctx;
} rt_stats;

/* Returns nonzero to stop generation after these tokens. */
typedef int (*rt_token_cb)(void *user, const int32_t *tok, int n);
typedef bool (*rt_eog_fn)(const void *user, int32_t tok);

typedef struct rt_gen_cfg {
	rt_sampling samp;     /* the target's sampling; the draft samples with the same */
	int gamma;            /* draft tokens per iteration, 1..RT_MAX_GAMMA */
	uint64_t seed;
	int max_new;          /* tokens to emit at most */
	float lossy_eps;      /* > 0: LOSSY relaxation of Yin et al. (accept with
	                       * min(1, (p + eps)/q)); biased, off by default */
	rt_eog_fn is_eog;     /* optional: end-of-generation test */
	const void *eog_user;
	rt_token_cb on_tokens; /* optional streaming callback */
	void *cb_user;
} rt_gen_cfg;

/* Both write the emitted tokens to out (cap >= max_new) and return the count
 * or a negative error. tc must be empty (len 0). */
int rt_generate_target(rt_ctx *tc, const int32_t *prompt, int n_prompt, const rt_gen_cfg *cfg,
                       int32_t *out, rt_stats *st, sw_err *err);
int rt_generate_spec(rt_ctx *tc, rt_drafter *d, const int32_t *prompt, int n_prompt,
                     const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err);

/* One chain verification (ALGORITHMS.txt 1a/1b/1c). logits (g+1, V): the
 * target's logits at the g drafted positions and the bonus position, warped
 * by s row by row only as far as needed; q (g, V) or NULL for a deterministic
 * draft (one-hot). Returns the accepted count in [0, g]; *final = the
 * residual or bonus token. Uniforms keyed by (seed, iter, position, purpose).
 * Scratch: p and tmp V floats, idx V ints. */
int rt_verify_chain(const float *logits, const rt_sampling *s, const float *q, const int32_t *xd,
                    int g, int V, uint64_t seed, uint32_t iter, int32_t *final, float *p, float *tmp,
                    int *idx);

/* Tree speculative decoding: each iteration drafts the whole static tree
 * level by level with the draft model (children of a node drawn by `rule`
 * from the draft's warped distribution there), verifies all nodes in one
 * target forward with the ancestor mask, and accepts a path with `method`
 * (tree_verify.h). At temperature 0 the expansion is top-k by draft logits
 * and the verification greedy, whatever rule/method say. */
typedef struct rt_tree_cfg {
	const struct rt_tree *tree;
	int rule;   /* enum rt_expand_rule */
	int method; /* enum rt_verify_method */
} rt_tree_cfg;

int rt_generate_tree(rt_ctx *tc, const rt_model *draft, const rt_tree_cfg *tcfg, const int32_t *prompt,
                     int n_prompt, const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err);
/* The same with the tree drafted by a drafter that drafts trees (its
 * draft_tree op: block drafters, EAGLE-3 heads) instead of a draft model. */
int rt_generate_tree_drafter(rt_ctx *tc, rt_drafter *d, const rt_tree_cfg *tcfg, const int32_t *prompt,
                             int n_prompt, const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err);
static inline bool rt_drafter_drafts_trees(const rt_drafter *d) { return d && d->ops->draft_tree; }

#endif

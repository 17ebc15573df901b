/* Internal to the decoding loops (chain.c, tree_decode.c): the shared state of
 * one generation (token history, scratch rows) and its set-up, prefill and
 * token emission. Not a public interface. */
#ifndef RT_SPEC_LOOP_H
#define RT_SPEC_LOOP_H

#include "chain.h"

struct rt_loop {
	int32_t *hist;  /* prompt + emitted tokens */
	int n_hist;
	float *logits;  /* (rows, V) */
	float *q;       /* (rows, V) */
	float *p, *tmp; /* (V) */
	int *idx;       /* (V) */
};

/* Validates the request, allocates `rows` = gamma + 1 logits/q rows,
 * prefills all prompt tokens but the last. */
int rt_loop_init(struct rt_loop *L, rt_ctx *tc, const int32_t *prompt, int n_prompt, const rt_gen_cfg *cfg,
                 int gamma, rt_stats *st, sw_err *err);
void rt_loop_free(struct rt_loop *L);
/* Appends tokens to out and the history, stopping at max_new or an
 * end-of-generation token; streams them. True when generation must stop. */
bool rt_loop_emit(const rt_gen_cfg *cfg, const int32_t *tok, int n, int32_t *out, int *n_out, int32_t *hist,
                  int *n_hist, rt_stats *st);

#endif

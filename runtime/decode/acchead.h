/* SpecDec++ (ALGORITHMS.txt 6): the acceptance-prediction head, the adaptive
 * stop rule of the model drafter, the SpecDec++ time model, and the head's
 * trainer. The head is tiny and runs in fp32 on the host; it is not a device
 * op. Not here: the chain loop itself (chain.c), which is unchanged. */
#ifndef RT_ACCHEAD_H
#define RT_ACCHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "model/ctx.h"
#include "core/err.h"
#include "chain.h"

/* p_hat(x) = softmax(W2 y + b2)[1] with y = R^k(x), R(y) = y + SiLU(W y + b):
 * ONE weight-tied ResBlock applied k times (PyTorch `[ResBlock(h)] * k`),
 * then Linear(h, 2). Class 1 = accept. k = 0 is a linear head. */
typedef struct rt_acchead {
	int dim;      /* h: the draft's hidden size */
	int n_layers; /* k: applications of the tied block */
	float *w;     /* (dim, dim) out x in */
	float *b;     /* (dim) */
	float *w2;    /* (2, dim) */
	float *b2;    /* (2) */
} rt_acchead;

/* Zero weights (p_hat = 0.5). */
rt_acchead *rt_acchead_new(int dim, int n_layers, sw_err *err);
/* PyTorch's default nn.Linear init: U(-1/sqrt(in), 1/sqrt(in)) for weights
 * and biases, from a splitmix64 stream of seed. */
void rt_acchead_init_random(rt_acchead *h, uint64_t seed);
void rt_acchead_free(rt_acchead *h);

/* Loads a head saved from nn.Sequential: `P model.{i}.linear.weight/bias`
 * for the ResBlocks i < k (copies of the tied block; every stored copy must
 * equal the others; copies a deduplicating writer dropped may be absent)
 * and `P model.{k}.weight/bias` for the final Linear, with one common prefix
 * P ("" or e.g. "acc_head."). k is discovered from the names. dim > 0: the
 * hidden size the head must take (the draft's). */
rt_acchead *rt_acchead_load(const char *path, int dim, sw_err *err);
/* Writes the PyTorch layout (k identical copies of the block), F32. */
int rt_acchead_save(const rt_acchead *h, const char *path, sw_err *err);

/* p_hat for one hidden state x (dim). scratch: 2*dim floats. */
float rt_acchead_prob(const rt_acchead *h, const float *x, float *scratch);
/* The two logits (reject, accept) and, if y is non-NULL, the head's last
 * hidden y (dim). scratch: 2*dim floats. */
void rt_acchead_forward(const rt_acchead *h, const float *x, float logits[2], float *y, float *scratch);

/* ---- adaptive draft length (the model drafter's stop rule) ---- */

enum rt_adapt_predictor {
	RT_ADAPT_OFF = 0,
	RT_ADAPT_HEAD,  /* p_hat from the acceptance head */
	RT_ADAPT_PROXY, /* p_hat = the draft's probability of its own sample, q(Y)
	                 * (at T = 0: the draft softmax at T = 1) */
};

typedef struct rt_adaptive {
	int predictor;          /* enum rt_adapt_predictor */
	float threshold;        /* h: stop once P(at least one rejection) > h */
	int min_len, max_len;   /* bounds on the drafted length; the gamma the loop
	                         * passes (rt_gen_cfg.gamma, clipped) stays the hard max */
	const rt_acchead *head; /* RT_ADAPT_HEAD: dim = the draft's hidden size */
} rt_adaptive;

/* The stop rule of SpecDec++ (hf_generation.py, schedule 'ada'), one step:
 * Y_step was just drafted; p_prev = p_hat(Y_{step-1}) (ignored at step 1);
 * *cum is the running product (1 at the start of a round). max = the
 * effective upper bound. True: stop after submitting Y_step. */
bool rt_adaptive_stop(const rt_adaptive *a, int step, int max, double p_prev, double *cum);

/* Attaches (or with a == NULL / predictor OFF, detaches) the stop rule to a
 * model drafter; a is copied. Errors: not a model drafter, a head whose dim
 * differs from the draft's hidden size, h outside [0, 1], bad bounds. */
int rt_drafter_set_adaptive(rt_drafter *d, const rt_adaptive *a, sw_err *err);

/* Parses "h[:min:max]" (defaults min 2, max 20, the paper's bounds). */
int rt_adaptive_parse(const char *s, rt_adaptive *a, sw_err *err);

/* ---- the SpecDec++ time model (Eq. 2.1 and 2.3) ----
 * Counting convention: one draft forward per drafted token. The model
 * drafter's sync forward (which may run several tokens: the last verified
 * token, plus the previous round's unfed last draft when it was accepted)
 * is the forward that yields Y_1, and the last draft of a round is never
 * fed within the round; so a round of k drafts costs exactly k draft
 * forwards and N_draft = n_drafted. With N_target rounds each emitting
 * n + 1 tokens, N_draft = N + N_discard - N_target holds exactly, where N
 * counts the tokens the rounds produced (n_accepted + N_target); the emitted
 * count st->n_tokens can be smaller when max_new or end-of-generation cut
 * the last round. */
typedef struct rt_time_model {
	double t_draft, t_target;      /* seconds per forward (t_draft includes the draft's prefill) */
	double N, N_draft, N_target, N_discard;
	double D, V;                   /* discard rate N_discard/N, verification rate N_target/N */
	double T_total;                /* Eq. 2.1: t_draft*N_draft + t_target*N_target */
	double T_per_token;            /* Eq. 2.3: t_draft*D + (t_target - t_draft)*V + t_draft */
} rt_time_model;

void rt_time_model_compute(const rt_stats *st, rt_time_model *tm);

/* ---- training (acchead_train.c) ---- */

typedef struct rt_acchead_train_cfg {
	int n_tokens;        /* labelled draft-token positions to generate */
	int n_layers;        /* k */
	int ctx_len;         /* corpus tokens before each continuation */
	int cont_len;        /* continuation positions per chunk */
	float mix_ratio;     /* r: a position takes the target's token (ALGORITHMS 6: 0.15) */
	float w_rej, w_acc;  /* loss weights (6, 1) */
	int epochs;
	int batch;
	float lr;
	float holdout;       /* fraction of chunks held out for evaluation */
	uint64_t seed;
	int verbose;         /* progress lines on stderr */
} rt_acchead_train_cfg;

typedef struct rt_acchead_train_report {
	int n_train, n_test;
	double mean_label;        /* training labels, unweighted */
	double const_w;           /* the optimal constant for the weighted loss on the training set */
	double test_loss;         /* weighted soft BCE of the trained head, held out */
	double test_loss_const;   /* same, constant predictor const_w */
	double test_bce;          /* unweighted soft BCE of the head, held out */
	double test_bce_const;    /* unweighted, constant predictor mean_label */
	double train_loss_first, train_loss_last; /* epoch means */
	double seconds_data, seconds_train;
} rt_acchead_train_report;

void rt_acchead_train_defaults(rt_acchead_train_cfg *c);
/* Generates data from corpus tokens with target and draft (same vocabulary),
 * trains a head on the draft's hidden states; *out receives it. */
int rt_acchead_train(const rt_model *target, const rt_model *draft, const int32_t *corpus, int n_corpus,
                     const rt_acchead_train_cfg *cfg, rt_acchead **out, rt_acchead_train_report *rep,
                     sw_err *err);

#endif

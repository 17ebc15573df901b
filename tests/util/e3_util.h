/* EAGLE-3 engine tests' common ground (tests/test_engine_eagle3*.c): their
 * spec, their tiny head, bind, spec refusals, the per-iteration check that
 * an engine drafts the host head's tokens, and the T > 0 exactness cases.
 * Each helper fails the running CMocka test on error. Which host head and
 * target the drafts are held to, and the tie bound's rounding, are the
 * caller's (an fp16 engine: the same head, u = 2^-11; a gguf_a8 one: the
 * head with Q8_0-rounded weights, u = 2^-8 + 2^-11). */
#ifndef TESTS_E3_UTIL_H
#define TESTS_E3_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/chain.h"
#include "decode/eagle3_draft.h"
#include "decode/tree_verify.h"
#include "engine/engine.h"
#include "model/ctx.h"
#include "model/eagle3.h"

/* The per-element rounding of an engine's head logits: fp16 (u = 2^-11),
 * and Q8_0 weights with int8 GEMM inputs then fp16 (2^-8 + 2^-11); a
 * near-tie is a margin within 8 u max|logit| (test_engine.c check_greedy's
 * derivation). */
#define E3U_U_FP16 0x1p-11
#define E3U_U_A8 (0x1p-8 + 0x1p-11)

/* An EAGLE-3 engine's spec (name "tiny-e3-<dtype>", archs sm_80, top_k 0,
 * top_p 1) for the target file at target and the head directory head. */
void e3u_spec(char *buf, size_t n, const char *dtype, const char *target, const char *head,
              const char *tree, const char *verify, const char *expand, double temp, int ctx,
              int chunk);
/* The same with extra members of "draft" (e.g. ", \"ngram\": \"1:3\"") and of
 * the spec (e.g. ", \"control\": {\"mode\": \"off\"}"); either may be "". */
void e3u_spec_ex(char *buf, size_t n, const char *dtype, const char *target, const char *head,
                 const char *tree, const char *verify, const char *expand, double temp, int ctx,
                 int chunk, const char *draft_extra, const char *spec_extra);
/* The engine tests' head over m: draft vocabulary 60 (spread over m's),
 * ffn as given, written into dir (made here). Returns 0 or -1. */
int e3u_head60(const char *dir, const rt_model *m, int ffn, uint64_t seed);
/* The engine tests' fixture: the work directory `dir` for test `name`
 * (eu_work_dir), the tiny target saved there (eu_tiny_model: *tiny, its path
 * tiny_path) and e3u_head60's head over it (ffn 192, seed 5) in dir/head
 * (head), loaded as *h. Returns 0, or -1 saying why. e3u_fixture_free
 * releases both and removes the head's directory. */
int e3u_fixture(const char *name, char *dir, size_t ndir, char *tiny_path, size_t ntp, char *head,
                size_t nhead, rt_model **tiny, rt_eagle3 **h);
void e3u_fixture_free(rt_model *tiny, rt_eagle3 *h, const char *head);
/* Loads the engine in dir and binds it to d with target m and head h. */
rt_engine *e3u_bind(const char *dir, rt_dev *d, const rt_model *m, const rt_eagle3 *h,
                    uint64_t seed);
/* text must be refused by gen_spec_parse with a message containing want. */
void e3u_spec_refused(const char *text, const char *want);

/* Every iteration's drafted tree (the engine's tree_tokens after it)
 * against the host head's drafts from the same committed tokens: the root
 * (the last committed token), then every node (a chain: the host chain
 * drafter's gamma tokens; a tree: its top-k tree). A chain's first
 * difference may be a near-tie of the host head's logits (margin <= 8 u
 * max|logit|), counted and named; the rest of that chain is not compared.
 * Anything else fails the test. */
typedef struct e3u_drafts {
	/* the caller's */
	rt_engine *e;
	const rt_model *target;  /* the host target whose taps feed the host head */
	const rt_eagle3 *head;   /* the host head (fp32 forward) */
	const char *head_name;   /* in messages, e.g. "host head", "Q8_0 host head" */
	double u;                /* E3U_U_FP16 or E3U_U_A8 */
	const rt_tree *t;       /* NULL: a chain of gamma */
	int gamma;
	char what[96];
	/* an n-gram-first engine ("ngram": "MIN:MAX", ngram_max > 0; its chain
	 * the head drafts at most gamma = its levels): the pick words e3_go
	 * (gamma of them) must be a prefix of hk ones; an iteration with hk = 0
	 * and node 1 present must have drafted a present prefix of
	 * ref_ngram_lookup_info's proposal over the committed tokens (all of it
	 * when ctrl_off), one with hk > 0 the host head's first hk tokens then
	 * absent nodes (ctrl_off: hk = gamma, and only when the lookup proposed
	 * none), one with hk = 0 and node 1 absent nothing (a plain step: only
	 * with the controller); the chain has n_nodes nodes */
	int ngram_min, ngram_max, n_nodes;
	bool ctrl_off;
	/* counted */
	int iters, nodes, same, ties; /* same: non-root nodes equal to the host head's */
	int by_ngram, by_head;        /* an n-gram-first engine's iterations by drafter */
	int plain, head_short;        /* its iterations that drafted nothing, and those whose
	                               * head drafted fewer than gamma levels */
	double worst;                 /* the largest near-tie margin / bound */
	/* scratch */
	rt_drafter *hd;
	rt_ctx *tc;
	float *q;
	int32_t hist[256];
	int n_hist;
} e3u_drafts;
/* rt_engine_generate of max_new tokens after prompt (no EOS) on c->e with
 * every iteration checked as above; the count must be max_new. */
void e3u_drafts_run(e3u_drafts *c, const int32_t *prompt, int n_prompt, int max_new, int32_t *out,
                    rt_engine_stats *st);

/* Exactness at T > 0 of EAGLE-3 engines on a 12-id target m (saved at
 * mpath) with a head over 10 of its ids (not a prefix: q = 0 on ids 0 and
 * 2; flat, so drafts are accepted): per case an engine (dtype, native host,
 * max_context 64, chunk 8) whose first two tokens after {3, 7, 1} over
 * `runs` seeded runs at each setting are held to the enumerated
 * distribution, chi-square at significance 1e-4; drafts accepted; the graph
 * captured once per engine. */
typedef struct e3u_exact_case {
	const char *tree, *verify, *expand;
	const char *draft_extra; /* NULL, or e3u_spec_ex's */
} e3u_exact_case;
typedef struct e3u_exact {
	const rt_model *m;
	const char *mpath, *dtype;
	const char *dir, *cache_dir; /* the test's work directory (head12, exact<i> made there) */
	const e3u_exact_case *cases;
	int n_cases;
	const rt_engine_sampling *set;
	int n_set, runs;
	uint64_t seed;     /* the first run's */
	const char *label; /* prefix of the printed lines */
	const int32_t *prompt; /* NULL: {3, 7, 1} */
	int n_prompt;
} e3u_exact;
void e3u_exactness(const e3u_exact *x);

#endif

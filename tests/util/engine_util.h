/* Engine tests' common ground (tests/test_engine*.c): the tiny Llama the
 * engines are built for (saved as GGUF, since a spec names its target by
 * path), the spec text for it, a prompt with repeats (so n-grams match),
 * `specwright build` without NVRTC, and load + bind + generate on any
 * device. Each helper fails the running CMocka test on error. Not the
 * references the engines are checked against (those stay in each test). */
#ifndef TESTS_ENGINE_UTIL_H
#define TESTS_ENGINE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/ctx.h"
#include "device/device.h"
#include "engine/engine.h"
#include "cli/cli.h"

/* vocab 111 (not a power of two), dim 256, 3 layers, 4 heads, 2 KV heads
 * (head_dim 64, GQA 2), ffn 384, seed 7: test_engine.c's model. */
#define EU_TINY_VOCAB 111

/* The pair test's sampling: n seeded runs (seeds *seed, *seed + 1, ...;
 * *seed advanced) of two new tokens after prompt at samp, each pair counted
 * in counts[first * V + second] (zeroed first). Returns the iterations
 * taken; *captures gains the runs that captured a graph. Fails the test on
 * an error, naming what. */
int eu_sample_pairs(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt,
                    const rt_engine_sampling *samp, int n, uint64_t *seed, uint64_t *counts,
                    int V, int *captures);

/* Makes build/<name>.<pid> (and its cache/ subdirectory) into dir. */
void eu_work_dir(char *dir, size_t n, const char *name);
/* The cache/ subdirectory of the last eu_work_dir ("" before one). */
const char *eu_cache_dir(void);
/* The tiny model, also saved (f32) as dir/tiny.gguf into path. */
rt_model *eu_tiny_model(const char *dir, char *path, size_t n);
/* A spec for the tiny model at model_path: max_context 192, prefill chunk
 * 16, archs sm_80; extra (NULL or "") is appended as more top-level JSON
 * members, e.g. "\"adaptive\": {\"h\": 0.3}". */
void eu_tiny_spec(char *buf, size_t n, const char *model_path, const char *draft, const char *tree,
                  const char *verify, const char *expand, double temp, const char *dtype,
                  const char *extra);
/* n prompt tokens below EU_TINY_VOCAB: random, then repeating with period 12. */
void eu_tiny_prompt(int32_t *p, int n);
/* Writes spec_json to <dir>.spec.json and builds the engine into dir
 * (plan + render; no NVRTC unless compile). */
void eu_build(const char *spec_json, const char *dir, const char *cache_dir, bool compile);
/* A host device (RT_HOST_NATIVE or RT_HOST_EMULATE) whose emulator builds
 * kernels with gen_emu_module_build into cache_dir. */
rt_dev *eu_open_host(int mode, const char *cache_dir);
/* Adds dir/name (a file a test put into an engine directory, e.g. a
 * stand-in module image) to engine.json's file list, as the build would
 * have listed it, so the executor's check accepts it. */
void eu_list_file(const char *dir, const char *name);
/* Rewrites dir's engine.sum for its engine.json as it is (the format
 * gen/build.c writes): a test that edits engine.json to stand for an older
 * or another build, not for a tampered one. */
void eu_resum(const char *dir);
/* Host fp32 target-only greedy tokens (model/ forward: the independent
 * reference engines are held to), the top-2 logit margin at each step, and
 * (max_logit non-NULL) the largest |logit| after the prompt, for the
 * dtype-derived near-tie bound. */
void eu_reference(const rt_model *m, const int32_t *prompt, int n_prompt, int n, int32_t *out,
                  float *margin, double *max_logit);
/* Loads the engine in dir (rt_engine_load), failing the test on error. */
rt_engine *eu_load(const char *dir);
/* Loads the engine in dir and binds it to d (seed for Philox); a
 * block-drafter or EAGLE-3 engine with the directory its engine.json names. */
rt_engine *eu_bind(const char *dir, rt_dev *d, const rt_model *m, uint64_t seed);
/* rt_engine_generate with no EOS; returns the token count; prints a line
 * (what, tokens, iterations, tau, times). */
int eu_generate(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt, int max_new,
                bool eager, int32_t *out, rt_engine_stats *st);
/* The same with this request's sampling values (NULL: the engine's). */
int eu_generate_samp(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt,
                     int max_new, bool eager, const rt_engine_sampling *samp, int32_t *out,
                     rt_engine_stats *st);

/* The same engine's target-only tokens (one row a token) for max_new after
 * prompt must be want's, token for token (what names the run); st gets
 * the run's statistics. */
void eu_check_target_only(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt,
                          int max_new, const int32_t *want, rt_engine_stats *st);
/* got vs the fp32 reference ref: identical, or the first divergence at a
 * near-tie of the reference (margin within bound, the dtype's 8 u
 * max|logit|). Returns the length of the identical prefix. */
int eu_agree_prefix(const char *what, const int32_t *got, const int32_t *ref, const float *margin,
                    int n, double bound);

/* The engine exactness tests' sampling loop: `runs` requests on prompt
 * (max_new 2, seeds seed, seed + 1, ...: seed is advanced), each one's two
 * tokens counted in counts[first * vocab + second] (vocab^2 words, zeroed here),
 * iterations, captures and the runs whose first token is >= pad_from (0 if
 * pad_from < 0) accumulated; e->graph must not change within the call. */
typedef struct eu_pairs {
	const int32_t *prompt;
	int n_prompt;
	const rt_engine_sampling *samp; /* NULL: the engine's defaults */
	int runs, vocab, pad_from;
	uint64_t seed;
	uint64_t *counts;
	int iters, captures, pad_first;
} eu_pairs;
void eu_count_pairs(rt_engine *e, eu_pairs *p, const char *what);
/* At temperature 0 the enumerated pk (K sequences) is a point mass: every
 * one of the runs counted must be its sequence (V ids per token). */
void eu_check_point_mass(const double *pk, const uint64_t *counts, int K, int V, int runs,
                         const char *what);
/* The exact distributions of the first two tokens after prompt at each of
 * n_set sampling settings (tu_seq_dist): n_set rows of vocab^2
 * probabilities, malloc'ed (the chi-square tests' expected counts). */
double *eu_seq_dists(const rt_model *m, const int32_t *prompt, int n_prompt,
                     const rt_engine_sampling *set, int n_set);

#endif

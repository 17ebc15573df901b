/* Tests against Hugging Face transformers (test_qwen, test_qwen_engine,
 * test_gemma): tiny random checkpoints that transformers itself makes and
 * saves (tests/tools/hf_tiny.py, run with build/venv-hf's Python: Debian's
 * torch + transformers), the reference each writes (ref.json), and the
 * host model's logits and greedy tokens to hold against it. */
#ifndef HF_UTIL_H
#define HF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "model/ctx.h"

/* $BUILD/venv-hf/bin/python (BUILD defaults to build). */
const char *hf_python(void);

/* Makes a fresh directory from tmpl (a mkdtemp template under /tmp) into dir
 * (cap bytes) and runs hf_tiny.py there for the n variants, then extra (its
 * own arguments, or NULL). 1: made; 0: no transformers in hf_python() (the
 * caller skips, saying why); -1: the script failed (said on stderr). */
int hf_make(const char *tmpl, char *dir, size_t cap, const char *const *variants, int n);

/* Runs hf_tiny.py once more in dir with the given arguments; 0 or -1. */
int hf_run(const char *dir, const char *args);

/* rm -rf dir, only when it starts with prefix (a test's own directory). */
void hf_rm_rf(const char *dir, const char *prefix);

/* A key of ref.json; a missing one fails the test. */
const json_value *hf_jget(const json_value *o, const char *k);

/* dir/ref.json parsed (text holds the file, freed by the caller after the
 * value); a missing or malformed file fails the test. */
json_value *hf_load_ref(const char *dir, char **text);

/* All T (<= 64) rows' logits of a fresh context on tok (malloc'd). */
float *hf_prompt_logits(const rt_model *m, const int32_t *tok, int T);

/* n greedy target-only tokens after the prompt into out; the count. */
int hf_greedy(const rt_model *m, const int32_t *prompt, int n_prompt, int n, int32_t *out);

/* A transformers fixture as the engine tests use it: dir's ref.json
 * (hf_load_ref), its prompt and greedy length, the model loaded from dir and
 * the host decoder's greedy tokens for the prompt (eu_reference). Fails the
 * test on any error. */
typedef struct hf_fixture {
	json_value *ref;
	char *text;
	rt_model *m;
	int T, N;
	int32_t prompt[64], host[64];
} hf_fixture;
void hf_fixture_load(const char *dir, hf_fixture *f);
void hf_fixture_free(hf_fixture *f);

/* One built engine (edir) of a transformers fixture (ref: hf_load_ref's) on
 * host mode `mode`: the first step's logits against transformers' float64
 * ones within 2 (per_layer L + 2)(2u + gamma_K) |.| (u = 2^-11, fp16/bf16
 * storage; per_layer: the roundings a layer adds), every greedy token equal
 * to transformers' (a near-tie margin fails: the fixture changed) and to
 * the host decoder's (host); native mode also graph == eager and
 * speculative == target-only. Returns the worst error over its bound. */
double hf_engine_check(const char *what, const char *edir, const char *cache, int mode,
                       const rt_model *m, const json_value *ref, const int32_t *prompt, int T,
                       const int32_t *host, int per_layer);

#endif

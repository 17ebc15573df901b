/* Shared test helpers: tiny synthetic models (random Markov tables, random
 * tiny Llama weights), exact sequence distributions by enumeration, and the
 * chi-square machinery with its stated critical values. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <stdint.h>

#include "model/ctx.h"
#include "decode/sampler.h"

/* xorshift64 (13, 7, 17), 32 bits from the top 53: the raw bit source of
 * the host-op tests (random floats by their bit patterns). */
static inline uint32_t tu_xs32(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

/* Deterministic test RNG (splitmix64), independent of the engine's Philox. */
uint64_t tu_rand(uint64_t *s);
double tu_uniform(uint64_t *s);

/* Row-stochastic random table (rows, V); about zero_frac of entries are 0
 * (at least one positive entry per row). */
void tu_random_table(float *t, int rows, int V, double zero_frac, uint64_t seed);
/* A tiny Llama model with random weights (deterministic in seed). */
rt_model *tu_tiny_llama(int vocab, int dim, int n_layers, int n_heads, int n_kv_heads, int ffn,
                        uint64_t seed);

/* The same for Qwen2 (arch RT_ARCH_QWEN2: random q/k/v biases) or Qwen3
 * (RT_ARCH_QWEN3: random q/k norm weights), head_dim free. */
rt_model *tu_tiny_qwen(int arch, int vocab, int dim, int n_layers, int n_heads, int n_kv_heads,
                       int head_dim, int ffn, uint64_t seed);

/* A tiny Gemma 3 GGUF at path, F32, written as llama.cpp's gemma3 files
 * are (general.architecture "gemma3", its keys and tensor names, every
 * norm weight stored as 1 + w, per-head q/k norms, the sandwich norms, a
 * tied embedding, rope base 1e6): sliding_window `window` (llama.cpp's
 * fixed pattern: every sixth layer global, the rest sliding with base
 * 10000). Random weights, deterministic in seed, scaled so that the
 * logits are O(1..3). 0, or non-zero with err set. */
int tu_tiny_gemma_gguf(const char *path, int vocab, int dim, int n_layers, int n_heads,
                       int n_kv_heads, int head_dim, int ffn, int window, uint64_t seed,
                       sw_err *err);

/* Exact distribution of the next n tokens after prompt under model m with
 * sampling s: probs over V^n sequences, index = sum tok_i * V^(n-1-i). */
void tu_seq_dist(const rt_model *m, const int32_t *prompt, int n_prompt, int n, const rt_sampling *s,
                 double *probs);

/* Upper critical value of chi-square with df degrees of freedom at level
 * alpha (Wilson-Hilferty; z from the normal quantile). */
double tu_chi2_crit(int df, double alpha);
/* Pearson statistic of counts vs expected probabilities; categories with
 * expected count < 5 are pooled into one. *df receives the degrees of
 * freedom used. Observations in a zero-probability category give +inf. */
double tu_chi2(const uint64_t *counts, const double *probs, int k, uint64_t n, int *df);
/* Standard normal upper quantile for alpha (Acklam's rational approx.). */
double tu_norm_quantile(double p);

/* Rewrites the f32 Llama GGUF src (as rt_llama_save_gguf writes it) into
 * dst with `vocab` ids: llama.vocab_size set, token_embd and output cut to
 * their first vocab rows or extended with zero rows; with tokens (n_tok
 * strings, NULL: none) also tokenizer.ggml.model = tok_model and
 * tokenizer.ggml.tokens (and, for "gpt2", an empty tokenizer.ggml.merges:
 * the tokenizer then loads, each listed token whole). Returns 0, or non-zero with err set. */
int tu_gguf_revocab(const char *src, const char *dst, int vocab, const char *const *tokens,
                    int n_tok, const char *tok_model, sw_err *err);

#endif

/* Q4_K, Q6_K and Q5_0 encoders for tests (the runtime only decodes these types):
 * a plain min/max rule, not ggml's search (llama-quantize's files are
 * closer to their inputs, but any blocks that decode as the format says are
 * a valid file), and a writer of a Q4_K_M-style GGUF from an F32 one, so
 * the gguf_a8 engine can be tested on mixed per-layer types with a model
 * whose rows are whole 256-element blocks. */
#ifndef TESTS_KQUANT_H
#define TESTS_KQUANT_H

#include <stdint.h>

/* x (n floats, n a multiple of 256) -> out, n / 256 blocks of 144 (Q4_K) or
 * 210 (Q6_K) bytes, ggml's layouts (formats/gguf.c decodes them). */
void kq_quantize_q4_k(const float *x, int64_t n, void *out);
void kq_quantize_q6_k(const float *x, int64_t n, void *out);
/* x (n floats, n a multiple of 32) -> n / 32 Q5_0 blocks of 22 bytes (d;
 * qh[4]; qs[16]), ggml's quantize_row_q5_0_ref: d = the signed value of
 * largest magnitude / -16, q = min(31, (int8)(x / d + 16.5)). */
void kq_quantize_q5_0(const float *x, int64_t n, void *out);

/* One tensor's type in kq_write_mixed: (name, layer or -1) -> enum
 * ggml_dtype; GGML_T_F32 keeps the source's values. */
typedef uint32_t (*kq_type_fn)(const char *name, int layer);
/* Writes src (an F32 GGUF) to dst with each tensor encoded as pick says
 * (F32, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K), every metadata entry copied. Fails
 * the running CMocka test on error. */
void kq_write_mixed(const char *src, const char *dst, kq_type_fn pick);

/* llama.cpp's Q4_K_M rule for attn_v and ffn_down (use_more_bits): Q6_K in
 * the first and last eighth of the layers and every third between. */
int kq_more_bits(int layer, int n_layers);

#endif

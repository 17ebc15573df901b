/* The host backend's tree attention: the native tree_attention op
 * (host_ops.c) on 16-bit Q/K/V, fp32 arithmetic. Each KV head's keys and
 * values are widened once per block of HA_KEY_BLOCK keys and used by every
 * query row of its GQA group and of the tree before the next block is read,
 * so K/V cross memory once per call, not once per query row. Semantics are
 * kernels/ref's ref_attention_append (exact two-pass softmax, a query with
 * no visible key gets zeros, invisible keys never read); the float order is
 * not (8-lane dot products, fp32 sums), see tests/test_host_attn.c. */
#ifndef RT_HOST_ATTN_H
#define RT_HOST_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#define HA_KEY_BLOCK 64

/* out (T, H, hd) fp32 = attention of q (T, H, hd) over k, v (ctx + nb rows
 * of KH * hd), the queries being the LAST T of the nb block entries; mask:
 * T rows of mw uint64 words over the nb block entries (bit set = visible),
 * or NULL for causal. f16: fp16, else bf16. path: enum hg_path
 * (host_gemm.h). threads: 0 = the pool's, 1 = the caller only. Returns 0 or
 * SW_ENOMEM / SW_EINVAL. */
int ha_tree_attention(float *out, const uint16_t *q, const uint16_t *k, const uint16_t *v, int T,
                      int ctx, int nb, int H, int KH, int hd, const uint64_t *mask, int mw, bool f16,
                      int path, int threads);
/* The same with a sliding window (tree attention's WINDOW; 0: none): query
 * t at position ctx + depth(t) sees context slot j only when ctx +
 * depth(t) - j < window (kernels/ref's ref_tree_attention_window). */
int ha_tree_attention_window(float *out, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                             int T, int ctx, int nb, int H, int KH, int hd, const uint64_t *mask,
                             int mw, bool f16, int window, int path, int threads);

#endif

/* The host forward's GEMMs: kernels/ref's matmul, SwiGLU MLP and LM head
 * (ref_matmul, ref_mlp_swiglu, ref_lm_head) through CBLAS, the fp32 host
 * decoder's speed path; the loops of kernels/ref/matmul.c stay their
 * specification. Same arguments, shapes and results within the fp32
 * dot-product bound (tests/test_ref_matmul.c holds both to it). */
#ifndef RT_MODEL_GEMM_H
#define RT_MODEL_GEMM_H

/* y (T, n_out) = x (T, n_in) @ w^T for w (n_out, n_in): one sgemm. */
void rt_matmul(float *y, const float *x, const float *w, int T, int n_in, int n_out);
/* ref_mlp_swiglu with its three GEMMs by rt_matmul; scratch 2*T*ffn floats. */
void rt_mlp_swiglu(float *out, const float *x, const float *w_gate, const float *w_up,
                   const float *w_down, int T, int dim, int ffn, float *scratch);
/* ref_lm_head with its GEMM by rt_matmul; scratch T*dim floats. */
void rt_lm_head(float *logits, const float *x, const float *norm_w, const float *lm_head, int T,
                int dim, int vocab, float eps, float *scratch);

#endif

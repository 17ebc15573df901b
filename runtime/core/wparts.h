/* Fused GEMM weights: one engine buffer holding several of a model's weight
 * fields, so that one GEMM does what several did (issue 37). Each layer's
 * slice holds the parts' rows one after another, in the order below
 * ("wqkv": wq's rows, then wk's, then wv's; "w_gate_up": w_gate's, then
 * w_up's), each part in the buffer's dtype (a GGUF type: its blocks, row by
 * row). The planner (gen/plan.c) makes them, the build's weights digest
 * (gen/build.c) and the runtime's binding (runtime/engine/engine.c) read
 * them as their parts, field by field in this order: the digest is the
 * unfused engine's, a property of the model, not of the fusion. */
#ifndef SW_WPARTS_H
#define SW_WPARTS_H

#define SW_WPARTS_MAX 3

/* The parts of fused field `field` ("wqkv" -> "wq", "wk", "wv") into
 * parts[], their count; 0 for a field that is not fused. */
int sw_wparts(const char *field, const char *parts[SW_WPARTS_MAX]);

#endif

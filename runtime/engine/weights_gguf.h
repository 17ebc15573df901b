/* An engine weight source over a GGUF file (llama.cpp tensor and key names),
 * for a deployment that links only the runtime archive (no runtime/model):
 * each (field, layer) is dequantized to fp32 when bind asks for it, so one
 * tensor at a time is in fp32, not the whole model. Llama architecture only;
 * the config is read from the metadata and checked by bind against the
 * engine's shapes. A gguf_a8 engine bound to a loaded model of any family
 * takes the file's blocks alone from it (rt_engine_gguf_open_raw). Not a
 * model loader: runtime/model/model_gguf.c is that. */
#ifndef RT_WEIGHTS_GGUF_H
#define RT_WEIGHTS_GGUF_H

#include "core/err.h"
#include "engine.h"

typedef struct rt_engine_gguf rt_engine_gguf;

/* Opens path and fills *w (valid until rt_engine_gguf_close). */
rt_engine_gguf *rt_engine_gguf_open(const char *path, rt_engine_weights *w, sw_err *err);
void rt_engine_gguf_close(rt_engine_gguf *g);

/* Opens path for its GEMM weights' blocks alone (w->get_raw; w->get
 * refuses every field): the source of a gguf_a8 engine bound to a model
 * loaded elsewhere (runtime/cli, tests), whose fp32 weights, RoPE tables
 * and family weights that model gives. Any family whose GEMM weights have
 * llama.cpp's tensor names (llama, qwen2, qwen3, gemma3): the file's
 * general.architecture must be shape->arch's, each tensor of shape's
 * sizes (bind checks shape against the engine's and each block against
 * the model's values). */
rt_engine_gguf *rt_engine_gguf_open_raw(const char *path, const rt_engine_shape *shape,
                                        rt_engine_weights *w, sw_err *err);

#endif

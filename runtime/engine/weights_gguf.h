/* An engine weight source over a GGUF file (llama.cpp tensor and key names),
 * for a deployment that links only the runtime archive (no runtime/model):
 * each (field, layer) is dequantized to fp32 when bind asks for it, so one
 * tensor at a time is in fp32, not the whole model. Llama architecture only;
 * the config is read from the metadata and checked by bind against the
 * engine's shapes. Not a model loader: runtime/model/model_gguf.c is that. */
#ifndef RT_WEIGHTS_GGUF_H
#define RT_WEIGHTS_GGUF_H

#include "core/err.h"
#include "engine.h"

typedef struct rt_engine_gguf rt_engine_gguf;

/* Opens path and fills *w (valid until rt_engine_gguf_close). */
rt_engine_gguf *rt_engine_gguf_open(const char *path, rt_engine_weights *w, sw_err *err);
void rt_engine_gguf_close(rt_engine_gguf *g);

#endif

/* Llama-architecture models from GGUF: the config from metadata and the
 * weights dequantized to fp32 into one arena. Not a general GGUF model zoo:
 * only general.architecture == "llama" is accepted. */
#ifndef RT_MODEL_GGUF_H
#define RT_MODEL_GGUF_H

#include "core/err.h"
#include "formats/gguf.h"
#include "model.h"

/* Reads and validates the config (metadata, plus token_embd/output tensor
 * presence for vocab and tying). Missing required keys, a foreign
 * architecture or inconsistent shapes give an error naming the key. */
int rt_llama_config_from_gguf(const gguf_file *f, rt_config *cfg, sw_err *err);
/* Config plus weights; every tensor's shape is checked against the config.
 * On success w owns one arena (free with rt_weights_free); on failure w is
 * left empty. The file may be closed afterwards. */
int rt_llama_load_gguf(const gguf_file *f, rt_config *cfg, rt_weights *w, sw_err *err);

#endif

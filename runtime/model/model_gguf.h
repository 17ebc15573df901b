/* Llama-family models from GGUF: the config from metadata and the weights
 * dequantized to fp32 into one arena. Not a general GGUF model zoo: only
 * general.architecture "llama", "qwen2" (q/k/v biases blk.N.attn_{q,k,v}.bias)
 * and "qwen3" (blk.N.attn_{q,k}_norm.weight, head_dim from
 * qwen3.attention.key_length) are accepted, with llama.cpp's key and tensor
 * names; cfg->arch says which. */
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

/* Whether a draft model can draft for a target: its vocabulary (dvocab) is
 * the target's (tvocab) or a prefix of it, and, when both paths are GGUF
 * files with a tokenizer, the draft's tokenizer.ggml.model equals the
 * target's and its tokenizer.ggml.tokens are the target's first ones, id by
 * id (a draft without a tokenizer, as derive-draft writes, uses the
 * target's; an HF directory's tokenizer is not read). Special token ids are
 * not compared: a base draft under an instruct target shares the tokens but
 * not the eos id, and the draft never decides a stop. The target may then
 * commit ids in [dvocab, tvocab) (padding, or tokens the draft lacks): the
 * draft embeds them as a zero row (kernels/ref/embedding16.c) and gives
 * them q = 0. paths may be NULL or "" (shape-only). 0, or SW_EINVAL naming
 * the draft file, the field, what was expected and what was found. */
int rt_draft_vocab_check(const char *tpath, int tvocab, const char *dpath, int dvocab, sw_err *err);

#endif

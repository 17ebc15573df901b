/* Loader for Hugging Face checkpoints of the Llama family: config.json plus
 * safetensors (single file or sharded). Weights become f32 in one arena.
 * model_type "llama" (no biases): q_proj/k_proj rows are permuted from HF's
 * rotate_half RoPE layout to the GGUF adjacent-pair layout (see model.h);
 * "qwen2" (q/k/v biases) and "qwen3" (q_norm/k_norm, head_dim from the
 * config): rows kept, the forward uses NeoX RoPE. SiLU MLP, RoPE
 * none/linear/llama3, no sliding window. Not a tokenizer loader. */
#ifndef RT_MODEL_HF_H
#define RT_MODEL_HF_H

#include <stddef.h>

#include "core/err.h"
#include "model.h"

/* Reads dir/config.json and dir/model.safetensors[.index.json] into cfg and w
 * (w is zeroed first; everything, the layer table included, lives in
 * w->arena: release with rt_weights_free). When lm_head.weight is
 * absent or tie_word_embeddings is true, w->lm_head == w->tok_embd and
 * cfg->tied_embd is set. */
int rt_llama_load_hf(const char *dir, rt_config *cfg, rt_weights *w, sw_err *err);

/* Parses config.json text (name is for messages) into cfg (cfg->arch from
 * model_type). Refuses anything that is not a bias-free Llama, a Qwen2 or a
 * Qwen3 without attention_bias; fills defaults as transformers' config
 * classes do (num_key_value_heads = heads, head_dim = hidden/heads (Qwen3:
 * 128), rope_theta 10000, rms_norm_eps 1e-6, max_position_embeddings 2048
 * (Qwen: 32768), untied embeddings). */
int rt_llama_config_from_hf_json(const char *json_text, size_t n, const char *name,
				 rt_config *cfg, sw_err *err);

/* The same for a Llama config (model_type "llama" only) whose
 * $.architectures (when present) names one of archs (NULL-terminated; the
 * first is quoted in errors): EAGLE-3 heads are Llama configs under
 * "LlamaForCausalLMEagle3". */
int rt_llama_config_from_hf_json_as(const char *json_text, size_t n, const char *name,
				    const char *const *archs, rt_config *cfg, sw_err *err);

/* HF (rotate_half) -> GGUF (adjacent pairs) row order of one projection of
 * n_head heads of head_dim rows each, in place: llama.cpp's
 * W.reshape(n_head, 2, hd/2, dim).swapaxes(1, 2).reshape(n_head*hd, dim). */
int rt_hf_permute_qk(float *w, int n_head, int head_dim, int dim, sw_err *err);

#endif

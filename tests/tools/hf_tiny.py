#!/usr/bin/env python3
"""A tiny random Qwen2, Qwen3 or Gemma 3 checkpoint made and run by Hugging
Face transformers itself, for tests/test_qwen.c and tests/test_gemma.c.

Usage: build/venv-hf/bin/python tests/tools/hf_tiny.py OUT VARIANT...
  VARIANT: ARCH[-tied][-untied][-kvK][-sSEED][-free][-capC][-wW],
  ARCH qwen2, qwen3 or gemma3 (e.g. qwen3-tied-kv1, gemma3-free-cap8)
  [--layers L] [--prompt N] [--steps N]

Gemma 3 (Gemma3TextConfig / Gemma3ForCausalLM; tied unless -untied):
hidden 64, 4 heads, head_dim 32 (hidden / heads is 16), ffn 96, sliding
window 4 (shorter than the prompt, so it cuts), rope_theta 1e6. As llama.cpp
fixes them for gemma3 GGUF files (its load_hparams): 6 layers, a global
layer every 6 (layers 0-4 sliding, 5 global), local RoPE base 10000,
query_pre_attn_scalar = head_dim; then model.gguf is written too, as
convert_hf_to_gguf.py's Gemma3Model does (norm weights + 1). With -free:
4 layers, a global layer every 2, local base 100, query_pre_attn_scalar
24, all of which a GGUF cannot say (no model.gguf); -capC sets
final_logit_softcapping C; -wW the sliding window W instead of 4 (an engine
whose context the window covers: tests/test_gemma_engine.c). Norm weights are drawn as 0.2 u (the forward
multiplies by 1 + w).

Writes for each variant, into OUT/VARIANT/, all from transformers' own
classes (Qwen2Config / Qwen3Config, Qwen2ForCausalLM / Qwen3ForCausalLM,
save_pretrained with safetensors); vocabulary 300, hidden 64, 4 heads (K KV
heads, default 2), ffn 96, rope_theta 1e6; Qwen3 with head_dim 24 (hidden /
heads is 16):
  OUT_DIR/config.json, OUT_DIR/model.safetensors  the checkpoint (fp32);
  OUT_DIR/model.gguf   the same tensors as GGUF with the gguf package, under
      llama.cpp's architecture, key and tensor names as convert_hf_to_gguf.py
      writes them for Qwen2Model / Qwen3Model (no q/k row permutation: these
      architectures use NeoX RoPE in llama.cpp), f32, with a stand-in
      tokenizer (gpt2, token i spelled "<i>", one merge) for the CLI;
  OUT_DIR/ref.json     the prompt ids; per prompt row the float64 logits of
      the model in float64 (model.double()), the float32 logits of the model
      as saved, and S[t][i] = sum_d |lm_head[i, d] * h[t, d]| with h the
      float64 hidden state after the final norm (the scale of the fp32 error
      bound); the greedy continuation (argmax of the float64 logits, the
      whole sequence re-run each step), each step's top-1 minus top-2
      margin and the sum of those two logits' S.
Weights are redrawn after construction (HF initializes biases to zero and
norms to one, which would hide both): matrices uniform in +-2/sqrt(in),
embeddings +-1, biases +-0.5, norm weights 1 +- 0.2.

Needs torch and transformers 4.51 (Qwen3). Debian's python3-torch is 1.13;
transformers 4.51 imports, at module level, three things torch 1.13 lacks
and these models never use: the module torch.distributed.tensor, the
namespace torch.compiler (is_compiling / disable) and the float8/uint dtype
names. They are supplied below before transformers is imported: an empty
module, is_compiling() = False (true: nothing here is compiled), disable =
identity, and dtype names bound to sentinels that fail if ever used as a
dtype. The forward itself is transformers' code on torch's ops; the eager
attention path is asked for explicitly."""
import argparse
import json
import os
import sys
import types

import numpy as np
import torch

try:
    import torch.distributed.tensor  # noqa: F401
except ImportError:
    _m = types.ModuleType("torch.distributed.tensor")
    sys.modules["torch.distributed.tensor"] = _m
    torch.distributed.tensor = _m
if not hasattr(torch, "compiler"):
    _m = types.ModuleType("torch.compiler")
    _m.is_compiling = lambda: False
    _m.disable = lambda fn=None, recursive=True: fn if fn is not None else (lambda f: f)
    sys.modules["torch.compiler"] = _m
    torch.compiler = _m


class _Absent:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<torch.%s: absent in torch %s>" % (self.name, torch.__version__)


for _n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
           "uint16", "uint32", "uint64"):
    if not hasattr(torch, _n):
        setattr(torch, _n, _Absent(_n))

import transformers  # noqa: E402
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig,  # noqa: E402
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)
import gguf  # noqa: E402


def redraw(model, gen, gemma=False):
    """Every parameter redrawn (see the module docstring)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            u = torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1
            if name.endswith("norm.weight") or "layernorm" in name:
                v = (0 if gemma else 1) + 0.2 * u
            elif name.endswith(".bias"):
                v = 0.5 * u
            elif "embed_tokens" in name:
                v = u
            else:
                v = u * 2 / p.shape[1] ** 0.5
            p.copy_(v.to(p.dtype))


def write_gguf(path, arch, cfg, sd, tied):
    """The checkpoint as llama.cpp's converter writes a Qwen2/Qwen3 model
    (set_gguf_parameters of TextModel, tensor map of gguf-py's
    MODEL_TENSORS), f32, a stand-in tokenizer."""
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    # a stand-in tokenizer so that the CLI runs the file (prompts as --ids):
    # byte-level BPE, token i spelled "<i>" but the last three "[", "]" and
    # "[]", one merge "[ ]" (gguf-py writes no empty array)
    toks = ["<%d>" % i for i in range(cfg.vocab_size - 3)] + ["[", "]", "[]"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(toks)
    w.add_token_merges(["[ ]"])
    if getattr(cfg, "head_dim", None) is not None and arch == "qwen3":
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.q_proj.bias": "attn_q.bias",
        "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.bias": "attn_v.bias",
        "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    for k, t in sd.items():
        a = t.detach().to(torch.float32).numpy()
        if k == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif k == "model.norm.weight":
            g = "output_norm.weight"
        elif k == "lm_head.weight":
            if tied:
                continue
            g = "output.weight"
        else:
            parts = k.split(".")  # model.layers.N.rest
            assert parts[0] == "model" and parts[1] == "layers", k
            g = "blk.%s.%s" % (parts[2], names[".".join(parts[3:])])
        w.add_tensor(g, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gguf_gemma3(path, cfg, sd):
    """As convert_hf_to_gguf.py's Gemma3Model writes a text model: its keys
    (no pattern, local base or query scale: llama.cpp fixes them), every
    norm weight + 1, tied (no output.weight), f32, the stand-in tokenizer."""
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_sliding_window(cfg.sliding_window)
    toks = ["<%d>" % i for i in range(cfg.vocab_size - 3)] + ["[", "]", "[]"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(toks)
    w.add_token_merges(["[ ]"])
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        "post_attention_layernorm.weight": "post_attention_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight",
        "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    for k, t in sd.items():
        a = t.detach().to(torch.float32)
        if k.endswith("norm.weight"):
            a = a + 1
        a = a.numpy()
        if k == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif k == "model.norm.weight":
            g = "output_norm.weight"
        elif k == "lm_head.weight":
            continue
        else:
            parts = k.split(".")
            assert parts[0] == "model" and parts[1] == "layers", k
            g = "blk.%s.%s" % (parts[2], names[".".join(parts[3:])])
        w.add_tensor(g, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make(out, arch, tied, seed, kv_heads, layers, n_prompt, steps, free=False, cap=None,
         window=4):
    common = dict(vocab_size=300, hidden_size=64, intermediate_size=96,
                  num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=kv_heads, max_position_embeddings=512,
                  rope_theta=1000000.0, rms_norm_eps=1e-6,
                  tie_word_embeddings=tied, use_sliding_window=False,
                  sliding_window=None, attn_implementation="eager")
    if arch == "gemma3":
        for k in ("use_sliding_window", "tie_word_embeddings", "num_hidden_layers",
                  "sliding_window"):
            del common[k]
        cfg = Gemma3TextConfig(head_dim=32, sliding_window=window, tie_word_embeddings=tied,
                               num_hidden_layers=4 if free else 6,
                               sliding_window_pattern=2 if free else 6,
                               rope_local_base_freq=100.0 if free else 10000.0,
                               query_pre_attn_scalar=24 if free else 32,
                               final_logit_softcapping=cap, attn_logit_softcapping=None,
                               hidden_activation="gelu_pytorch_tanh", **common)
        cls = Gemma3ForCausalLM
    elif arch == "qwen2":
        cfg, cls = Qwen2Config(**common), Qwen2ForCausalLM
    else:  # head_dim 24 while hidden / heads is 16
        cfg, cls = Qwen3Config(head_dim=24, **common), Qwen3ForCausalLM
    torch.manual_seed(seed)
    model = cls(cfg)
    gen = torch.Generator().manual_seed(seed)
    redraw(model, gen, arch == "gemma3")
    if tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model.eval()
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    if arch != "gemma3":
        write_gguf(os.path.join(out, "model.gguf"), arch, cfg, model.state_dict(), tied)
    elif not free and tied:
        write_gguf_gemma3(os.path.join(out, "model.gguf"), cfg, model.state_dict())

    prompt = torch.randint(0, cfg.vocab_size, (1, n_prompt), generator=gen)
    ones = lambda s: torch.ones_like(s)  # noqa: E731 (Gemma's sliding mask needs a mask)
    with torch.no_grad():
        l32 = model(prompt, attention_mask=ones(prompt), use_cache=False).logits[0]
        m64 = model.double()
        res = m64(prompt, attention_mask=ones(prompt), use_cache=False, output_hidden_states=True)
        l64 = res.logits[0]
        h = res.hidden_states[-1][0]  # after the final norm
        # the softcap's tanh only shrinks errors (|tanh'| <= 1): S of the
        # logits before it bounds both
        S = h.abs() @ m64.lm_head.weight.abs().T
        seq, greedy, margin, margin_abs = prompt, [], [], []
        for _ in range(steps):
            r = m64(seq, attention_mask=ones(seq), use_cache=False, output_hidden_states=True)
            lg, hl = r.logits[0, -1], r.hidden_states[-1][0, -1]
            top = torch.topk(lg, 2)
            greedy.append(int(top.indices[0]))
            margin.append(float(top.values[0] - top.values[1]))
            sa = m64.lm_head.weight[top.indices].abs() @ hl.abs()
            margin_abs.append(float(sa.sum()))
            seq = torch.cat([seq, top.indices[:1].view(1, 1)], dim=1)
    ref = {
        "transformers": transformers.__version__, "torch": torch.__version__,
        "arch": arch, "tied": tied, "vocab": cfg.vocab_size,
        "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
        "ffn": cfg.intermediate_size, "kv_heads": cfg.num_key_value_heads,
        "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        "prompt": prompt[0].tolist(),
        "logits64": l64.tolist(), "logits32": l32.double().tolist(), "abs": S.tolist(),
        "greedy": greedy, "margin": margin, "margin_abs": margin_abs,
    }
    if arch == "gemma3":
        ref.update({"sliding_window": cfg.sliding_window, "pattern": cfg.sliding_window_pattern,
                    "softcap": cap, "gguf": os.path.exists(os.path.join(out, "model.gguf")),
                    "free": free})
    with open(os.path.join(out, "ref.json"), "w") as f:
        json.dump(ref, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=11)
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    for k, v in enumerate(a.variants):
        parts = v.split("-")
        if parts[0] not in ("qwen2", "qwen3", "gemma3"):
            ap.error("variant %s: expected qwen2, qwen3 or gemma3 first" % v)
        tied, kv, seed, free, cap, window = parts[0] == "gemma3", 2, k + 1, False, None, 4
        for p in parts[1:]:
            if p == "tied":
                tied = True
            elif p == "untied":
                tied = False
            elif p == "free":
                free = True
            elif p.startswith("cap"):
                cap = float(p[3:])
            elif p.startswith("w"):
                window = int(p[1:])
            elif p.startswith("kv"):
                kv = int(p[2:])
            elif p.startswith("s"):
                seed = int(p[1:])
            else:
                ap.error("variant %s: unknown part %s" % (v, p))
        make(os.path.join(a.out, v), parts[0], tied, seed, kv, a.layers, a.prompt, a.steps,
             free, cap, window)


if __name__ == "__main__":
    main()

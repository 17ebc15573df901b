#!/usr/bin/env python3
"""Independent references for Gemma 3 GGUF files (tests/gemma/check.sh).

(Its tokenizer's reference is tests/tools/tok_reference.py spm-gguf.)

logits GGUF DUMP...
    transformers' Gemma3ForCausalLM as the reference forward, on the GGUF's
    weights dequantized by the gguf package (gguf.quants.dequantize; norm
    weights minus the 1 llama.cpp's converter added), config from the
    GGUF's keys and the values llama.cpp fixes for gemma3 (a global layer
    every 6, local RoPE base 10000, query_pre_attn_scalar = head_dim).
    Each DUMP is `specwright eval --dump` (int32 n_prompt, n_gen, V; the
    ids; n_gen x V float32 logits, row i predicting generated[i]). The
    model is teacher-forced on prompt + generated in float64 and in
    float32; every logit of ours must lie within 2 D gamma_K S_j of the
    float64 one (D = 14 L + 3 fp32 stages, K the longest dot product,
    S_j = sum_d |E_jd h_d| with h the float64 hidden state after the final
    norm: the bound of tests/test_gemma.c), transformers' fp32 logits too,
    and our greedy token must be transformers' float64 argmax wherever
    the top-2 margin exceeds the two logits' bounds. Prints one line per
    dump and PASS/FAIL; exits 1 on FAIL.
"""
import json
import struct
import sys

import numpy as np


def field(r, k, default=None):
    f = r.fields.get(k)
    return default if f is None else f.contents()


def build_model(gguf_path):
    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize
    sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/tests/tools")
    import hf_tiny  # noqa: F401  (torch 1.13 shims before transformers)
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    r = GGUFReader(gguf_path)
    a = "gemma3."
    hd = int(field(r, a + "attention.key_length"))
    n_layers = int(field(r, a + "block_count"))
    dim = int(field(r, a + "embedding_length"))
    heads = int(field(r, a + "attention.head_count"))
    cfg = Gemma3TextConfig(
        vocab_size=len(field(r, "tokenizer.ggml.tokens")), hidden_size=dim,
        intermediate_size=int(field(r, a + "feed_forward_length")), num_hidden_layers=n_layers,
        num_attention_heads=heads, num_key_value_heads=int(field(r, a + "attention.head_count_kv")),
        head_dim=hd, rms_norm_eps=float(field(r, a + "attention.layer_norm_rms_epsilon")),
        rope_theta=float(field(r, a + "rope.freq_base")), rope_local_base_freq=10000.0,
        sliding_window=int(field(r, a + "attention.sliding_window")), sliding_window_pattern=6,
        query_pre_attn_scalar=(dim // heads) if n_layers == 62 else hd,
        max_position_embeddings=int(field(r, a + "context_length")),
        final_logit_softcapping=field(r, a + "final_logit_softcapping"), attn_logit_softcapping=None,
        tie_word_embeddings=True, attn_implementation="eager", torch_dtype="float32")
    names = {
        "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
        "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
        "post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm", "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    }
    sd = {}
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else w.reshape(-1)
        if t.name.endswith("norm.weight"):
            w = w - 1.0
        if t.name == "token_embd.weight":
            k = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            k = "model.norm.weight"
        else:
            _, l, rest, _ = t.name.split(".")
            k = "model.layers.%s.%s.weight" % (l, names[rest])
        sd[k] = torch.from_numpy(np.ascontiguousarray(w))
    model = Gemma3ForCausalLM(cfg)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise SystemExit("gemma_ref: state dict: missing %s, unexpected %s" % (missing, unexpected))
    model.tie_weights()
    return model.eval(), cfg


def read_dump(path):
    with open(path, "rb") as f:
        raw = f.read()
    n_prompt, n_gen, V = struct.unpack("<3i", raw[:12])
    ids = np.frombuffer(raw, dtype="<i4", count=n_prompt + n_gen, offset=12)
    off = 12 + 4 * (n_prompt + n_gen)
    if len(raw) != off + 4 * n_gen * V:
        raise SystemExit(f"{path}: size {len(raw)} != expected {off + 4 * n_gen * V}")
    lg = np.frombuffer(raw, dtype="<f4", offset=off).reshape(n_gen, V)
    return [int(t) for t in ids[:n_prompt]], [int(t) for t in ids[n_prompt:]], lg


def logits(gguf_path, dumps):
    import torch
    torch.set_num_threads(1)
    model, cfg = build_model(gguf_path)
    u = 2.0 ** -24
    ok = True
    cases = []
    for path in dumps:  # float32 first: .double() converts the model in place
        p, g, ours = read_dump(path)
        seq = torch.tensor([p + g[:-1]])
        with torch.no_grad():
            l32 = model(seq, attention_mask=torch.ones_like(seq), use_cache=False).logits[0, len(p) - 1:]
        cases.append((path, p, g, ours, seq, l32.double()))
    m64 = model.double()
    for path, p, g, ours, seq, l32 in cases:
        one = torch.ones_like(seq)
        with torch.no_grad():
            res = m64(seq, attention_mask=one, use_cache=False, output_hidden_states=True)
            l64 = res.logits[0, len(p) - 1:]
            h = res.hidden_states[-1][0, len(p) - 1:]
            S = h.abs() @ m64.lm_head.weight.abs().T
        K = max(cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads * cfg.head_dim, seq.shape[1])
        D = 14 * cfg.num_hidden_layers + 3
        gam = K * u / (1 - K * u)
        bound = 2 * D * gam * S
        o = torch.from_numpy(ours.astype(np.float64))
        e, e32 = (o - l64).abs(), (l32 - l64).abs()
        worst, worst32 = float((e / (gam * S)).max()), float((e32 / (gam * S)).max())
        bad = int((e > bound).sum()) + int((~torch.isfinite(o)).sum())
        bad32 = int((e32 > bound).sum())
        # greedy: ours vs transformers' float64 argmax, decisive steps only
        top = torch.topk(l64, 2, dim=1)
        marg = top.values[:, 0] - top.values[:, 1]
        pair = bound.gather(1, top.indices).sum(1)
        decisive = marg > pair
        diff = [i for i in range(len(g)) if decisive[i] and g[i] != int(top.indices[i, 0])]
        agree = sum(1 for i in range(len(g)) if g[i] == int(top.indices[i, 0]))
        good = bad == 0 and bad32 == 0 and not diff
        ok = ok and good
        print("gemma_ref: %s: %d prompt + %d generated ids; max error %.3f gamma_K S (transformers fp32 "
              "%.3f; bound %d); %d logits over the bound (fp32: %d); greedy %d/%d equal to transformers' "
              "float64 argmax, %d decisive steps, %d decisive differing: %s"
              % (path, len(p), len(g), worst, worst32, 2 * D, bad, bad32, agree, len(g),
                 int(decisive.sum()), len(diff), "PASS" if good else "FAIL"))
    print("gemma_ref: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "logits":
        sys.exit(logits(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit(__doc__)

#!/usr/bin/python3
"""A tiny random EAGLE-3 head in the public checkpoint format, and its logits
from a PyTorch forward written to mirror the public modeling code
(SafeAILab/EAGLE eagle/model/cnets.py: Model, LlamaDecoderLayeremb,
LlamaAttention with HF rotate_half RoPE; SGLang/vLLM llama_eagle3.py for
norm_before_residual and the d2t offset rule). Independent of specwright's C
code: tests/test_eagle3.c loads the directory with runtime/model/eagle3.c and
compares its forward with ref.json.

Usage: /usr/bin/python3 tests/tools/eagle3_tiny.py OUT_DIR [--seed S]
  [--vocab V] [--draft-vocab VD] [--hidden H] [--heads N] [--kv-heads K]
  [--ffn F] [--target-layers L] [--rows N] [--steps K]
  [--norm-before-residual] [--layer-prefix midlayer.|layers.0.]
Writes OUT_DIR/config.json, OUT_DIR/model.safetensors (F32 weights, d2t I64,
t2d BOOL, its own embed_tokens.weight: the test needs no target weights) and
OUT_DIR/ref.json: the inputs (target features (rows, 3H), the row tokens,
the draft-step tokens, two sibling tokens) and, in float64, the logits and
absolute sums |lm_head[i] * norm(x)| per logit (for the error bound) of
  commit: the last committed row (rows 0..N-1, row i at position i),
  steps:  K chained draft steps (step j: feature = the previous row's output
          before the final norm, token steps_tok[j], position N + j),
  siblings: two rows at position N, each after the committed rows only.
safetensors is written by hand (no safetensors package needed)."""
import argparse
import json
import math
import os
import struct

import torch


def write_safetensors(path, tensors):
    """tensors: list of (name, torch tensor); F32, I64 or BOOL."""
    kinds = {torch.float32: "F32", torch.int64: "I64", torch.bool: "BOOL"}
    header, blobs, off = {}, [], 0
    for name, t in tensors:
        t = t.contiguous()
        if t.dtype == torch.bool:
            raw = bytes(t.to(torch.uint8).flatten().tolist())
        elif t.dtype == torch.int64:
            raw = struct.pack("<%dq" % t.numel(), *t.flatten().tolist())
        else:
            raw = struct.pack("<%df" % t.numel(), *t.flatten().tolist())
        header[name] = {"dtype": kinds[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---- the modeling code, mirrored (float64) ----

def rms_norm(x, w, eps):
    # LlamaRMSNorm: weight * (x * rsqrt(mean(x^2) + eps))
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(x, pos, theta):
    # LlamaRotaryEmbedding: inv_freq = 1 / base^(arange(0, d, 2) / d), emb = cat(freqs, freqs)
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = pos.to(torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos()[None] + rotate_half(x) * emb.sin()[None]


class Head:
    def __init__(self, W, cfg):
        self.W, self.cfg = W, cfg
        self.pre = cfg["_prefix"]

    def w(self, k):
        return self.W[self.pre + k]

    def layer(self, emb, hid, pos, mask):
        """LlamaDecoderLayeremb.forward over rows (T, H) with an additive
        mask (T, T); vLLM's norm_before_residual variant when set."""
        c = self.cfg
        eps, nh, nkv = c["rms_norm_eps"], c["num_attention_heads"], c["num_key_value_heads"]
        hd = c["hidden_size"] // nh
        if c.get("norm_before_residual", False):
            hid = rms_norm(hid, self.w("hidden_norm.weight"), eps)
            residual = hid
        else:
            residual = hid
            hid = rms_norm(hid, self.w("hidden_norm.weight"), eps)
        emb = rms_norm(emb, self.w("input_layernorm.weight"), eps)
        x = torch.cat((emb, hid), dim=-1)
        T = x.shape[0]
        q = (x @ self.w("self_attn.q_proj.weight").T).view(T, nh, hd).transpose(0, 1)
        k = (x @ self.w("self_attn.k_proj.weight").T).view(T, nkv, hd).transpose(0, 1)
        v = (x @ self.w("self_attn.v_proj.weight").T).view(T, nkv, hd).transpose(0, 1)
        q, k = rope(q, pos, c["rope_theta"]), rope(k, pos, c["rope_theta"])
        k = k.repeat_interleave(nh // nkv, dim=0)  # repeat_kv
        v = v.repeat_interleave(nh // nkv, dim=0)
        a = q @ k.transpose(1, 2) / math.sqrt(hd) + mask[None]
        a = torch.softmax(a, dim=-1) @ v
        a = a.transpose(0, 1).reshape(T, nh * hd) @ self.w("self_attn.o_proj.weight").T
        x = residual + a
        y = rms_norm(x, self.w("post_attention_layernorm.weight"), eps)
        g = y @ self.w("mlp.gate_proj.weight").T
        u = y @ self.w("mlp.up_proj.weight").T
        y = (torch.nn.functional.silu(g) * u) @ self.w("mlp.down_proj.weight").T
        return x + y

    def logits(self, x):
        n = rms_norm(x, self.W["norm.weight"], self.cfg["rms_norm_eps"])
        lm = self.W["lm_head.weight"]
        return n @ lm.T, n.abs() @ lm.abs().T


def causal(T, visible=None):
    m = torch.full((T, T), float("-inf"), dtype=torch.float64)
    for i in range(T):
        for j in range(T):
            if (visible[i][j] if visible else j <= i):
                m[i, j] = 0.0
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=37)
    ap.add_argument("--draft-vocab", type=int, default=23)
    ap.add_argument("--hidden", type=int, default=24)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=40)
    ap.add_argument("--target-layers", type=int, default=9)
    ap.add_argument("--rows", type=int, default=7)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--norm-before-residual", action="store_true")
    ap.add_argument("--layer-prefix", default="midlayer.")
    a = ap.parse_args()
    g = torch.Generator().manual_seed(a.seed)
    H, V, Vd, F = a.hidden, a.vocab, a.draft_vocab, a.ffn
    hd = H // a.heads
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": H, "intermediate_size": F, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "num_hidden_layers": 1, "vocab_size": V, "draft_vocab_size": Vd,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 2048,
        "tie_word_embeddings": False, "bias": False, "torch_dtype": "float32",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, a.target_layers // 2, a.target_layers - 2],
                         "use_aux_hidden_state": True},
    }
    if a.norm_before_residual:
        cfg["norm_before_residual"] = True

    def rnd(*shape, scale):
        return (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1).mul(scale).to(torch.float32)

    p = a.layer_prefix
    W = {
        "fc.weight": rnd(H, 3 * H, scale=2 / math.sqrt(3 * H)),
        p + "input_layernorm.weight": 1 + rnd(H, scale=0.2),
        p + "hidden_norm.weight": 1 + rnd(H, scale=0.2),
        p + "self_attn.q_proj.weight": rnd(a.heads * hd, 2 * H, scale=3 / math.sqrt(2 * H)),
        p + "self_attn.k_proj.weight": rnd(a.kv_heads * hd, 2 * H, scale=3 / math.sqrt(2 * H)),
        p + "self_attn.v_proj.weight": rnd(a.kv_heads * hd, 2 * H, scale=2 / math.sqrt(2 * H)),
        p + "self_attn.o_proj.weight": rnd(H, a.heads * hd, scale=2 / math.sqrt(H)),
        p + "post_attention_layernorm.weight": 1 + rnd(H, scale=0.2),
        p + "mlp.gate_proj.weight": rnd(F, H, scale=2 / math.sqrt(H)),
        p + "mlp.up_proj.weight": rnd(F, H, scale=2 / math.sqrt(H)),
        p + "mlp.down_proj.weight": rnd(H, F, scale=2 / math.sqrt(F)),
        "norm.weight": 1 + rnd(H, scale=0.2),
        "lm_head.weight": rnd(Vd, H, scale=4 / math.sqrt(H)),
        "embed_tokens.weight": rnd(V, H, scale=1.0),
    }
    # the Vd draftable ids: a random subset, d2t stored as offsets (EAGLE's
    # d2t = used_tokens - arange(Vd); target = draft + d2t[draft])
    used = torch.sort(torch.randperm(V, generator=g)[:Vd]).values
    d2t = used - torch.arange(Vd)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[used] = True
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(a.out, "model.safetensors"),
                      list(W.items()) + [("d2t", d2t.to(torch.int64)), ("t2d", t2d)])

    # ---- inputs and the reference forward in float64 ----
    cfg["_prefix"] = p
    Wd = {k: v.to(torch.float64) for k, v in W.items()}
    head = Head(Wd, cfg)
    N, K = a.rows, a.steps
    feat = rnd(N, 3 * H, scale=3.0)                       # the target's tapped states
    row_tok = torch.randint(0, V, (N,), generator=g)      # tokens one position later
    steps_tok = used[torch.randint(0, Vd, (K,), generator=g)]  # drafts are draftable ids
    sib_tok = used[torch.randint(0, Vd, (2,), generator=g)]
    fused = feat.to(torch.float64) @ Wd["fc.weight"].T   # Model.forward: fc when 3H wide
    emb = Wd["embed_tokens.weight"]

    def run(feats, toks, pos, vis=None):
        return head.layer(emb[toks], feats, pos, causal(len(toks), vis))

    out = run(fused, row_tok, torch.arange(N))
    lg, ab = head.logits(out[-1:])
    ref = {"rows": N, "hidden": H, "feat": feat.flatten().tolist(), "row_tok": row_tok.tolist(),
           "steps_tok": steps_tok.tolist(), "sib_tok": sib_tok.tolist(), "d2t_abs": used.tolist(),
           "commit": {"logits": lg[0].tolist(), "abs": ab[0].tolist()}, "steps": []}
    # chained steps: each row's feature is the previous row's output (pre-norm)
    feats, toks, last = fused, row_tok, out[-1]
    for j in range(K):
        feats = torch.cat((feats, last[None]), 0)
        toks = torch.cat((toks, steps_tok[j:j + 1]), 0)
        o = run(feats, toks, torch.arange(N + j + 1))
        last = o[-1]
        lg, ab = head.logits(o[-1:])
        ref["steps"].append({"logits": lg[0].tolist(), "abs": ab[0].tolist()})
    # siblings: two rows at position N after the committed rows, not seeing each other
    feats = torch.cat((fused, out[-1:], out[-1:]), 0)
    toks = torch.cat((row_tok, sib_tok), 0)
    vis = [[j <= i for j in range(N + 2)] for i in range(N + 2)]
    vis[N + 1][N] = False
    o = run(feats, toks, torch.cat((torch.arange(N + 1), torch.tensor([N]))), vis)
    ref["siblings"] = []
    for r in (N, N + 1):
        lg, ab = head.logits(o[r:r + 1])
        ref["siblings"].append({"logits": lg[0].tolist(), "abs": ab[0].tolist()})
    with open(os.path.join(a.out, "ref.json"), "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main()

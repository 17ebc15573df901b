"""The block drafter in PyTorch: the same forward as runtime/model/block_drafter.c, and
its file format (config.json + model.safetensors, written here without the safetensors
package). See block_drafter.h for the definition; the two must agree."""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn

from smollm import rmsnorm, rope


class BlockDrafter(nn.Module):
    def __init__(self, cfg, target):
        super().__init__()
        self.cfg = cfg
        dim, B = cfg["target"]["dim"], cfg["block"]
        nh, nkv, hd, ffn = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["ffn_dim"]
        self.t = target
        self.mask_embd = nn.Parameter(target.embd.mean(0).repeat(B - 1, 1) + 0.02 * torch.randn(B - 1, dim))
        if cfg["conditioning"] == "features":
            nt = len(cfg["taps"])
            self.fc = nn.Parameter(torch.randn(dim, nt * dim) / math.sqrt(nt * dim))
            self.fc_norm = nn.Parameter(torch.ones(dim))
        self.layers = nn.ModuleList()
        nl = cfg["n_layers"]
        for li in range(nl):
            src = target.layers[len(target.layers) - nl + li]
            L = nn.ParameterDict()
            # Warm start from the target's last n_layers layers when the shapes agree.
            for k, tk, shape in (("attn_norm", "attn_norm", (dim,)), ("wq", "attn_q", (nh * hd, dim)),
                                 ("wk", "attn_k", (nkv * hd, dim)), ("wv", "attn_v", (nkv * hd, dim)),
                                 ("wo", "attn_output", (dim, nh * hd)), ("ffn_norm", "ffn_norm", (dim,)),
                                 ("w_gate", "ffn_gate", (ffn, dim)), ("w_up", "ffn_up", (ffn, dim)),
                                 ("w_down", "ffn_down", (dim, ffn))):
                w = src[tk]
                L[k] = nn.Parameter(w.clone() if tuple(w.shape) == shape else
                                    (torch.ones(shape) if len(shape) == 1 else torch.randn(shape) * 0.02))
            self.layers.append(L)
        self.out_norm = nn.Parameter(target.out_norm.clone())
        self.head = target.head[:cfg["draft_vocab"]]  # frozen, shared
        i = torch.arange(hd // 2, dtype=torch.float64)
        self.inv_freq = (cfg["rope_theta"] ** (-2.0 * i / hd)).float().double()

    def fuse(self, feat):
        """feat (..., n_taps*dim) tapped target states -> (..., dim) fused context states."""
        return rmsnorm(feat @ self.fc.T, self.fc_norm, self.cfg["norm_eps"])

    def forward(self, x, pos, ctx, ctx_pos, mask):
        """x (N, R, dim) row inputs (block rows; tokens conditioning: window rows first),
        pos (N, R); ctx (N, C, dim) fused context states or None, ctx_pos (N, C);
        mask (N, R, C + R) bool, True = visible. Returns the final hidden (N, R, dim)."""
        c = self.cfg
        nh, nkv, hd, eps = c["n_heads"], c["n_kv_heads"], c["head_dim"], c["norm_eps"]
        N, R, dim = x.shape
        for L in self.layers:
            h = rmsnorm(x, L["attn_norm"], eps)
            q = rope((h @ L["wq"].T).view(N, R, nh, hd), pos, self.inv_freq)
            k = rope((h @ L["wk"].T).view(N, R, nkv, hd), pos, self.inv_freq)
            v = (h @ L["wv"].T).view(N, R, nkv, hd)
            if ctx is not None:
                C = ctx.shape[1]
                kc = rope((ctx @ L["wk"].T).view(N, C, nkv, hd), ctx_pos, self.inv_freq)
                vc = (ctx @ L["wv"].T).view(N, C, nkv, hd)
                k, v = torch.cat((kc, k), 1), torch.cat((vc, v), 1)
            rep = nh // nkv
            k = k.repeat_interleave(rep, 2).transpose(1, 2)
            v = v.repeat_interleave(rep, 2).transpose(1, 2)
            att = (q.transpose(1, 2) @ k.transpose(-1, -2)) / math.sqrt(hd)
            att = att.masked_fill(~mask[:, None], float("-inf")).softmax(-1)
            o = (att @ v).transpose(1, 2).reshape(N, R, nh * hd)
            x = x + o @ L["wo"].T
            h = rmsnorm(x, L["ffn_norm"], eps)
            x = x + (torch.nn.functional.silu(h @ L["w_gate"].T) * (h @ L["w_up"].T)) @ L["w_down"].T
        return x

    def logits(self, hidden):
        return rmsnorm(hidden, self.out_norm, self.cfg["norm_eps"]) @ self.head.T

    def tensors(self):
        out = {"mask_embd": self.mask_embd, "out_norm": self.out_norm}
        if self.cfg["conditioning"] == "features":
            out["fc"] = self.fc
            out["fc_norm"] = self.fc_norm
        for l, L in enumerate(self.layers):
            for k, v in L.items():
                out[f"layers.{l}.{k}"] = v
        return out

    def save(self, d):
        import os
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/config.json", "w") as f:
            json.dump(self.cfg, f, indent=1)
            f.write("\n")
        write_safetensors(f"{d}/model.safetensors", {k: v.detach() for k, v in self.tensors().items()},
                          self.cfg.get("dtype", "F16"))


def write_safetensors(path, tensors, dtype="F16"):
    np_dt = {"F16": np.float16, "F32": np.float32}[dtype]
    hdr, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = tensors[k].float().numpy().astype(np_dt)
        b = a.tobytes()
        hdr[k] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)

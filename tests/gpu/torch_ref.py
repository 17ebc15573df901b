#!/usr/bin/env python3
"""The same weights decoded by PyTorch: the GPU check's side-by-side.

Reads a Llama-architecture GGUF (its own small reader: a GPU machine may
have PyTorch and nothing else, not even numpy), dequantizes F32/F16/BF16/
Q8_0/Q4_0/Q4_1 tensors with torch ops, and decodes greedily at batch 1 from
a prompt given as token ids, twice: eager (one Python step a token, the
argmax left on the device) and as one CUDA graph per step replayed (the
token, position and output ring updated inside the graph; one sync at the
end). Prints one JSON object: tokens of each mode, tok/s, device, dtype.
Not part of specwright: an independent implementation written from the
GGUF format and the Llama architecture, so its tokens are a reference too
(the dry run compares them with specwright's fp32 host forward on the CPU).

usage: torch_ref.py MODEL.gguf --ids "1 2 3" [-n N] [--device cuda|cpu]
                    [--dtype fp16|bf16|fp32] [--no-graph] [--ctx C]
"""
import argparse
import json
import math
import struct
import sys
import time

import torch

GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 3, 8, 30
# block size (elements) and bytes per block of each type read here
BLOCKS = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2),
          GGML_Q4_0: (32, 18), GGML_Q4_1: (32, 20), GGML_Q8_0: (32, 34)}


class GGUF:
    """Metadata and tensor table of a GGUF v2/v3 file; tensor bytes by name."""

    def __init__(self, path, buf=None):
        """path: the file (or, with buf, the name its messages give to buf's bytes)."""
        if buf is None:
            with open(path, "rb") as f:
                buf = f.read()
        self.buf = buf
        self.pos = 0
        if self.buf[:4] != b"GGUF":
            raise SystemExit(f"{path}: not a GGUF file (magic {self.buf[:4]!r})")
        self.pos = 4
        version = self.u32()
        if version not in (2, 3):
            raise SystemExit(f"{path}: GGUF version {version} (expected 2 or 3)")
        n_tensors, n_kv = self.u64(), self.u64()
        self.kv = {}
        for _ in range(n_kv):
            key = self.string()
            self.kv[key] = self.value(self.u32())
        infos = []
        for _ in range(n_tensors):
            name = self.string()
            dims = [self.u64() for _ in range(self.u32())]
            infos.append((name, dims, self.u32(), self.u64()))
        align = int(self.kv.get("general.alignment", 32))
        base = (self.pos + align - 1) // align * align
        self.tensors = {}
        for name, dims, typ, off in infos:
            if typ not in BLOCKS:
                raise SystemExit(f"{path}: tensor {name} has ggml type {typ}, which this "
                                 f"reader does not dequantize (F32/F16/BF16/Q8_0/Q4_0/Q4_1)")
            n = math.prod(dims)
            blk, nbytes = BLOCKS[typ]
            size = n // blk * nbytes
            self.tensors[name] = (dims, typ, base + off, size)
            if base + off + size > len(self.buf):
                raise SystemExit(f"{path}: tensor {name} runs past the end of the file")

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0]

    def u32(self):
        return self.take("I")

    def u64(self):
        return self.take("Q")

    def string(self):
        n = self.u64()
        s = self.buf[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def value(self, t):
        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q",
                  11: "q", 12: "d"}
        if t in scalar:
            return self.take(scalar[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.u32(), self.u64()
            return [self.value(et) for _ in range(n)]
        raise SystemExit(f"GGUF: unknown metadata value type {t}")

    def tensor(self, name, dtype, device):
        """The tensor as a (rows, cols) or (n,) float tensor of dtype on device."""
        dims, typ, off, size = self.tensors[name]
        raw = torch.frombuffer(bytearray(self.buf[off:off + size]), dtype=torch.uint8)
        if typ == GGML_F32:
            x = raw.view(torch.float32)
        elif typ == GGML_F16:
            x = raw.view(torch.float16).float()
        elif typ == GGML_BF16:
            x = raw.view(torch.bfloat16).float()
        else:
            blk, nb = BLOCKS[typ]
            b = raw.view(-1, nb)
            d = b[:, 0:2].contiguous().view(torch.float16).float()
            if typ == GGML_Q8_0:
                q = b[:, 2:34].contiguous().view(torch.int8).float()
                x = q * d
            else:
                qs = b[:, nb - 16:nb]
                # element j < 16: the low nibble of byte j; j >= 16: the high one of j - 16
                q = torch.cat([qs & 15, qs >> 4], dim=1).float()
                if typ == GGML_Q4_0:
                    x = (q - 8) * d
                else:
                    m = b[:, 4 - 2:4].contiguous().view(torch.float16).float()
                    x = q * d + m
            x = x.reshape(-1)
        shape = list(reversed(dims))  # ggml ne[0] is the fastest dimension
        return x.reshape(shape).to(device=device, dtype=dtype)


class Llama:
    """Llama forward at batch 1 with a static KV cache of ctx positions."""

    def __init__(self, g, dtype, device, ctx):
        arch = g.kv.get("general.architecture", "llama")
        if arch != "llama":
            raise SystemExit(f"torch_ref.py: architecture {arch!r} (only llama here)")
        k = lambda s, d=None: g.kv.get(f"llama.{s}", d)
        self.L = int(k("block_count"))
        self.dim = int(k("embedding_length"))
        self.nh = int(k("attention.head_count"))
        self.nkv = int(k("attention.head_count_kv", self.nh))
        self.hd = self.dim // self.nh
        self.eps = float(k("attention.layer_norm_rms_epsilon", 1e-5))
        theta = float(k("rope.freq_base", 10000.0))
        self.ctx, self.dtype, self.device = ctx, dtype, device
        w = lambda n: g.tensor(n, dtype, device)
        self.emb = w("token_embd.weight")
        self.out = w("output.weight") if "output.weight" in g.tensors else self.emb
        self.out_norm = g.tensor("output_norm.weight", torch.float32, device)
        self.layers = []
        for i in range(self.L):
            p = f"blk.{i}."
            self.layers.append({n: w(p + n + ".weight") for n in (
                "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")})
            for n in ("attn_norm", "ffn_norm"):
                self.layers[-1][n] = g.tensor(p + n + ".weight", torch.float32, device)
        half = torch.arange(0, self.hd // 2, dtype=torch.float64)
        self.inv_freq = (theta ** (-2.0 * half / self.hd)).to(device)
        self.kc = torch.zeros(self.L, ctx, self.nkv, self.hd, dtype=dtype, device=device)
        self.vc = torch.zeros_like(self.kc)
        self.idx = torch.arange(ctx, device=device)

    def norm(self, x, w):
        x = x.float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w).to(self.dtype)

    def rope(self, x, pos):
        # GGUF "normal" mode: adjacent pairs (x[2i], x[2i+1]) rotate by pos * inv_freq[i]
        a = pos.double() * self.inv_freq
        c, s = torch.cos(a).float(), torch.sin(a).float()
        x = x.float().reshape(x.shape[0], -1, 2)
        x0, x1 = x[..., 0], x[..., 1]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).reshape(x.shape[0], -1)

    def step(self, tok, pos):
        """One token: tok, pos are 1-element long tensors on the device; logits (V,) fp32."""
        x = self.emb[tok].reshape(1, self.dim)
        live = (self.idx <= pos).reshape(1, 1, self.ctx)
        g = self.nh // self.nkv
        for i, l in enumerate(self.layers):
            h = self.norm(x, l["attn_norm"])
            q = (h @ l["attn_q"].t()).reshape(self.nh, self.hd)
            k = (h @ l["attn_k"].t()).reshape(self.nkv, self.hd)
            v = (h @ l["attn_v"].t()).reshape(self.nkv, self.hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            self.kc[i].index_copy_(0, pos, k.to(self.dtype).reshape(1, self.nkv, self.hd))
            self.vc[i].index_copy_(0, pos, v.reshape(1, self.nkv, self.hd))
            K = self.kc[i].float().permute(1, 0, 2).repeat_interleave(g, 0)  # (nh, ctx, hd)
            V = self.vc[i].float().permute(1, 0, 2).repeat_interleave(g, 0)
            s = torch.bmm(K, q.reshape(self.nh, self.hd, 1)).reshape(self.nh, 1, self.ctx)
            s = s / math.sqrt(self.hd)
            s = s.masked_fill(~live, float("-inf")).softmax(-1)
            o = torch.bmm(s, V).reshape(1, self.dim).to(self.dtype)
            x = x + o @ l["attn_output"].t()
            h = self.norm(x, l["ffn_norm"])
            a = torch.nn.functional.silu((h @ l["ffn_gate"].t()).float()) * (h @ l["ffn_up"].t()).float()
            x = x + a.to(self.dtype) @ l["ffn_down"].t()
        x = self.norm(x, self.out_norm)
        return (x @ self.out.t()).float().reshape(-1)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def prefill(m, ids):
    m.kc.zero_()
    m.vc.zero_()
    logits = None
    for p, t in enumerate(ids):
        logits = m.step(torch.tensor([t], device=m.device), torch.tensor([p], device=m.device))
    return logits


def decode_eager(m, ids, n):
    logits = prefill(m, ids)
    tok = logits.argmax().reshape(1)
    out = torch.zeros(n, dtype=torch.long, device=m.device)
    pos = torch.tensor([len(ids)], device=m.device)
    sync(m.device)
    t0 = time.perf_counter()
    for i in range(n):
        out[i] = tok[0]
        if i + 1 < n:
            tok = m.step(tok, pos).argmax().reshape(1)
            pos = pos + 1
    sync(m.device)
    return out.tolist(), n / (time.perf_counter() - t0)


def decode_graph(m, ids, n):
    """One captured step: reads tok/pos, writes the next token into tok, the
    ring at its index, and advances pos, all on the device."""
    P = len(ids)
    ring = torch.zeros(n + 1, dtype=torch.long, device=m.device)
    tok = torch.zeros(1, dtype=torch.long, device=m.device)
    pos = torch.zeros(1, dtype=torch.long, device=m.device)

    def body():
        nxt = m.step(tok, pos).argmax().reshape(1)
        ring.index_copy_(0, pos - P + 1, nxt)
        tok.copy_(nxt)
        pos.add_(1)

    # warm up on a side stream (allocator, cuBLAS handles), as capture requires
    logits = prefill(m, ids)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            tok.copy_(logits.argmax().reshape(1))
            pos.fill_(P)
            body()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    # the real run: prefill again (the warm-up wrote position P), then replay
    logits = prefill(m, ids)
    tok.copy_(logits.argmax().reshape(1))
    ring[0] = tok[0]
    pos.fill_(P)
    sync(m.device)
    t0 = time.perf_counter()
    for _ in range(n - 1):
        graph.replay()
    sync(m.device)
    return ring[:n].tolist(), n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="prompt token ids, space or comma separated")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, choices=["fp16", "bf16", "fp32"])
    ap.add_argument("--ctx", type=int, default=0, help="KV positions (default: prompt + n)")
    ap.add_argument("--no-graph", action="store_true")
    a = ap.parse_args()
    ids = [int(x) for x in a.ids.replace(",", " ").split()]
    if not ids or a.n < 1:
        ap.error("--ids needs at least one id and -n at least 1")
    dev = torch.device(a.device)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[
        a.dtype or ("fp16" if dev.type == "cuda" else "fp32")]
    t0 = time.perf_counter()
    g = GGUF(a.model)
    m = Llama(g, dtype, dev, a.ctx or len(ids) + a.n + 1)
    vocab = m.emb.shape[0]
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        ap.error(f"--ids: {bad[0]} is outside the vocabulary [0, {vocab})")
    res = {"torch": torch.__version__, "device": str(dev), "dtype": str(dtype).split(".")[-1],
           "load_s": round(time.perf_counter() - t0, 3), "n": a.n, "n_prompt": len(ids)}
    if dev.type == "cuda":
        res["gpu"] = torch.cuda.get_device_name(dev)
    res["eager_tokens"], tps = decode_eager(m, ids, a.n)
    res["eager_tok_per_s"] = round(tps, 2)
    if dev.type == "cuda" and not a.no_graph:
        res["graph_tokens"], tps = decode_graph(m, ids, a.n)
        res["graph_tok_per_s"] = round(tps, 2)
        res["graph_equals_eager"] = res["graph_tokens"] == res["eager_tokens"]
    json.dump(res, sys.stdout)
    print()


if __name__ == "__main__":
    main()

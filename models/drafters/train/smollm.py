"""SmolLM2 (Llama architecture) forward in PyTorch over the fp32 weights prep.py wrote,
mirroring runtime/model/llama.c: GGUF row order, RoPE on adjacent pairs (x[2i], x[2i+1]),
RMSNorm, GQA attention, SwiGLU, tied LM head. Batched with left padding and a KV cache;
returns the hidden states after the tapped layers (the residual stream after layer l,
0-based, what runtime/model/llama.c hands out for a tap at l). Every tensor lives on the
device of the weights (Target(d) loads prep.py's .npy files on the CPU; Target.from_gguf
dequantizes a GGUF with tests/gpu/torch_ref.py's reader on any device, no numpy)."""
import json

import torch


class Target:
    def __init__(self, d, c=None, ld=None):
        """d: prep.py's directory (target_config.json, w/NAME.npy); or c (the config dict)
        and ld (NAME -> fp32 tensor, FileNotFoundError when absent) with d None."""
        if ld is None:
            import numpy as np
            c = json.load(open(f"{d}/target_config.json"))
            ld = lambda n: torch.from_numpy(np.load(f"{d}/w/{n}.npy"))
        self.L = c["block_count"]
        self.dim = c["embedding_length"]
        self.nh = c["attention.head_count"]
        self.nkv = c["attention.head_count_kv"]
        self.hd = self.dim // self.nh
        self.eps = c["attention.layer_norm_rms_epsilon"]
        self.theta = c["rope.freq_base"]
        self.V = c["vocab_size"]
        self.embd = ld("token_embd.weight")
        self.layers = []
        for l in range(self.L):
            p = f"blk.{l}."
            self.layers.append({k: ld(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                "ffn_up", "ffn_down")})
        self.out_norm = ld("output_norm.weight")
        try:
            self.head = ld("output.weight")
        except FileNotFoundError:
            self.head = self.embd
        i = torch.arange(self.hd // 2, dtype=torch.float64)
        self.inv_freq = (self.theta ** (-2.0 * i / self.hd)).float().double().to(self.embd.device)
        self.bf16 = {}  # id(weight) -> its bf16 copy, once use_bf16() is on

    @classmethod
    def from_gguf(cls, g, device):
        """g: a torch_ref.GGUF (Llama architecture); the weights as fp32 on device."""
        k = lambda s: g.kv[f"llama.{s}"]
        c = {n: k(n) for n in ("block_count", "embedding_length", "feed_forward_length",
                               "attention.head_count", "attention.head_count_kv", "rope.freq_base",
                               "attention.layer_norm_rms_epsilon")}
        c["vocab_size"] = g.kv.get("llama.vocab_size", len(g.kv.get("tokenizer.ggml.tokens", [])))

        def ld(n):
            if n not in g.tensors:
                raise FileNotFoundError(n)
            return g.tensor(n, torch.float32, device)
        m = cls(None, c, ld)
        m.config = c
        return m

    def use_bf16(self):
        """forward_cached's weight products in bfloat16 (fp32 accumulation; oneDNN runs them
        on AMX at ~5x the fp32 rate on this CPU): gen.py's fast, approximate target.
        forward() stays fp32 (the checks against the C forward use it)."""
        for W in self.layers:
            for k in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
                self.bf16[id(W[k])] = W[k].bfloat16()
        self.bf16[id(self.head)] = self.head.bfloat16()


def lin(m, x, w, lowp=False):
    """x @ w.T, in bfloat16 when lowp and the target has w's bf16 copy."""
    wb = m.bf16.get(id(w)) if lowp else None
    return x @ w.T if wb is None else (x.bfloat16() @ wb.T).float()


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, inv_freq):
    """x (..., T, H, hd); pos (..., T) int. Adjacent pairs, angle in double."""
    a = pos.double().unsqueeze(-1) * inv_freq  # (..., T, hd/2)
    c, s = torch.cos(a).float().unsqueeze(-2), torch.sin(a).float().unsqueeze(-2)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


def _out_ffn(m, W, x, o, lowp=False):
    """The rest of a layer after attention: output projection, residual, SwiGLU FFN."""
    x = x + lin(m, o, W["attn_output"], lowp)
    h = rmsnorm(x, W["ffn_norm"], m.eps)
    g = lin(m, h, W["ffn_gate"], lowp)
    return x + lin(m, torch.nn.functional.silu(g) * lin(m, h, W["ffn_up"], lowp), W["ffn_down"], lowp)


@torch.no_grad()
def forward(m, tok, pos, kv, keymask, taps=(), want_logits=True):
    """tok, pos (B, T); kv: list per layer of (K, V) tensors (B, nkv, S, hd) or None
    (appended to); keymask (B, S_total) bool: which cache+new keys are real (not padding).
    Causal within the new tokens. Returns logits (B, T, V) (want_logits "last": (B, 1, V)) or None, taps (B, T, n_taps*dim)."""
    B, T = tok.shape
    x = m.embd[tok]
    tapped = []
    rep = m.nh // m.nkv
    for l, W in enumerate(m.layers):
        h = rmsnorm(x, W["attn_norm"], m.eps)
        q = (h @ W["attn_q"].T).view(B, T, m.nh, m.hd)
        k = (h @ W["attn_k"].T).view(B, T, m.nkv, m.hd)
        v = (h @ W["attn_v"].T).view(B, T, m.nkv, m.hd)
        q, k = rope(q, pos, m.inv_freq), rope(k, pos, m.inv_freq)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if kv[l] is not None:
            k = torch.cat((kv[l][0], k), 2)
            v = torch.cat((kv[l][1], v), 2)
        kv[l] = (k, v)
        S = k.shape[2]
        causal = torch.ones(T, S, dtype=torch.bool, device=tok.device).tril(S - T)
        mask = causal.unsqueeze(0) & keymask[:, None, :]
        # A padding row sees itself, so no softmax row is empty (NaN would leak
        # into real rows through 0 * NaN); real rows never see padding keys.
        mask[:, :, S - T:] |= torch.eye(T, dtype=torch.bool, device=tok.device)
        # GQA without copying the cache: query heads grouped by their KV head
        qg = q.reshape(B, m.nkv, rep, T, m.hd)
        att = (qg @ k.unsqueeze(2).transpose(-1, -2)) / (m.hd ** 0.5)
        att = att.masked_fill(~mask[:, None, None], float("-inf")).softmax(-1)
        o = (att @ v.unsqueeze(2)).reshape(B, m.nh, T, m.hd).transpose(1, 2).reshape(B, T, m.dim)
        x = _out_ffn(m, W, x, o)
        if l in taps:
            tapped.append(x)
    if want_logits == "last":
        x = x[:, -1:]
    logits = rmsnorm(x, m.out_norm, m.eps) @ m.head.T if want_logits else None
    return logits, (torch.cat(tapped, -1) if taps else None)


class Cache:
    """A preallocated KV cache for B rows of at most S_max positions (the fast path of
    gen.py): keys/values written in place, RoPE from a table, padding as an additive
    bias. Rows are left-padded; pad[r] columns at the front of row r are not real."""

    def __init__(self, m, pad, s_max):
        B, dev = pad.shape[0], m.embd.device
        pad = pad.to(dev)
        self.K = [torch.zeros(B, m.nkv, s_max, m.hd, device=dev) for _ in range(m.L)]
        self.V = [torch.zeros(B, m.nkv, s_max, m.hd, device=dev) for _ in range(m.L)]
        self.pad, self.n = pad.clone(), 0
        col = torch.arange(s_max, device=dev)
        self.bias = torch.zeros(B, s_max, device=dev).masked_fill(col[None] < pad[:, None], float("-inf"))
        a = torch.arange(s_max, dtype=torch.float64, device=dev)[:, None] * m.inv_freq  # angles in double
        self.cos, self.sin = torch.cos(a).float(), torch.sin(a).float()

    def keep(self, rows):
        """Drops the other rows (finished sequences) from the cache."""
        self.K = [k.index_select(0, rows) for k in self.K]
        self.V = [v.index_select(0, rows) for v in self.V]
        self.pad, self.bias = self.pad[rows], self.bias[rows]


def _rope_tab(x, c, s):
    """x (B, T, H, hd); c, s (B, T, hd/2)."""
    c, s = c.unsqueeze(2), s.unsqueeze(2)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


@torch.inference_mode()
def forward_cached(m, tok, cache, taps=()):
    """tok (B, T): the next T columns of every row (the prompt at first, then one token
    a step). Same arithmetic as forward(). Returns the last column's logits (B, V) and
    the taps (B, T, n_taps*dim)."""
    B, T = tok.shape
    S0, S = cache.n, cache.n + T
    dev = tok.device
    pos = (torch.arange(S0, S, device=dev)[None] - cache.pad[:, None]).clamp(min=0)  # (B, T)
    c, s = cache.cos[pos], cache.sin[pos]
    bias = cache.bias[:, :S].clone()
    if T > 1:
        causal = torch.ones(T, S, dtype=torch.bool, device=dev).tril(S0)
        bias = bias[:, None, :].expand(B, T, S).clone()
        bias.masked_fill_(~causal[None], float("-inf"))
        # a padding row sees itself, so no softmax row is empty
        d = torch.arange(T, device=dev)
        bias[:, d, S0 + d] = 0.0
    else:
        bias = bias[:, None, :]
    bias = bias[:, None]  # (B, 1, T, S) over (kv head, rep*T) rows below
    rep = m.nh // m.nkv
    x = m.embd[tok]
    tapped = []
    for l, W in enumerate(m.layers):
        h = rmsnorm(x, W["attn_norm"], m.eps)
        q = _rope_tab(lin(m, h, W["attn_q"], True).view(B, T, m.nh, m.hd), c, s)
        k = _rope_tab(lin(m, h, W["attn_k"], True).view(B, T, m.nkv, m.hd), c, s)
        v = lin(m, h, W["attn_v"], True).view(B, T, m.nkv, m.hd)
        cache.K[l][:, :, S0:S] = k.transpose(1, 2)
        cache.V[l][:, :, S0:S] = v.transpose(1, 2)
        K, V = cache.K[l][:, :, :S], cache.V[l][:, :, :S]
        qg = q.view(B, T, m.nkv, rep, m.hd).permute(0, 2, 3, 1, 4).reshape(B, m.nkv, rep * T, m.hd)
        att = torch.matmul(qg, K.transpose(-1, -2)) / (m.hd ** 0.5)  # (B, nkv, rep*T, S)
        att = (att.view(B, m.nkv, rep, T, S) + bias[:, :, None]).softmax(-1)
        o = torch.matmul(att.view(B, m.nkv, rep * T, S), V)  # (B, nkv, rep*T, hd)
        o = o.view(B, m.nkv, rep, T, m.hd).permute(0, 3, 1, 2, 4).reshape(B, T, m.dim)
        x = _out_ffn(m, W, x, o, True)
        if l in taps:
            tapped.append(x)
    cache.n = S
    logits = lin(m, rmsnorm(x[:, -1], m.out_norm, m.eps), m.head, True)
    return logits, (torch.cat(tapped, -1) if taps else None)

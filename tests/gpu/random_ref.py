#!/usr/bin/env python3
"""The weights of `specwright run ENGINE_DIR --random-weights SEED`, made again here, and an
fp32 forward over them: the GPU check's correctness at the shapes users deploy.

Written from the C, not shared with it: kernels/philox.h (Philox-4x32-10, the key the seed's
two words, the counter (group low word, group high word, purpose 8 = SW_RNG_FILL, lane)),
kernels/ref/fill_random.c (element e of a buffer is word e % 4 of group e / 4, u = ((w >> 9) * 2
+ 1) * 2^-24, x = fma(a, 2u - 1, c), rounded to nearest even into the buffer's dtype) and
runtime/engine/random_weights.c (the lane of a buffer is its index in engine.json's $.buffers;
norms c = 1, a = 1/16; other weights c = 0, a = 1/sqrt(their last dimension); inv_freq and
rope_freq each row theta^(-2i/(2 * row)), computed; the id maps d2t/t2d the first Vd steps of a
Fisher-Yates shuffle on lane 0xfffffffe). Philox and the fill run on NumPy int64 arrays or
torch int64 tensors alike (the GPU machine has torch; NumPy may be absent there), in chunks.

The forward (torch): Llama, Qwen2, Qwen3 and Gemma 3 as runtime/model/{llama,qwen,gemma}.c and
gen/arch_*.c define them (Llama's RoPE on adjacent pairs in GGUF row order, NeoX pairs for the
others; Qwen2's q/k/v biases; Qwen3's and Gemma 3's per-head q/k RMSNorms; Gemma 3's embedding
times sqrt(dim), query scale sqrt(head_dim / query_pre_attn_scalar), sandwich norms, tanh GeGLU
and sliding windows on layers (l + 1) % pattern != 0), one token a step over a static KV cache,
in fp32 (the reference), in fp32 with the engine's 16-bit rounding points (--emulate: what the
dtype alone costs), or in bf16/fp16 (the timed side-by-side, eager and as CUDA graphs through
torch_ref.py's loops). Gemma 3's sliding_window, pattern, local base and query scalar are not in
engine.json: they come from the spec (--spec).

usage:
  random_ref.py fill-check ENGINE_DIR --seed S --dump DIR [--xp numpy|torch]    every weight
        buffer against the engine's own (DIR/NAME.bin: the bytes a bound engine holds), bit
        for bit
  random_ref.py check ENGINE_DIR --seed S --run RUN.json:LOGITS.npy [--run ...] [--spec SPEC]
        [--device cpu|cuda] [--bound-scale K] [--mutate lane|transpose] [--time N]
        the engine's dumped logits (run --random-weights S --dump-logits) against the fp32
        forward over the same weights and the engine's own tokens: relative error per row
        against the bound of the engine's dtype; exit 1 over it. --time N: then PyTorch at the
        engine's dtype, eager and CUDA graphs, N tokens (tok/s beside the engine's)
  random_ref.py calibrate --shape JSON [--dtype bf16] [--seed S] [-n N]: the dtype-emulating
        forward against fp32 on a shape without an engine (how the bound compares to rounding)
Prints one JSON object (check: per run and row, rel error, bound, pass). Exit 0, 1 when a
comparison fails (fill-check: a buffer differs; check: a row over the bound), 2 on an error.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

try:
    import torch
except ImportError:  # fill-check runs on NumPy alone
    torch = None
try:
    import numpy as np
except ImportError:  # the GPU machine may have torch without NumPy
    np = None

MASK = 0xFFFFFFFF
M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
SW_RNG_FILL = 8
MAP_LANE = 0xFFFFFFFE
CHUNK = 1 << 22  # groups of 4 elements per Philox pass (16M elements)


# ---- Philox-4x32-10 on int64 arrays holding uint32 values ----
def _mulhilo(m, x):
    """hi, lo words of m * x (m a Python int < 2^32, x uint32 values in int64): the product
    split at 16 bits so that every partial fits an int64."""
    a = (x & 0xFFFF) * m
    b = (x >> 16) * m
    t = a + ((b & 0xFFFF) << 16)
    return (b >> 16) + (t >> 32), t & MASK


def philox(c0, c1, c2, c3, k0, k1):
    """Philox-4x32-10 of counter (c0..c3: arrays or ints) under key (k0, k1: ints)."""
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def rand_u32x4(seed, it, pos, purpose, lane):
    """sw_rand_u32x4 on Python ints."""
    return philox(it, pos, purpose, lane, seed & MASK, (seed >> 32) & MASK)


def f32(x):
    """x rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


class Xp:
    """The few array operations the fill needs, on NumPy or torch (device)."""

    def __init__(self, kind, device="cpu"):
        if kind == "torch" and torch is None or kind == "numpy" and np is None:
            raise SystemExit(f"random_ref.py: {kind} is not installed")
        self.kind, self.device = kind, device

    def arange(self, a, b):
        if self.kind == "numpy":
            return np.arange(a, b, dtype=np.int64)
        return torch.arange(a, b, dtype=torch.int64, device=self.device)

    def stack(self, ws):
        return np.stack(ws, -1) if self.kind == "numpy" else torch.stack(ws, -1)

    def f64(self, x):
        return x.astype(np.float64) if self.kind == "numpy" else x.to(torch.float64)

    def f32(self, x):
        return x.astype(np.float32) if self.kind == "numpy" else x.to(torch.float32)

    def f32_bits(self, x):
        """float32 values -> their bits as int64 in [0, 2^32)."""
        if self.kind == "numpy":
            return x.view(np.uint32).astype(np.int64)
        return x.view(torch.int32).to(torch.int64) & MASK

    def bits_f32(self, b):
        """int64 bits in [0, 2^32) -> float32 values."""
        s = (b ^ 0x80000000) - 0x80000000  # as a signed 32-bit value
        if self.kind == "numpy":
            return s.astype(np.int32).view(np.float32)
        return s.to(torch.int32).view(torch.float32)

    def f16_bits(self, x):
        """float32 -> fp16 (round to nearest even, subnormals included) bits as int64."""
        if self.kind == "numpy":
            return x.astype(np.float16).view(np.uint16).astype(np.int64)
        return x.to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF

    def f16_f32(self, b):
        if self.kind == "numpy":
            return b.astype(np.uint16).view(np.float16).astype(np.float32)
        return ((b ^ 0x8000) - 0x8000).to(torch.int16).view(torch.float16).to(torch.float32)


def fill_chunk(xp, seed, lane, g0, g1, a, c, mode):
    """Elements 4 g0 .. 4 g1 - 1 of a buffer: (values as float32, bits) with mode 0 f32, 1 fp16,
    2 bf16; bits are the stored words (int64)."""
    g = xp.arange(g0, g1)
    ws = philox(g & MASK, g >> 32, SW_RNG_FILL, lane, seed & MASK, (seed >> 32) & MASK)
    w = xp.stack(list(ws)).reshape(-1)
    # u = (2k + 1) 2^-24 and v = 2u - 1 are exact in float32; a v + c is exact in float64 for
    # the ranges random_weights.c draws (c = 0, or c = 1 with a = 1/16), so one rounding to
    # float32 is fmaf's
    v = xp.f64((w >> 9) * 2 + 1) * (2.0 ** -23) - 1.0
    x = xp.f32(v * a + c)
    if mode == 0:
        return x, xp.f32_bits(x)
    if mode == 1:
        b = xp.f16_bits(x)
        return xp.f16_f32(b), b
    u = xp.f32_bits(x)
    b = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return xp.bits_f32(b << 16), b


MODES = {"f32": 0, "fp16": 1, "bf16": 2}


class Engine:
    """engine.json: the buffers, their Philox lanes and ranges, the target's shape."""

    def __init__(self, d, spec_path=None):
        self.dir = d
        p = os.path.join(d, "engine.json")
        try:
            with open(p) as f:
                self.man = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"random_ref.py: {p}: {e}")
        self.bufs = self.man["buffers"]
        self.dtype = self.man["spec"]["dtype"]
        self.shape = dict(self.man["shapes"]["target"])
        self.dshape = self.man["shapes"].get("draft") or {}
        self.gemma = {}
        if spec_path:
            self.read_spec(spec_path)

    def read_spec(self, path):
        """The spec's target shape: checked against engine.json's, Gemma 3's fields taken."""
        try:
            with open(path) as f:
                sh = json.load(f)["target"]["shape"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"random_ref.py: {path}: expected a spec with $.target.shape ({e})")
        for k in ("n_layers", "dim", "n_heads", "ffn_dim", "vocab"):
            if sh.get(k) != self.shape.get(k):
                raise SystemExit(f"random_ref.py: {path}: $.target.shape.{k} is {sh.get(k)}, "
                                 f"{self.dir}/engine.json's target {self.shape.get(k)}: not the "
                                 f"engine's spec")
        if sh.get("arch", "llama") != self.shape.get("arch", "llama"):
            raise SystemExit(f"random_ref.py: {path}: arch {sh.get('arch', 'llama')}, the engine's "
                             f"{self.shape.get('arch')}")
        if sh.get("arch") == "gemma3":  # Gemma3TextConfig's defaults, as gen/spec.c takes them
            self.gemma = {"window": sh.get("sliding_window", 4096),
                          "pattern": sh.get("sliding_window_pattern", 6),
                          "local_base": sh.get("rope_local_base_freq", 10000.0),
                          "query_scalar": sh.get("query_pre_attn_scalar", self.shape["head_dim"])}

    @staticmethod
    def field(b):
        n = b["name"]
        return n.split(".", 1)[1] if "." in n else n

    def is_map(self, b):
        return b["kind"] == "weight" and b["dtype"] == "i32" and self.field(b) in ("d2t", "t2d")

    def weights(self):
        """(lane, buffer) of every weight buffer."""
        return [(i, b) for i, b in enumerate(self.bufs) if b["kind"] == "weight"]

    def range_of(self, b):
        """(a, c) of a drawn buffer, None for inv_freq/rope_freq and the maps."""
        fl = self.field(b)
        if fl in ("inv_freq", "rope_freq") or self.is_map(b):
            return None
        if "norm" in fl:
            return 0.0625, 1.0
        last = b["shape"][-1] if b["shape"] else 1
        return f32(1.0 / math.sqrt(last)), 0.0

    def freqs(self, b):
        """A RoPE table as random_weights.c computes it (float32 values, Python floats)."""
        n = b["bytes"] // 4
        row = b["shape"][-1] if len(b["shape"]) >= 2 else n
        draft = b["name"].startswith("draft.") and self.dshape.get("head_dim")
        theta = f32(float((self.dshape if draft else self.shape)["rope_theta"]))
        return [f32(math.pow(theta, -2.0 * (e % row) / (2 * row))) for e in range(n)]

    def maps(self, seed, vd, v):
        """d2t (vd), t2d (v): the first vd steps of a seeded Fisher-Yates shuffle."""
        perm = list(range(v))
        w = None
        for i in range(vd):
            if i % 4 == 0:
                w = rand_u32x4(seed, i // 4, 0, SW_RNG_FILL, MAP_LANE)
            j = i + w[i % 4] % (v - i)
            perm[i], perm[j] = perm[j], perm[i]
        t2d = [-1] * v
        for i in range(vd):
            t2d[perm[i]] = i
        return perm[:vd], t2d

    def fill(self, xp, seed, lane, b, out=None):
        """Buffer b's values: into out (a flat float32 tensor of its elements) when given, else
        returned as (values, bits) concatenated over the chunks (small buffers)."""
        a, c = self.range_of(b)
        mode = MODES[b["dtype"]]
        n = b["bytes"] // (4 if mode == 0 else 2)
        groups = (n + 3) // 4
        vals, bits = [], []
        for g0 in range(0, groups, CHUNK):
            g1 = min(groups, g0 + CHUNK)
            v, w = fill_chunk(xp, seed, lane, g0, g1, a, c, mode)
            e0, e1 = 4 * g0, min(n, 4 * g1)
            if out is not None:
                out[e0:e1] = v[:e1 - e0]
            else:
                vals.append(v[:e1 - e0])
                bits.append(w[:e1 - e0])
        return (vals, bits) if out is None else out


# ---- fill-check: the engine's buffers, bit for bit ----
def fill_check(a):
    e = Engine(a.engine)
    kind = a.xp or ("torch" if torch is not None else "numpy")
    xp = Xp(kind)
    res = {"engine": a.engine, "seed": a.seed, "backend": kind, "buffers": 0, "elements": 0,
           "mismatch": []}
    maps = None
    for lane, b in e.weights():
        path = os.path.join(a.dump, b["name"] + ".bin")
        with open(path, "rb") as f:
            got = f.read()
        if len(got) != b["bytes"]:
            raise SystemExit(f"random_ref.py: {path}: {len(got)} bytes, engine.json says {b['bytes']}")
        if e.is_map(b):
            if maps is None:
                vd = next(x["bytes"] for x in e.bufs if e.is_map(x) and e.field(x) == "d2t") // 4
                v = next(x["bytes"] for x in e.bufs if e.is_map(x) and e.field(x) == "t2d") // 4
                maps = e.maps(a.seed, vd, v)
            want = maps[0] if e.field(b) == "d2t" else maps[1]
            want = struct.pack(f"<{len(want)}i", *want)
        elif e.range_of(b) is None:
            fr = e.freqs(b)
            want = struct.pack(f"<{len(fr)}f", *fr)
        else:
            if b["dtype"] not in MODES:
                raise SystemExit(f"random_ref.py: {e.dir}/engine.json: weight {b['name']} has dtype "
                                 f"{b['dtype']}: random weights are f32, fp16, bf16")
            _, bits = e.fill(xp, a.seed, lane, b)
            width = 4 if b["dtype"] == "f32" else 2
            parts = []
            for w in bits:
                w = w.tolist() if kind == "numpy" else w.cpu().tolist()
                parts.append(struct.pack(f"<{len(w)}{'I' if width == 4 else 'H'}", *w))
            want = b"".join(parts)
        res["buffers"] += 1
        res["elements"] += b["bytes"] // (2 if b["dtype"] in ("fp16", "bf16") else 4)
        if want != got:
            k = next(i for i in range(len(got)) if got[i] != want[i])
            res["mismatch"].append(f"{b['name']} (lane {lane}): first differing byte {k}")
    json.dump(res, sys.stdout)
    print()
    return 1 if res["mismatch"] else 0


# ---- the forward ----
# the target's weight buffers this forward reads, by field, and their shapes
def expected_shape(e, f):
    s = e.shape
    L, D, F, V, hd = s["n_layers"], s["dim"], s["ffn_dim"], s["vocab"], s["head_dim"]
    qd, kvd = s["n_heads"] * hd, s["n_kv_heads"] * hd
    shapes = {"tok_embd": [V, D], "attn_norm": [L, D], "wq": [L, qd, D], "wk": [L, kvd, D],
              "wv": [L, kvd, D], "wo": [L, D, qd], "ffn_norm": [L, D], "w_gate": [L, F, D],
              "w_up": [L, F, D], "w_down": [L, D, F], "out_norm": [D], "lm_head": [V, D],
              "inv_freq": None, "q_norm": [L, hd], "k_norm": [L, hd], "bq": [L, qd],
              "bk": [L, kvd], "bv": [L, kvd], "post_attn_norm": [L, D], "post_ffn_norm": [L, D],
              "rope_freq": [L, hd // 2],
              # fused GEMM weights (runtime/core/wparts.h): the parts' rows one after another
              "wqkv": [L, qd + 2 * kvd, D], "w_gate_up": [L, 2 * F, D]}
    return shapes.get(f, "unknown")


# a fused buffer's parts, in row order (runtime/core/wparts.h)
FUSED = {"wqkv": ("wq", "wk", "wv"), "w_gate_up": ("w_gate", "w_up")}


def load_weights(e, seed, device, mutate=None):
    """The target's weights as the engine holds them, each as float32 on device (16-bit values
    exactly), and the fields the engine stores in 16 bits. mutate: "lane" draws every buffer
    from its neighbour's Philox stream, "transpose" reads the q projection's rows as columns (a
    weight layout that is not the engine's: the check must then fail)."""
    arch = e.shape.get("arch", "llama")
    xp = Xp("torch", device)
    w, w16 = {}, set()
    for lane, b in e.weights():
        if not b["name"].startswith("target."):
            continue
        fl = e.field(b)
        want = expected_shape(e, fl)
        if want == "unknown":
            raise SystemExit(f"random_ref.py: {e.dir}/engine.json: weight buffer {b['name']}: not "
                             f"one this forward knows (Llama/Qwen/Gemma 3 fields as gen/plan.c "
                             f"names them); a fused or new weight needs its place in random_ref.py")
        if want is not None and list(b["shape"]) != want:
            raise SystemExit(f"random_ref.py: {e.dir}/engine.json: {b['name']} has shape "
                             f"{b['shape']}, this forward expects {want}")
        if e.range_of(b) is None:
            t = torch.tensor(e.freqs(b), dtype=torch.float64, device=device)
        else:
            if b["dtype"] not in MODES:
                raise SystemExit(f"random_ref.py: {e.dir}/engine.json: {b['name']} has dtype "
                                 f"{b['dtype']}: random weights are f32, fp16, bf16")
            n = b["bytes"] // (4 if b["dtype"] == "f32" else 2)
            t = torch.empty(n, dtype=torch.float32, device=device)
            e.fill(xp, seed, lane + 1 if mutate == "lane" else lane, b, out=t)
            if b["dtype"] != "f32":
                w16.add(fl)
        w[fl] = t.reshape(b["shape"])
    for fl, parts in FUSED.items():  # a fused buffer: its parts' rows, as the unfused buffers
        if fl not in w:
            continue
        s = e.shape
        hd, F = s["head_dim"], s["ffn_dim"]
        rows = {"wq": s["n_heads"] * hd, "wk": s["n_kv_heads"] * hd, "wv": s["n_kv_heads"] * hd,
                "w_gate": F, "w_up": F}
        r0 = 0
        for p in parts:
            w[p] = w[fl][:, r0:r0 + rows[p], :].contiguous()
            r0 += rows[p]
            if fl in w16:
                w16.add(p)
        del w[fl]
    if mutate == "transpose":
        q = w["wq"]
        if q.shape[1] != q.shape[2]:
            raise SystemExit("random_ref.py: --mutate transpose needs a square wq")
        w["wq"] = q.transpose(1, 2).contiguous()
    for k in ("tok_embd", "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up",
              "w_down", "out_norm", "inv_freq"):
        if k not in w:
            raise SystemExit(f"random_ref.py: {e.dir}/engine.json: no weight buffer target.{k}")
    need = {"qwen2": ("bq", "bk", "bv"), "qwen3": ("q_norm", "k_norm"),
            "gemma3": ("q_norm", "k_norm", "post_attn_norm", "post_ffn_norm", "rope_freq")}
    for k in need.get(arch, ()):
        if k not in w:
            raise SystemExit(f"random_ref.py: {e.dir}/engine.json: a {arch} target without "
                             f"target.{k}")
    if "lm_head" not in w:  # tied
        w["lm_head"] = w["tok_embd"]
    return w, w16


class Model:
    """The target of an engine over its random weights (load_weights): one token a step, static
    KV cache. prec: "fp32" (the reference), "emulate" (fp32 with the engine's 16-bit roundings:
    gen/plan.c layer_ops' casts of the GEMM inputs, q, the K/V cache, the attention output and
    the LM head's input) or "native" (the 16-bit weights and activations in the engine's dtype:
    PyTorch's own way, timed)."""

    def __init__(self, e, device, ctx, w, w16, prec="fp32"):
        self.e, self.device, self.ctx = e, device, ctx
        s = e.shape
        self.arch = s.get("arch", "llama")
        if self.arch == "gemma3" and not e.gemma:
            raise SystemExit(f"random_ref.py: {e.dir}/engine.json: a gemma3 target: engine.json "
                             f"does not carry sliding_window, sliding_window_pattern, "
                             f"rope_local_base_freq and query_pre_attn_scalar; give the spec it "
                             f"was built from (--spec)")
        self.L, self.dim, self.nh, self.nkv = s["n_layers"], s["dim"], s["n_heads"], s["n_kv_heads"]
        self.hd, self.V, self.eps = s["head_dim"], s["vocab"], f32(float(s["norm_eps"]))
        self.d16 = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(e.dtype)
        if prec != "fp32" and self.d16 is None:
            raise SystemExit(f"random_ref.py: {e.dir}: dtype {e.dtype}: --emulate and the timed "
                             f"forward need a bf16 or fp16 engine")
        # native: the engine's dtype (exact: the values are the dtype's); on a CPU fp32, as
        # PyTorch's CPU GEMMs do not all take 16-bit operands
        nat = self.d16 if device.type == "cuda" else torch.float32
        self.act = nat if prec == "native" else torch.float32
        if prec == "native" and nat != torch.float32:
            w = {k: (t.to(nat) if k in w16 else t) for k, t in w.items()}
            if "lm_head" not in w16 and "tok_embd" in w16:
                w["lm_head"] = w["tok_embd"]
        self.w = w
        self.set_prec(prec)
        g = e.gemma
        self.embd_scale = f32(math.sqrt(self.dim)) if self.arch == "gemma3" else 1.0
        self.qscale = 1.0
        if self.arch == "gemma3" and g["query_scalar"] != self.hd:
            self.qscale = f32(math.sqrt(f32(self.hd / g["query_scalar"])))
        self.window = g.get("window", 0)
        self.pattern = g.get("pattern", 0)
        self.kc = torch.zeros(self.L, ctx, self.nkv, self.hd, dtype=self.act, device=device)
        self.vc = torch.zeros_like(self.kc)
        self.idx = torch.arange(ctx, device=device)
        self.dtype = self.act

    def set_prec(self, prec):
        """fp32 <-> emulate on the same weights (native is fixed at construction)."""
        self.prec = prec
        d16 = self.d16
        self.rnd = (lambda x: x.to(d16).float()) if prec == "emulate" else (lambda x: x)

    def norm(self, x, wt, eps=None):
        x = x.float()
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + (self.eps if eps is None else eps))
        return y * wt.float()

    def mm(self, x, wt):
        return x.to(wt.dtype) @ wt.t()

    def rope(self, x, pos, inv):
        """x (heads, hd): Llama's adjacent pairs, the others' NeoX halves."""
        a = pos.double() * inv.double()
        c, s = torch.cos(a).float(), torch.sin(a).float()
        x = x.float()
        if self.arch == "llama":
            x = x.reshape(x.shape[0], -1, 2)
            x0, x1 = x[..., 0], x[..., 1]
            return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).reshape(x.shape[0], -1)
        h = x.shape[1] // 2
        x0, x1 = x[:, :h], x[:, h:]
        return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], -1)

    def sliding(self, l):
        return self.window > 0 and self.pattern > 0 and (l + 1) % self.pattern != 0

    def step(self, tok, pos):
        """One token (tok, pos: 1-element long tensors on the device): logits (V,) fp32."""
        w, r, nh, nkv, hd = self.w, self.rnd, self.nh, self.nkv, self.hd
        x = w["tok_embd"][tok].reshape(1, self.dim).float() * self.embd_scale
        x = x.to(self.act)
        causal = (self.idx <= pos).reshape(1, 1, self.ctx)
        windowed = causal & (self.idx > pos - self.window).reshape(1, 1, self.ctx)
        g = nh // nkv
        for l in range(self.L):
            h = r(self.norm(x, w["attn_norm"][l]))
            q = self.mm(h, w["wq"][l]).float().reshape(nh, hd)
            k = self.mm(h, w["wk"][l]).float().reshape(nkv, hd)
            v = self.mm(h, w["wv"][l]).float().reshape(nkv, hd)
            inv = w["inv_freq"]
            if self.arch == "qwen2":
                q = q + w["bq"][l].float().reshape(nh, hd)
                k = k + w["bk"][l].float().reshape(nkv, hd)
                v = v + w["bv"][l].float().reshape(nkv, hd)
            elif self.arch in ("qwen3", "gemma3"):
                q = self.norm(q, w["q_norm"][l])
                k = self.norm(k, w["k_norm"][l])
            if self.arch == "gemma3":
                inv = w["rope_freq"][l]
            q, k = self.rope(q, pos, inv), self.rope(k, pos, inv)
            if self.qscale != 1.0:
                q = q * self.qscale
            q = r(q)
            self.kc[l].index_copy_(0, pos, r(k).to(self.act).reshape(1, nkv, hd))
            self.vc[l].index_copy_(0, pos, r(v).to(self.act).reshape(1, nkv, hd))
            K = self.kc[l].float().permute(1, 0, 2).repeat_interleave(g, 0)  # (nh, ctx, hd)
            Vv = self.vc[l].float().permute(1, 0, 2).repeat_interleave(g, 0)
            s = torch.bmm(K, q.reshape(nh, hd, 1)).reshape(nh, 1, self.ctx) / math.sqrt(hd)
            live = windowed if self.sliding(l) else causal
            s = s.masked_fill(~live, float("-inf")).softmax(-1)
            o = r(torch.bmm(s, Vv).reshape(1, nh * hd))
            d = self.mm(o, w["wo"][l]).float()
            if self.arch == "gemma3":
                d = self.norm(d, w["post_attn_norm"][l])
            x = (x.float() + d).to(self.act)
            h = r(self.norm(x, w["ffn_norm"][l]))
            gt = self.mm(h, w["w_gate"][l]).float()
            up = self.mm(h, w["w_up"][l]).float()
            act = (torch.nn.functional.gelu(gt, approximate="tanh") if self.arch == "gemma3"
                   else torch.nn.functional.silu(gt))
            d = self.mm(r(act * up), w["w_down"][l]).float()
            if self.arch == "gemma3":
                d = self.norm(d, w["post_ffn_norm"][l])
            x = (x.float() + d).to(self.act)
        h = r(self.norm(x, w["out_norm"]))
        return self.mm(h, w["lm_head"]).float().reshape(-1)

    def logits_at(self, seq, wanted):
        """Teacher-forced over seq: {c: logits after the first c tokens} for c in wanted."""
        self.kc.zero_()
        self.vc.zero_()
        out = {}
        for p in range(max(wanted)):
            lg = self.step(torch.tensor([seq[p]], device=self.device),
                           torch.tensor([p], device=self.device))
            if p + 1 in wanted:
                out[p + 1] = lg.double().cpu()
        return out


# ---- the bound ----
# u: the unit roundoff of the engine's dtype (bf16 8, fp16 11 significant bits)
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "f32": 2.0 ** -24}
KAPPA = 4.0


def bound(dtype, scale=1.0):
    """The relative error ||engine - fp32|| / ||fp32|| over the vocabulary a correct engine of
    this dtype stays within: KAPPA u. Why u and not more with depth: the weights add nothing
    (the reference reads the engine's own 16-bit values); the activations are rounded to the
    dtype at 7 points a layer (gen/plan.c layer_ops: the attention's input, q, the K and V cache
    rows, the attention's output, the MLP's input and middle) and once before the LM head, each
    a relative perturbation of u/sqrt(3) rms of its tensor. A layer's rounding errors are
    relative to its own contribution to the residual stream, the contributions add in
    quadrature as the stream does, and the RMSNorm before every GEMM keeps a relative error
    relative: the stream's relative error stays that of one layer's roundings, sqrt(5 + 2)
    u/sqrt(3) ~ 1.5 u, with the LM head's input sqrt(8/3) u ~ 1.6 u at any depth. Measured
    (`calibrate`, the emulating forward against fp32 on random shapes of 2 to 32 layers, widths
    64 to 1024, bf16 and fp16): 1.0 to 1.6 u. KAPPA = 4 leaves 2.5x for other shapes and the
    GPU's summation orders; the check prints the emulating forward's error beside the
    engine's."""
    return scale * KAPPA * UNIT.get(dtype, UNIT["f32"])


def rel_err(got, ref):
    return float((got - ref).norm() / ref.norm())


def read_npy(path):
    """A little-endian f32 .npy (run --dump-logits) as a torch tensor (rows, V): no NumPy."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:6] != b"\x93NUMPY":
        raise SystemExit(f"random_ref.py: {path}: not a .npy file")
    hl = struct.unpack_from("<H", buf, 8)[0]
    hdr = buf[10:10 + hl].decode("latin-1")
    if "'<f4'" not in hdr or "False" not in hdr:
        raise SystemExit(f"random_ref.py: {path}: expected little-endian f32 in C order: {hdr.strip()}")
    shape = tuple(int(x) for x in hdr.split("(")[1].split(")")[0].split(",") if x.strip())
    t = torch.frombuffer(bytearray(buf[10 + hl:]), dtype=torch.float32)
    if t.numel() != math.prod(shape):
        raise SystemExit(f"random_ref.py: {path}: {t.numel()} floats, the header says {shape}")
    return t.reshape(shape).double()


def check(a):
    if torch is None:
        raise SystemExit("random_ref.py check: needs torch")
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference is fp32, not TF32
    torch.backends.cudnn.allow_tf32 = False
    e = Engine(a.engine, a.spec)
    dev = torch.device(a.device)
    runs = []
    for r in a.run:
        jp, _, lp = r.partition(":")
        try:
            with open(jp) as f:
                rj = json.load(f)
        except (OSError, ValueError) as x:
            raise SystemExit(f"random_ref.py: --run {jp}: {x}")
        if rj.get("random_weights") != a.seed:
            raise SystemExit(f"random_ref.py: {jp}: random weights seed {rj.get('random_weights')}, "
                             f"not --seed {a.seed}")
        if "dump_logits" not in rj:
            raise SystemExit(f"random_ref.py: {jp}: no dump_logits (run with --dump-logits)")
        runs.append((jp, lp, rj, read_npy(lp)))
    B = bound(e.dtype, a.bound_scale)
    res = {"engine": e.man["spec"]["name"], "dir": a.engine, "arch": e.shape.get("arch", "llama"),
           "dtype": e.dtype, "seed": a.seed, "device": str(dev), "torch": torch.__version__,
           "bound": B, "bound_rule": f"{KAPPA:g} u, u = 2^{int(math.log2(UNIT.get(e.dtype, UNIT['f32'])))}"
           + (f", scaled {a.bound_scale}" if a.bound_scale != 1 else ""),
           "mutate": a.mutate, "runs": []}
    ctx = max(len(rj["prompt_ids"]) + len(rj["tokens"]) for _, _, rj, _ in runs) + 1
    t0 = time.perf_counter()
    w, w16 = load_weights(e, a.seed, dev, a.mutate)
    sync(dev)
    res["weights_s"] = round(time.perf_counter() - t0, 2)
    ref = Model(e, dev, ctx, w, w16, "fp32")
    ok = True
    wants = []
    for jp, lp, rj, got in runs:
        seq = rj["prompt_ids"] + rj["tokens"]
        pos = rj["dump_logits"]["positions"]
        if got.shape[0] != len(pos) or got.shape[1] != e.shape["vocab"]:
            raise SystemExit(f"random_ref.py: {lp}: shape {tuple(got.shape)}, expected "
                             f"({len(pos)}, {e.shape['vocab']})")
        if max(pos) > len(seq):
            raise SystemExit(f"random_ref.py: {jp}: a dumped row at context {max(pos)} past the "
                             f"{len(seq)} ids of prompt and tokens")
        t0 = time.perf_counter()
        want = ref.logits_at(seq, set(pos))
        wants.append(want)
        fwd_s = time.perf_counter() - t0
        rows = []
        for i, c in enumerate(pos):
            r_ = want[c]
            er = rel_err(got[i], r_)
            top = int(r_.argmax())
            # the token the engine emitted from this row (greedy runs: its own argmax)
            tok = seq[c] if c < len(seq) else None
            row = {"context": c, "rel_err": er, "pass": er <= B,
                   "max_abs_err": float((got[i] - r_).abs().max()), "ref_norm": float(r_.norm()),
                   "ref_top1": top, "engine_top1": int(got[i].argmax()), "emitted": tok}
            if tok is not None and tok != top:
                row["ref_margin_to_emitted"] = float(r_[top] - r_[tok])
            ok &= er <= B
            rows.append(row)
        res["runs"].append({"run": jp, "target_only": rj.get("target_only"),
                            "backend": rj.get("backend"), "n_prompt": len(rj["prompt_ids"]),
                            "n_tokens": len(rj["tokens"]), "forward_s": round(fwd_s, 2),
                            "rows": rows})
    if a.emulate and e.dtype in ("bf16", "fp16"):
        # what rounding alone costs: the same forward with the engine's 16-bit roundings; beside
        # it the engine against that forward (where the engine sums as the reference does,
        # host native, often next to nothing)
        ref.set_prec("emulate")
        rj, got = runs[0][2], runs[0][3]
        pos = rj["dump_logits"]["positions"]
        g = ref.logits_at(rj["prompt_ids"] + rj["tokens"], set(pos))
        res["emulated"] = [{"context": c, "rel_err_vs_fp32": rel_err(g[c], wants[0][c]),
                            "engine_vs_emulated": rel_err(got[i], g[c])}
                           for i, c in enumerate(pos)]
    del ref
    if a.time:
        res["torch_time"] = time_native(e, a, dev, runs[0][2], w, w16)
    del w
    res["pass"] = ok
    json.dump(res, sys.stdout)
    print()
    return 0 if ok else 1


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def time_native(e, a, dev, rj, w, w16):
    """PyTorch at the engine's dtype on the same weights: greedy decode of a.time tokens from
    the run's prompt, eager and (cuda) as one CUDA graph a step (torch_ref.py's loops)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True  # no __pycache__ in a bundle (its files are listed)
    import torch_ref
    ids = rj["prompt_ids"]
    m = Model(e, dev, len(ids) + a.time + 1, w, w16, "native")
    out = {"dtype": str(m.act).split(".")[-1], "n": a.time}
    out["weight_bytes"] = sum(t.numel() * t.element_size() for k, t in m.w.items()
                              if not (k == "lm_head" and t is m.w["tok_embd"]))
    out["eager_tokens"], tps = torch_ref.decode_eager(m, ids, a.time)
    out["eager_tok_per_s"] = round(tps, 2)
    if dev.type == "cuda":
        # the read rate a device-to-device copy reaches (the roofline's measured form)
        x = torch.empty(1 << 29, dtype=torch.float32, device=dev)
        y = torch.empty_like(x)
        y.copy_(x)
        sync(dev)
        t0 = time.perf_counter()
        for _ in range(5):
            y.copy_(x)
        sync(dev)
        out["copy_gbs"] = round(5 * 2 * x.numel() * 4 / (time.perf_counter() - t0) / 1e9, 1)
        del x, y
        out["graph_tokens"], tps = torch_ref.decode_graph(m, ids, a.time)
        out["graph_tok_per_s"] = round(tps, 2)
        out["graph_equals_eager"] = out["graph_tokens"] == out["eager_tokens"]
    return out


def calibrate(a):
    """The emulated dtype against fp32 on a shape without an engine: a synthetic engine.json."""
    sh = json.loads(a.shape)
    e = Engine.__new__(Engine)
    e.dir, e.dtype, e.dshape, e.gemma = "(calibrate)", a.dtype, {}, {}
    sh.setdefault("arch", "llama")
    sh.setdefault("head_dim", sh["dim"] // sh["n_heads"])
    sh.setdefault("n_kv_heads", sh["n_heads"])
    sh.setdefault("rope_theta", 10000.0)
    sh.setdefault("norm_eps", 1e-5)
    e.shape = sh
    L, D, F, V, hd = sh["n_layers"], sh["dim"], sh["ffn_dim"], sh["vocab"], sh["head_dim"]
    qd, kvd = sh["n_heads"] * hd, sh["n_kv_heads"] * hd
    bufs = [("tok_embd", [V, D], a.dtype), ("attn_norm", [L, D], "f32"), ("wq", [L, qd, D], a.dtype),
            ("wk", [L, kvd, D], a.dtype), ("wv", [L, kvd, D], a.dtype), ("wo", [L, D, qd], a.dtype),
            ("ffn_norm", [L, D], "f32"), ("w_gate", [L, F, D], a.dtype), ("w_up", [L, F, D], a.dtype),
            ("w_down", [L, D, F], a.dtype), ("out_norm", [D], "f32"), ("lm_head", [V, D], a.dtype),
            ("inv_freq", [hd // 2], "f32")]
    e.bufs = [{"name": "target." + n, "kind": "weight", "dtype": dt, "shape": s,
               "bytes": math.prod(s) * (4 if dt == "f32" else 2)} for n, s, dt in bufs]
    e.man = {"spec": {"name": "calibrate", "dtype": a.dtype}}
    dev = torch.device(a.device)
    ids = [int(w % V) for w in rand_u32x4(a.seed, 0, 0, SW_RNG_FILL, 0xFFFFFFFF)]
    w, w16 = load_weights(e, a.seed, dev)
    ref = Model(e, dev, len(ids) + a.n + 1, w, w16, "fp32")
    seq = list(ids)
    for _ in range(a.n):  # the fp32 model's own greedy continuation
        seq.append(int(ref.logits_at(seq, {len(seq)})[len(seq)].argmax()))
    want = set(range(len(ids), len(seq) + 1))
    r = ref.logits_at(seq, want)
    ref.set_prec("emulate")
    g = ref.logits_at(seq, want)
    errs = [rel_err(g[c], r[c]) for c in sorted(want)]
    out = {"shape": sh, "dtype": a.dtype, "rows": len(errs), "rel_err_max": max(errs),
           "rel_err_mean": sum(errs) / len(errs), "max_over_u": max(errs) / UNIT[a.dtype],
           "bound": bound(a.dtype), "max_over_bound": max(errs) / bound(a.dtype)}
    json.dump(out, sys.stdout)
    print()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fill-check")
    f.add_argument("engine")
    f.add_argument("--seed", type=int, required=True)
    f.add_argument("--dump", required=True)
    f.add_argument("--xp", choices=["numpy", "torch"], help="the array library (default torch)")
    c = sub.add_parser("check")
    c.add_argument("engine")
    c.add_argument("--seed", type=int, required=True)
    c.add_argument("--run", action="append", required=True, help="RUN.json:LOGITS.npy")
    c.add_argument("--spec")
    c.add_argument("--device", default="cpu")
    c.add_argument("--bound-scale", type=float, default=1.0)
    c.add_argument("--mutate", choices=["lane", "transpose"])
    c.add_argument("--emulate", action="store_true", help="also the dtype-emulating forward")
    c.add_argument("--time", type=int, default=0, help="tokens of the timed PyTorch decode")
    k = sub.add_parser("calibrate")
    k.add_argument("--shape", required=True, help="a target shape as JSON")
    k.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    k.add_argument("--seed", type=int, default=1)
    k.add_argument("--device", default="cpu")
    k.add_argument("-n", type=int, default=8)
    a = ap.parse_args()
    try:
        if a.cmd == "fill-check":
            return fill_check(a)
        if a.cmd == "check":
            return check(a)
        return calibrate(a)
    except SystemExit as x:  # an error (not a failed comparison, exit 1): exit 2
        if isinstance(x.code, str):
            print(x.code, file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())

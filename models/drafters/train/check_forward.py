#!/usr/bin/env python3
"""Checks the PyTorch SmolLM2 forward (smollm.py) against the C forward's logits:
check_forward.py WDIR DUMP, DUMP from `specwright eval MODEL --dump DUMP -n N` (header
n_prompt, n, V; prompt ids; greedy ids; n rows of V logits). Prints the max abs logit
difference and whether the argmax agrees, for forward() and for gen.py's cached
forward_cached(); exits 1 beyond 1e-2 (fp32, two summation
orders over 30 layers)."""
import sys

import numpy as np
import torch

import smollm

torch.set_num_threads(2)
m = smollm.Target(sys.argv[1])
raw = open(sys.argv[2], "rb").read()
npr, n, V = np.frombuffer(raw[:12], np.int32)
ids = np.frombuffer(raw[12:12 + 4 * npr], np.int32)
out = np.frombuffer(raw[12 + 4 * npr:12 + 4 * (npr + n)], np.int32)
lg = np.frombuffer(raw[12 + 4 * (npr + n):], np.float32).reshape(n, V)
seq = torch.tensor(np.concatenate([ids, out[:-1]]), dtype=torch.long)[None]
pos = torch.arange(seq.shape[1])[None]
logits, _ = smollm.forward(m, seq, pos, [None] * m.L, torch.ones(1, seq.shape[1], dtype=torch.bool))
mine = logits[0, npr - 1:].numpy()
d = np.abs(mine - lg).max()
agree = (mine.argmax(-1) == lg.argmax(-1)).mean()
print(f"check_forward: {n} positions, max |logit diff| {d:.2e}, argmax agreement {agree:.3f}")
# gen.py's fast path (preallocated cache): the prompt in one pass, then a token a step
cache = smollm.Cache(m, torch.zeros(1, dtype=torch.long), seq.shape[1])
lgc, _ = smollm.forward_cached(m, seq[:, :npr], cache)
fast = [lgc[0]]
for i in range(npr, seq.shape[1]):
    lgc, _ = smollm.forward_cached(m, seq[:, i:i + 1], cache)
    fast.append(lgc[0])
fast = torch.stack(fast).numpy()
dc = np.abs(fast - lg).max()
agree_c = (fast.argmax(-1) == lg.argmax(-1)).mean()
print(f"check_forward: cached path, max |logit diff| {dc:.2e}, argmax agreement {agree_c:.3f}")
sys.exit(0 if max(d, dc) < 1e-2 and min(agree, agree_c) == 1.0 else 1)

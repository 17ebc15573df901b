#!/usr/bin/env python3
"""Checks the PyTorch SmolLM2 forward (smollm.py) against the C forward's logits:
check_forward.py WDIR DUMP, DUMP from `specwright eval MODEL --dump DUMP -n N` (header
n_prompt, n, V; prompt ids; greedy ids; n rows of V logits). Prints the max abs logit
difference and whether the argmax agrees; exits 1 beyond 1e-2 (fp32, two summation
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
sys.exit(0 if d < 1e-2 and agree == 1.0 else 1)

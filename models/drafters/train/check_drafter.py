#!/usr/bin/env python3
"""The trained drafter's forward in PyTorch (drafter.py) against the C forward
(check_c.c) on the same file: check_drafter.py WDIR DRAFTER CHECK_C MODEL.
A held-out prompt's ids go to both; each prints per block row the logits of ids 0..3
and the row maximum. Exits 1 beyond 1e-3 (fp32 both, different summation orders over
one layer and the target's 30)."""
import json
import struct
import subprocess
import sys

import numpy as np
import torch

import smollm
from drafter import BlockDrafter


def load(dr, path):
    raw = open(path, "rb").read()
    hl = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + hl])
    params = dr.tensors()
    dt = {"F16": np.float16, "F32": np.float32}
    with torch.no_grad():
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            arr = np.frombuffer(raw[8 + hl + a:8 + hl + b], dt[v["dtype"]]).astype(np.float32)
            params[k].copy_(torch.from_numpy(arr.reshape(v["shape"])))


def main():
    wdir, ddir, check_c, model = sys.argv[1:5]
    torch.set_num_threads(2)
    m = smollm.Target(wdir)
    cfg = json.load(open(f"{ddir}/config.json"))
    dr = BlockDrafter(cfg, m)
    load(dr, f"{ddir}/model.safetensors")
    ids = json.load(open(f"{wdir}/prompts_heldout.json"))["ids"][0][:80]
    with open(f"{wdir}/check_ids.txt", "w") as f:
        f.write(" ".join(map(str, ids)))
    out = subprocess.run([check_c, model, ddir, f"{wdir}/check_ids.txt"], capture_output=True, text=True, check=True)
    c = np.array([[float(x) for x in line.split()] for line in out.stdout.strip().splitlines()])
    n, B = len(ids), cfg["block"]
    causal = cfg["block_attention"] == "causal"
    if cfg["conditioning"] == "features":
        tok = torch.tensor(ids[:n - 1])[None]
        _, feat = smollm.forward(m, tok, torch.arange(n - 1)[None], [None] * m.L,
                                 torch.ones(1, n - 1, dtype=torch.bool), tuple(cfg["taps"]), False)
        with torch.no_grad():
            x = torch.cat((m.embd[ids[n - 1]][None], dr.mask_embd), 0)[None]
            mask = torch.ones(1, B, n - 1 + B, dtype=torch.bool)
            if causal:
                mask[0, :, n - 1:] = torch.ones(B, B, dtype=torch.bool).tril()
            h = dr(x, torch.arange(n - 1, n - 1 + B)[None], dr.fuse(feat), torch.arange(n - 1)[None], mask)
            lg = dr.logits(h)[0]
    else:
        W = min(cfg["window"], n - 1)
        with torch.no_grad():
            x = torch.cat((m.embd[torch.tensor(ids[n - 1 - W:n])], dr.mask_embd), 0)[None]
            mask = torch.ones(1, W + B, W + B, dtype=torch.bool)
            if causal:
                mask[0, W:, W:] = torch.ones(B, B, dtype=torch.bool).tril()
            h = dr(x, torch.arange(n - 1 - W, n - 1 + B)[None], None, None, mask)
            lg = dr.logits(h)[0, W:]
    py = torch.cat((lg[:, :4], lg.max(-1, keepdim=True).values), 1).numpy()
    d = np.abs(py - c).max()
    print(f"check_drafter: {ddir}: {B} rows, max |PyTorch - C| {d:.2e} (logit scale {np.abs(c).max():.1f})")
    return 0 if d < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())

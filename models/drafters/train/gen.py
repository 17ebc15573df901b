#!/usr/bin/env python3
"""Stage 2: the target's OWN greedy continuations of the prompts, with the hidden states
tapped from TAPS at every position (prompt and continuation), batched (many rows per
forward, left padding, KV cache).
gen.py WDIR SET N_NEW BATCH [LIMIT [SECONDS]] -> WDIR/data_SET.pt: list of dicts
  {tok: int32 (n,), n_prompt: int, feat: fp16 (n, len(TAPS)*dim)}
The last prompt token is the first anchor the drafter sees; a sequence stops after the
target's end-of-turn token."""
import json
import os
import sys
import time

import torch

import smollm

TAPS = (2, 15, 29)
EOT = 2  # <|im_end|>


def main():
    torch.set_num_threads(2)
    d, which, n_new, bs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    limit = int(sys.argv[5]) if len(sys.argv) > 5 else None
    budget = float(sys.argv[6]) if len(sys.argv) > 6 else 1e9  # seconds; saves after every batch
    m = smollm.Target(d)
    prompts = json.load(open(f"{d}/prompts_{which}.json"))["ids"][:limit]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # similar lengths per batch
    data = [None] * len(prompts)
    t0 = time.time()
    ntok = 0
    for b0 in range(0, len(order), bs):
        idx = order[b0:b0 + bs]
        P = [prompts[i] for i in idx]
        B, Lp = len(P), max(map(len, P))
        tok = torch.zeros(B, Lp, dtype=torch.long)
        keym = torch.zeros(B, Lp, dtype=torch.bool)
        for r, p in enumerate(P):
            tok[r, Lp - len(p):] = torch.tensor(p)
            keym[r, Lp - len(p):] = True
        pad = Lp - keym.sum(1)
        pos = (torch.arange(Lp)[None] - pad[:, None]).clamp(min=0)
        kv = [None] * m.L
        logits, feat = smollm.forward(m, tok, pos, kv, keym, TAPS, "last")
        feats = [feat]
        toks = [tok]
        nxt = logits[:, -1].argmax(-1)
        done = torch.zeros(B, dtype=torch.bool)
        lens = torch.full((B,), n_new)
        for s in range(n_new):
            toks.append(nxt[:, None])
            ended = (nxt == EOT) & ~done
            lens[ended] = s + 1
            done |= ended
            if bool(done.all()) or s + 1 == n_new:
                break
            keym = torch.cat((keym, torch.ones(B, 1, dtype=torch.bool)), 1)
            logits, feat = smollm.forward(m, nxt[:, None], (pos[:, -1:] + 1), kv, keym, TAPS)
            pos = torch.cat((pos, pos[:, -1:] + 1), 1)
            feats.append(feat)
            nxt = logits[:, -1].argmax(-1)
        tok = torch.cat(toks, 1)
        feat = torch.cat(feats, 1).half()
        for r, i in enumerate(idx):
            a = int(pad[r])
            n = len(P[r]) + int(lens[r])
            data[i] = {"tok": tok[r, a:a + n].int().clone(), "n_prompt": len(P[r]),
                       "feat": feat[r, a:a + n - 1].clone()}  # the last token has no features yet
            ntok += n
        el = time.time() - t0
        print(f"gen {which}: {b0 + B}/{len(order)} prompts, {ntok} tokens, {el:.0f}s, {ntok / el:.1f} tok/s",
              flush=True)
        torch.save({"taps": TAPS, "data": [x for x in data if x is not None]}, f"{d}/data_{which}.pt.tmp")
        os.replace(f"{d}/data_{which}.pt.tmp", f"{d}/data_{which}.pt")
        if el > budget:
            print(f"gen {which}: time budget of {budget:.0f}s reached", flush=True)
            break


if __name__ == "__main__":
    main()

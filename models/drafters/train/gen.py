#!/usr/bin/env python3
"""Stage 2: the target's OWN greedy continuations of the prompts, with the hidden states
tapped from TAPS at every position (prompt and continuation), batched: BATCH rows per
forward over a preallocated KV cache (smollm.Cache), rows of similar prompt length side
by side (left padding), finished rows dropped from the batch as they end.
gen.py WDIR SET N_NEW BATCH [LIMIT [SECONDS]] -> WDIR/data_SET/NNNN.pt, one shard per
batch, each a dict {taps, data: list of {tok: int32 (n,), n_prompt: int,
feat: fp16 (n-1, len(TAPS)*dim), soft_id: int32 (n-n_prompt, SOFT_K), soft_lp: fp16
(n-n_prompt, SOFT_K)}}: soft_* row i is the target's distribution for token n_prompt+i
(the one its greedy decode chose), as its SOFT_K most likely ids among the first SOFT_VD
(the widest draft vocabulary trained) with their log-probabilities over the FULL vocabulary
(so the mass outside them is 1 - sum exp), for soft distillation. The last prompt token is the first anchor the drafter
sees; a sequence stops after the target's end-of-turn token. Shards already on disk are
kept (a rerun continues where the last one stopped)."""
import glob
import json
import os
import sys
import time

import torch

import smollm

TAPS = (2, 15, 29)
EOT = 2  # <|im_end|>
SOFT_K = int(os.environ.get("SOFT_K", 32))
SOFT_VD = int(os.environ.get("SOFT_VD", 8192))


def load(d, which, seen=None):
    """All shards of a set, in order (those not in seen, which gets them added)."""
    out = []
    for f in sorted(glob.glob(f"{d}/data_{which}/*.pt")):
        if seen is None or f not in seen:
            out += torch.load(f)["data"]
            if seen is not None:
                seen.add(f)
    return out


def gen_batch(m, P, n_new, t0):
    B, Lp = len(P), max(map(len, P))
    tok = torch.zeros(B, Lp, dtype=torch.long)
    for r, p in enumerate(P):
        tok[r, Lp - len(p):] = torch.tensor(p)
    pad = torch.tensor([Lp - len(p) for p in P])
    cache = smollm.Cache(m, pad, Lp + n_new)
    logits, feat = smollm.forward_cached(m, tok, cache, TAPS)
    print(f"gen:   prefill of {B} rows x {Lp} done, {time.time() - t0:.0f}s", flush=True)
    feats = [[feat[r, int(pad[r]):].half()] for r in range(B)]
    toks = [[tok[r, int(pad[r]):]] for r in range(B)]
    live = torch.arange(B)  # original row of each cache row
    nxt = logits.argmax(-1)
    sid = [[] for _ in range(B)]
    slp = [[] for _ in range(B)]
    for s in range(n_new):
        lp = logits[:, :SOFT_VD] - torch.logsumexp(logits, -1, keepdim=True)
        top = lp.topk(SOFT_K, -1)
        for i, r in enumerate(live.tolist()):
            toks[r].append(nxt[i:i + 1])
            sid[r].append(top.indices[i:i + 1].int())
            slp[r].append(top.values[i:i + 1].half())
        keep = nxt != EOT
        if s + 1 == n_new or not bool(keep.any()):
            break
        if not bool(keep.all()):
            rows = keep.nonzero()[:, 0]
            cache.keep(rows)
            live, nxt = live[rows], nxt[rows]
        logits, feat = smollm.forward_cached(m, nxt[:, None], cache, TAPS)
        for i, r in enumerate(live.tolist()):
            feats[r].append(feat[i].half())
        nxt = logits.argmax(-1)
        if s % 32 == 31:
            print(f"gen:   step {s + 1}/{n_new}, {len(live)} rows live, {time.time() - t0:.0f}s", flush=True)
    out = []
    for r in range(B):
        t = torch.cat(toks[r]).int()
        f = torch.cat(feats[r])[:t.shape[0] - 1]  # the last token has no features yet
        out.append({"tok": t, "n_prompt": len(P[r]), "feat": f.clone(),
                    "soft_id": torch.cat(sid[r]), "soft_lp": torch.cat(slp[r])})
    return out


def main():
    torch.set_num_threads(int(os.environ.get("THREADS", 2)))
    d, which, n_new, bs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    limit = int(sys.argv[5]) if len(sys.argv) > 5 else None
    budget = float(sys.argv[6]) if len(sys.argv) > 6 else 1e9  # seconds
    m = smollm.Target(d)
    if os.environ.get("GEN_BF16", "1") == "1":
        m.use_bf16()
    part, parts = (int(x) for x in os.environ.get("GEN_PART", "0/1").split("/"))
    prompts = json.load(open(f"{d}/prompts_{which}.json"))["ids"][:limit]
    # batches of similar prompt lengths, taken in a fixed shuffled order so a short
    # budget still covers the whole corpus evenly
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    batches = [order[b:b + bs] for b in range(0, len(order), bs)]
    g = torch.Generator().manual_seed(1)
    batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
    os.makedirs(f"{d}/data_{which}", exist_ok=True)
    t0 = time.time()
    ntok = ncont = nseq = 0
    for bi, idx in enumerate(batches):
        path = f"{d}/data_{which}/{bi:04d}.pt"
        if bi % parts != part or os.path.exists(path):
            continue
        data = gen_batch(m, [prompts[i] for i in idx], n_new, t0)
        torch.save({"taps": TAPS, "data": data}, path + ".tmp")
        os.replace(path + ".tmp", path)
        nseq += len(data)
        ntok += sum(x["tok"].shape[0] for x in data)
        ncont += sum(x["tok"].shape[0] - x["n_prompt"] for x in data)
        el = time.time() - t0
        print(f"gen {which}: batch {bi + 1}/{len(batches)}, {nseq} sequences, {ntok} tokens "
              f"({ncont} generated), {el:.0f}s, {ntok / el:.0f} tok/s ({ncont / el:.0f} generated/s)",
              flush=True)
        if el > budget:
            print(f"gen {which}: time budget of {budget:.0f}s reached", flush=True)
            break


if __name__ == "__main__":
    main()

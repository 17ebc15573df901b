#!/usr/bin/env python3
"""Stage 3: trains a block drafter by distillation from the target's own greedy
continuations (gen.py), on the CPU, time-boxed.
train.py WDIR OUTDIR CONDITIONING SECONDS [BLOCK VD]
Loss: cross-entropy of the drafter's q_j (draft head over the first VD ids) against the
target's greedy token at block position j (= the target's T=0 distribution), masked where
the token is outside the draft vocabulary or past the sequence, weighted exp(-j/(B/2))
toward the anchor (DFlash's decay). UNMASK_FRAC of the blocks are partially denoised
(each row j >= 1 holds the target's token with a random rate r), so steps > 1 (MDLM's
sampler, ALGORITHMS.txt 8) sees inputs it was trained on. Each step takes a few sequences and up to ANCHORS anchors per sequence; the
blocks of one sequence share one pass over its context (a mask keeps each block to the
context before its anchor and to itself). 5% of the sequences are held back to report
per-position top-1 accuracy and the greedy accepted length it implies."""
import glob
import json
import math
import os
import random
import sys
import time

import torch

import smollm
from drafter import BlockDrafter
from gen import TAPS, load

SEQS, ANCHORS, WINDOW = int(os.environ.get("SEQS", 6)), int(os.environ.get("ANCHORS", 24)), 32
PROMPT_FRAC = 0.25
UNMASK_FRAC = float(os.environ.get("UNMASK_FRAC", 0.3))  # blocks trained partially unmasked
EVAL_EVERY = 200
LAYERS = int(os.environ.get("LAYERS", 1))  # drafter layers (1..4, warm-started from the target's last ones)
SOFT_K = int(os.environ.get("SOFT_K", 32))  # soft labels used per position (gen.py stores 32)
SOFT_W = float(os.environ.get("SOFT_W", 0.7))  # loss = SOFT_W soft CE + (1 - SOFT_W) hard CE
BF16 = os.environ.get("TRAIN_BF16", "1") == "1"  # autocast the products to bfloat16 (AMX)
SOFT = []  # batch_features' soft labels of its last batch: (ids (N, R, K), probs (N, R, K))


def batch_features(dr, seqs, B, Vd, anchors_per_seq, rng):
    """Inputs for a features-conditioned step: per sequence, blocks at random anchors."""
    X, P, CTX, CP, M, Y, SI, SP = [], [], [], [], [], [], [], []
    C = max(s["feat"].shape[0] for s in seqs)
    for s in seqs:
        tok, n, n0 = s["tok"].long(), s["tok"].shape[0], s["n_prompt"]
        # anchors: the target's continuation, plus (PROMPT_FRAC of them) the
        # passage inside the prompt, which costs no extra generation
        cand = list(range(n0 - 1, n - 1))
        an = rng.sample(cand, min(anchors_per_seq, len(cand)))
        k = int(len(an) * PROMPT_FRAC)
        if k and n0 > 40:
            an = an[:len(an) - k] + rng.sample(range(30, n0 - 1), min(k, n0 - 31))
        an = sorted(an)
        A = len(an)
        feat = torch.zeros(C, s["feat"].shape[1])
        feat[:n - 1] = s["feat"].float()
        xs = []
        for t in an:
            xb = torch.cat((dr.t.embd[tok[t]][None], dr.mask_embd), 0)
            if rng.random() < UNMASK_FRAC:
                # a partially denoised block (steps > 1, ALGORITHMS.txt 8): row j >= 1
                # holds the target's token for position t+j with probability r
                r = rng.random()
                for j in range(1, B):
                    if t + j < n and rng.random() < r:
                        xb[j] = dr.t.embd[tok[t + j]]
            xs.append(xb)
        x = torch.cat(xs, 0)
        pos = torch.tensor([t + j for t in an for j in range(B)])
        y = torch.full((A * B,), -100, dtype=torch.long)
        si = torch.zeros(A * B, SOFT_K, dtype=torch.long)  # soft label ids (0 where none)
        sp = torch.zeros(A * B, SOFT_K)  # their probabilities, renormalised over the ids < Vd
        m = torch.zeros(A * B, C + A * B, dtype=torch.bool)
        soft = "soft_id" in s
        for a, t in enumerate(an):
            for j in range(B):
                if t + 1 + j < n and int(tok[t + 1 + j]) < Vd:
                    y[a * B + j] = tok[t + 1 + j]
                    i = t + 1 + j - n0
                    if soft and i >= 0:
                        ids, lp = s["soft_id"][i, :SOFT_K].long(), s["soft_lp"][i, :SOFT_K].float()
                        p = lp.exp() * (ids < Vd)
                        si[a * B + j], sp[a * B + j] = ids.clamp(max=Vd - 1), p / p.sum()
            m[a * B:(a + 1) * B, :t] = True
            blk = torch.ones(B, B, dtype=torch.bool)
            if dr.cfg["block_attention"] == "causal":
                blk = blk.tril()
            m[a * B:(a + 1) * B, C + a * B:C + (a + 1) * B] = blk
        X.append(x), P.append(pos), CTX.append(feat), CP.append(torch.arange(C)), M.append(m), Y.append(y)
        SI.append(si), SP.append(sp)
    R = max(x.shape[0] for x in X)
    pad = lambda t, n, v: torch.cat((t, t.new_full((n - t.shape[0],) + t.shape[1:], v)), 0)
    X = torch.stack([pad(x, R, 0.0) for x in X])
    P = torch.stack([pad(p, R, 0) for p in P])
    Y = torch.stack([pad(y, R, -100) for y in Y])
    SOFT.clear()
    SOFT.append((torch.stack([pad(x, R, 0) for x in SI]), torch.stack([pad(x, R, 0.0) for x in SP])))
    Mm = []
    for m in M:
        r = m.shape[0]
        full = torch.zeros(R, C + R, dtype=torch.bool)
        full[:r, :C + r] = m
        full[r:, 0] = True  # padding rows see something (their loss is masked)
        Mm.append(full)
    return X, P, dr.fuse(torch.stack(CTX)), torch.stack(CP), torch.stack(Mm), Y


def batch_tokens(dr, seqs, B, Vd, anchors_per_seq, rng):
    """tokens conditioning: each anchor is its own row set [window W, block B]."""
    X, P, M, Y = [], [], [], []
    W = dr.cfg["window"]
    for s in seqs:
        tok, n, n0 = s["tok"].long(), s["tok"].shape[0], s["n_prompt"]
        cand = list(range(max(n0 - 1, 1), n - 1))
        for t in rng.sample(cand, min(anchors_per_seq, len(cand))):
            w0 = max(0, t - W)
            win = tok[w0:t]
            pw = torch.arange(w0, t)
            x = torch.cat((dr.t.embd[win], dr.t.embd[tok[t]][None], dr.mask_embd), 0)
            R = W + B
            xx = torch.zeros(R, x.shape[1])
            xx[R - x.shape[0]:] = x
            pp = torch.zeros(R, dtype=torch.long)
            pp[R - x.shape[0]:] = torch.cat((pw, torch.arange(t, t + B)))
            m = torch.zeros(R, R, dtype=torch.bool)
            m[:, R - x.shape[0]:] = True
            if dr.cfg["block_attention"] == "causal":
                m[W:, W:] = torch.ones(B, B, dtype=torch.bool).tril()
            m[:R - x.shape[0], 0] = True
            y = torch.full((R,), -100, dtype=torch.long)
            for j in range(B):
                if t + 1 + j < n and int(tok[t + 1 + j]) < Vd:
                    y[W + j] = tok[t + 1 + j]
            X.append(xx), P.append(pp), M.append(m), Y.append(y)
    return torch.stack(X), torch.stack(P), None, None, torch.stack(M), torch.stack(Y)


def main():
    torch.set_num_threads(int(os.environ.get("THREADS", 2)))
    d, out, cond, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    B = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    Vd = int(sys.argv[6]) if len(sys.argv) > 6 else 8192
    torch.manual_seed(1)
    rng = random.Random(1)
    tgt = smollm.Target(d)
    seen = set()  # shards loaded so far
    data = load(d, "train", seen)
    rng.shuffle(data)
    nval = max(2, len(data) // 20)
    val, train = data[:nval], data[nval:]
    key = lambda s: tuple(s["tok"][:s["n_prompt"]].tolist())
    val_keys = {key(s) for s in val}
    shards = lambda: len(glob.glob(f"{d}/data_train/*.pt"))
    n_shards = shards()
    ntok = sum(s["tok"].shape[0] - s["n_prompt"] for s in train)
    print(f"train {cond}: {len(train)} sequences ({ntok} continuation tokens), {nval} held back",
          flush=True)
    cfg = {
        "format": "specwright-block-drafter", "version": 1,
        "conditioning": cond, "block": B, "draft_vocab": Vd,
        "target": {"dim": tgt.dim, "vocab": tgt.V, "n_layers": tgt.L},
        "taps": list(TAPS) if cond == "features" else [],
        "window": WINDOW if cond == "tokens" else 0,
        "block_attention": "bidirectional",
        "n_layers": LAYERS, "n_heads": tgt.nh, "n_kv_heads": tgt.nkv, "head_dim": tgt.hd,
        "ffn_dim": 1536, "norm_eps": tgt.eps, "rope_theta": tgt.theta, "dtype": "F16",
    }
    dr = BlockDrafter(cfg, tgt)
    params = [p for p in dr.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.98))
    wpos = torch.tensor([math.exp(-j / (B / 2)) for j in range(B)])
    mk = batch_features if cond == "features" else batch_tokens
    t0, step = time.time(), 0
    while True:
        el = time.time() - t0
        if el > seconds:
            break
        frac = el / seconds
        lr = 1e-3 * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        SOFT.clear()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=BF16):
            X, P, CTX, CP, M, Y = mk(dr, rng.sample(train, min(SEQS, len(train))), B, Vd, ANCHORS, rng)
            h = dr(X, P, CTX, CP, M)
            rows = Y >= 0
            lg = dr.logits(h[rows])
        lg = lg.float()
        ce = torch.nn.functional.cross_entropy(lg, Y[rows], reduction="none")
        if SOFT:
            # soft distillation: cross-entropy against the target's distribution (its top
            # SOFT_K ids inside the draft vocabulary, renormalised); rows without one
            # (labels inside the prompt) keep the hard label
            si, sp = SOFT[0][0][rows], SOFT[0][1][rows]
            sce = -(sp * lg.log_softmax(-1).gather(1, si)).sum(-1)
            has = sp.sum(-1) > 0
            ce = torch.where(has, SOFT_W * sce + (1 - SOFT_W) * ce, ce)
        jpos = (P - P.new_tensor(0))  # position within the block, below
        jb = torch.arange(X.shape[1]) % B if cond == "features" else (torch.arange(X.shape[1]) - WINDOW).clamp(0)
        w = wpos[jb.expand_as(Y)[rows]]
        loss = (ce * w).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % 50 == 0:
            print(f"train {cond}: step {step} {el:.0f}s lr {lr:.2e} loss {loss.item():.3f}", flush=True)
        if step % 100 == 0 and shards() != n_shards:
            # gen.py is still adding batches: train on them too (val stays fixed)
            n_shards = shards()
            train += [x for x in load(d, "train", seen) if key(x) not in val_keys]
            print(f"train {cond}: reloaded, {len(train)} sequences", flush=True)
        if step % EVAL_EVERY == 0:
            evaluate(dr, val, B, Vd, mk, cond)
            dr.save(out)
    evaluate(dr, val, B, Vd, mk, cond)
    dr.save(out)
    print(f"train {cond}: {step} steps in {time.time() - t0:.0f}s, saved to {out}", flush=True)


@torch.no_grad()
def evaluate(dr, val, B, Vd, mk, cond):
    rng = random.Random(7)
    global PROMPT_FRAC, UNMASK_FRAC
    pf, uf, PROMPT_FRAC, UNMASK_FRAC = PROMPT_FRAC, UNMASK_FRAC, 0.0, 0.0  # continuations, fully masked
    X, P, CTX, CP, M, Y = mk(dr, val[:48], B, Vd, 64, rng)
    PROMPT_FRAC, UNMASK_FRAC = pf, uf
    h = dr(X, P, CTX, CP, M)
    pred = dr.logits(h).argmax(-1)
    ok = (pred == Y)
    if cond == "features":
        ok = ok.view(ok.shape[0], -1, B)
        valid = (Y >= 0).view(ok.shape)
    else:
        ok, valid = ok[:, -B:][:, None], (Y >= 0)[:, -B:][:, None]
    acc = [(ok[..., j] & valid[..., j]).sum().item() / max(1, valid[..., j].sum().item()) for j in range(B)]
    # greedy accepted length: leading run of correct drafts (an out-of-vocab label stops it)
    run = ok.int().cumprod(-1).sum(-1).float()
    blk = valid[..., 0]
    tau = 1 + run[blk].mean().item()
    print("eval: top-1 by position " + " ".join(f"{a:.2f}" for a in acc) + f"; greedy tau ~ {tau:.2f}",
          flush=True)


if __name__ == "__main__":
    main()

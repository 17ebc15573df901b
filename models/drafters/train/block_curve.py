#!/usr/bin/env python3
"""The block drafter's learning curve on the EAGLE-3 head's data (issue 23): train.py's
features drafter trained on tf_data.py's shards, held-out greedy tau at token milestones.
Not a replacement for train.py (gen.py's data) or e3train.py; it reuses both.

block_curve.py WDIR OUT [--seconds 2400] [--tokens 1.46e5] [--milestones 1e4,3e4,6e4,1e5]
  [--vd 4096] [--map-shards 23] [--gamma 4] [--seed 1] [--e3 E3_HEAD_DIR]
WDIR: the EAGLE-3 run's directory (prep.py's weights, tf/*.pt, heldout_seq.pt). Writes
OUT/ck-NNNNNNNN/ at every milestone of trained tokens and OUT/final/ (config.json with
"d2t": true, model.safetensors F16 + d2t I64: runtime/model/block_drafter.c loads them),
each with curve.json; OUT/curve.json holds the whole curve.

What the data forces (the rest is train.py's defaults: B = 8, one layer warm-started from
the target's last, bidirectional block, SEQS 6 x ANCHORS 24 blocks a step, 25% of the
anchors inside the prompt, 30% of the blocks partially unmasked, AdamW lr 1e-3 with 20
warm-up steps and a cosine to 1e-4, loss SOFT_W 0.7 soft + 0.3 hard CE weighted
exp(-j/(B/2)), bf16 autocast):
  - taps (1, 14, 26), the layers the shards hold, not gen.py's (2, 15, 29);
  - labels: the shards' inputs are documents and sampled chat replies, not the target's
    greedy output, so block row j at anchor t is trained toward the target's distribution
    at position t + j given the true prefix (top_id / top_p, the same soft labels
    e3train.py uses) and its argmax as the hard label, not toward the token in the text;
  - the draft vocabulary is e3train.draft_map's Vd = 4096 most frequent target argmaxes
    over the first MAP_SHARDS shards (the head's own map; --e3 checks they are equal),
    the LM head's rows gathered through it (block_drafter.h: "d2t": true);
  - the prompt/reply split is the last assistant header of each row (the text windows'
    reply is the document slice); shards 0 and 3 are held back, as e3train.py does.
The cosine runs over whichever budget (--tokens, --seconds) is spent first. "Trained
tokens" counts anchors: each a block of B labelled rows, as e3train.py counts the rows
that each get its unrolled steps. Held-out tau is e3train.chain_tau's exact simulation
(what eval_tau.py measures the head with) over the block drafter's first GAMMA rows."""
import argparse
import glob
import json
import math
import os
import random
import time

import numpy as np
import torch

import e3train
import eval_tau
import smollm
import train
from drafter import BlockDrafter

ASSISTANT = (1, 520, 9531, 198)  # "<|im_start|>assistant\n" in SmolLM2's vocabulary
TAPS = (1, 14, 26)  # tf_data.TAPS (not imported: tf_data pulls in nothing we need)
HELD = (0, 3)  # a text and a chat shard, as e3train.py


def reply_start(tok):
    """Index of the first token after the last assistant header (0 if none)."""
    t = tok.tolist()
    for i in range(len(t) - len(ASSISTANT), -1, -1):
        if tuple(t[i:i + len(ASSISTANT)]) == ASSISTANT:
            return i + len(ASSISTANT)
    return 0


def shard_seqs(paths):
    """One dict per row, in train.batch_features' layout (tok, n_prompt, feat: n-1 rows)
    plus the target's top-K next-token distribution at every position."""
    out = []
    for f in paths:
        s = torch.load(f)
        for r in range(s["tok"].shape[0]):
            n = int(s["len"][r])
            tok = s["tok"][r, :n].long()
            out.append({"tok": tok, "n_prompt": reply_start(tok), "feat": s["feat"][r, :n - 1],
                        "top_id": s["top_id"][r, :n].long(), "top_p": s["top_p"][r, :n].float()})
    return out


def relabel(seqs, P, Y, t2d_idx):
    """train.batch_features labels row (t, j) with the text's token t+1+j (Y, target ids;
    -100 past the sequence). Replace it with the target's distribution at position
    P = t + j: hard label its argmax as a draft id (-100 off the map, train.py's rule for
    labels outside the draft vocabulary), soft labels its top-K renormalised over the map."""
    K = seqs[0]["top_id"].shape[1]
    N, R = Y.shape
    hard = torch.full((N, R), -100, dtype=torch.long)
    si = torch.zeros(N, R, K, dtype=torch.long)
    sp = torch.zeros(N, R, K)
    for i, s in enumerate(seqs):
        v = Y[i] >= 0
        p = P[i][v]
        d = t2d_idx[s["top_id"][p]]
        pr = s["top_p"][p] * (d >= 0)
        hard[i][v] = torch.where(d[:, 0] >= 0, d[:, 0], torch.full_like(d[:, 0], -100))
        si[i][v] = d.clamp(min=0)
        sp[i][v] = pr / pr.sum(-1, keepdim=True).clamp(min=1e-12)
    return hard, si, sp


@torch.no_grad()
def block_logits(dr, feat, tok, anchors, chunk=32):
    """Draft-vocabulary logits (len(anchors), B, Vd) of one fully masked pass per anchor t
    (row 0 the token at t, context the features at 0..t-1), as block_decode.c drafts with
    the target holding [0, t). Written apart from train.batch_features on purpose:
    check_batches() compares the two."""
    B = dr.cfg["block"]
    ctx = dr.fuse(feat[None].float())
    C = ctx.shape[1]
    out = []
    for c0 in range(0, len(anchors), chunk):
        an = anchors[c0:c0 + chunk]
        A = len(an)
        x = torch.cat([torch.cat((dr.t.embd[tok[t]][None], dr.mask_embd), 0) for t in an], 0)
        pos = torch.tensor([t + j for t in an for j in range(B)])
        m = torch.zeros(A * B, C + A * B, dtype=torch.bool)
        blk = torch.ones(B, B, dtype=torch.bool)
        if dr.cfg["block_attention"] == "causal":
            blk = blk.tril()
        for a, t in enumerate(an):
            m[a * B:(a + 1) * B, :t] = True
            m[a * B:(a + 1) * B, C + a * B:C + (a + 1) * B] = blk
        h = dr(x[None], pos[None], ctx, torch.arange(C)[None], m[None])
        out.append(dr.logits(h[0]).view(A, B, -1))
    return torch.cat(out, 0)


class AsChain:
    """e3train.chain_tau's view of a block drafter: unroll(feat, tok, steps)[k][0, a] is
    block row k's logits at anchor a + 1 (row 0 the token at a + 1, context 0..a), the
    draft for position a + 2 + k, as the head's step k at row a is."""
    training = False

    def __init__(self, dr):
        self.dr = dr

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def unroll(self, feat, tok, steps):
        L = tok.shape[1]
        lg = block_logits(self.dr, feat[0, :L - 1], tok[0], list(range(1, L)))
        return [lg[:, k][None] for k in range(steps + 1)]


@torch.no_grad()
def heldback_top1(dr, seqs, used, stride=2):
    """Top-1 by block position over held-back rows, anchors every `stride`-th position of
    the reply (fully masked): the drafter's argmax (through the map) against the target's
    argmax at t + j, a label off the map counting as a miss (as e3train.py's proxy)."""
    B = dr.cfg["block"]
    hit, tot = [0] * B, [0] * B
    for s in seqs:
        n = s["tok"].shape[0]
        an = list(range(max(s["n_prompt"] - 1, 0), n - 1, stride))
        if not an:
            continue
        pred = used[block_logits(dr, s["feat"], s["tok"], an).argmax(-1)]  # (A, B)
        for j in range(B):
            p = torch.tensor(an) + j
            v = p < n
            lab = s["top_id"][p.clamp(max=n - 1), 0]
            hit[j] += int(((pred[:, j] == lab) & v).sum())
            tot[j] += int(v.sum())
    return [h / max(t, 1) for h, t in zip(hit, tot)]


def heldout(dr, used, seqs, gamma):
    m = AsChain(dr)
    t, acc, it = e3train.chain_tau(m, used, seqs, gamma)
    per = [e3train.chain_tau(m, used, [s], gamma)[0] for s in seqs]
    return {"tau": t, "acceptance": acc, "iterations": it, "per_prompt": per}


def check_batches(dr, seqs, B, rng):
    """train.batch_features (the trainer's rows) and block_logits (the measure's) on the
    same anchors, fully masked, must give the same logits: returns the max difference."""
    pf, uf = train.PROMPT_FRAC, train.UNMASK_FRAC
    train.PROMPT_FRAC, train.UNMASK_FRAC = 0.0, 0.0
    s = next(x for x in seqs if x["tok"].shape[0] < 256)  # a short row: all its anchors in one pass
    X, P, CTX, CP, M, Y = train.batch_features(dr, [s], B, dr.t.V, 10 ** 6, rng)  # every anchor
    train.PROMPT_FRAC, train.UNMASK_FRAC = pf, uf
    with torch.no_grad():
        a = dr.logits(dr(X, P, CTX, CP, M))[0].view(-1, B, dr.head.shape[0])
    an = P[0].view(-1, B)[:, 0].tolist()
    b = block_logits(dr, s["feat"], s["tok"], an)
    return float((a - b).abs().max()), len(an)


def save_ck(dr, used, d, record):
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/config.json", "w") as f:
        json.dump(dict(dr.cfg, d2t=True), f, indent=1)
        f.write("\n")
    Vd = used.shape[0]
    W = [(k, v.detach().half()) for k, v in sorted(dr.tensors().items())]
    e3train.write_safetensors(f"{d}/model.safetensors", W + [("d2t", (used - torch.arange(Vd)).long())])
    json.dump(record, open(f"{d}/curve.json", "w"), indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wdir")
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=2400, help="training time (evaluations excluded)")
    ap.add_argument("--tokens", type=float, default=1.46e5, help="anchors to train (the head's final: 1.46e5)")
    ap.add_argument("--milestones", default="1e4,3e4,6e4,1e5")
    ap.add_argument("--vd", type=int, default=4096)
    ap.add_argument("--map-shards", type=int, default=23, help="shards the head's map was counted over")
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1, help="torch and sampling seed (train.py's: 1)")
    ap.add_argument("--e3", help="the EAGLE-3 head (dir): check its map and its held-out tau here")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("THREADS", 1)))
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    B = a.block
    os.makedirs(a.out, exist_ok=True)
    tgt = smollm.Target(a.wdir)
    V = tgt.V
    fs = sorted(glob.glob(f"{a.wdir}/tf/*.pt"))
    # the map, as e3train.main counts it (every shard present then, held-back ones included)
    cnt = torch.zeros(V, dtype=torch.long)
    for f in fs[:a.map_shards]:
        s = torch.load(f)
        for r in range(s["tok"].shape[0]):
            cnt += torch.bincount(s["top_id"][r, :int(s["len"][r]), 0].long(), minlength=V)
    used, t2d_idx, cov, cov_pre = e3train.draft_map(cnt, a.vd)
    print(f"block_curve: map from {a.map_shards} shards, {int(cnt.sum())} argmaxes: covers {cov:.4f} "
          f"(prefix {cov_pre:.4f})", flush=True)
    hc = torch.load(f"{a.wdir}/heldout_seq.pt")  # eval_tau.sequences' cache, read as it is
    assert hc["n_new"] == 64, hc["n_new"]
    hseqs = hc["seqs"]
    bad = [i for i, s in enumerate(hseqs) if reply_start(s["tok"]) != s["n_prompt"]]
    print(f"block_curve: {len(hseqs)} held-out prompts; reply_start == n_prompt on all but {bad}", flush=True)
    if a.e3:
        embd = torch.from_numpy(np.load(f"{a.wdir}/w/token_embd.weight.npy"))
        tc = json.load(open(f"{a.wdir}/target_config.json"))
        head, hused = eval_tau.load_head(a.e3, tc, embd)
        same = hused.shape == used.shape and bool((hused == used).all())
        t, acc, _ = e3train.chain_tau(head, hused, hseqs, a.gamma)
        print(f"block_curve: EAGLE-3 head {a.e3}: map equal to ours: {same}; held-out tau {t:.3f}, "
              "acceptance " + " ".join(f"{x:.3f}" for x in acc), flush=True)
        del head
    seqs = shard_seqs([f for i, f in enumerate(fs) if i not in HELD])
    held = shard_seqs([fs[i] for i in HELD])
    print(f"block_curve: {len(seqs)} training rows ({sum(s['tok'].shape[0] for s in seqs)} tokens, "
          f"{sum(s['tok'].shape[0] - s['n_prompt'] for s in seqs)} after the prompt), {len(held)} held back",
          flush=True)
    cfg = {
        "format": "specwright-block-drafter", "version": 1,
        "conditioning": "features", "block": B, "draft_vocab": a.vd,
        "target": {"dim": tgt.dim, "vocab": V, "n_layers": tgt.L},
        "taps": list(TAPS), "window": 0, "block_attention": "bidirectional",
        "n_layers": train.LAYERS, "n_heads": tgt.nh, "n_kv_heads": tgt.nkv, "head_dim": tgt.hd,
        "ffn_dim": 1536, "norm_eps": tgt.eps, "rope_theta": tgt.theta, "dtype": "F16",
    }
    dr = BlockDrafter(cfg, tgt)
    dr.head = tgt.head[used]  # frozen: the target's LM-head rows of the map
    d, n = check_batches(dr, held, B, random.Random(3))
    print(f"block_curve: train.batch_features vs block_logits on {n} anchors: max |diff| {d:.2e}", flush=True)
    params = [p for p in dr.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.98))
    wpos = torch.tensor([math.exp(-j / (B / 2)) for j in range(B)])
    miles = sorted(float(x) for x in a.milestones.split(","))
    curve = []
    anchored = set()  # distinct (row, position) anchors trained
    step, tokens, mi, el, ema = 0, 0, 0, 0.0, None

    def measure(tag):
        t0 = time.time()
        hb = heldback_top1(dr, held, used)
        ho = heldout(dr, used, hseqs, a.gamma)
        rec = {"tag": tag, "tokens": tokens, "distinct": len(anchored), "steps": step, "train_seconds": round(el),
               "heldback_top1_by_position": hb, **{"heldout_" + k: v for k, v in ho.items()}}
        curve.append(rec)
        save_ck(dr, used, f"{a.out}/{tag}", rec)
        json.dump({"curve": curve, "args": vars(a)}, open(f"{a.out}/curve.json", "w"), indent=1)
        print(f"block_curve: {tag}: {tokens} anchors ({len(anchored)} distinct), {step} steps, {el:.0f}s; "
              "held-back top-1 by position " + " ".join(f"{x:.3f}" for x in hb) + f"; held-out tau "
              f"{ho['tau']:.3f} over {ho['iterations']} iterations, acceptance "
              + " ".join(f"{x:.3f}" for x in ho["acceptance"]) + "; per prompt "
              + " ".join(f"{x:.2f}" for x in ho["per_prompt"]) + f" ({time.time() - t0:.0f}s to measure)",
              flush=True)

    t_last = time.time()
    while True:
        frac = max(el / a.seconds, tokens / a.tokens)
        if frac >= 1:
            break
        lr = 1e-3 * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = rng.sample(seqs, min(train.SEQS, len(seqs)))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=train.BF16):
            X, P, CTX, CP, M, Y = train.batch_features(dr, batch, B, V, train.ANCHORS, rng)
            h = dr(X, P, CTX, CP, M)
        for i, s in enumerate(batch):  # anchors: row 0 of each block
            for t in P[i][::B][Y[i][::B] >= 0].tolist():
                anchored.add((id(s), t))
        nblk = int((Y[:, ::B] >= 0).sum())
        Y, si, sp = relabel(batch, P, Y, t2d_idx)
        rows = Y >= 0
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=train.BF16):
            lg = dr.logits(h[rows])
        lg = lg.float()
        ce = torch.nn.functional.cross_entropy(lg, Y[rows], reduction="none")
        sce = -(sp[rows] * lg.log_softmax(-1).gather(1, si[rows])).sum(-1)
        ce = train.SOFT_W * sce + (1 - train.SOFT_W) * ce
        w = wpos[(torch.arange(Y.shape[1]) % B).expand_as(Y)[rows]]
        loss = (ce * w).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        tokens += nblk
        now = time.time()
        el += now - t_last
        t_last = now
        hit = (lg.argmax(-1) == Y[rows]).float()[(torch.arange(Y.shape[1]) % B).expand_as(Y)[rows] == 0]
        ema = float(hit.mean()) if ema is None else 0.95 * ema + 0.05 * float(hit.mean())
        if step % 25 == 0:
            print(f"block_curve: step {step}, {tokens} anchors, loss {loss.item():.3f}, train top-1@1 ~{ema:.3f}, "
                  f"lr {lr:.2e}, {el:.0f}s, {tokens / max(el, 1):.0f} anchors/s", flush=True)
        while mi < len(miles) and tokens >= miles[mi]:
            measure(f"ck-{int(miles[mi]):08d}")
            mi += 1
            t_last = time.time()
    measure("final")


if __name__ == "__main__":
    main()

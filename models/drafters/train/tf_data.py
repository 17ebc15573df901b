#!/usr/bin/env python3
"""EAGLE-3 data, stage 2 (Debian python3-torch): teacher-forced distillation data.

tf_data.py WDIR [SECONDS]  (WDIR: prep.py's weights + corpus.py's windows and chat prompts)
Runs the target (smollm.py, weight products in bf16 as gen.py does) over
  - text windows (windows.npy, WIN tokens each, in corpus.py's shuffled order), BATCH at a
    time, batched like a prefill (one causal forward over the whole window);
  - the target's OWN continuations of chat prompts (chat_prompts.json): every CHAT_EVERY-th
    batch generates up to N_NEW tokens for CHAT_BATCH prompts over smollm.Cache (half the
    rows greedy, half sampled at T = 0.7, seeded), then runs the same teacher-forced
    forward over prompt + continuation;
and stores, at every position t of every row, the hidden states after the tapped layers
TAPS (the outputs of layers 1, 14, 26 of the 30: the inputs of layers 2, L/2, L-3, the
public EAGLE-3 default) and the target's top-K distribution for the NEXT token (ids int32,
probabilities fp16 over the full vocabulary at temperature 1).
Shards: WDIR/tf/NNNNN.pt = {tok int32 (B, T), len int32 (B), feat fp16 (B, T, 3*dim),
top_id int32 (B, T, K), top_p fp16 (B, T, K), kind: "text" | "chat"}. A rerun continues
after the last shard on disk; progress (tokens, tokens/s, the mix) every shard.
THREADS (default 1) torch threads."""
import glob
import json
import os
import sys
import time

import torch

import smollm

TAPS = (1, 14, 26)
K = int(os.environ.get("TOPK", 12))
BATCH = int(os.environ.get("BATCH", 4))
CHAT_EVERY = int(os.environ.get("CHAT_EVERY", 4))
CHAT_BATCH = int(os.environ.get("CHAT_BATCH", 24))
N_NEW = int(os.environ.get("N_NEW", 160))
EOT = 2


@torch.inference_mode()
def tf_forward(m, tok, chunk=1024):
    """tok (B, T) long (on the weights' device): one causal forward from position 0. Returns
    feat (B, T, 3*dim) fp16 and the top-K next-token distribution (ids int32, probs fp16)
    at every position (the LM head over chunk positions at a time)."""
    B, T = tok.shape
    pos = torch.arange(T, device=tok.device)
    a = pos.double()[:, None] * m.inv_freq
    c = torch.cos(a).float()[None].expand(B, T, -1)
    s = torch.sin(a).float()[None].expand(B, T, -1)
    mask = torch.full((T, T), float("-inf"), device=tok.device).triu(1)
    rep = m.nh // m.nkv
    x = m.embd[tok]
    taps = []
    for l, W in enumerate(m.layers):
        h = smollm.rmsnorm(x, W["attn_norm"], m.eps)
        q = smollm._rope_tab(smollm.lin(m, h, W["attn_q"], True).view(B, T, m.nh, m.hd), c, s)
        k = smollm._rope_tab(smollm.lin(m, h, W["attn_k"], True).view(B, T, m.nkv, m.hd), c, s)
        v = smollm.lin(m, h, W["attn_v"], True).view(B, T, m.nkv, m.hd)
        q = q.view(B, T, m.nkv, rep, m.hd).permute(0, 2, 3, 1, 4)  # (B, nkv, rep, T, hd)
        k = k.permute(0, 2, 1, 3)[:, :, None]
        v = v.permute(0, 2, 1, 3)[:, :, None]
        att = (torch.matmul(q, k.transpose(-1, -2)) / (m.hd ** 0.5) + mask).softmax(-1)
        o = torch.matmul(att, v).permute(0, 3, 1, 2, 4).reshape(B, T, m.dim)
        x = smollm._out_ffn(m, W, x, o, True)
        if l in TAPS:
            taps.append(x.half())
    xn = smollm.rmsnorm(x, m.out_norm, m.eps).reshape(B * T, m.dim)
    ids, ps = [], []
    for r in range(0, B * T, chunk):
        lg = smollm.lin(m, xn[r:r + chunk], m.head, True)
        p = lg.softmax(-1)
        t = p.topk(K, -1)
        ids.append(t.indices.int())
        ps.append(t.values.half())
    return (torch.cat(taps, -1), torch.cat(ids).view(B, T, K), torch.cat(ps).view(B, T, K))


@torch.inference_mode()
def generate(m, P, n_new, gen, sampled=None, deadline=None, compact=8):
    """The target's own continuations of prompts P (lists of ids): rows 0::2 greedy, 1::2
    sampled at T = 0.7 (or the rows where the bool list sampled is True). Returns prompt +
    continuation per row (ending at <|im_end|>, or cut at n_new tokens, or when
    time.time() passes deadline). gen: a torch.Generator on the weights' device. Finished
    rows leave the cache once they are at least 1/compact of it (each removal copies it;
    compact 0: never)."""
    dev = m.embd.device
    B, Lp = len(P), max(map(len, P))
    tok = torch.zeros(B, Lp, dtype=torch.long)
    for r, p in enumerate(P):
        tok[r, Lp - len(p):] = torch.tensor(p)
    pad = torch.tensor([Lp - len(p) for p in P])
    cache = smollm.Cache(m, pad, Lp + n_new)
    logits, _ = smollm.forward_cached(m, tok.to(dev), cache)
    out = [list(p) for p in P]
    live = torch.arange(B, device=dev)  # the prompt of each cache row
    done = torch.zeros(B, dtype=torch.bool, device=dev)  # cache rows past their <|im_end|>
    samp_all = (torch.arange(B) % 2 == 1) if sampled is None else torch.tensor(sampled, dtype=torch.bool)
    samp_all = samp_all.to(dev)
    for s in range(n_new):
        samp = samp_all[live]
        pr = (logits / 0.7).softmax(-1)
        drawn = torch.multinomial(pr, 1, generator=gen)[:, 0]
        nxt = torch.where(samp, drawn, logits.argmax(-1))
        for r, t, d in zip(live.tolist(), nxt.tolist(), done.tolist()):
            if not d:
                out[r].append(t)
        done = done | (nxt == EOT)
        nd = int(done.sum())
        if s + 1 == n_new or nd == done.shape[0] or (deadline is not None and time.time() > deadline):
            break
        if nd > 0 and nd * compact >= done.shape[0]:
            rows = (~done).nonzero()[:, 0]
            cache.keep(rows)
            live, nxt, done = live[rows], nxt[rows], done[rows]
        logits, _ = smollm.forward_cached(m, nxt[:, None], cache)
    return out


@torch.inference_mode()
def greedy_features(m, P, n_new):
    """The target's greedy continuations of prompts P (up to n_new tokens, ending at
    <|im_end|>; no cache compaction, so each row's arithmetic is the same batch's) with the
    tapped features along each: a list of {"tok" (T,) long, "n_prompt", "feat" (T, 3 dim)
    fp32}, on the weights' device. The held-out measure's input (e3train.chain_tau);
    forward_cached in whatever precision m has (fp32 unless use_bf16 was called)."""
    gen = torch.Generator(device=m.embd.device).manual_seed(0)
    out = generate(m, P, n_new, gen, [False] * len(P), compact=0)
    seqs = []
    for r, seq in enumerate(out):
        t = torch.tensor(seq, device=m.embd.device)[None]
        feat, _, _ = tf_forward(m, t)
        seqs.append({"tok": t[0], "n_prompt": len(P[r]), "feat": feat[0].float()})
    return seqs


def main():
    import numpy as np  # here only: gpu_e3.py imports this file where there is no numpy
    torch.set_num_threads(int(os.environ.get("THREADS", 1)))
    d = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 1e9
    m = smollm.Target(d)
    m.use_bf16()
    W = np.load(f"{d}/windows.npy")
    cp = json.load(open(f"{d}/chat_prompts.json"))["ids"]
    os.makedirs(f"{d}/tf", exist_ok=True)
    have = sorted(glob.glob(f"{d}/tf/*.pt"))
    shard = len(have)
    # where the text windows and the chat prompts stand after the shards on disk
    state = {"win": 0, "chat": 0}
    if os.path.exists(f"{d}/tf/state.json"):
        state = json.load(open(f"{d}/tf/state.json"))
    gen = torch.Generator().manual_seed(1000 + shard)
    t0 = time.time()
    ntok = {"text": 0, "chat": 0}
    while time.time() - t0 < budget:
        if shard % CHAT_EVERY == CHAT_EVERY - 1 and state["chat"] < len(cp):
            P = cp[state["chat"]:state["chat"] + CHAT_BATCH]
            state["chat"] += len(P)
            seqs = [s[:W.shape[1]] for s in generate(m, P, N_NEW, gen)]
            T = max(map(len, seqs))
            tok = torch.zeros(len(seqs), T, dtype=torch.long)
            for r, sq in enumerate(seqs):
                tok[r, :len(sq)] = torch.tensor(sq)
            ln = torch.tensor([len(sq) for sq in seqs], dtype=torch.int32)
            kind = "chat"
        else:
            if state["win"] >= W.shape[0]:
                print("tf_data: every text window done", flush=True)
                break
            tok = torch.from_numpy(W[state["win"]:state["win"] + BATCH].astype(np.int64))
            state["win"] += tok.shape[0]
            # a short document ends with <|im_end|> then padding 0
            ln = torch.tensor([int((row == EOT).nonzero()[-1]) + 1 if bool((row[-1] == 0) and (row == EOT).any())
                               else row.shape[0] for row in tok], dtype=torch.int32)
            kind = "text"
        feat, tid, tp = tf_forward(m, tok)
        path = f"{d}/tf/{shard:05d}.pt"
        torch.save({"tok": tok.int(), "len": ln, "feat": feat, "top_id": tid, "top_p": tp, "kind": kind,
                    "taps": TAPS}, path + ".tmp")
        os.replace(path + ".tmp", path)
        json.dump(state, open(f"{d}/tf/state.json", "w"))
        shard += 1
        ntok[kind] += int(ln.sum())
        el = time.time() - t0
        tot = ntok["text"] + ntok["chat"]
        print(f"tf_data: shard {shard}, {tot} tokens this run ({ntok['text']} text, {ntok['chat']} chat), "
              f"{el:.0f}s, {tot / el:.0f} tok/s; windows {state['win']}/{W.shape[0]}, chat prompts "
              f"{state['chat']}/{len(cp)}", flush=True)


if __name__ == "__main__":
    main()

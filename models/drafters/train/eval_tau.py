#!/usr/bin/env python3
"""Held-out greedy tau of EAGLE-3 heads, computed exactly from the target's greedy output
(the learning curve's measure; the final head is also run through the C decoder,
`specwright bench`, whose T = 0 tau this must reproduce up to fp16/fp32 differences).

eval_tau.py WDIR HELDOUT_IDS.json N_NEW GAMMA DIR...
At T = 0 a chain of GAMMA drafts is accepted up to its first draft that differs from the
target's greedy token, so tau depends only on the target's greedy continuation x and on
the head's argmax drafts along it: with the target holding positions [0, n) and x_n
emitted, the head's committed rows are 0..n-1 and draft k (k = 1..GAMMA) is the argmax of
e3train.Head.unroll's step k-1 at anchor row n-1 (its inputs are the true tokens, which
are the drafted ones along the accepted prefix: check_e3.py shows the unroll equals the
public chain forward); n advances by accepted + 1. The continuation (N_NEW tokens, the
target in fp32 as smollm.py, which matches the C forward) and its tapped features are
computed once and cached in WDIR/heldout_seq.pt. Prints, per DIR, tau and the acceptance
at each position (accepted / tried, as specwright bench reports it) over all prompts."""
import json
import os
import struct
import sys

import numpy as np
import torch

import e3train
import smollm
import tf_data



def load_head(d, tc, embd):
    cfg = json.load(open(f"{d}/config.json"))
    with open(f"{d}/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        raw = f.read()
    dt = {"F16": np.float16, "F32": np.float32, "I64": np.int64, "BOOL": np.uint8}
    T = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        T[k] = torch.from_numpy(np.frombuffer(raw[a:b], dtype=dt[v["dtype"]]).reshape(v["shape"]).copy())
    Vd = cfg["draft_vocab_size"]
    used = torch.arange(Vd) + T["d2t"]
    m = e3train.Head(tc, Vd, embd, T["norm.weight"].float(), T["lm_head.weight"].float(),
                     ffn=cfg["intermediate_size"])
    p = "midlayer."
    names = {"fc": "fc.weight", "in_norm": p + "input_layernorm.weight", "hid_norm": p + "hidden_norm.weight",
             "q": p + "self_attn.q_proj.weight", "k": p + "self_attn.k_proj.weight",
             "v": p + "self_attn.v_proj.weight", "o": p + "self_attn.o_proj.weight",
             "post_norm": p + "post_attention_layernorm.weight", "gate": p + "mlp.gate_proj.weight",
             "up": p + "mlp.up_proj.weight", "down": p + "mlp.down_proj.weight", "norm": "norm.weight"}
    with torch.no_grad():
        for a, b in names.items():
            getattr(m, a).copy_(T[b].float())
    return m.eval(), used


def sequences(wdir, ids_file, n_new):
    path = f"{wdir}/heldout_seq.pt"
    if os.path.exists(path):
        c = torch.load(path)
        if c["n_new"] == n_new and c["ids_file"] == os.path.abspath(ids_file):
            return c["seqs"]
    m = smollm.Target(wdir)  # fp32: no use_bf16()
    seqs = tf_data.greedy_features(m, json.load(open(ids_file))["ids"], n_new)
    torch.save({"n_new": n_new, "ids_file": os.path.abspath(ids_file), "seqs": seqs}, path)
    return seqs


def main():
    torch.set_num_threads(int(os.environ.get("THREADS", 1)))
    wdir, ids_file, n_new, gamma = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    tc = json.load(open(f"{wdir}/target_config.json"))
    embd = torch.from_numpy(np.load(f"{wdir}/w/token_embd.weight.npy"))
    seqs = sequences(wdir, ids_file, n_new)
    if os.environ.get("LINES"):  # a subset of the prompts (0-based), as eval_c.sh takes it
        seqs = [seqs[int(i)] for i in os.environ["LINES"].split()]
    if os.environ.get("N_EVAL"):  # only the first N_EVAL generated tokens of each
        k = int(os.environ["N_EVAL"])
        seqs = [dict(s, tok=s["tok"][:s["n_prompt"] + k], feat=s["feat"][:s["n_prompt"] + k]) for s in seqs]
    print(f"eval_tau: {len(seqs)} held-out prompts, {sum(s['tok'].shape[0] - s['n_prompt'] for s in seqs)} "
          f"greedy tokens, gamma {gamma}", flush=True)
    for d in sys.argv[5:]:
        m, used = load_head(d, tc, embd)
        t, a, it = e3train.chain_tau(m, used, seqs, gamma)
        per = [e3train.chain_tau(m, used, [s], gamma)[0] for s in seqs]
        rec = {}
        if os.path.exists(f"{d}/train_record.json"):
            rec = json.load(open(f"{d}/train_record.json"))
        print(f"eval_tau: {d}: tau {t:.3f} over {it} iterations; acceptance by position "
              + " ".join(f"{x:.3f}" for x in a) + "; per prompt " + " ".join(f"{x:.2f}" for x in per), flush=True)
        json.dump({"tau": t, "per_prompt": per, "acceptance": a, "iterations": it, "gamma": gamma, "n_new": n_new},
                  open(f"{d}/heldout_tau.json", "w"))


if __name__ == "__main__":
    main()

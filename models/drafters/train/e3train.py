#!/usr/bin/env python3
"""EAGLE-3 head training (Debian python3-torch; --device cuda on a GPU, same script).

e3train.py WDIR OUT [--seconds S] [--vd 4096] [--ttt 3] [--device cpu|cuda]
  [--min-tokens 4e4] [--milestones 1e4,3e4,6e4,1e5,...] [--lr 2e-3] [--rows 2] [--warmup 10]
Reads tf_data.py's shards WDIR/tf/*.pt as they appear (it may still be writing); shards
0 and 3 (a text and a chat shard) are held back (the top-1 proxy printed at every milestone). Writes OUT/ (and
OUT/ck-NNNNNNN/ at every milestone of trained tokens) in the public EAGLE-3 checkpoint
format that runtime/model/eagle3.c loads (SGLang / SpecForge names: fc, midlayer.*,
norm, lm_head, d2t as offsets, t2d), F16, no embed_tokens (the target's is used).

The head (ALGORITHMS.txt 11; tests/tools/eagle3_tiny.py mirrors the public forward):
row t pairs the target's tapped states at t (fused by fc) with the token at t + 1, RoPE
position t (HF rotate_half order; eagle3.c permutes at load), and predicts the token at
t + 2. Training-time test (EAGLE-3): step 0 runs every row over the target's features;
step k >= 1 runs, for every anchor row a, the row at position a + k whose feature is
step k-1's output at a (the head's own state, as when drafting) and whose token is the
true token at a + k + 1; it attends to the step-0 rows 0..a (the committed rows) and to
the anchor's own rows of steps 1..k (the staged draft rows), exactly the rows
eagle3_draft.c's chain sees. Loss at every step (weight 0.8^k): cross-entropy of the
head's draft-vocabulary softmax against the target's top-K distribution (soft labels)
mapped through t2d (mass outside the map is dropped: q is 0 there).
The draft vocabulary: the Vd most frequent target argmax ids (top_id[..., 0]) over the
shards present at the start (at least --min-tokens), sorted (EAGLE's d2t = used - arange).
Importable without numpy (gpu_e3.py trains with Head, draft_map, make_losses, lr_at and
save on a machine with torch alone); main() reads prep.py's .npy weights with numpy.
"""
import argparse
import ctypes
import glob
import json
import math
import os
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


class Head(nn.Module):
    def __init__(self, tc, Vd, embd, out_norm, head_rows, ffn=1536):
        super().__init__()
        H = tc["embedding_length"]
        self.H, self.nh, self.nkv = H, tc["attention.head_count"], tc["attention.head_count_kv"]
        self.hd = H // self.nh
        self.eps, self.theta = tc["attention.layer_norm_rms_epsilon"], tc["rope.freq_base"]
        self.ffn, self.Vd = ffn, Vd
        g = torch.Generator().manual_seed(7)

        def P(o, i, s=1.0):
            return nn.Parameter(torch.randn(o, i, generator=g) * (s / math.sqrt(i)))
        self.fc = P(H, 3 * H)
        self.in_norm = nn.Parameter(torch.ones(H))
        self.hid_norm = nn.Parameter(torch.ones(H))
        self.q = P(self.nh * self.hd, 2 * H)
        self.k = P(self.nkv * self.hd, 2 * H)
        self.v = P(self.nkv * self.hd, 2 * H)
        self.o = P(H, self.nh * self.hd, 0.5)
        self.post_norm = nn.Parameter(torch.ones(H))
        self.gate = P(ffn, H)
        self.up = P(ffn, H)
        self.down = P(H, ffn, 0.5)
        self.norm = nn.Parameter(out_norm.clone() * 0.1)  # starts near uniform over the map
        self.lm_head = nn.Parameter(head_rows.clone())  # the target's LM head rows of the map
        self.register_buffer("embd", embd, persistent=False)
        # 1 / the RMS of each tapped feature dimension over the first shards: the target's
        # residual stream has a few dimensions ~1000x the median; training fc on standardized
        # inputs and saving fc * fscale is the same function with a well-conditioned start
        self.register_buffer("fscale", torch.ones(3 * H), persistent=False)
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        self.register_buffer("inv", inv, persistent=False)

    def rope(self, x, pos):
        """x (B, h, T, hd), pos (T,) int."""
        f = pos.double()[:, None] * self.inv[None]
        e = torch.cat((f, f), -1)
        return x * e.cos().to(x.dtype) + rotate_half(x) * e.sin().to(x.dtype)

    def qkv(self, emb, hid, pos):
        B, T, _ = emb.shape
        x = torch.cat((rms(emb, self.in_norm, self.eps), rms(hid, self.hid_norm, self.eps)), -1)
        q = (x @ self.q.T).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = (x @ self.k.T).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = (x @ self.v.T).view(B, T, self.nkv, self.hd).transpose(1, 2)
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        return self.rope(q, pos), self.rope(k, pos), v

    def rest(self, hid, a):
        B, T = a.shape[0], a.shape[2]
        x = hid + a.transpose(1, 2).reshape(B, T, self.nh * self.hd) @ self.o.T
        y = rms(x, self.post_norm, self.eps)
        return x + (F.silu(y @ self.gate.T) * (y @ self.up.T)) @ self.down.T

    def logits(self, x):
        return rms(x, self.norm, self.eps) @ self.lm_head.T

    def unroll(self, feat, tok, steps):
        """feat (B, T, 3H) float, tok (B, T) long. Returns [logits of step k (B, T-1-k? ...)]:
        a list of (B, R, Vd) over anchor rows a = 0..R-1, R = T-1; row a at step k
        predicts the token at a + k + 2."""
        B, T, _ = feat.shape
        R = T - 1
        pos = torch.arange(R, device=feat.device)
        tokp = torch.cat((tok, tok.new_zeros(B, steps)), 1)
        hid = (feat * self.fscale) @ self.fc.T
        hid = hid[:, :R]
        q, k0, v0 = self.qkv(self.embd[tokp[:, 1:R + 1]], hid, pos)
        scale = 1.0 / math.sqrt(self.hd)
        causal = torch.ones(R, R, dtype=torch.bool, device=feat.device).tril()
        s0 = (q @ k0.transpose(-1, -2)) * scale
        a = s0.masked_fill(~causal, float("-inf")).softmax(-1) @ v0
        x = self.rest(hid, a)
        outs = [self.logits(x)]
        ks, vs = [], []
        for k in range(1, steps + 1):
            qk, kk, vk = self.qkv(self.embd[tokp[:, 1 + k:R + 1 + k]], x, pos + k)
            ks.append(kk)
            vs.append(vk)
            sm = ((qk @ k0.transpose(-1, -2)) * scale).masked_fill(~causal, float("-inf"))
            sd = torch.stack([(qk * kj).sum(-1) * scale for kj in ks], -1)  # (B, h, R, k)
            att = torch.cat((sm, sd), -1).softmax(-1)
            a = att[..., :R] @ v0 + sum(att[..., R + j:R + j + 1] * vs[j] for j in range(k))
            x = self.rest(x, a)
            outs.append(self.logits(x))
        return outs


def write_safetensors(path, tensors):
    kinds = {torch.float16: "F16", torch.int64: "I64", torch.bool: "BOOL"}
    header, blobs, off = {}, [], 0
    for name, t in tensors:
        t = t.detach().cpu()
        kind = kinds[t.dtype]
        t = (t.to(torch.uint8) if t.dtype == torch.bool else t).contiguous()
        raw = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())  # no numpy
        header[name] = {"dtype": kind, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def save(m, used, V, tc, taps, out, record):
    os.makedirs(out, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_act": "silu",
           "hidden_size": m.H, "intermediate_size": m.ffn, "num_attention_heads": m.nh,
           "num_key_value_heads": m.nkv, "num_hidden_layers": 1, "vocab_size": V, "draft_vocab_size": m.Vd,
           "rms_norm_eps": m.eps, "rope_theta": m.theta, "max_position_embeddings": 8192,
           "tie_word_embeddings": False, "bias": False, "torch_dtype": "float16",
           "target_hidden_size": m.H,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(taps), "use_aux_hidden_state": True}}
    json.dump(cfg, open(f"{out}/config.json", "w"), indent=1)
    p = "midlayer."
    W = [("fc.weight", m.fc * m.fscale[None]), (p + "input_layernorm.weight", m.in_norm), (p + "hidden_norm.weight", m.hid_norm),
         (p + "self_attn.q_proj.weight", m.q), (p + "self_attn.k_proj.weight", m.k),
         (p + "self_attn.v_proj.weight", m.v), (p + "self_attn.o_proj.weight", m.o),
         (p + "post_attention_layernorm.weight", m.post_norm), (p + "mlp.gate_proj.weight", m.gate),
         (p + "mlp.up_proj.weight", m.up), (p + "mlp.down_proj.weight", m.down), ("norm.weight", m.norm),
         ("lm_head.weight", m.lm_head)]
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[used] = True
    write_safetensors(f"{out}/model.safetensors", [(n, w.half()) for n, w in W] +
                      [("d2t", (used - torch.arange(len(used))).long()), ("t2d", t2d)])
    json.dump(record, open(f"{out}/train_record.json", "w"), indent=1)


@torch.no_grad()
def chain_tau(m, used, seqs, gamma):
    """Greedy tau of head m (drafting over the map used: draft id -> target id) along the
    target's greedy continuations seqs (tf_data.greedy_features), exactly as a chain of gamma
    drafts verified greedily runs: with the target holding [0, n) and x_n emitted, draft k is
    the argmax of m.unroll's step k-1 at anchor row n-1 (its inputs are the true tokens, which
    are the drafted ones along the accepted prefix); n advances by accepted + 1. Returns
    (tau, acceptance at each position = accepted / tried, iterations)."""
    was = m.training
    m.eval()
    emitted = iters = 0
    tried = [0] * gamma
    acc = [0] * gamma
    for s in seqs:
        x, P = s["tok"], s["n_prompt"]
        L = x.shape[0]
        outs = m.unroll(s["feat"][None], x[None], gamma - 1)
        drafts = torch.stack([used[o[0].argmax(-1)] for o in outs], 0).tolist()  # (gamma, L-1)
        x = x.tolist()
        n = P  # x_P is the first generated token, emitted by the prefill
        while n + gamma < L:
            a = n - 1
            A = 0
            while A < gamma and drafts[A][a] == x[n + 1 + A]:
                A += 1
            for j in range(min(A + 1, gamma)):
                tried[j] += 1
            for j in range(A):
                acc[j] += 1
            emitted += A + 1
            iters += 1
            n += A + 1
    m.train(was)
    return emitted / max(iters, 1), [acc[j] / tried[j] if tried[j] else 0.0 for j in range(gamma)], iters


def draft_map(cnt, vd):
    """cnt (V,) long: target argmax counts. Returns the draft vocabulary (the vd most
    frequent ids, sorted), t2d_idx (V,) (draft index or -1), the map's coverage of the
    counts and the coverage of the prefix [0, vd)."""
    V = cnt.shape[0]
    used = torch.sort(torch.topk(cnt, vd).indices).values
    tot = max(1.0, float(cnt.sum()))
    t2d_idx = torch.full((V,), -1, dtype=torch.long, device=cnt.device)
    t2d_idx[used] = torch.arange(vd, device=cnt.device)
    return used, t2d_idx, float(cnt[used].sum()) / tot, float(cnt[:vd].sum()) / tot


def make_losses(m, used, t2d_idx, ttt):
    """The training loss of the unroll (see the module comment): losses(feat, tok, tid, tp,
    ln) -> (weighted soft cross-entropy, [(top-1 hits, valid rows) tensors per step])."""
    def losses(feat, tok, tid, tp, ln):
        dev = feat.device
        outs = m.unroll(feat, tok, ttt)
        B, T = tok.shape
        R = T - 1
        tot, acc = 0.0, []
        for k, lg in enumerate(outs):
            # row a at step k predicts the token at a+k+2: the target's distribution at a+k+1
            idx = torch.arange(R, device=dev) + k + 1
            valid = (idx[None] < ln[:, None]) & (idx[None] < T)
            idc = idx.clamp(max=T - 1)
            ids, ps = tid[:, idc], tp[:, idc]               # (B, R, K)
            d = t2d_idx[ids]
            lq = lg.log_softmax(-1)
            g = lq.gather(-1, d.clamp(min=0)) * (d >= 0)
            ce = -(ps * g).sum(-1)                          # (B, R)
            nv = valid.sum().clamp(min=1)
            tot = tot + (0.8 ** k) * (ce * valid).sum() / nv
            hit = (used[lg.argmax(-1)] == ids[..., 0]) & valid
            acc.append((hit.sum(), valid.sum()))
        return tot, acc
    return losses


def lr_at(base, step, warmup, frac):
    """Linear warm-up over warmup steps, constant, then a linear decay over the last 15% of
    the time budget (frac: the fraction spent) down to a tenth."""
    return base * min(1.0, (step + 1) / warmup) * (1.0 if frac < 0.85 else max(0.1, (1 - frac) / 0.15))


def main():
    import numpy as np  # here only: gpu_e3.py imports this file where there is no numpy
    ap = argparse.ArgumentParser()
    ap.add_argument("wdir")
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=1800)
    ap.add_argument("--vd", type=int, default=4096)
    ap.add_argument("--ttt", type=int, default=3, help="draft steps unrolled after step 0")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-tokens", type=float, default=4e4)
    ap.add_argument("--milestones", default="1e4,3e4,6e4,1e5,3e5,1e6,3e6,1e7")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--rows", type=int, default=2, help="rows (sequences) per step")
    ap.add_argument("--warmup", type=int, default=10, help="steps of linear warm-up")
    ap.add_argument("--max-len", type=int, default=512)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    tc = json.load(open(f"{a.wdir}/target_config.json"))
    V = tc["vocab_size"]
    ld = lambda n: torch.from_numpy(np.load(f"{a.wdir}/w/{n}.npy"))
    embd = ld("token_embd.weight")
    head_w = ld("output.weight") if os.path.exists(f"{a.wdir}/w/output.weight.npy") else embd
    out_norm = ld("output_norm.weight")
    held = {0, 3}  # a text shard and a chat shard (tf_data: every CHAT_EVERY=4th shard is chat)

    def shards():
        return sorted(glob.glob(f"{a.wdir}/tf/*.pt"))
    t0 = time.time()
    while True:  # wait for enough data to choose the map
        fs = shards()
        n = sum(int(torch.load(f)["len"].sum()) for f in fs[:40]) if len(fs) > 3 else 0
        if n >= a.min_tokens or len(fs) >= 40:
            break
        print(f"e3train: waiting for data ({len(fs)} shards, {n} tokens)", flush=True)
        time.sleep(30)
    cnt = torch.zeros(V, dtype=torch.long)
    sq, nsq = torch.zeros(3 * tc["embedding_length"], dtype=torch.float64), 0
    for f in fs:
        s = torch.load(f)
        for r in range(s["tok"].shape[0]):
            x = s["feat"][r, :int(s["len"][r])].double()
            sq += x.pow(2).sum(0)
            nsq += x.shape[0]
        for r in range(s["tok"].shape[0]):
            cnt += torch.bincount(s["top_id"][r, :int(s["len"][r]), 0].long(), minlength=V)
    used, t2d_idx, cov_map, cov_pre = draft_map(cnt, a.vd)
    print(f"e3train: draft vocabulary from {len(fs)} shards, {int(cnt.sum())} target argmax outputs: "
          f"the {a.vd} most frequent cover {cov_map:.4f}, the prefix [0, {a.vd}) {cov_pre:.4f}", flush=True)
    m = Head(tc, a.vd, embd, out_norm, head_w[used])
    m.fscale.copy_((sq / max(nsq, 1)).sqrt().clamp(min=1e-3).reciprocal().float())
    m = m.to(dev)
    t2d_idx = t2d_idx.to(dev)
    params = [p for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    miles = sorted(float(x) for x in a.milestones.split(","))
    record = {"vd": a.vd, "ttt": a.ttt, "lr": a.lr, "rows": a.rows, "device": a.device, "threads": a.threads,
              "coverage_map": cov_map, "coverage_prefix": cov_pre, "map_from_tokens": int(cnt.sum()),
              "curve": []}

    def batch_of(s, rows):
        L = int(s["len"][rows].max())
        L = min(L, a.max_len)
        ln = s["len"][rows].clamp(max=L).to(dev)
        return (s["feat"][rows, :L].to(dev).float(), s["tok"][rows, :L].long().to(dev),
                s["top_id"][rows, :L].long().to(dev), s["top_p"][rows, :L].to(dev).float(), ln)

    loss_fn = make_losses(m, used.to(dev), t2d_idx, a.ttt)

    def losses(feat, tok, tid, tp, ln):
        tot, acc = loss_fn(feat, tok, tid, tp, ln)
        return tot, [(int(h), int(n)) for h, n in acc]

    def evaluate():
        m.eval()
        hits = [[0, 0] for _ in range(a.ttt + 1)]
        with torch.no_grad():
            for f in [fs[i] for i in sorted(held)]:
                s = torch.load(f)
                for r in range(0, s["tok"].shape[0], a.rows):
                    rows = torch.arange(r, min(r + a.rows, s["tok"].shape[0]))
                    _, acc = losses(*batch_of(s, rows))
                    for k, (h, n) in enumerate(acc):
                        hits[k][0] += h
                        hits[k][1] += n
        m.train()
        return [h / max(n, 1) for h, n in hits]

    seen, order, step, tokens, mi = set(), [], 0, 0, 0
    t_start = time.time()
    ema = None
    epoch = 0
    while time.time() - t_start < a.seconds:
        fs_now = shards()
        new = [f for i, f in enumerate(fs_now) if i not in held and f not in seen]
        if new:
            f = new[0]
            seen.add(f)
        else:
            cand = [f for i, f in enumerate(fs_now) if i not in held]
            f = cand[torch.randint(len(cand), (1,)).item()]
            epoch += 1
        s = torch.load(f)
        nrow = s["tok"].shape[0]
        perm = torch.randperm(nrow)
        for r in range(0, nrow, a.rows):
            el = time.time() - t_start
            frac = el / a.seconds
            lr = lr_at(a.lr, step, a.warmup, frac)
            for gp in opt.param_groups:
                gp["lr"] = lr
            feat, tok, tid, tp, ln = batch_of(s, perm[r:r + a.rows])
            loss, acc = losses(feat, tok, tid, tp, ln)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            tokens += int((ln - 1).clamp(min=0).sum())
            a0 = acc[0][0] / max(acc[0][1], 1)
            ema = a0 if ema is None else 0.95 * ema + 0.05 * a0
            if step % 20 == 0:
                print(f"e3train: step {step}, {tokens} tokens, loss {float(loss):.3f}, train top-1@1 ~{ema:.3f}, "
                      f"lr {lr:.2e}, {len(seen)} shards seen, repeats {epoch}, {el:.0f}s, "
                      f"{tokens / max(el, 1):.0f} tok/s", flush=True)
            while mi < len(miles) and tokens >= miles[mi]:
                ev = evaluate()
                record["curve"].append({"tokens": tokens, "steps": step, "seconds": round(el),
                                        "heldback_top1_by_step": ev, "distinct_shards": len(seen)})
                d = f"{a.out}/ck-{int(miles[mi]):08d}"
                save(m, used, V, tc, s["taps"], d, record)
                print(f"e3train: milestone {miles[mi]:.0e} tokens -> {d}; held-back top-1 by step "
                      + " ".join(f"{x:.3f}" for x in ev), flush=True)
                mi += 1
            if time.time() - t_start >= a.seconds:
                break
    ev = evaluate()
    record["final"] = {"tokens": tokens, "steps": step, "seconds": round(time.time() - t_start),
                       "heldback_top1_by_step": ev, "distinct_shards": len(seen), "repeats": epoch}
    # coverage of the map over every shard trained on
    cnt2 = torch.zeros(V, dtype=torch.long)
    for f in sorted(seen):
        s = torch.load(f)
        for r in range(s["tok"].shape[0]):
            cnt2 += torch.bincount(s["top_id"][r, :int(s["len"][r]), 0].long(), minlength=V)
    record["final"]["coverage_map_all"] = float(cnt2[used].sum()) / max(1.0, float(cnt2.sum()))
    record["final"]["coverage_prefix_all"] = float(cnt2[:a.vd].sum()) / max(1.0, float(cnt2.sum()))
    save(m, used, V, tc, s["taps"], a.out, record)
    print(f"e3train: done, {tokens} tokens, {step} steps -> {a.out}; held-back top-1 by step "
          + " ".join(f"{x:.3f}" for x in ev) + f"; map coverage {record['final']['coverage_map_all']:.4f} "
          f"vs prefix {record['final']['coverage_prefix_all']:.4f}", flush=True)


if __name__ == "__main__":
    main()

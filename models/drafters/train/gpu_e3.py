#!/usr/bin/env python3
"""EAGLE-3 head for SmolLM2-135M-Instruct in one GPU job with a wall-clock budget
(torch + the standard library only: the GPU machine has no numpy, no tokenizers, no
network). Run by gpu_run.sh from the two parts gpu_pack.sh wrote (build/e3gpu/{a,b}).

gpu_e3.py --a DIR --b DIR --out DIR [--device cuda|cpu] [--t0 EPOCH] [--budget 270]
Phases, each against a deadline measured from --t0 (the job's start):
  1. load: the GGUF's two halves joined in memory, its sha256 checked against part b's
     meta.json, dequantized by tests/gpu/torch_ref.py's reader (smollm.Target.from_gguf);
  2. data (until gen_frac * budget): the target's OWN continuations of the chat prompts
     (tf_data.generate: up to --n-new tokens, stop at <|im_end|>; pass 0 samples the odd
     rows at T = 0.7 and takes the even ones greedily, pass 1 the other way round, later
     passes sample every row), each batch then teacher-forced (tf_data.tf_forward: taps
     after layers 1, 14, 26 and the top-K next-token distribution), plus text windows
     (part b's windows.u16) for --text-share of the tokens; kept on the device, cut into
     training batches of similar length (at most --batch-tokens tokens each);
  3. train (until budget - reserve): e3train.Head with e3train's loss (make_losses: the
     training-time test over --ttt steps, soft labels), draft map (draft_map) and schedule
     (lr_at); one chat batch and one text batch held back (top-1 by step at the end);
  4. OUT/head/ (config.json + model.safetensors, e3train.save: the format --draft
     eagle3:DIR loads, F16) and OUT/smollm2-eagle3-gpu/ (the same head packed by e3pack.py:
     config.json, model.safetensors with Q8_0 blocks, SHA256SUMS; the repository's form,
     committed as models/drafters/smollm2-eagle3-gpu/) after 10 s of training, every
     --save-every (20) s, and at the end (a run cut short still leaves a whole head); OUT/gpu_e3.log
     (progress) and OUT/gpu_e3.json (the record). Any failure: a message and exit 1.
The prompts are corpus.py's chat prompts (held-out fragments checked out there and again
by gpu_pack.py); this job reads nothing else.
"""
import argparse
import array
import hashlib
import importlib.util
import json
import os
import random
import shutil
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e3pack  # noqa: E402
import e3train  # noqa: E402
import smollm  # noqa: E402
import tf_data  # noqa: E402

LOG = None
PACKED = "smollm2-eagle3-gpu"  # OUT/PACKED: the packed head (models/drafters/PACKED in the repository)


def log(msg):
    line = f"[{time.strftime('%H:%M:%S')}] gpu_e3: {msg}"
    print(line, flush=True)
    if LOG:
        LOG.write(line + "\n")
        LOG.flush()


def mem():
    """The device memory in use and at peak, for the log (empty on the CPU)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return ""
    return f", device memory {torch.cuda.memory_allocated() / 2 ** 30:.1f} GiB (peak " \
        f"{torch.cuda.max_memory_allocated() / 2 ** 30:.1f})"


def fail(msg):
    log("FAILED: " + msg)
    sys.exit(1)


def load_torch_ref():
    p = os.path.join(HERE, "../../../tests/gpu/torch_ref.py")
    spec = importlib.util.spec_from_file_location("torch_ref", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_parts(a, b):
    """Part b's meta.json, the GGUF bytes (part a's gguf.part0 + part b's gguf.part1,
    checked against the recorded sizes and sha256), the chat prompts' ids, the windows."""
    mp = f"{b}/meta.json"
    if not os.path.exists(mp):
        fail(f"{mp}: missing (part b not carried? expected gpu_pack.sh's build/e3gpu/b)")
    meta = json.load(open(mp))
    p0, p1 = f"{a}/gguf.part0", f"{b}/gguf.part1"
    for p, n in ((p0, meta["part0_bytes"]), (p1, meta["part1_bytes"])):
        if not os.path.exists(p):
            fail(f"{p}: missing (part a comes with call 1, within 30 s of call 2; rerun call 1)")
        if os.path.getsize(p) != n:
            fail(f"{p}: size expected {n} bytes, found {os.path.getsize(p)}")
    buf = open(p0, "rb").read() + open(p1, "rb").read()
    h = hashlib.sha256(buf).hexdigest()
    if h != meta["gguf_sha256"]:
        fail(f"{meta['gguf_name']}: sha256 expected {meta['gguf_sha256']}, found {h} (parts from different packs?)")
    chat = read_u16_rows(f"{b}/chat_ids.u16", meta["chat_prompts"], meta["chat_prompt_tokens"])
    heldout = None
    if "heldout_prompts" in meta:  # measured on, never trained on
        heldout = read_u16_rows(f"{b}/heldout_ids.u16", meta["heldout_prompts"],
                                meta["heldout_prompt_tokens"])
    W = None
    if meta["windows"]:
        raw = open(f"{b}/windows.u16", "rb").read()
        if len(raw) != meta["windows"] * meta["win"] * 2:
            fail(f"{b}/windows.u16: expected {meta['windows'] * meta['win'] * 2} bytes, found {len(raw)}")
        W = torch.frombuffer(bytearray(raw), dtype=torch.int16).view(meta["windows"], meta["win"])
        W = W.long() & 0xFFFF  # uint16 ids
    return meta, buf, chat, W, heldout


def read_u16_rows(path, n_rows, n_ids):
    """gpu_pack.py's layout: each row a u16 length, then its u16 ids (little-endian)."""
    cr = open(path, "rb").read()
    raw = array.array("H", cr[:len(cr) // 2 * 2])
    if sys.byteorder != "little":
        raw.byteswap()
    rows, i = [], 0
    while i < len(raw):
        n = raw[i]
        if n == 0 or i + 1 + n > len(raw) or len(cr) % 2:
            fail(f"{path}: row {len(rows)} at u16 {i}: length {n} runs past the file's {len(cr)} bytes")
        rows.append(raw[i + 1:i + 1 + n].tolist())
        i += 1 + n
    if len(rows) != n_rows or sum(map(len, rows)) != n_ids:
        fail(f"{path}: expected {n_rows} rows of {n_ids} ids, found {len(rows)} of {sum(map(len, rows))}")
    return rows


def window_lengths(tok):
    """tf_data's rule: a short document ends with <|im_end|> (2) then padding 0."""
    out = []
    for row in tok:
        eot = (row == tf_data.EOT).nonzero()
        out.append(int(eot[-1]) + 1 if bool(row[-1] == 0) and eot.numel() else row.shape[0])
    return out


class Data:
    """Teacher-forced training batches on the device: dicts with feat (b, T, 3H) fp16, tok
    (b, T) long, tid (b, T, K) int32, tp (b, T, K) fp16, ln (b,) long, kind."""

    def __init__(self, m, dev, batch_tokens, max_len, chunk):
        self.m, self.dev, self.bt, self.max_len, self.chunk = m, dev, batch_tokens, max_len, chunk
        self.items, self.tokens = [], {"chat": 0, "text": 0}
        self.tf_seconds = 0.0

    def add(self, seqs, kind, lens=None):
        """seqs: lists of ids (lens: their real lengths, for padded text windows)."""
        t = time.time()
        seqs = [s[:self.max_len] for s in seqs]
        lens = [min(len(s), self.max_len) for s in seqs] if lens is None else [min(x, self.max_len) for x in lens]
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        i = 0
        while i < len(order):
            T = len(seqs[order[i]])
            n = max(1, self.bt // T)
            rows = order[i:i + n]
            i += n
            tok = torch.zeros(len(rows), T, dtype=torch.long)
            for r, j in enumerate(rows):
                tok[r, :len(seqs[j])] = torch.tensor(seqs[j])
            tok = tok.to(self.dev)
            feat, tid, tp = tf_data.tf_forward(self.m, tok, self.chunk)
            ln = torch.tensor([lens[j] for j in rows], dtype=torch.long, device=self.dev)
            self.items.append({"feat": feat, "tok": tok, "tid": tid, "tp": tp, "ln": ln, "kind": kind})
            self.tokens[kind] += sum(lens[j] for j in rows)
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        self.tf_seconds += time.time() - t


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="part a (gguf.part0)")
    ap.add_argument("--b", required=True, help="part b (gguf.part1, meta.json, chat_ids.u16, windows.u16)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--t0", type=float, default=None, help="the job's start (epoch seconds; default: now)")
    ap.add_argument("--budget", type=float, default=270.0, help="seconds from --t0 to the last output")
    ap.add_argument("--gen-frac", type=float, default=0.5, help="data phase ends at this fraction of the budget")
    ap.add_argument("--reserve", type=float, default=15.0, help="seconds kept for the final evaluation and save")
    ap.add_argument("--n-new", type=int, default=384)
    ap.add_argument("--gen-batch", type=int, default=None, help="prompts per generation batch (cuda 768, cpu 8)")
    ap.add_argument("--max-prompts", type=int, default=None, help="use only the first N chat prompts (tests)")
    ap.add_argument("--text-share", type=float, default=0.2, help="fraction of the data tokens from text windows")
    ap.add_argument("--max-data-tokens", type=float, default=6e6, help="data phase stops here (device memory: ~3.5 KB a token)")
    ap.add_argument("--batch-tokens", type=int, default=None, help="tokens per training batch (cuda 8192, cpu 1024)")
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--vd", type=int, default=4096)
    ap.add_argument("--ttt", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--save-every", type=float, default=20.0,
                    help="seconds between heads written during training (the first after 10 s): a run cut "
                         "short still leaves a whole head")
    ap.add_argument("--heldout-new", type=int, default=64,
                    help="greedy tokens of each held-out prompt for the learning curve (0: none)")
    ap.add_argument("--heldout-gamma", type=int, default=4, help="the curve's chain length")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    t0 = a.t0 if a.t0 is not None else time.time()
    os.makedirs(a.out, exist_ok=True)
    LOG = open(f"{a.out}/gpu_e3.log", "a")
    rec = {"args": vars(a), "torch": torch.__version__, "phases": {}}
    el = lambda: time.time() - t0
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            fail("--device cuda but torch.cuda.is_available() is False")
        rec["device"] = torch.cuda.get_device_name(0)
    else:
        rec["device"] = "cpu"
    gen_batch = a.gen_batch or (768 if cuda else 8)
    batch_tokens = a.batch_tokens or (8192 if cuda else 1024)
    gen_end, train_end = a.gen_frac * a.budget, a.budget - a.reserve
    log(f"start {el():.1f}s after t0 on {rec['device']}, torch {torch.__version__}; budget {a.budget:.0f}s: "
        f"data until {gen_end:.0f}s, training until {train_end:.0f}s")

    # 1. load
    meta, buf, chat, W, heldout = read_parts(a.a, a.b)
    tr = load_torch_ref()
    g = tr.GGUF(meta["gguf_name"], buf)
    m = smollm.Target.from_gguf(g, dev)
    hseqs = None
    if heldout and a.heldout_new > 0:  # before use_bf16: the fp32 target's greedy text
        t = time.time()
        hseqs = tf_data.greedy_features(m, heldout, a.heldout_new)
        rec["phases"]["heldout_seconds"] = round(time.time() - t, 1)
        log(f"held-out: {len(hseqs)} prompts' greedy continuations ({sum(len(s['tok']) - s['n_prompt'] for s in hseqs)} "
            f"tokens, fp32) for the curve, in {time.time() - t:.1f}s")
    m.use_bf16()
    del buf, g
    tc = m.config
    if cuda:
        torch.cuda.synchronize()
    rec["phases"]["load_end_s"] = round(el(), 1)
    log(f"load: {meta['gguf_name']} sha256 ok, {m.L} layers, dim {m.dim}, vocab {m.V}, on {dev} at {el():.1f}s; "
        f"{len(chat)} chat prompts, {0 if W is None else W.shape[0]} text windows")

    # 2. data
    data = Data(m, dev, batch_tokens, a.max_len, 8192 if cuda else 1024)
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    rng = random.Random(a.seed)
    order = list(range(len(chat) if a.max_prompts is None else min(a.max_prompts, len(chat))))
    rng.shuffle(order)
    pos, npass, new_tok, gen_s, nwin = 0, 0, 0, 0.0, 0
    t_data = time.time()
    while el() < gen_end and data.tokens["chat"] + data.tokens["text"] < a.max_data_tokens:
        idx = order[pos:pos + gen_batch]
        P = [chat[i] for i in idx]
        if npass == 0:
            samp = [(pos + r) % 2 == 1 for r in range(len(P))]
        elif npass == 1:
            samp = [(pos + r) % 2 == 0 for r in range(len(P))]
        else:
            samp = [True] * len(P)
        t = time.time()
        try:
            seqs = tf_data.generate(m, P, a.n_new, gen, samp, deadline=t0 + gen_end)
            if cuda:
                torch.cuda.synchronize()
        except RuntimeError as e:  # out of device memory: half the batch, once more
            if "out of memory" not in str(e) or gen_batch < 16:
                raise
            gen_batch //= 2
            if cuda:
                torch.cuda.empty_cache()
            log(f"data: out of memory generating {len(P)} rows; {gen_batch} a batch from now on")
            continue
        dt = time.time() - t
        gen_s += dt
        n = sum(len(s) - len(p) for s, p in zip(seqs, P))
        new_tok += n
        data.add(seqs, "chat")
        pos += len(P)
        if pos >= len(order):
            pos, npass = 0, npass + 1
            rng.shuffle(order)
        # text windows for --text-share of the tokens
        while W is not None and nwin < W.shape[0] and \
                data.tokens["text"] < a.text_share / max(1e-9, 1 - a.text_share) * data.tokens["chat"]:
            short = a.text_share / max(1e-9, 1 - a.text_share) * data.tokens["chat"] - data.tokens["text"]
            k = max(1, min(W.shape[0] - nwin, -(-int(short) // W.shape[1]), batch_tokens // W.shape[1] * 4))
            tok = W[nwin:nwin + k]
            nwin += k
            data.add([r.tolist() for r in tok], "text", window_lengths(tok))
        log(f"data: batch of {len(P)} prompts (pass {npass}), {n} new tokens in {dt:.1f}s ({n / max(dt, 1e-9):.0f} tok/s "
            f"generated); total {new_tok} generated at {new_tok / max(gen_s, 1e-9):.0f} tok/s; teacher-forced "
            f"{data.tokens['chat']} chat + {data.tokens['text']} text tokens ({nwin} windows), features "
            f"{(data.tokens['chat'] + data.tokens['text']) / max(data.tf_seconds, 1e-9):.0f} tok/s; {el():.1f}s{mem()}")
    data_s = time.time() - t_data
    rec["phases"].update({"data_end_s": round(el(), 1), "generated_tokens": new_tok, "generate_seconds": round(gen_s, 1),
                          "generate_tok_s": round(new_tok / max(gen_s, 1e-9)), "chat_tokens": data.tokens["chat"],
                          "text_tokens": data.tokens["text"], "text_windows": nwin,
                          "features_seconds": round(data.tf_seconds, 1),
                          "features_tok_s": round((data.tokens["chat"] + data.tokens["text"]) / max(data.tf_seconds, 1e-9)),
                          "prompt_passes": npass + pos / max(1, len(order)), "data_seconds": round(data_s, 1)})
    chat_items = [i for i, it in enumerate(data.items) if it["kind"] == "chat"]
    text_items = [i for i, it in enumerate(data.items) if it["kind"] == "text"]
    if len(chat_items) < 2:
        fail(f"data: {len(chat_items)} chat batches by {el():.0f}s (need 2: one held back); budget too small?")
    held = {chat_items[len(chat_items) // 2]} | ({text_items[0]} if len(text_items) >= 2 else set())
    train = [it for i, it in enumerate(data.items) if i not in held]
    heldb = [data.items[i] for i in sorted(held)]

    # 3. train
    V, H = tc["vocab_size"], m.dim
    cnt = torch.zeros(V, dtype=torch.long, device=dev)
    sq = torch.zeros(3 * H, dtype=torch.float64, device=dev)
    nsq = 0
    for it in train:
        valid = torch.arange(it["tok"].shape[1], device=dev)[None] < it["ln"][:, None]
        cnt += torch.bincount(it["tid"][..., 0][valid].long(), minlength=V)
        sq += it["feat"][valid].float().pow(2).sum(0).double()
        nsq += int(valid.sum())
    used, t2d_idx, cov_map, cov_pre = e3train.draft_map(cnt, a.vd)
    log(f"train: draft vocabulary from {int(cnt.sum())} target argmax outputs: the {a.vd} most frequent cover "
        f"{cov_map:.4f}, the prefix [0, {a.vd}) {cov_pre:.4f}; {len(train)} batches, {nsq} tokens, "
        f"{len(heldb)} held back")
    head_w = m.head
    hm = e3train.Head(tc, a.vd, m.embd.float().cpu(), m.out_norm.cpu(), head_w[used].cpu())
    hm.fscale.copy_((sq / max(nsq, 1)).sqrt().clamp(min=1e-3).reciprocal().float().cpu())
    hm = hm.to(dev)
    del m.bf16
    m.bf16 = {}
    if cuda:
        torch.cuda.empty_cache()
    params = list(hm.parameters())
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    loss_fn = e3train.make_losses(hm, used, t2d_idx, a.ttt)
    used_cpu = used.cpu()
    record = {"vd": a.vd, "ttt": a.ttt, "lr": a.lr, "batch_tokens": batch_tokens, "device": rec["device"],
              "coverage_map": cov_map, "coverage_prefix": cov_pre, "map_from_tokens": int(cnt.sum()),
              "recipe": "gpu_e3.py: target's own chat continuations + text windows", "curve": []}

    def batch(it):
        return it["feat"].float(), it["tok"], it["tid"].long(), it["tp"].float(), it["ln"]

    def evaluate():
        hm.eval()
        hits = [[0, 0] for _ in range(a.ttt + 1)]
        with torch.no_grad():
            for it in heldb:
                _, acc = loss_fn(*batch(it))
                for k, (h, n) in enumerate(acc):
                    hits[k][0] += int(h)
                    hits[k][1] += int(n)
        hm.train()
        return [h / max(n, 1) for h, n in hits]

    def save(final):
        ev = evaluate()
        pt = {"tokens": tokens, "steps": step, "seconds": round(el()), "heldback_top1_by_step": ev}
        if hseqs:  # the held-out learning curve (e3train.chain_tau, eval_tau.py's measure)
            ht, hacc, hit = e3train.chain_tau(hm, used, hseqs, a.heldout_gamma)
            pt.update({"heldout_tau": round(ht, 4), "heldout_acceptance": [round(x, 4) for x in hacc],
                       "heldout_iterations": hit})
        record["curve"].append(pt)
        if final:
            record["final"] = dict(record["curve"][-1], epochs=round(tokens / max(1, nsq), 2))
        # written beside, then swapped in: a run killed here leaves the previous whole head
        new, old = f"{a.out}/head.new", f"{a.out}/head.old"
        shutil.rmtree(new, ignore_errors=True)
        e3train.save(hm, used_cpu, V, tc, tf_data.TAPS, new, record)
        if os.path.exists(f"{a.out}/head"):
            os.replace(f"{a.out}/head", old)
        os.replace(new, f"{a.out}/head")
        shutil.rmtree(old, ignore_errors=True)
        # the repository's form of the same head (e3pack: Q8_0 blocks, <= 8 MB, SHA256SUMS),
        # swapped in the same way: what the next session commits as models/drafters/PACKED
        pk = f"{a.out}/{PACKED}"
        shutil.rmtree(pk + ".new", ignore_errors=True)
        size = e3pack.pack(f"{a.out}/head", pk + ".new")
        if os.path.exists(pk):
            os.replace(pk, pk + ".old")
        os.replace(pk + ".new", pk)
        shutil.rmtree(pk + ".old", ignore_errors=True)
        rec["train"] = record
        json.dump(rec, open(f"{a.out}/gpu_e3.json", "w"), indent=1)
        log(f"train: {'final head' if final else 'milestone'} -> {a.out}/head at {el():.1f}s: {tokens} tokens, "
            f"{step} steps; held-back top-1 by step " + " ".join(f"{x:.3f}" for x in ev)
            + (f"; held-out tau {pt['heldout_tau']:.3f}" if hseqs else "") + f"; packed {size} bytes -> {pk}")

    step, tokens, ema, perm, pi = 0, 0, None, [], 0
    t_train = time.time()
    next_save = t_train + min(10.0, a.save_every)
    span = max(1.0, t0 + train_end - t_train)
    while el() < train_end:
        if pi >= len(perm):
            perm, pi = torch.randperm(len(train)).tolist(), 0
        it = train[perm[pi]]
        pi += 1
        lr = e3train.lr_at(a.lr, step, a.warmup, (time.time() - t_train) / span)
        for gp in opt.param_groups:
            gp["lr"] = lr
        loss, acc = loss_fn(*batch(it))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        tokens += int(it["ln"].sum()) - it["ln"].shape[0]
        if step % 25 == 0 or step == 1:
            a0 = float(acc[0][0]) / max(1, float(acc[0][1]))
            ema = a0 if ema is None else 0.8 * ema + 0.2 * a0
            dt = time.time() - t_train
            log(f"train: step {step}, {tokens} tokens ({tokens / max(1, nsq):.2f} epochs), loss {float(loss):.3f}, "
                f"top-1@1 ~{ema:.3f}, lr {lr:.2e}, {tokens / max(dt, 1e-9):.0f} tok/s, {el():.1f}s{mem()}")
        if time.time() >= next_save and el() < train_end - 5:
            save(False)
            next_save = time.time() + a.save_every
    rec["phases"]["peak_device_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 1) if cuda else None
    rec["phases"].update({"train_end_s": round(el(), 1), "train_tokens": tokens, "train_steps": step,
                          "train_tok_s": round(tokens / max(time.time() - t_train, 1e-9))})
    save(True)
    log(f"done at {el():.1f}s: {rec['phases']}")
    if el() > a.budget:
        log(f"WARNING: finished {el() - a.budget:.1f}s past the budget")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - any failure: a clear message, exit 1
        log(f"FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        sys.exit(1)

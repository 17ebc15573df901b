#!/usr/bin/env python3
"""gpu_pack.py GGUF WORK HELDOUT OUTDIR [MAX_PART_MIB] (build/venv: numpy, gguf, tokenizers)

Packs what gpu_e3.py needs into two parts of at most MAX_PART_MIB (default 47.5) each,
carried to the GPU machine by two consecutive calls:
  OUTDIR/a/gguf.part0  the GGUF's first bytes (as many as fit);
  OUTDIR/b/gguf.part1  the rest of the GGUF;
  OUTDIR/b/chat_ids.u16   corpus.py's chat prompts (WORK/chat_prompts.json) as token ids,
                          each prompt a u16 length then its u16 ids (little-endian),
           chat template applied;
  OUTDIR/b/windows.u16  the first N of corpus.py's text windows (WORK/windows.npy, already
           shuffled across sources), uint16 little-endian (N, WIN), N as many as fit;
  OUTDIR/b/heldout_ids.u16  HELDOUT's prompts (as specwright bench cuts them) in the chat
           template, same layout as chat_ids.u16: for measuring only (gpu_e3.py's held-out
           tau at each saved head), never trained on;
  OUTDIR/b/meta.json  sizes, the GGUF's sha256 and name, counts, the held-out check.
Held out: every shipped chat prompt is re-tokenized from its text (prep.build_tokenizer,
the chat template) and must equal its ids; every prompt text and every shipped window
(decoded) is checked against HELDOUT's lines by corpus.py's 40-byte fragments. Any hit,
or any mismatch, stops the pack with a message (exit 1): nothing held out is shipped.
"""
import hashlib
import json
import os
import re
import sys

import numpy as np
from gguf import GGUFReader

from corpus import fragments
from prep import build_tokenizer, chat

MiB = 1 << 20


def main():
    gguf_path, work, heldout, outdir = sys.argv[1:5]
    cap = float(sys.argv[5]) if len(sys.argv) > 5 else 47.5
    buf = open(gguf_path, "rb").read()
    cp = json.load(open(f"{work}/chat_prompts.json"))
    texts, ids = cp["text"], cp["ids"]
    if len(texts) != len(ids) or not ids:
        sys.exit(f"gpu_pack: {work}/chat_prompts.json: expected equal non-empty 'text' and 'ids' lists, "
                 f"found {len(texts)} and {len(ids)}")
    tok, system = build_tokenizer(GGUFReader(gguf_path))
    held = [l for l in open(heldout, encoding="utf-8").read().split("\n")[1:] if l.strip()]
    frags = set(f for h in held for f in fragments(h))
    enc = [e.ids for e in tok.encode_batch([chat(system, t) for t in texts], add_special_tokens=False)]
    bad = [i for i in range(len(ids)) if enc[i] != ids[i]]
    if bad:
        sys.exit(f"gpu_pack: {work}/chat_prompts.json: prompt {bad[0]}'s ids differ from its text re-tokenized "
                 f"({len(bad)} such prompts): rerun corpus.py")
    hit = [i for i, t in enumerate(texts) if any(f in re.sub(r"\s+", " ", t) for f in frags)]
    if hit:
        sys.exit(f"gpu_pack: chat prompt {hit[0]} ({texts[hit[0]][:60]!r}) contains held-out text from {heldout}")
    if max(max(x) for x in ids) >= 65536 or max(map(len, ids)) >= 65536:
        sys.exit(f"gpu_pack: {work}/chat_prompts.json: ids and lengths expected below 65536")
    # each prompt: its length, then its ids, little-endian u16 (2 bytes an id, not JSON's ~6)
    def u16(rows):
        return np.concatenate([np.array([len(x)] + x, dtype="<u2") for x in rows]).tobytes()
    chat_raw = u16(ids)
    hids = [e.ids for e in tok.encode_batch([chat(system, h) for h in held], add_special_tokens=False)]
    held_raw = u16(hids)
    W = np.load(f"{work}/windows.npy")
    if W.max() >= 65536 or W.min() < 0:
        sys.exit(f"gpu_pack: {work}/windows.npy: ids expected in [0, 65536), found [{W.min()}, {W.max()}]")
    half = int(cap * MiB) - 4096  # part a: the GGUF's first bytes
    p0, p1 = buf[:half], buf[half:]
    room = int(cap * MiB) - len(p1) - len(chat_raw) - len(held_raw) - 16384
    nwin = max(0, min(W.shape[0], room // (W.shape[1] * 2)))
    if room < 0:
        sys.exit(f"gpu_pack: part b would exceed {cap} MiB ({(len(p1) + len(chat_raw)) / MiB:.1f} MiB without windows)")
    Wk = W[:nwin]
    for r in range(nwin):
        t = re.sub(r"\s+", " ", tok.decode([int(x) for x in Wk[r] if x != 0], skip_special_tokens=False))
        if any(f in t for f in frags):
            sys.exit(f"gpu_pack: text window {r} contains held-out text from {heldout}")
    for d in ("a", "b"):
        os.makedirs(f"{outdir}/{d}", exist_ok=True)
    open(f"{outdir}/a/gguf.part0", "wb").write(p0)
    open(f"{outdir}/b/gguf.part1", "wb").write(p1)
    open(f"{outdir}/b/chat_ids.u16", "wb").write(chat_raw)
    open(f"{outdir}/b/heldout_ids.u16", "wb").write(held_raw)
    open(f"{outdir}/b/windows.u16", "wb").write(Wk.astype("<u2").tobytes())
    meta = {"gguf_name": os.path.basename(gguf_path), "gguf_bytes": len(buf),
            "gguf_sha256": hashlib.sha256(buf).hexdigest(), "part0_bytes": len(p0), "part1_bytes": len(p1),
            "chat_prompts": len(ids), "chat_prompt_tokens": sum(map(len, ids)), "windows": int(nwin),
            "win": int(W.shape[1]), "windows_available": int(W.shape[0]), "source": os.path.abspath(work),
            "heldout_file": heldout, "heldout_lines": len(held), "heldout_fragments": len(frags),
            "heldout_prompts": len(hids), "heldout_prompt_tokens": sum(map(len, hids)),
            "heldout_check": "chat prompt texts (ids = their re-tokenized text) and decoded windows: no fragment"}
    json.dump(meta, open(f"{outdir}/b/meta.json", "w"), indent=1)
    for d in ("a", "b"):
        n = sum(os.path.getsize(f"{outdir}/{d}/{f}") for f in os.listdir(f"{outdir}/{d}"))
        if n > cap * MiB:
            sys.exit(f"gpu_pack: {outdir}/{d}: {n / MiB:.2f} MiB, over the {cap} MiB cap")
        print(f"gpu_pack: {outdir}/{d}: {n / MiB:.2f} MiB ({n} bytes): " + ", ".join(sorted(os.listdir(f"{outdir}/{d}"))))
    print(f"gpu_pack: {len(ids)} chat prompts ({meta['chat_prompt_tokens']} tokens), {nwin} of {W.shape[0]} text "
          f"windows of {W.shape[1]}; held-out check passed ({len(held)} lines, {len(frags)} fragments); "
          f"GGUF sha256 {meta['gguf_sha256']}")


if __name__ == "__main__":
    main()

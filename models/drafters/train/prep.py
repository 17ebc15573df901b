#!/usr/bin/env python3
"""Stage 1 of the block-drafter pipeline (runs in build/venv: numpy, gguf, tokenizers).

prep.py GGUF OUTDIR [N_TRAIN N_HELDOUT]
  - dequantizes every tensor of the target GGUF to fp32 .npy files (OUTDIR/w/NAME.npy),
    in the GGUF's own row order (the C forward's order: RoPE on adjacent pairs);
  - cuts prompts from the KJV Bible (`bible` from bible-kjv) the way `specwright bench`
    does ("Rewrite the following passage in plain modern English:" + a 200-600 byte
    passage, chat template on), tokenizes them with a HF `tokenizers` BPE built from the
    GGUF's own vocabulary and merges (as tests/tools/tok_reference.py does);
  - TRAINING prompts come from the Old Testament (Genesis..Malachi) only, plus a few
    other instructions over the same passages; HELD-OUT prompts (never trained on) come
    from the New Testament (Matthew..Revelation). Written as OUTDIR/prompts_{train,heldout}.json.
The torch side (gen.py, train.py) reads only these files, so it needs no gguf/tokenizers.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

ASKS = [
    "Rewrite the following passage in plain modern English:\n\n",
    "Rewrite the following passage in plain modern English:\n\n",
    "Summarize the following passage in a few sentences:\n\n",
    "Explain what the following passage means:\n\n",
]


def cut_passages(text, n):
    """The cut of runtime/cli/bench.c cli_cut_prompts: n passages of 200-600 bytes at line
    boundaries, evenly spread."""
    b = text.encode("utf-8")
    out = []
    L = len(b)
    for i in range(n):
        at = L // n * i
        while at < L and b[at] != 10:
            at += 1
        while at < L and b[at] in (10, 32):
            at += 1
        end = at
        while end < L and (end - at < 200 or b[end] != 10) and end - at < 600:
            end += 1
        if end - at < 40:
            continue
        out.append(b[at:end].decode("utf-8", "replace"))
    return out


def build_tokenizer(r):
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    f = r.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    pre = f["tokenizer.ggml.pre"].contents() if "tokenizer.ggml.pre" in f else "default"
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl])
    else:
        tok.pre_tokenizer = bl
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] in (2, 3)])
    tpl = f["tokenizer.chat_template"].contents()
    m = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", tpl, re.S)
    system = m.group(1) if m else None
    return tok, system


def chat(system, user):
    s = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    return s + f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def main():
    from gguf import GGUFReader
    from gguf.quants import dequantize
    gguf_path, outdir = sys.argv[1], sys.argv[2]
    n_train = int(sys.argv[3]) if len(sys.argv) > 3 else 600
    n_held = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    os.makedirs(outdir + "/w", exist_ok=True)
    r = GGUFReader(gguf_path)
    cfg = {}
    for k in ("block_count", "embedding_length", "feed_forward_length", "attention.head_count",
              "attention.head_count_kv", "rope.freq_base", "attention.layer_norm_rms_epsilon",
              "vocab_size"):
        cfg[k] = r.fields["llama." + k].contents()
    if not os.path.exists(outdir + "/w/.done"):
        for t in r.tensors:
            a = dequantize(t.data, t.tensor_type).astype(np.float32)
            shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order: (out, in)
            np.save(f"{outdir}/w/{t.name}.npy", a.reshape(shape))
        open(outdir + "/w/.done", "w").close()
    print(f"prep: weights of {gguf_path} dequantized to {outdir}/w", flush=True)
    tok, system = build_tokenizer(r)
    ot = subprocess.run(["bible", "-f", "gen1:1-mal4:6"], capture_output=True, text=True).stdout
    nt = subprocess.run(["bible", "-f", "mat1:1-rev22:21"], capture_output=True, text=True).stdout
    if len(ot) < 100000 or len(nt) < 100000:
        sys.exit("prep: `bible` (package bible-kjv) gave no text")
    sets = {}
    for name, text, n, asks in (("train", ot, n_train, ASKS), ("heldout", nt, n_held, ASKS[:1])):
        ps = cut_passages(text, n)
        recs = [chat(system, asks[i % len(asks)] + p) for i, p in enumerate(ps)]
        ids = [e.ids for e in tok.encode_batch(recs, add_special_tokens=False)]
        sets[name] = {"text": ps, "ids": ids}
        with open(f"{outdir}/prompts_{name}.json", "w") as f:
            json.dump(sets[name], f)
        print(f"prep: {len(ids)} {name} prompts, {sum(map(len, ids))} tokens", flush=True)
    with open(f"{outdir}/target_config.json", "w") as f:
        json.dump({k: (float(v) if isinstance(v, float) else v) for k, v in cfg.items()}, f)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cuts a Llama GGUF's vocabulary to its first N ids (the standard library only).

gguf_vocab_prefix.py IN.gguf N OUT.gguf

The GPU check's test model (the Makefile's gpu-model) is two layers of SmolLM2-135M, whose
49152-row embedding is three quarters of the file; the check compares the engines' tokens with
the host reference on the same file, so any valid model serves, and a prefix of the vocabulary
keeps one: token_embd (and output, when untied) keep their first N rows, block for block;
tokenizer.ggml.tokens / token_type / scores their first N entries; tokenizer.ggml.merges the
merges whose two parts and whose result are all kept (byte-level BPE: every text still
tokenizes, into more pieces); <arch>.vocab_size becomes N. Special token ids must lie below
N. Every other key and tensor is copied as it is. OUT is written beside and renamed into place.
"""
import os
import struct
import sys

# ggml type -> (block bytes, block elements): the types a row can be cut from
BLOCKS = {0: (4, 1), 1: (2, 1), 30: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32), 8: (34, 32)}
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALARS[t])


def put_value(out, t, v):
    if t == STRING:
        out += struct.pack("<Q", len(v)) + v
    elif t == ARRAY:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        for x in items:
            put_value(out, et, x)
    else:
        out += struct.pack("<" + SCALARS[t], v)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, n, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    data = open(src, "rb").read()
    r = Reader(data)
    if r.take("I") != 0x46554747:
        sys.exit(f"{src}: not a GGUF file (magic)")
    version = r.take("I")
    if version not in (2, 3):
        sys.exit(f"{src}: GGUF version {version} (expected 2 or 3)")
    nt, nkv = r.take("Q"), r.take("Q")
    kv = []
    for _ in range(nkv):
        k = r.string()
        t = r.take("I")
        kv.append([k.decode(), t, r.value(t)])
    tensors = []
    for _ in range(nt):
        name = r.string().decode()
        nd = r.take("I")
        dims = [r.take("Q") for _ in range(nd)]
        tensors.append([name, dims, r.take("I"), r.take("Q")])
    meta = {k: (t, v) for k, t, v in kv}
    align = meta.get("general.alignment", (4, 32))[1]
    base = (r.p + align - 1) // align * align
    arch = meta["general.architecture"][1].decode()
    vocab = len(meta["tokenizer.ggml.tokens"][1][1])
    if not 0 < n <= vocab:
        sys.exit(f"{src}: N = {n}: expected 1 to the vocabulary's {vocab}")
    for k, (t, v) in meta.items():
        if k.startswith("tokenizer.ggml.") and k.endswith("_token_id") and v >= n:
            sys.exit(f"{src}: {k} = {v}: a special token past the first {n} ids")
    toks = meta["tokenizer.ggml.tokens"][1][1][:n]
    kept = set(toks)
    for e in kv:
        k = e[0]
        if k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            e[2] = (e[2][0], e[2][1][:n])
        elif k == "tokenizer.ggml.merges":
            keep = []
            for m in e[2][1]:
                a, _, b = m.partition(b" ")
                if a in kept and b in kept and a + b in kept:
                    keep.append(m)
            e[2] = (e[2][0], keep)
        elif k == f"{arch}.vocab_size":
            e[2] = n
    blobs = []
    for t in tensors:
        name, dims, typ, off = t
        size = 1
        for d in dims:
            size *= d
        if typ not in BLOCKS:
            if name in ("token_embd.weight", "output.weight"):
                sys.exit(f"{src}: {name}: ggml type {typ} (expected one of {sorted(BLOCKS)})")
        bb, be = BLOCKS.get(typ, (0, 1))
        nbytes = size // be * bb if typ in BLOCKS else None
        if nbytes is None:  # copy up to the next tensor's offset (or the end)
            later = [x[3] for x in tensors if x[3] > off]
            nbytes = (min(later) if later else len(data) - base) - off
        raw = data[base + off:base + off + nbytes]
        if name in ("token_embd.weight", "output.weight") and dims[-1] == vocab:
            row = dims[0] // be * bb
            raw = raw[:row * n]
            t[1] = dims[:-1] + [n]
        blobs.append(raw)
    out = bytearray(struct.pack("<IIQQ", 0x46554747, version, nt, nkv))
    for k, t, v in kv:
        put_value(out, STRING, k.encode())
        out += struct.pack("<I", t)
        put_value(out, t, v)
    off = 0
    offs = []
    for b in blobs:
        offs.append(off)
        off = (off + len(b) + align - 1) // align * align
    for (name, dims, typ, _), o in zip(tensors, offs):
        put_value(out, STRING, name.encode())
        out += struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", typ, o)
    out += b"\0" * (-len(out) % align)
    for b in blobs:
        out += b
        out += b"\0" * (-len(b) % align)
    tmp = f"{dst}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, dst)
    print(f"gguf_vocab_prefix: {dst}: the first {n} of {vocab} ids, {len(out)} bytes (was {len(data)})")


if __name__ == "__main__":
    main()

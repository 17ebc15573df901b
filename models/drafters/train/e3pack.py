#!/usr/bin/env python3
"""Packs an EAGLE-3 head for the repository (torch + the standard library: the GPU machine's
job calls it on the head it trained, and it runs anywhere else the same way).

e3pack.py HEAD_DIR OUT_DIR [--max-bytes 8000000]
HEAD_DIR: config.json + model.safetensors in the public format (e3train.save writes F16).
OUT_DIR (must not exist): config.json (copied byte for byte), model.safetensors and SHA256SUMS
(`sha256sum -c` format, both files). In model.safetensors every matrix whose rows are whole
blocks of 32 is stored as GGUF Q8_0's blocks split in two tensors: NAME (I8, the codes) and
NAME_scale (F16, one scale per block, shape [rows, cols / 32]); runtime/model/eagle3.c reads
them back as code x scale. The arithmetic is gguf.c's q8_0_block (ggml's reference
quantizer): d = amax / 127 in f32, codes round(x * (1 / d)) half away from zero, the scale
stored as f16(d). A gguf_a8 engine quantizes the head's weights to Q8_0 at upload with that
same function, and re-quantizing code x f16(d) gives the same codes and scale again, so that
engine runs the very blocks it would have made from the F16 head. fp16 engines and the host
decoder draft from the rounded weights instead (within half a step of each block); drafts
decide speed, never the output (verification is the target's). Vectors (the norms) and d2t
stay as they are; t2d is left out (the loader derives it from d2t). About 7.95 MB for the
SmolLM2 head (7.45 M weights in bytes, 1/16 more in scales); over --max-bytes is an error.
"""
import argparse
import ctypes
import hashlib
import json
import os
import shutil
import struct
import sys

import torch

BLOCK = 32
DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
          "I64": (torch.int64, 8), "BOOL": (torch.bool, 1), "I8": (torch.int8, 1)}
NAMES = {v[0]: k for k, v in DTYPES.items()}


def read_safetensors(path):
    """[(name, tensor)] in file order (CPU tensors, dtypes as stored)."""
    raw = open(path, "rb").read()
    if len(raw) < 8:
        raise ValueError(f"{path}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"{path}: header length {n} runs past the file ({len(raw)} bytes)")
    header = json.loads(raw[8:8 + n])
    data = bytearray(raw[8 + n:])
    out = []
    for name, h in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                          key=lambda kv: kv[1]["data_offsets"][0]):
        if h["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name}: dtype {h['dtype']} (expected one of {sorted(DTYPES)})")
        dt, size = DTYPES[h["dtype"]]
        b, e = h["data_offsets"]
        count = 1
        for d in h["shape"]:
            count *= d
        if e - b != count * size or e > len(data):
            raise ValueError(f"{path}: tensor {name}: data_offsets [{b}, {e}] do not hold shape {h['shape']}")
        t = torch.frombuffer(data, dtype=torch.uint8, count=e - b, offset=b).clone()
        out.append((name, t.view(dt).reshape(h["shape"])))
    return out


def write_safetensors(path, tensors, metadata):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors:
        t = t.detach().cpu().contiguous()
        raw = _bytes(t)
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def _bytes(t):
    """A contiguous CPU tensor's bytes (through ctypes: the GPU machine has no numpy)."""
    t = t.to(torch.uint8) if t.dtype == torch.bool else t
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def q8_0(w):
    """w (rows, cols) float -> (codes int8 (rows, cols), scales f16 (rows, cols / 32)), as
    gguf.c's q8_0_block: amax, d = amax / 127, id = 1 / d (0 when d is 0), code =
    roundf(x * id) (half away from zero), the scale f16(d) (round to nearest even)."""
    x = w.detach().to("cpu", torch.float32)
    rows, cols = x.shape
    xb = x.reshape(rows, cols // BLOCK, BLOCK)
    d = xb.abs().amax(-1) / torch.tensor(127.0)
    nz = d != 0
    idv = torch.where(nz, torch.div(torch.ones_like(d), torch.where(nz, d, torch.ones_like(d))), torch.zeros_like(d))
    v = xb * idv[..., None]
    a = v.abs()
    fl = a.floor()
    q = (fl + ((a - fl) >= 0.5).to(torch.float32)) * torch.sign(v)
    return q.to(torch.int8).reshape(rows, cols), d.to(torch.float16)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pack(src, out, max_bytes=8_000_000):
    """Writes out/ (which must not exist) from the head in src; returns the packed file's size."""
    if os.path.exists(out):
        raise ValueError(f"{out}: exists (the packed head is written to a new directory)")
    tensors = read_safetensors(f"{src}/model.safetensors")
    packed, kept = [], []
    for name, t in tensors:
        if name == "t2d":
            continue  # derived from d2t by the loader
        if t.dim() == 2 and t.is_floating_point() and t.shape[1] % BLOCK == 0:
            q, s = q8_0(t)
            packed += [(name, q), (name + "_scale", s)]
        else:
            kept.append(name)
            packed.append((name, t))
    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        shutil.copyfile(f"{src}/config.json", f"{tmp}/config.json")
        meta = {"format": "pt", "packed": "q8_0: each matrix NAME as I8 codes and NAME_scale, "
                "one F16 scale per block of 32 (models/drafters/train/e3pack.py)"}
        write_safetensors(f"{tmp}/model.safetensors", packed, meta)
        size = os.path.getsize(f"{tmp}/model.safetensors")
        if size > max_bytes:
            raise ValueError(f"{out}/model.safetensors: {size} bytes, over the limit of {max_bytes} "
                             f"(kept unpacked: {', '.join(kept) or 'nothing'})")
        with open(f"{tmp}/SHA256SUMS", "w") as f:
            for fn in ("config.json", "model.safetensors"):
                f.write(f"{sha256(f'{tmp}/{fn}')}  {fn}\n")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("head", help="the head's directory (config.json + model.safetensors)")
    ap.add_argument("out", help="the packed head's directory (must not exist)")
    ap.add_argument("--max-bytes", type=int, default=8_000_000)
    a = ap.parse_args()
    try:
        size = pack(a.head, a.out, a.max_bytes)
    except (OSError, ValueError, KeyError) as e:
        print(f"e3pack: error: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"e3pack: {a.out}: model.safetensors {size} bytes, config.json, SHA256SUMS")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""llama.cpp's target-only greedy decode on the prompts `specwright bench`
used (issue 15): tok/s wall-clock and per CPU-second of this process.

  SW_BENCH_IDS=ids.txt build/specwright bench ENGINE_DIR ...   # writes the prompt ids
  $REF/venv/bin/python tests/reference/llamacpp_bench.py ids.txt MODEL.gguf [...]

ids.txt: one prompt per line, token ids separated by spaces. Each model file
is timed on every prompt: prefill (not counted), then N_GEN greedy tokens
one at a time (llama.cpp's sampler, top-k 1). --f16 SRC DST first writes DST,
a copy of SRC with every tensor dequantized to F16 (norms stay F32), with
the vendored gguf-py (PYTHONPATH=$REF/llama_cpp_python-*/vendor/llama.cpp/gguf-py).
--q8 SRC DST likewise writes DST with the matrices requantized to Q8_0
(gguf-py's reference quantizer, as ggml's). --lookup also times llama.cpp's
prompt-lookup decoding (llama-cpp-python's LlamaPromptLookupDecoding, its
default n-gram size 2 and 10 draft tokens) on each model.
Prints one markdown row per model and mode: median tok/s and tok per
CPU-second; --machine adds one tab-separated line per row
("ROW<TAB>label<TAB>tok/s<TAB>tok per CPU-s<TAB>tokens") for `specwright bench`."""
import argparse
import os
import statistics
import sys
import time

import numpy as np


def convert_f16(src, dst):
    from llamacpp_ref import convert_gguf  # the same converter check-reference uses
    convert_gguf(src, dst, f16=True)


def convert_q8(src, dst):
    from llamacpp_ref import convert_gguf
    convert_gguf(src, dst, q8_0=True)


def bench(model, prompts, n_gen, threads, lookup=False):
    from llama_cpp import Llama
    draft = None
    if lookup:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
        draft = LlamaPromptLookupDecoding()
    llm = Llama(model_path=model, n_ctx=1024, n_batch=512, n_threads=threads,
                n_threads_batch=threads, verbose=False, draft_model=draft)
    wall, cpu, toks = [], [], []
    for i, ids in enumerate(prompts):
        print(f"llamacpp_bench: {os.path.basename(model)}{' lookup' if lookup else ''} "
              f"prompt {i + 1} of {len(prompts)}", file=sys.stderr, flush=True)
        llm.reset()
        llm.eval(ids)
        n = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for tok in llm.generate([], top_k=1, temp=0.0, reset=False):
            n += 1
            if n >= n_gen or tok == llm.token_eos():
                break
        t1, c1 = time.perf_counter(), time.process_time()
        wall.append(n / (t1 - t0))
        cpu.append(n / (c1 - c0))
        toks.append(n)
    return statistics.median(wall), statistics.median(cpu), sum(toks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ids")
    ap.add_argument("models", nargs="*")
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--f16", nargs=2, metavar=("SRC", "DST"))
    ap.add_argument("--q8", nargs=2, metavar=("SRC", "DST"))
    ap.add_argument("--lookup", action="store_true")
    ap.add_argument("--machine", action="store_true")
    a = ap.parse_args()
    if a.f16 and not os.path.exists(a.f16[1]):
        convert_f16(*a.f16)
    if a.q8 and not os.path.exists(a.q8[1]):
        convert_q8(*a.q8)
    prompts = [[int(x) for x in line.split()] for line in open(a.ids) if line.strip()]
    print(f"llama.cpp target-only greedy, {len(prompts)} prompts, {a.n_gen} new tokens, "
          f"{a.threads} threads")
    print("| model | decoding | median tok/s | median tok per CPU-s | tokens |")
    print("|---|---|---|---|---|")
    rows = []
    for m in a.models:
        for lk in ([False, True] if a.lookup else [False]):
            w, c, n = bench(m, prompts, a.n_gen, a.threads, lk)
            mode = "prompt lookup" if lk else "target only"
            print(f"| {os.path.basename(m)} | {mode} | {w:.2f} | {c:.2f} | {n} |")
            rows.append(f"ROW\t{os.path.basename(m)} {mode}\t{w:.4f}\t{c:.4f}\t{n}")
            sys.stdout.flush()
    if a.machine:
        print("\n".join(rows))


if __name__ == "__main__":
    main()

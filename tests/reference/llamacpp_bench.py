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
Prints one markdown row per model: median tok/s and tok per CPU-second."""
import argparse
import os
import statistics
import sys
import time

import numpy as np


def convert_f16(src, dst):
    from llamacpp_ref import convert_gguf  # the same converter check-reference uses
    convert_gguf(src, dst, f16=True)


def bench(model, prompts, n_gen, threads):
    from llama_cpp import Llama
    llm = Llama(model_path=model, n_ctx=1024, n_batch=512, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    wall, cpu, toks = [], [], []
    for ids in prompts:
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
    a = ap.parse_args()
    if a.f16 and not os.path.exists(a.f16[1]):
        convert_f16(*a.f16)
    prompts = [[int(x) for x in line.split()] for line in open(a.ids) if line.strip()]
    print(f"llama.cpp target-only greedy, {len(prompts)} prompts, {a.n_gen} new tokens, "
          f"{a.threads} threads")
    print("| model | median tok/s | median tok per CPU-s | tokens |")
    print("|---|---|---|---|")
    for m in a.models:
        w, c, n = bench(m, prompts, a.n_gen, a.threads)
        print(f"| {os.path.basename(m)} | {w:.2f} | {c:.2f} | {n} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks the parts gpu_e3.py adds to the data path (python3-torch, CPU, ~1-2 min):
1. smollm.Target.from_gguf (tests/gpu/torch_ref.py's dequantization) equals Target(WDIR)
   (prep.py's .npy files, dequantized by the gguf package) tensor by tensor, when WDIR
   (prep.py's output) is given;
2. tf_data.generate's rows are independent of the batch: greedy rows of a batch equal the
   same prompts decoded alone (fp32 weights, where the product is batch-invariant);
3. its compaction (finished rows leave the cache once they are 1/compact of it) changes
   nothing: every finish, never, and at 1/3 give the same rows, with a frequent token as
   the end marker so that rows finish at different steps.
check_gen.py GGUF CHAT_IDS_JSON [WDIR]   (CHAT_IDS_JSON: gpu_pack's chat_ids.json or a
corpus.py chat_prompts.json). Exit status 0 when every check holds."""
import importlib.util
import json
import os
import sys
from collections import Counter

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import smollm  # noqa: E402
import tf_data  # noqa: E402


def main():
    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("torch_ref", os.path.join(HERE, "../../../tests/gpu/torch_ref.py"))
    tr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tr)
    m = smollm.Target.from_gguf(tr.GGUF(sys.argv[1]), torch.device("cpu"))
    c = json.load(open(sys.argv[2]))
    chat = c["ids"] if isinstance(c, dict) else c
    ok = True
    if len(sys.argv) > 3:
        ref = smollm.Target(sys.argv[3])
        worst = max(float((a - b).abs().max()) for a, b in
                    [(m.embd, ref.embd), (m.out_norm, ref.out_norm)] +
                    [(x[k], y[k]) for x, y in zip(m.layers, ref.layers) for k in x])
        print(f"check_gen: from_gguf vs prep.py's weights: max |difference| {worst:.3e}")
        ok &= worst == 0.0
    P = [chat[i] for i in (0, 5, 9, 17, 33, 41)]
    gen = torch.Generator().manual_seed(0)
    greedy = [False] * len(P)
    batch = tf_data.generate(m, P, 24, gen, greedy)
    alone = [tf_data.generate(m, [p], 24, gen, [False])[0] for p in P[:2]]
    print(f"check_gen: greedy rows in a batch of {len(P)} == decoded alone: {batch[:2] == alone}")
    ok &= batch[:2] == alone
    cnt = Counter(t for s, p in zip(batch, P) for t in s[len(p):])
    tf_data.EOT = cnt.most_common(3)[2][0]
    runs = [tf_data.generate(m, P, 24, gen, greedy, compact=k) for k in (1, 10 ** 9, 3)]
    lens = [len(x) - len(p) for x, p in zip(runs[0], P)]
    same = runs[0] == runs[1] == runs[2]
    print(f"check_gen: end marker {tf_data.EOT}, new tokens per row {lens}; compaction at every finish == "
          f"never == at 1/3: {same}")
    ok &= same and len(set(lens)) > 2
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

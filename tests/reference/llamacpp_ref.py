#!/usr/bin/env python3
"""Independent check of specwright's forward pass against llama.cpp.

Run by tests/reference/check.sh inside build/ref/venv (llama-cpp-python built
from its PyPI sdist) with the sdist's vendored gguf-py on PYTHONPATH.

Inputs: the GGUF model and, per prompt, the prompt text and the binary dump of
`specwright eval --dump` (int32 [n_prompt, n_gen, V], n_prompt prompt ids,
n_gen generated ids, n_gen x V float32 logits; row i predicted generated[i]).

For each prompt llama.cpp
  * tokenizes the text itself (tokenizer cross-check, reported and checked),
  * decodes greedily for n_gen tokens from OUR prompt ids (not re-tokenized),
  * is teacher-forced on our prompt + generated ids, so that every logits row
    is taken at exactly the prefix our row was taken at.

Tolerance (full derivation in tests/reference/README.md). llama.cpp's CPU
Q4_1 / Q8_0 matmuls quantize the activation to Q8_1 / Q8_0 (8 bit, one fp16
scale d = max|x_b|/127 per block of 32) before the dot product; we use exact
fp32 activations. Per block the rounding error e_i ~ U(-d/2, d/2), so
    ||e_b|| / ||x_b|| = sqrt(32 d^2/12) / ||x_b|| <= sqrt(32/12)/127   (since ||x_b|| >= max|x_b| = 127 d)
plus 2^-11 for the fp16 scale: RHO_MAX = 0.01335, a hard cap whatever the
activation distribution. Each of the N = 30*7 + 1 = 211 quantized matmuls
injects such a relative error; with independent injections and unit gain
through the (pre-norm, residual) blocks the final normed hidden state h carries
    EPS_BOUND = RHO_MAX * sqrt(N) = 0.194      (relative, ||dh|| / ||h||).
A logit is l_j = E_j . h (tied Q8_0 embedding E), so for dh in a random
direction dl_j ~ N(0, (EPS * ||E_j|| * ||h|| / sqrt(D))^2), D = 576.
The check normalizes every logit difference by s_j = ||E_j|| ||h|| / sqrt(D):
    max_j |dl_j| / s_j <= Z * EPS_BOUND,  Z = sqrt(2 ln(V * steps)) (Gaussian max)
and a greedy token may differ only where both engines' top-2 margin is below
    T = Z_PAIR * EPS_BOUND * sqrt(s_a^2 + s_b^2)   (top-2 pair difference, Z_PAIR = 4).
h is recovered exactly from the logits by least squares (l = E h, E has full
column rank), so the measured eps = ||h_ours - h_llama|| / ||h_ours|| is
reported against EPS_BOUND (and against the typical value EPS_TYP, for which
max|x_b|/rms(x_b) = 2.44, the mean max of 32 |N(0,1)|, replaces sqrt(32)).

Other weight types (Gemma 3 270M's Q4_K_M file mixes Q5_0, Q8_0, Q4_K and
Q6_K): llama.cpp quantizes the activation of a Q4_0/Q4_1/Q5_0/Q5_1/Q8_0
matmul to Q8_0/Q8_1 (blocks of 32, fp16 scale, RHO_MAX above) and that of a
K-quant (Q2_K..Q6_K) to Q8_K (blocks of 256, fp32 scale):
    RHO_K = sqrt(256/12)/127 = 0.0364   (typ 3.04/(127 sqrt 12) = 0.0069,
                                         3.04 = mean max of 256 |N(0,1)|).
Each matmul i gets the rho of its own weight type, and with independent
injections EPS_BOUND = sqrt(sum_i rho_i^2) (= RHO_MAX sqrt(N) when all are
alike, as for SmolLM2).

With --rho fp32, run on the same weights dequantized to F32 (written by
--convert-f32; llama.cpp then quantizes no activation either), the same
comparison uses the fp32 rounding bound RHO32 = 4 u sqrt(K_max) instead
(K_max the longest dot product of the model's matmuls: 1536 for SmolLM2,
2048 for Gemma 3 270M). Gemma adds llama.cpp's fp16 GELU table (RHO_GELU
below), one per block.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

D_BLOCK = 32
U32 = 2.0 ** -24                     # fp32 unit roundoff
FP16_SCALE = 2.0 ** -11              # relative rounding of the fp16 block scale
RHO_MAX = math.sqrt(D_BLOCK / 12.0) / 127.0 + FP16_SCALE   # 0.01335
RHO_TYP = 2.44 / (127.0 * math.sqrt(12.0))                   # 0.00555
RHO_K = math.sqrt(256 / 12.0) / 127.0                        # Q8_K, fp32 scale: 0.0364
RHO_K_TYP = 3.04 / (127.0 * math.sqrt(12.0))                 # 0.0069
K_QUANTS = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}
FP_TYPES = {"F32", "F16", "BF16"}


def act_rho(wtype):
    """(hard cap, typical) relative error of the activation quantization
    llama.cpp's CPU matmul applies for a weight of type wtype."""
    if wtype in FP_TYPES:
        return 0.0, 0.0
    if wtype in K_QUANTS:
        return RHO_K, RHO_K_TYP
    return RHO_MAX, RHO_TYP
Z_PAIR = 4.0


def read_dump(path):
    with open(path, "rb") as f:
        raw = f.read()
    n_prompt, n_gen, V = struct.unpack("<3i", raw[:12])
    ids = np.frombuffer(raw, dtype="<i4", count=n_prompt + n_gen, offset=12)
    off = 12 + 4 * (n_prompt + n_gen)
    want = off + 4 * n_gen * V
    if len(raw) != want:
        raise SystemExit(f"{path}: size {len(raw)} != expected {want}")
    logits = np.frombuffer(raw, dtype="<f4", offset=off).reshape(n_gen, V)
    return [int(t) for t in ids[:n_prompt]], [int(t) for t in ids[n_prompt:]], logits


def output_matrix(model_path):
    """The lm_head matrix (output.weight, else the tied token_embd) as fp32
    V x D, its name and type, and the number of blocks."""
    import gguf
    r = gguf.GGUFReader(model_path)
    by = {t.name: t for t in r.tensors}
    t = by.get("output.weight") or by["token_embd.weight"]
    E = gguf.quants.dequantize(t.data, t.tensor_type)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    n_blk = int(r.fields[f"{arch}.block_count"].parts[-1][0])
    # the matmuls of one forward: every 2-D weight but the embedding lookup,
    # plus the lm_head (the tied embedding or output.weight)
    mm = [(u.tensor_type.name, int(u.shape[0])) for u in r.tensors
          if len(u.shape) == 2 and u.name not in ("token_embd.weight", "output.weight")]
    mm.append((t.tensor_type.name, int(t.shape[0])))
    return np.ascontiguousarray(E, dtype=np.float32), t.name, t.tensor_type.name, n_blk, mm, arch


def convert_gguf(src, dst, f16=False, q8_0=False):
    """Write a copy of src with every tensor dequantized to F32, or (f16)
    the matrices to F16 and the vectors to F32 (llamacpp_bench.py's F16
    model), or (q8_0) the matrices requantized to Q8_0 with gguf-py's
    reference quantizer (llamacpp_bench.py's Q8_0 model)."""
    import gguf
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst + ".tmp", arch)
    for field in r.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vt = field.types[0]
        sub = field.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        val = field.contents()
        if field.name == "general.file_type":
            val = int(gguf.LlamaFileType.MOSTLY_Q8_0 if q8_0 else
                      gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
        w.add_key_value(field.name, val, vt, sub_type=sub)
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if q8_0 and a.ndim >= 2:
            q8 = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(t.name, np.ascontiguousarray(gguf.quants.quantize(a, q8)), raw_dtype=q8)
            continue
        if f16 and a.ndim >= 2:
            a = a.astype(np.float16)
        w.add_tensor(t.name, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(dst + ".tmp", dst)


def plain_cpu_kernels():
    """Loads models without llama.cpp's extra CPU buffer types (AMX and
    repacked weights): the reference is its generic CPU path. Measured with
    the pinned 0.3.16 build (-DGGML_NATIVE=ON) on this AMX CPU: Q4_1 logits
    teacher-forced on 32 or more tokens a batch come out with a relative
    error of 2.2 against the same weights in F32 (top-1 agreement 50%), and
    0.08-0.10 below 32 tokens or with the extra types off, where the Q8_1
    activation bound predicts up to 0.19; F32 weights are not affected. The
    extra types are a speed path, so the check does not use them."""
    import llama_cpp.llama_cpp as low
    if getattr(low, "_sw_plain", False):
        return
    orig = low.llama_model_default_params

    def params():
        p = orig()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p
    low.llama_model_default_params = params
    low._sw_plain = True


class Ref:
    def __init__(self, model_path, n_ctx):
        from llama_cpp import Llama
        plain_cpu_kernels()
        # f32 KV cache (type 0 = GGML_TYPE_F32) and no flash attention, so the
        # attention itself adds no fp16 rounding on llama.cpp's side.
        self.llm = Llama(model_path=model_path, logits_all=True, n_ctx=n_ctx,
                         n_batch=n_ctx, n_ubatch=n_ctx, n_threads=2,
                         type_k=0, type_v=0, flash_attn=False, verbose=False)

    def tokenize(self, text):
        return self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    def greedy(self, prompt, n):
        llm = self.llm
        llm.reset()
        llm.eval(prompt)
        toks, rows = [], []
        for i in range(n):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            t = int(np.argmax(row))
            toks.append(t)
            rows.append(row)
            if i + 1 < n:
                llm.eval([t])
        return toks, np.stack(rows)

    def forced(self, prompt, gen):
        llm = self.llm
        llm.reset()
        llm.eval(list(prompt) + list(gen[:-1]))
        p = len(prompt)
        return np.array(llm.scores[p - 1:p - 1 + len(gen)], dtype=np.float32)


def top2(row):
    i = np.argpartition(-row, 2)[:2]
    i = i[np.argsort(-row[i])]
    return int(i[0]), int(i[1]), float(row[i[0]] - row[i[1]])


def compare(ours_ids, ours_logits, ref_gen, ref_rows, ref_forced, E, Einv, Enorm, eps_bound, z):
    """Statistics and verdict for one prompt."""
    D = E.shape[1]
    n = len(ours_ids)
    st = dict(max_abs=0.0, max_rel_spread=0.0, rms=0.0, max_norm=0.0, eps_max=0.0,
              resid_max=0.0, top1=0, top5_same=0, top5_overlap=0.0, steps=n,
              near_ties=[], problems=[])
    sq = 0.0
    for i in range(n):
        a = ours_logits[i].astype(np.float64)
        b = ref_forced[i].astype(np.float64)
        d = a - b
        h_a = Einv(a)
        h_b = Einv(b)
        hn = float(np.linalg.norm(h_a))
        resid = float(np.linalg.norm(E @ h_a.astype(np.float32) - a) / np.linalg.norm(a))
        st["resid_max"] = max(st["resid_max"], resid)
        eps = float(np.linalg.norm(h_a - h_b) / hn)
        st["eps_max"] = max(st["eps_max"], eps)
        s = Enorm * hn / math.sqrt(D)           # per-logit scale s_j
        norm = np.abs(d) / s
        st["max_norm"] = max(st["max_norm"], float(norm.max()))
        st["max_abs"] = max(st["max_abs"], float(np.abs(d).max()))
        st["max_rel_spread"] = max(st["max_rel_spread"], float(np.abs(d).max() / (a.max() - a.min())))
        sq += float((d * d).mean())
        ta, ta2, ma = top2(a)
        tb, tb2, mb = top2(b)
        t5a = set(np.argpartition(-a, 5)[:5].tolist())
        t5b = set(np.argpartition(-b, 5)[:5].tolist())
        st["top1"] += ta == tb
        st["top5_same"] += t5a == t5b
        st["top5_overlap"] += len(t5a & t5b) / 5.0
        tie_tol = Z_PAIR * eps_bound * math.sqrt(s[ta] ** 2 + s[ta2] ** 2)
        if ta != ours_ids[i]:
            st["problems"].append(f"step {i}: our logits argmax {ta} != our token {ours_ids[i]}")
        if ta != tb:
            info = dict(step=i, ours=ta, llama=tb, margin_ours=ma, margin_llama=mb, tie_tol=tie_tol)
            st["near_ties"].append(info)
            if not (ma < tie_tol and mb < tie_tol):
                st["problems"].append(f"step {i}: top-1 {ta} vs llama.cpp {tb} with margins "
                                      f"{ma:.4f}/{mb:.4f} >= near-tie tolerance {tie_tol:.4f}")
    st["rms"] = math.sqrt(sq / n)
    st["top5_overlap"] /= n
    if st["max_norm"] > z * eps_bound:
        st["problems"].append(f"logits: max |dl|/s = {st['max_norm']:.4f} > bound {z * eps_bound:.4f}")
    # llama.cpp's own greedy run against ours: identical, or diverging at a
    # step where both engines' top-2 margins (on the still shared prefix) are
    # below the near-tie tolerance. After a divergence the prefixes differ, so
    # only the teacher-forced rows above are compared.
    div = next((i for i in range(n) if ref_gen[i] != ours_ids[i]), None)
    st["greedy_identical"] = div is None
    st["greedy_divergence"] = div
    if div is not None:
        a = ours_logits[div].astype(np.float64)
        ta, ta2, ma = top2(a)
        _, _, mb = top2(ref_rows[div].astype(np.float64))
        s = Enorm * float(np.linalg.norm(Einv(a))) / math.sqrt(D)
        tol = Z_PAIR * eps_bound * math.sqrt(s[ta] ** 2 + s[ta2] ** 2)
        st["greedy_divergence_margins"] = dict(ours=ma, llama=mb, tie_tol=tol)
        if not (ma < tol and mb < tol):
            st["problems"].append(f"greedy: llama.cpp diverges at step {div} ({ref_gen[div]} vs our {ours_ids[div]}) "
                                  f"with margins {ma:.4f}/{mb:.4f} >= near-tie tolerance {tol:.4f}")
    return st


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--case", action="append", nargs=2, metavar=("PROMPT_FILE", "DUMP"), default=[])
    ap.add_argument("--label", default="Q4_1 model vs llama.cpp (Q8_1/Q8_0 activations)")
    ap.add_argument("--rho", choices=["q8", "fp32"], default="q8",
                    help="tolerance model: q8 = llama.cpp quantizes activations; fp32 = F32 weights, rounding only")
    ap.add_argument("--convert-f32", nargs=2, metavar=("SRC", "DST"),
                    help="only write DST = SRC with all tensors dequantized to F32, then exit")
    ap.add_argument("--json")
    args = ap.parse_args()

    if args.convert_f32:
        convert_gguf(*args.convert_f32)
        return 0
    if not args.case:
        ap.error("at least one --case PROMPT_FILE DUMP")

    t0 = time.time()
    cases = []
    for pf, dump in args.case:
        with open(pf, "rb") as f:
            text = f.read().decode("utf-8")
        p, g, L = read_dump(dump)
        cases.append((text, p, g, L))
    V = cases[0][3].shape[1]
    n_ctx = max(len(p) + len(g) for _, p, g, _ in cases) + 8
    n_ctx = max(64, (n_ctx + 63) // 64 * 64)

    E, ename, etype, L_blocks, matmuls, arch = output_matrix(args.model)
    if E.shape[0] != V:
        raise SystemExit(f"vocab mismatch: dump V={V}, {ename} has {E.shape[0]} rows")
    D = E.shape[1]
    Enorm = np.linalg.norm(E.astype(np.float64), axis=1)
    E64 = E.astype(np.float64)
    G = E64.T @ E64
    cond = float(np.linalg.cond(G)) ** 0.5
    Gc = np.linalg.cholesky(G)

    def Einv(l):
        y = np.linalg.solve(Gc, E64.T @ l)
        return np.linalg.solve(Gc.T, y)

    N = len(matmuls)          # q, k, v, o, gate, up, down per block + lm_head
    k_max = max(k for _, k in matmuls)
    if args.rho == "q8":
        rhos = [act_rho(wt) for wt, _ in matmuls]
        eps_bound = math.sqrt(sum(r * r for r, _ in rhos))
        eps_typ = math.sqrt(sum(r * r for _, r in rhos))
        rho, rho_typ = max(r for r, _ in rhos), max(r for _, r in rhos)
    else:
        # fp32 only: dot-product accumulation in a different order (u sqrt(K)),
        # RoPE angle/sin/cos rounding (~ u * pos) and exp/silu/gelu
        # approximations (~ 2 ulp); a factor 4 over the largest, u * sqrt(K_max).
        rho = 4.0 * U32 * math.sqrt(k_max)
        rho_typ = U32 * math.sqrt(k_max)
        eps_bound = rho * math.sqrt(N)
        eps_typ = rho_typ * math.sqrt(N)
        if arch.startswith("gemma"):
            # llama.cpp's CPU GEGLU (ggml-cpu/vec.h, GGML_GELU_FP16 defined)
            # looks gelu up in a table indexed by the fp16 rounding of its
            # input and returns the fp16 entry: two roundings of relative
            # size <= 2^-11 (the input's through |x g'(x)/g(x)| <= 1.3 where
            # x > -0.75, which carries the norm) at the input of each
            # block's down projection. RHO_GELU = 4 * 2^-11 (typ 2^-11/sqrt(3)
            # * sqrt(1 + 1)), one per block, added in quadrature.
            rho_gelu, rho_gelu_typ = 4.0 * FP16_SCALE, FP16_SCALE / math.sqrt(3.0) * math.sqrt(2.0)
            eps_bound = math.sqrt(eps_bound ** 2 + L_blocks * rho_gelu ** 2)
            eps_typ = math.sqrt(eps_typ ** 2 + L_blocks * rho_gelu_typ ** 2)
            rho = max(rho, rho_gelu)
            rho_typ = max(rho_typ, rho_gelu_typ)
    types = {}
    for wt, _ in matmuls:
        types[wt] = types.get(wt, 0) + 1
    steps = sum(len(g) for _, _, g, _ in cases)
    z = math.sqrt(2.0 * math.log(V * steps))

    ref = Ref(args.model, n_ctx)
    print(f"== {args.label}")
    print(f"   lm_head {ename} ({etype}), V={V}, D={D}, cond(E)={cond:.1f}; {L_blocks} blocks -> N={N} matmuls "
          f"({', '.join(f'{n} {wt}' for wt, n in sorted(types.items()))}; K_max {k_max})")
    print(f"   rho_max={rho:.3g} (typ {rho_typ:.3g}); eps_bound=sqrt(sum rho_i^2)={eps_bound:.4g} (typ {eps_typ:.3g}); "
          f"Z=sqrt(2 ln(V*steps))={z:.2f}; logit bound max|dl_j|/s_j <= {z * eps_bound:.4g}")
    results = []
    ok_all = True
    for ci, (text, p, g, L) in enumerate(cases):
        own = ref.tokenize(text)
        tok_same = own == p
        ref_gen, ref_rows = ref.greedy(p, len(g))
        forced = ref.forced(p, g)
        st = compare(g, L, ref_gen, ref_rows, forced, E, Einv, Enorm, eps_bound, z)
        if not tok_same:
            st["problems"].append(f"tokenizer: llama.cpp gives {own}, ours {p}")
        st.update(prompt=text, n_prompt=len(p), tokenizer_same=tok_same, llama_tokens=own,
                  ours_gen=g, llama_gen=ref_gen)
        ok = not st["problems"]
        ok_all &= ok
        results.append(st)
        n = st["steps"]
        print(f"-- prompt {ci + 1} {text!r}: {len(p)} prompt ids, tokenizer {'same' if tok_same else 'DIFFERENT'}")
        print(f"   greedy {n} tokens: {'identical' if st['greedy_identical'] else 'diverge at step %d' % st['greedy_divergence']}"
              f"; top-1 {st['top1']}/{n}, top-5 set {st['top5_same']}/{n} (overlap {st['top5_overlap']:.3f})")
        print(f"   logits: max|d|={st['max_abs']:.4g} rms={st['rms']:.3g} max|d|/spread={st['max_rel_spread']:.3g} "
              f"max|d|/s={st['max_norm']:.4g} (bound {z * eps_bound:.4g}); eps(h)={st['eps_max']:.3g} "
              f"(bound {eps_bound:.3g}, typ {eps_typ:.3g}); lstsq resid {st['resid_max']:.1e}")
        for t in st["near_ties"]:
            print(f"   near-tie step {t['step']}: ours {t['ours']} llama {t['llama']} margins "
                  f"{t['margin_ours']:.4f}/{t['margin_llama']:.4f} (tol {t['tie_tol']:.4f})")
        if not st["greedy_identical"]:
            m = st["greedy_divergence_margins"]
            print(f"   greedy divergence step {st['greedy_divergence']}: llama.cpp {ref_gen[st['greedy_divergence']]} "
                  f"vs ours {g[st['greedy_divergence']]}, top-2 margins ours {m['ours']:.4f} / llama.cpp "
                  f"{m['llama']:.4f} (near-tie tol {m['tie_tol']:.4f})")
        for pr in st["problems"]:
            print(f"   PROBLEM {pr}")
        print(f"   {'PASS' if ok else 'FAIL'}")
    print(f"== {args.label}: {'PASS' if ok_all else 'FAIL'} ({len(cases)} prompts, {time.time() - t0:.1f}s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(label=args.label, rho=rho, eps_bound=eps_bound, eps_typ=eps_typ, z=z,
                           logit_bound=z * eps_bound, N=N, ok=ok_all, prompts=results), f, indent=1)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())

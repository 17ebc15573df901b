#!/usr/bin/env python3
"""Writes the small tokenizer GGUFs the tokenizer fuzzer falls back on
(tests/fuzz/data/): tok_bpe.gguf, a byte-level BPE vocabulary cut from the
real model (its 256 byte tokens, its first 2000 merges, its special tokens,
pre "smollm"), and tok_spm.gguf, a SentencePiece BPE model (byte fallback,
vocab 600) trained on the KJV text. Run from the repo root with build/venv:
  build/venv/bin/python tests/tools/gen_fuzz_tok_gguf.py MODEL.gguf
"""
import os
import subprocess
import sys
import tempfile

from gguf import GGUFReader, GGUFWriter


def bpe(model, out):
    f = GGUFReader(model).fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    merges = f["tokenizer.ggml.merges"].contents()[:2000]
    keep = [t for t, ty in zip(tokens, types) if ty != 1]
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    keep += [chr(c) for c in cs]
    for m in merges:
        keep.append(m.replace(" ", "", 1))
    seen, vocab = set(), []
    for t in keep:
        if t not in seen:
            seen.add(t)
            vocab.append(t)
    w = GGUFWriter(out, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(vocab)
    w.add_token_types([3 if i < 17 else 1 for i in range(len(vocab))])
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_space_prefix(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def spm(out):
    import sentencepiece as sp
    with tempfile.TemporaryDirectory() as d:
        text = subprocess.run(["bible", "gen1:1-gen20:18"], capture_output=True, check=True).stdout
        with open(f"{d}/train.txt", "wb") as o:
            o.write(text)
        sp.SentencePieceTrainer.train(
            input=f"{d}/train.txt", model_prefix=f"{d}/m", vocab_size=600, model_type="bpe",
            byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
        m = sp.SentencePieceProcessor(model_file=f"{d}/m.model")
    toks, scores, types = [], [], []
    for i in range(m.get_piece_size()):
        toks.append(m.id_to_piece(i))
        scores.append(m.get_score(i))
        types.append(2 if m.is_unknown(i) else 3 if m.is_control(i) else 6 if m.is_byte(i) else 1)
    w = GGUFWriter(out, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(True)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs("tests/fuzz/data", exist_ok=True)
    bpe(sys.argv[1], "tests/fuzz/data/tok_bpe.gguf")
    spm("tests/fuzz/data/tok_spm.gguf")

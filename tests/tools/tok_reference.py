#!/usr/bin/env python3
"""Independent reference ids for tests/test_tokenizer.c.

bpe GGUF IN OUT
    Builds a HF `tokenizers` Tokenizer from the GGUF's own vocabulary and
    merges, with the pre-tokenizer HF's SmolLM2 tokenizer.json uses
    (Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False,
    use_regex=True)] for tokenizer.ggml.pre "smollm", ByteLevel alone for
    gpt2/default) and the control tokens as special added tokens. Not
    transformers' GGUF conversion: that picks its converter from
    general.architecture ("llama" here) and ignores tokenizer.ggml.pre, so it
    would not reproduce the model's real tokenizer.
    IN holds NUL-separated UTF-8 records; OUT gets two lines per record:
    "S id id ..." (special tokens parsed) and "N id id ..." (not parsed).

spm-gguf GGUF IN OUT
    Google's sentencepiece itself on a GGUF's SentencePiece vocabulary
    (Gemma 3): a ModelProto built from tokenizer.ggml.tokens / scores /
    token_type (BPE, byte fallback, identity normalization, dummy prefix as
    tokenizer.ggml.add_space_prefix, whitespace escaped to U+2581: the
    settings of Gemma 3's tokenizer.model; user-defined pieces with their
    spaces back as U+2581, undoing llama.cpp's converter), encoded with
    SentencePieceProcessor; one line of ids per record of IN (no BOS).

spm TRAIN WORKDIR IN OUT
    Trains a SentencePiece BPE model (byte fallback, vocab 2000, identity
    normalization) on TRAIN, writes it as WORKDIR/spm.gguf with the `gguf`
    package, and writes sentencepiece's own ids for each record of IN.
"""
import sys


def read_records(path):
    with open(path, "rb") as f:
        data = f.read()
    recs = data.split(b"\0")
    if recs and recs[-1] == b"":
        recs.pop()
    return [r.decode("utf-8") for r in recs]


def bpe(gguf_path, inp, outp):
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    r = GGUFReader(gguf_path)
    f = r.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    types = f["tokenizer.ggml.token_type"].contents() if "tokenizer.ggml.token_type" in f else [1] * len(tokens)
    pre = f["tokenizer.ggml.pre"].contents() if "tokenizer.ggml.pre" in f else "default"

    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl])
    elif pre in ("gpt2", "default"):
        tok.pre_tokenizer = bl
    else:
        sys.exit(f"tok_reference: pre-tokenizer {pre!r} not known here")
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] in (2, 3)])
    user = [AddedToken(tokens[i], special=False, normalized=False)
            for i in range(len(tokens)) if types[i] == 4]
    if user:
        tok.add_tokens(user)

    recs = read_records(inp)
    tok.encode_special_tokens = False
    with_sp = tok.encode_batch(recs, add_special_tokens=False)
    tok.encode_special_tokens = True
    without = tok.encode_batch(recs, add_special_tokens=False)
    with open(outp, "w") as o:
        for a, b in zip(with_sp, without):
            o.write("S " + " ".join(map(str, a.ids)) + "\n")
            o.write("N " + " ".join(map(str, b.ids)) + "\n")


def field(r, k, default=None):
    f = r.fields.get(k)
    return default if f is None else f.contents()


def spm_gguf(gguf_path, inp, outp):
    import sentencepiece as spm
    from gguf import GGUFReader
    from sentencepiece import sentencepiece_model_pb2 as pb

    r = GGUFReader(gguf_path)
    tokens = field(r, "tokenizer.ggml.tokens")
    scores = field(r, "tokenizer.ggml.scores")
    types = field(r, "tokenizer.ggml.token_type")
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.vocab_size = len(tokens)
    m.trainer_spec.unk_id = field(r, "tokenizer.ggml.unknown_token_id", 3)
    m.trainer_spec.bos_id = field(r, "tokenizer.ggml.bos_token_id", 2)
    m.trainer_spec.eos_id = field(r, "tokenizer.ggml.eos_token_id", 1)
    m.trainer_spec.pad_id = field(r, "tokenizer.ggml.padding_token_id", 0)
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = bool(field(r, "tokenizer.ggml.add_space_prefix", False))
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    kinds = {1: pb.ModelProto.SentencePiece.NORMAL, 2: pb.ModelProto.SentencePiece.UNKNOWN,
             3: pb.ModelProto.SentencePiece.CONTROL, 4: pb.ModelProto.SentencePiece.USER_DEFINED,
             5: pb.ModelProto.SentencePiece.UNUSED, 6: pb.ModelProto.SentencePiece.BYTE}
    for t, s, ty in zip(tokens, scores, types):
        p = m.pieces.add()
        # convert_hf_to_gguf.py "pre-normalizes" user-defined pieces, U+2581
        # -> " " (Gemma's whitespace runs); the tokenizer.model had U+2581
        p.piece = t.replace(" ", "\u2581") if int(ty) == 4 else t
        p.score = float(s)
        p.type = kinds[int(ty)]
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    with open(outp, "w") as o:
        for rec in read_records(inp):
            o.write(" ".join(map(str, sp.encode(rec))) + "\n")


def spm(train, workdir, inp, outp):
    import sentencepiece as sp
    from gguf import GGUFWriter

    prefix = f"{workdir}/spm"
    sp.SentencePieceTrainer.train(
        input=train, model_prefix=prefix, vocab_size=2000, model_type="bpe",
        byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1,
        minloglevel=2)
    m = sp.SentencePieceProcessor(model_file=prefix + ".model")
    tokens, scores, types = [], [], []
    for i in range(m.get_piece_size()):
        tokens.append(m.id_to_piece(i))
        scores.append(m.get_score(i))
        if m.is_unknown(i):
            types.append(2)
        elif m.is_control(i):
            types.append(3)
        elif m.is_byte(i):
            types.append(6)
        elif m.is_unused(i):
            types.append(5)
        else:
            types.append(1)
    w = GGUFWriter(f"{workdir}/spm.gguf", "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
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

    with open(outp, "w") as o:
        for rec in read_records(inp):
            o.write(" ".join(map(str, m.encode(rec))) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "bpe":
        bpe(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "spm-gguf":
        spm_gguf(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "spm":
        spm(*sys.argv[2:])
    else:
        sys.exit(__doc__)

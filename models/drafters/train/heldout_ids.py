#!/usr/bin/env python3
"""heldout_ids.py GGUF PROMPTS_FILE OUT.json (build/venv): the held-out prompts (one a line
after the header line, as specwright bench --prompts 16 cuts them) in the chat template,
tokenized as specwright does (prep.build_tokenizer), for eval_tau.py."""
import json
import sys

from gguf import GGUFReader

from prep import build_tokenizer, chat

tok, system = build_tokenizer(GGUFReader(sys.argv[1]))
lines = [l for l in open(sys.argv[2], encoding="utf-8").read().split("\n")[1:] if l.strip()]
ids = [e.ids for e in tok.encode_batch([chat(system, l) for l in lines], add_special_tokens=False)]
json.dump({"text": lines, "ids": ids}, open(sys.argv[3], "w"))
print(f"heldout_ids: {len(ids)} prompts, {sum(map(len, ids))} tokens")

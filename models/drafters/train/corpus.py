#!/usr/bin/env python3
"""EAGLE-3 data, stage 1 (build/venv: numpy, gguf, tokenizers): the general-text corpus and
the chat prompts, tokenized, with the held-out prompts kept out.

corpus.py GGUF OUTDIR HELDOUT [MAX_MB_PER_SOURCE]   (CHAT_ONLY=1: rewrite the chat prompts only;
                                                     CHAT_PROMPTS=N: how many, default 6000)
  Sources (every Debian text source installed here; `apt-get install fortunes jargon-text
  python3-doc python3.11-doc bash-doc` adds four): man pages (troff stripped), info manuals,
  /usr/share/doc (README/text/markdown, .gz too), the Python documentation's reST sources
  and the standard library's source, fortunes, the Jargon File, the KJV Bible. Each source
  is capped (MAX_MB_PER_SOURCE, default 6) by sampling whole documents with a fixed seed.
  Writes OUTDIR/windows.npy (int32 (N, WIN): WIN-token windows, each an assistant turn of
  the chat template whose reply is a slice of one document, the sources interleaved in a
  fixed shuffled order so that any prefix of the file is a mix of all of them),
  OUTDIR/windows_src.npy (int8 source index per window), OUTDIR/chat_prompts.json (ids of
  diverse chat prompts from templates x topics, and text), OUTDIR/corpus.json (token and
  window counts per source).
  Held out: every line of HELDOUT (after its header) is checked against every source
  document and every chat prompt by 40-byte fragments; a hit is removed (and reported).
"""
import glob
import gzip
import json
import os
import random
import re
import subprocess
import sys

import numpy as np

from prep import build_tokenizer, chat

WIN = int(os.environ.get("WIN", 512))


def read(p):
    try:
        if p.endswith(".gz"):
            with gzip.open(p, "rb") as f:
                b = f.read(2_000_000)
        else:
            with open(p, "rb") as f:
                b = f.read(2_000_000)
    except OSError:
        return ""
    if b"\0" in b[:4096]:
        return ""
    return b.decode("utf-8", "replace")


def strip_troff(t):
    out = []
    for line in t.split("\n"):
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith((".", "'")):
            m = re.match(r"[.'](SH|SS|B|I|BR|IR|RB|BI|IB|TP|IP|PP|P|LP|TH|Nm|Nd|Sh|Fl|Ar)\b\s*(.*)", line)
            if not m or not m.group(2):
                continue
            line = m.group(2).replace('"', "")
        line = re.sub(r"\\f[BIRP]|\\f\(..|\\\(..|\\[&|^]|\\s[-+]?\d", "", line)
        line = line.replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ")
        out.append(line)
    return "\n".join(out)


def strip_info(t):
    return re.sub(r"\x1f\n[^\n]*\n", "\n", t)


def sources():
    """name -> list of callables giving a document's text (lazy: only sampled ones are read)."""
    S = {}
    S["man"] = [lambda p=p: strip_troff(read(p)) for p in sorted(glob.glob("/usr/share/man/man[1-8]/*"))]
    S["info"] = [lambda p=p: strip_info(read(p)) for p in sorted(glob.glob("/usr/share/info/*.info*"))]
    docs = [p for p in glob.glob("/usr/share/doc/**/*", recursive=True)
            if os.path.isfile(p) and "/html/" not in p and "python3.11/html" not in p
            and re.search(r"(README|NEWS|FAQ|TODO|\.txt|\.md|\.rst)(\.gz)?$", p)]
    S["doc"] = [lambda p=p: read(p) for p in sorted(docs)]
    rst = sorted(glob.glob("/usr/share/doc/python3*/html/_sources/**/*.txt", recursive=True))
    S["pydoc"] = [lambda p=p: read(p) for p in rst]
    S["pysrc"] = [lambda p=p: read(p) for p in sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
                  if "/test/" not in p and "site-packages" not in p]
    fort = sorted(f for f in glob.glob("/usr/share/games/fortunes/*") if "." not in os.path.basename(f))
    S["fortune"] = []
    for f in fort:
        parts = read(f).split("\n%\n")
        for i in range(0, len(parts), 40):  # documents of 40 fortunes
            S["fortune"].append(lambda s="\n\n".join(parts[i:i + 40]): s)
    jar = sorted(glob.glob("/usr/share/jargon*/**/*", recursive=True) + glob.glob("/usr/share/doc/jargon-text/*"))
    S["jargon"] = [lambda p=p: read(p) for p in jar if os.path.isfile(p)]
    bible = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True).stdout
    chunks = [bible[i:i + 20000] for i in range(0, len(bible), 20000)]
    S["bible"] = [lambda s=s: s for s in chunks]
    return S


ASK = {
    "man": ["Show me the manual page for this command.", "What does this command do? Give me its documentation.",
            "Print the reference documentation."],
    "info": ["Explain this part of the manual.", "Show me the relevant section of the manual."],
    "doc": ["Show me the README.", "What does the documentation say?", "Paste the project's notes."],
    "pydoc": ["Explain this part of the Python documentation.", "Show me the Python docs for this."],
    "pysrc": ["Show me the Python source code.", "Write the Python module.", "Give me the implementation."],
    "fortune": ["Tell me some quotes and jokes.", "Give me a few fortunes."],
    "jargon": ["Show me some entries from the hacker dictionary.", "Define these hacker terms."],
    "bible": ["Quote the passage from the King James Bible.", "Read me some verses."],
}

# chat prompts: templates x topics (none of them near a held-out prompt: checked below)
TOPICS = ["photosynthesis", "black holes", "the French Revolution", "compound interest", "how vaccines work",
          "the water cycle", "plate tectonics", "machine learning", "the printing press", "supply and demand",
          "how a car engine works", "the immune system", "quantum computing", "climate change", "the Roman Empire",
          "DNA replication", "inflation", "how the internet works", "volcanoes", "the theory of evolution",
          "public key cryptography", "the stock market", "sleep and memory", "honey bees", "the Silk Road",
          "recursion in programming", "electric cars", "the moon landing", "coral reefs", "the human heart",
          "hash tables", "ancient Egypt", "renewable energy", "how airplanes fly", "the Renaissance",
          "earthquakes", "probability", "the nitrogen cycle", "operating systems", "jazz music"]
STORIES = ["a robot learning to paint", "a dragon who is afraid of heights", "two friends lost in a forest",
           "a detective solving a mystery on a train", "a cat who becomes mayor", "a time traveller in ancient Rome",
           "a girl who can talk to birds", "a baker who wins a competition", "an astronaut stranded on Mars",
           "a haunted library", "a pirate looking for lost treasure", "a village that forgets one day each year",
           "a musician who loses her voice", "a boy building a treehouse", "a clockmaker and a mysterious visitor",
           "a whale that sings to ships", "the last tree in a city", "a knight who refuses to fight"]
CODE = ["reverses a string", "checks whether a number is prime", "computes the Fibonacci numbers",
        "counts the words in a text file", "finds the largest element in a list", "sorts a list with quicksort",
        "removes duplicates from a list while keeping the order", "converts Celsius to Fahrenheit",
        "checks whether a string is a palindrome", "computes the factorial of a number", "flattens a nested list",
        "reads a CSV file and prints the average of a column", "implements binary search",
        "counts how often each character occurs in a string", "validates an email address with a regular expression",
        "implements a stack class", "computes the greatest common divisor of two numbers",
        "transposes a matrix", "generates all permutations of a list", "parses a date string"]
LANGS = ["Python", "Python", "JavaScript", "C", "Java", "Rust", "Go", "a shell script"]
ADVICE = ["learning a new language", "running a first marathon", "saving money each month", "studying for exams",
          "starting a small business", "keeping houseplants alive", "getting better sleep", "public speaking",
          "writing a CV", "training a puppy", "learning to play the guitar", "working from home",
          "travelling on a budget", "making friends in a new city", "staying focused while studying"]
TEMPL = [
    lambda r: f"Explain {r.choice(TOPICS)} in simple terms.",
    lambda r: f"Can you explain {r.choice(TOPICS)} to a beginner? Give an example.",
    lambda r: f"What are the most important facts about {r.choice(TOPICS)}?",
    lambda r: f"Write a short essay about {r.choice(TOPICS)}.",
    lambda r: f"Give me five interesting questions and answers about {r.choice(TOPICS)}.",
    lambda r: f"Write a short story about {r.choice(STORIES)}.",
    lambda r: f"Tell me a bedtime story about {r.choice(STORIES)}.",
    lambda r: f"Write a poem about {r.choice(STORIES + TOPICS)}.",
    lambda r: f"Write a function in {r.choice(LANGS)} that {r.choice(CODE)}, and explain it.",
    lambda r: f"How do I write a program that {r.choice(CODE)}?",
    lambda r: f"What are some tips for {r.choice(ADVICE)}?",
    lambda r: f"I need advice on {r.choice(ADVICE)}. Where should I start?",
    lambda r: f"Make a step-by-step plan for {r.choice(ADVICE)}.",
    lambda r: f"Compare {r.choice(TOPICS)} and {r.choice(TOPICS)}: what do they have in common?",
    lambda r: f"Write a friendly email to a colleague about {r.choice(ADVICE)}.",
    lambda r: f"List the pros and cons of {r.choice(ADVICE)}.",
]


TEMPL2 = [
    lambda r: f"Write a haiku about {r.choice(STORIES + TOPICS)}.",
    lambda r: f"What would happen if {r.choice(TOPICS)} had never been discovered or invented?",
    lambda r: f"Give me a quiz of five questions about {r.choice(TOPICS)}, with the answers.",
    lambda r: f"Summarize the history of {r.choice(TOPICS)} in a paragraph.",
    lambda r: f"Continue this story: Once upon a time there was {r.choice(STORIES)}.",
    lambda r: f"If a train travels {r.randint(40, 400)} km in {r.randint(2, 9)} hours, what is its average "
              f"speed? Explain step by step.",
    lambda r: f"What is {r.randint(12, 99)} times {r.randint(12, 99)}? Show your working.",
    lambda r: f"I have {r.randint(3, 30)} apples and give away {r.randint(1, 3)} to each of "
              f"{r.randint(2, 6)} friends. How many are left?",
    lambda r: f"Write a dialogue between two people about {r.choice(ADVICE)}.",
    lambda r: f"Write a product description for {r.choice(['a reusable water bottle', 'a desk lamp', 'hiking boots', 'a notebook', 'a bicycle helmet', 'a coffee grinder', 'noise-cancelling headphones', 'a garden hose', 'a backpack'])}.",
]


def mined_prompts(rng, n):
    """Chat prompts whose subjects come from the local text sources (so the asks are as
    varied as the sources): man pages' NAME lines, the standard library's modules, short
    fortunes, Bible verses, prose paragraphs of /usr/share/doc to summarise or rewrite, and
    TEMPL2's extra forms. Returns up to n prompt texts, the families interleaved."""
    fam = {}
    names = []
    for p in sorted(glob.glob("/usr/share/man/man1/*")):
        t = read(p)
        m = re.search(r"\n\.SH\s+\"?NAME\"?\s*\n(.+?)\n", t)
        if not m:
            continue
        line = re.sub(r"\\f[BIRP]|\\f\(..|\\\(..|\\[&|^]", "", m.group(1)).replace("\\-", "-")
        mm = re.match(r"([A-Za-z0-9_.+-]{2,30})(?:,.*?)?\s+-+\s+(.{8,90})$", line.strip())
        if mm:
            names.append((mm.group(1), mm.group(2).rstrip(".")))
    rng.shuffle(names)
    fam["man"] = []
    for cmd, desc in names:
        f = rng.choice([lambda: f"What does the {cmd} command do, and how do I use it?",
                        lambda: f"Give me three examples of using {cmd} on Linux.",
                        lambda: f"I need to {desc[0].lower() + desc[1:]}. Is {cmd} the right tool? Explain.",
                        lambda: f"Explain what '{cmd} - {desc}' means to a new Linux user."])
        fam["man"].append(f())
    mods = sorted(set(os.path.basename(p)[:-3] for p in glob.glob("/usr/lib/python3.11/*.py")
                      if not os.path.basename(p).startswith("_")))
    rng.shuffle(mods)
    fam["pymod"] = [rng.choice([f"How do I use Python's {m} module? Show a short example.",
                                f"What is the {m} module in the Python standard library for?",
                                f"Write a small Python program that uses the {m} module."]) for m in mods]
    fort = []
    for f in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if "." in os.path.basename(f):
            continue
        for q in read(f).split("\n%\n"):
            q = re.sub(r"\s+", " ", q).strip()
            if 40 <= len(q) <= 200 and "\t" not in q:
                fort.append(q)
    rng.shuffle(fort)
    fam["fortune"] = [rng.choice([f"What does this quote mean?\n\n{q}", f"Explain this joke: {q}",
                                  f"Write a short story that ends with this line: {q}"]) for q in fort[:3000]]
    try:
        bible = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True).stdout
    except OSError:
        bible = ""
    verses = [re.sub(r"^\d?[A-Za-z]+ ?\d+:\d+:?\s*", "", v).strip() for v in bible.split("\n")]
    verses = [v for v in verses if 40 <= len(v) <= 220]
    rng.shuffle(verses)
    fam["bible"] = [rng.choice([f"Explain this verse in plain English: {v}",
                                f"Write a short reflection on this verse: {v}"]) for v in verses[:2000]]
    paras = []
    docs = sorted(p for p in glob.glob("/usr/share/doc/*/README*") if os.path.isfile(p))
    rng.shuffle(docs)
    for p in docs[:1500]:
        for para in re.split(r"\n\s*\n", read(p)):
            q = re.sub(r"\s+", " ", para).strip()
            letters = sum(ch.isalpha() or ch == " " for ch in q)
            if 150 <= len(q) <= 500 and letters > 0.9 * len(q) and "http" not in q:
                paras.append(q)
                break
    fam["summary"] = [rng.choice([f"Summarize this in one or two sentences:\n\n{q}",
                                  f"Rewrite this paragraph in simpler words:\n\n{q}",
                                  f"What are the key points of this text?\n\n{q}"]) for q in paras]
    fam["forms"] = [rng.choice(TEMPL2)(rng) for _ in range(4 * n)]
    out, keys = [], sorted(fam)
    while len(out) < n and any(fam[k] for k in keys):
        for k in keys:
            if fam[k] and len(out) < n:
                out.append(fam[k].pop())
    return out


def chat_prompts(tok, system, frags, out, n=None):
    """Distinct chat prompts (none containing a held-out fragment), tokenized with the chat
    template: OUTDIR/chat_prompts.json. TEMPL's templates x topics (2128 distinct), then
    mined_prompts up to n (CHAT_PROMPTS, default 6000), shuffled."""
    n = n or int(os.environ.get("CHAT_PROMPTS", 6000))
    rng = random.Random(2023)  # its own seed: CHAT_ONLY=1 rewrites the same prompts
    seen, prompts = set(), []
    for _ in range(200000):
        if len(prompts) >= min(n, 3000):
            break
        p = rng.choice(TEMPL)(rng)
        if p in seen:
            continue
        seen.add(p)
        if any(fr in p for fr in frags):
            continue
        prompts.append(p)
    dropped = 0
    for p in mined_prompts(random.Random(rng.random()), 2 * n):
        if len(prompts) >= n:
            break
        if p in seen:
            continue
        seen.add(p)
        if any(fr in re.sub(r"\s+", " ", p) for fr in frags):
            dropped += 1
            continue
        prompts.append(p)
    rng.shuffle(prompts)
    print(f"corpus: {len(prompts)} chat prompts ({dropped} mined ones dropped for held-out text)",
          flush=True)
    ids = [e.ids for e in tok.encode_batch([chat(system, p) for p in prompts], add_special_tokens=False)]
    json.dump({"text": prompts, "ids": ids}, open(f"{out}/chat_prompts.json", "w"))
    return prompts


def fragments(s, n=40, step=20):
    b = re.sub(r"\s+", " ", s).strip()
    return [b[i:i + n] for i in range(0, max(1, len(b) - n), step)]


def main():
    from gguf import GGUFReader
    gguf_path, out, heldout = sys.argv[1], sys.argv[2], sys.argv[3]
    cap = float(sys.argv[4]) if len(sys.argv) > 4 else 6.0
    os.makedirs(out, exist_ok=True)
    tok, system = build_tokenizer(GGUFReader(gguf_path))
    held = [l for l in open(heldout, encoding="utf-8").read().split("\n")[1:] if l.strip()]
    frags = set(f for h in held for f in fragments(h))
    if os.environ.get("CHAT_ONLY") == "1":  # the chat prompts alone, beside existing windows
        prompts = chat_prompts(tok, system, frags, out)
        meta = json.load(open(f"{out}/corpus.json")) if os.path.exists(f"{out}/corpus.json") else {}
        meta["chat_prompts"] = len(prompts)
        json.dump(meta, open(f"{out}/corpus.json", "w"), indent=1)
        return
    rng = random.Random(23)
    S = sources()
    per = {}
    docs = []  # (source index, text)
    names = sorted(S)
    removed = 0
    for si, name in enumerate(names):
        L = S[name][:]
        rng.shuffle(L)
        got = 0
        n = 0
        for f in L:
            t = f()
            if len(t) < 200:
                continue
            flat = re.sub(r"\s+", " ", t)
            if any(fr in flat for fr in frags):
                removed += 1
                continue
            t = t[:200_000]
            docs.append((si, t))
            got += len(t)
            n += 1
            if got > cap * 1e6:
                break
        per[name] = {"docs": n, "bytes": got, "available_docs": len(L)}
        print(f"corpus: {name}: {n} of {len(L)} documents, {got / 1e6:.1f} MB", flush=True)
    print(f"corpus: {removed} documents removed for containing held-out text", flush=True)
    # windows: chat header + a slice of one document, WIN tokens
    wins, wsrc = [], []
    for si, t in docs:
        name = names[si]
        ids = tok.encode(t, add_special_tokens=False).ids
        for i in range(0, len(ids), WIN - 40):
            body = ids[i:i + WIN]
            if len(body) < 64:
                break
            head = tok.encode(chat(system, rng.choice(ASK[name])), add_special_tokens=False).ids
            w = (head + body)[:WIN]
            if len(w) < WIN:
                w = w + [2] + [0] * (WIN - len(w) - 1)  # <|im_end|> then padding (masked by length)
            wins.append(w)
            wsrc.append(si)
    order = list(range(len(wins)))
    rng.shuffle(order)
    W = np.array([wins[i] for i in order], dtype=np.int32)
    np.save(f"{out}/windows.npy", W)
    np.save(f"{out}/windows_src.npy", np.array([wsrc[i] for i in order], dtype=np.int8))
    for si, name in enumerate(names):
        per[name]["windows"] = int(sum(1 for s in wsrc if s == si))
    prompts = chat_prompts(tok, system, frags, out)
    json.dump({"sources": names, "per_source": per, "windows": len(wins), "win": WIN,
               "chat_prompts": len(prompts), "heldout_lines": len(held), "removed_docs": removed},
              open(f"{out}/corpus.json", "w"), indent=1)
    print(f"corpus: {len(wins)} windows of {WIN} tokens ({len(wins) * WIN / 1e6:.1f} M tokens), "
          f"{len(prompts)} chat prompts", flush=True)


if __name__ == "__main__":
    main()

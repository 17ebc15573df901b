#!/usr/bin/env python3
"""A static draft tree fitted to an EAGLE-3 head's measured ranks on tuning prompts.

tree_fit.py WDIR HEAD_DIR OUT.json N IDS.json [IDS.json ...]
  WDIR: prep.py's weights (make eagle3-drafter's build/drafters/e3); HEAD_DIR: the head
  (config.json + model.safetensors, as --draft eagle3:DIR loads it); N: nodes besides the
  root; IDS.json: tuning prompts in the chat template (heldout_ids.py's format). Options
  (environment): N_NEW (128) generated tokens a prompt, DEPTH (8) the deepest level,
  RMAX (16) the most children a node may get, THREADS (1).

At T = 0 a tree whose children are the top-k of each node's draft distribution (`--expand
topk --verify greedy`; a path element is a rank) accepts, in an iteration anchored after
x_n, exactly the nodes whose rank path is a prefix of the ranks (r_1, r_2, ...) that the
target's own tokens x_{n+1}, x_{n+2}, ... hold in the head's successive distributions
along them: the iteration emits 1 + (the number of such nodes). So over a set of
iterations the expected tokens per target call of a tree is 1 + sum over its nodes of
c(path) / iterations, where c(path) counts the iterations whose rank sequence starts with
path: additive over nodes. The ranks come from e3train.Head.unroll along the target's
greedy continuations (the head's step k at anchor row n-1 sees the true tokens, which are
the drafted ones along an accepted path), at every anchor. The tree is grown best first:
among the paths whose parent is in the tree and whose next-lower sibling rank is in it
(top-k children are ranks 0..k-1), add the one with the largest count (ties: the
shallower, then the smaller ranks; with no count left, the largest product of per-depth
rank frequencies). Since c(child) <= c(parent), every added node counts at most as much
as each earlier one on its path.

Verification stays exact for any tree (the tree is fixed before any draft is verified);
the fit only decides which tokens are proposed. The tuning prompts must not be the
prompts figures are reported on: the caller passes models/prompts/tune-*.txt's ids.
Prints the in-sample tokens per call as the tree grows and writes the tree as the C
loader reads it ({"name", "source", "paths"})."""
import json
import os
import sys


def rank_sequences(m, used, seqs, depth, rmax):
    import torch
    """For every anchor of every sequence, the ranks of the true next tokens in the head's
    distributions along them (a rank >= rmax or a token outside the draft map ends it)."""
    V = int(m.embd.shape[0])
    t2d = torch.full((V,), -1, dtype=torch.long)
    t2d[used] = torch.arange(used.shape[0])
    out = []
    with torch.inference_mode():
        for s in seqs:
            x, P = s["tok"], s["n_prompt"]
            L = x.shape[0]
            logits = m.unroll(s["feat"][None].float(), x[None], depth - 1)
            for n in range(P, L - 1):  # x_n emitted; drafts x_{n+1}...
                a, r = n - 1, []
                for k in range(depth):
                    if n + 1 + k >= L:
                        break
                    d = int(t2d[x[n + 1 + k]])
                    if d < 0:
                        break
                    lg = logits[k][0, a]
                    rk = int((lg > lg[d]).sum()) + int((lg[:d] == lg[d]).sum())  # topk order
                    if rk >= rmax:
                        break
                    r.append(rk)
                out.append(tuple(r))
    return out


def path_counts(ranks):
    """c(path): the iterations whose rank sequence starts with path."""
    counts = {}
    for r in ranks:
        for j in range(1, len(r) + 1):
            counts[r[:j]] = counts.get(r[:j], 0) + 1
    return counts


def grow(ranks, N, rmax, depth):
    """The N-node tree (a list of rank paths) of the largest in-sample value sum c(path), over
    trees whose paths are prefix-closed and whose siblings are ranks 0..k-1, by a knapsack over
    each node's children in rank order (f(p, n): the best subtree of at most n nodes under p,
    p included); then, when the paths of positive count are fewer than N, nodes of zero
    count in the order of the product of per-depth rank frequencies. Returns (paths, trace):
    trace[k-1] = 1 + the best value of k nodes / iterations (tokens a call, in sample)."""
    counts = path_counts([r[:depth] for r in ranks])
    iters = max(1, len(ranks))
    kids = {(): []}
    for p in counts:
        kids.setdefault(p, [])
    for p in counts:  # every rank below a counted one is a node too (contiguity), count or not
        for rk in range(p[-1] + 1):
            q = p[:-1] + (rk,)
            if q not in kids:
                kids[q] = []
    for q in kids:
        if q:
            kids[q[:-1]].append(q)
    f, tables = {}, {}

    def solve(p):
        ch = sorted(kids[p], key=lambda q: q[-1])
        G = [0.0] * (N + 1)  # no children
        tabs = [G]
        for c in reversed(ch):
            fc = f[c]
            H = [0.0] * (N + 1)  # stop before c: c and every later child absent
            for k in range(1, N + 1):
                best = H[k]
                for s_ in range(1, k + 1):
                    best = max(best, fc[s_] + G[k - s_])
                H[k] = best
            G = H
            tabs.append(G)
        tables[p] = (ch, tabs[::-1])  # tables[p][1][i]: children i.. of p
        return G

    for p in sorted(kids, key=len, reverse=True):
        if not p:
            continue
        G = solve(p)
        f[p] = [0.0] + [counts.get(p, 0) + G[n - 1] for n in range(1, N + 1)]
    Groot = solve(())

    def take(p, budget, out):  # children i.. of p within budget, as the tables chose
        ch, tabs = tables[p]
        for i, c in enumerate(ch):
            target = tabs[i][budget]
            if budget == 0 or target == 0:
                break
            nxt = tabs[i + 1]
            s_ = next(s_ for s_ in range(1, budget + 1) if f[c][s_] + nxt[budget - s_] == target)
            out.append(c)
            take(c, s_ - 1, out)
            budget -= s_
        return out

    tree = take((), N, [])
    trace = [1.0 + Groot[k] / iters for k in range(1, N + 1)]
    freq = [[1e-9] * rmax for _ in range(depth + 1)]
    for p, c in counts.items():
        freq[len(p)][p[-1]] += c
    for row in freq:
        t = sum(row)
        row[:] = [v / t for v in row]

    def prior(p):
        v = 1.0
        for j, rk in enumerate(p):
            v *= freq[min(j + 1, depth)][rk]
        return v

    have = set(tree) | {()}
    while len(tree) < N:  # no counted path left to take
        cands = []
        for p in have:
            k = sum(1 for q in have if len(q) == len(p) + 1 and q[:-1] == p)
            if k < rmax and len(p) < depth:
                cands.append(p + (k,))
        q = max(cands, key=lambda q: (prior(q), -len(q), tuple(-v for v in q)))
        tree.append(q)
        have.add(q)
    return tree, trace


def tree_value(tree, counts):
    return sum(counts.get(p, 0) for p in tree)


def valid(tree):
    s = set(tree)
    return len(s) == len(tree) and all(
        (len(p) == 1 or p[:-1] in s) and (p[-1] == 0 or p[:-1] + (p[-1] - 1,) in s) for p in s)


def self_test():
    """grow() against an exhaustive search over every valid tree of up to 6 nodes (ranks < 3,
    depth <= 3) on seeded random rank data: the same best value, a valid tree, and a value
    equal to the trace. Exit 0 when all agree."""
    import random
    rng = random.Random(5)

    def subtrees(p, n, rmax, depth):  # every valid subtree under p (p included), <= n nodes
        out = []

        def kids_from(i, budget):  # children p+(i,), p+(i+1,), ... contiguous from i
            res = [[]]
            if i >= rmax or len(p) >= depth or budget == 0:
                return res
            for t in subtrees(p + (i,), budget, rmax, depth):
                for rest in kids_from(i + 1, budget - len(t)):
                    res.append(t + rest)
            return res
        for k in kids_from(0, n - 1):
            out.append([p] + k)
        return out

    def all_trees(n, rmax, depth):
        return [t[1:] for t in subtrees((), n + 1, rmax, depth) if len(t) == n + 1]

    bad = 0
    for case in range(40):
        ranks = []
        for _ in range(rng.randint(1, 30)):
            r = []
            while len(r) < 3 and rng.random() < 0.8:
                r.append(min(2, int(rng.expovariate(0.5 + rng.random()))))
                if rng.random() < 0.2 and r[-1] > 0:
                    break
            ranks.append(tuple(r))
        counts = path_counts(ranks)
        for n in range(1, 7):
            best = max(tree_value(t, counts) for t in all_trees(n, 3, 3))
            tree, trace = grow(ranks, n, 3, 3)
            got = tree_value(tree, counts)
            ok = valid(tree) and len(tree) == n and got == best and abs(trace[-1] - (1 + got / max(1, len(ranks)))) < 1e-9
            if not ok:
                bad += 1
                print(f"self-test: case {case} n {n}: best {best}, got {got} ({tree}), valid {valid(tree)}")
    print(f"tree_fit self-test: {40 * 6 - bad} of {40 * 6} exhaustive comparisons agree")
    return 0 if bad == 0 else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    import numpy as np
    import torch

    import eval_tau
    import smollm
    import tf_data
    torch.set_num_threads(int(os.environ.get("THREADS", 1)))
    wdir, head_dir, out, N = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ids = []
    for f in sys.argv[5:]:
        ids += json.load(open(f))["ids"]
    n_new = int(os.environ.get("N_NEW", 128))
    depth = int(os.environ.get("DEPTH", 8))
    rmax = int(os.environ.get("RMAX", 16))
    if not 1 <= N <= 255:
        sys.exit(f"tree_fit: N = {N}: expected 1..255 nodes besides the root (the C tree's limit)")
    tc = json.load(open(f"{wdir}/target_config.json"))
    embd = torch.from_numpy(np.load(f"{wdir}/w/token_embd.weight.npy"))
    m, used = eval_tau.load_head(head_dir, tc, embd)
    cache = f"{wdir}/tune_seq.pt"
    key = {"n_new": n_new, "ids": ids}
    seqs = None
    if os.path.exists(cache):
        c = torch.load(cache)
        if c["key"] == key:
            seqs = c["seqs"]
    if seqs is None:
        print(f"tree_fit: the target's greedy continuations of {len(ids)} tuning prompts ({n_new} tokens)", flush=True)
        seqs = tf_data.greedy_features(smollm.Target(wdir), ids, n_new)
        torch.save({"key": key, "seqs": seqs}, cache)
    ranks = rank_sequences(m, used, seqs, depth, rmax)
    tree, trace = grow(ranks, N, rmax, depth)
    chain = sum(1 for r in ranks for j in range(len(r)) if all(v == 0 for v in r[:j + 1])) / len(ranks)
    print(f"tree_fit: {len(ranks)} anchors from {len(seqs)} prompts; a chain of {depth} zeros: "
          f"{1 + chain:.3f} tokens a call in sample")
    for k in (1, 3, 7, 15, 31, 63, 127, 255):
        if k <= N:
            print(f"  {k:3d} nodes: {trace[k - 1]:.3f} tokens a call in sample")
    paths = sorted(tree, key=lambda p: (len(p), p))
    name = os.path.splitext(os.path.basename(out))[0]
    import hashlib
    sha = hashlib.sha256(open(f"{head_dir}/model.safetensors", "rb").read()).hexdigest()[:16]
    sets = os.environ.get("SETS") or ", ".join(os.path.basename(f) for f in sys.argv[5:])
    source = (f"tree_fit.py: the {N}-node tree of the largest in-sample tokens a call over the rank paths of the "
              f"EAGLE-3 head {os.path.basename(os.path.normpath(head_dir))} (model.safetensors sha256 {sha}...) "
              f"along the target's greedy continuations ({n_new} tokens) of {len(seqs)} tuning prompts ({sets}; "
              f"{len(ranks)} anchors): {trace[-1]:.3f} in sample. {N} nodes, depth {max(map(len, paths))}. "
              f"Element = rank in the node's draft top-k (--expand topk).")
    rows = [", ".join(json.dumps(p) for p in paths[i:i + 8]) for i in range(0, len(paths), 8)]
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write("{\n\t\"name\": " + json.dumps(name) + ",\n\t\"source\": " + json.dumps(source) +
                ",\n\t\"paths\": [\n\t\t" + ",\n\t\t".join(rows) + "\n\t]\n}\n")
    os.replace(tmp, out)
    print(f"tree_fit: wrote {out}: {N} nodes, depth {max(map(len, paths))}, "
          f"level widths {[sum(1 for p in paths if len(p) == d) for d in range(1, max(map(len, paths)) + 1)]}")


if __name__ == "__main__":
    main()

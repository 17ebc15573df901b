#!/usr/bin/env python3
"""Deterministic replay of the n-gram draft-length controller (tuning aid).

Replays ngram_lookup (kernels/ref/ngram_lookup.c: the longest suffix of
n = max_n .. min_n tokens found earlier, the latest occurrence, its next
n_draft tokens) and draft_ctrl (kernels/ref/draft_ctrl.c, integer Q16 rule
word for word: decayed counters per match-length class, probes whose
interval doubles while drafts fail, a separate prior for one-token matches,
an iteration that drafts none checking its first proposed token against the
token the target emits: depth-1 evidence for the match's class, a quarter
of a drafted outcome)
over each prompt's greedy target tokens, verifying greedily against those
tokens. The speed model is tokens / sum over iterations of cost[k] (cost[k]:
an iteration drafting k tokens over one drafting none, measured at load by
runtime/engine/ctrl.c): it prices decisions without timing noise.

Data: models/prompts/replay/SET.N.prompt (prompt token ids) and SET.N.ENG
(the engine's greedy target-only tokens, 96; the first 64 replayed), made by
models/prompts/replay/getids.sh. Tune on tune-*.txt only.

usage: tests/tools/ctrl_replay.py [--eng a8|fp16] [--cost c1,..,c6] [--show]
       [--probe 8] [--probe-max 256] [--prior 0.5] [--prior-w 1]
       [--prior1 0.1] [--prior1-w 4] [--decay 0.9] [--ngram 1:4] [-n 64]
       [--data DIR --sets a,b] [--no-k0]   (the rule before the evidence
       gate: --probe-max 8 --prior1 0.5 --prior1-w 1 --no-k0; before the k = 0
       evidence: --no-k0)
"""
import argparse
import glob
import os
import statistics

Q = 65536
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', '..', 'models', 'prompts', 'replay')


def lookup(h, min_n, max_n, nd):
    S = len(h)
    for n in range(max_n, min_n - 1, -1):
        if n >= S:
            continue
        suf = h[S - n:]
        for st in range(S - n - 1, -1, -1):
            if h[st:st + n] == suf:
                return h[st + n:st + n + nd], n
    return [], 0


def replay(prompt, toks, a, cost):
    D = 6
    NC = a.max_n - a.min_n + 1
    cq = [int(round(c * Q)) for c in cost]
    pa, pw = int(round(a.prior * a.prior_w * Q)), int(round(a.prior_w * Q))
    p1a, p1w = int(round(a.prior1 * a.prior1_w * Q)), int(round(a.prior1_w * Q))
    dec = int(round(a.decay * Q))
    T = [[0] * D for _ in range(NC)]
    A = [[0] * D for _ in range(NC)]
    idle = gap = 0
    h, n, total, ks = list(prompt), 0, 0.0, []
    pk, pc, acc, ptok = 0, -1, 0, -1
    while n < len(toks):
        if pk > 0 and pc >= 0:  # 1. fold the previous outcome
            for j in range(D):
                T[pc][j] = (T[pc][j] * dec) >> 16
                A[pc][j] = (A[pc][j] * dec) >> 16
            for j in range(1, min(pk, acc + 1) + 1):
                T[pc][j - 1] += Q
                A[pc][j - 1] += Q if j <= acc else 0
            g = gap if gap > 0 else a.probe
            gap = a.probe if acc > 0 else min(2 * g, a.probe_max)
        # 1b. the first undrafted proposal against the token the target emitted
        # there: k = 0 (depth 1), or with --kall any k whose drafts were all accepted
        if pc >= 0 and ptok >= 0 and acc == pk and (pk == 0 and a.k0 or a.kall):
            if T[pc][pk] < 1 << 30:  # a quarter of an outcome, no decay
                T[pc][pk] += Q // 4
                A[pc][pk] += Q // 4 if h[-1] == ptok else 0
        draft, m = lookup(h, a.min_n, a.max_n, D)
        K0, c, k = len(draft), -1, 0
        if m > 0 and K0 > 0:  # 2.-3. the class, argmax E_k / cost[k]
            c = min(max(m - a.min_n, 0), NC - 1)
            one = a.min_n == 1 and c == 0
            qa, qw = (p1a, p1w) if one else (pa, pw)
            prod, E, bE, bC = Q, Q, Q, cq[0]
            for i in range(1, K0 + 1):
                den = T[c][i - 1] + qw
                al = ((A[c][i - 1] + qa) << 16) // den if den > 0 else 0
                prod = (prod * min(al, Q)) >> 16
                E += prod
                if E * bC > bE * cq[i]:
                    bE, bC, k = E, cq[i], i
            g = gap if gap > 0 else a.probe
            if k == 0 and a.probe > 0 and idle + 1 >= g:
                k = 1
            idle = 0 if k > 0 else idle + 1
        acc = 0
        while acc < k and n + acc < len(toks) and draft[acc] == toks[n + acc]:
            acc += 1
        emit = min(acc + 1, len(toks) - n)
        h += toks[n:n + emit]
        n += emit
        total += cost[k]
        ks.append(k)
        pk, pc, ptok = k, c, (draft[k] if k < K0 and c >= 0 and (k == 0 or a.kall) else -1)
    return len(toks) / total, ks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--eng', default='a8')
    ap.add_argument('--cost', default=None, help='c1..c6 (cost[0] = 1)')
    ap.add_argument('--show', action='store_true')
    ap.add_argument('--probe', type=int, default=8)
    ap.add_argument('--probe-max', type=int, default=256)
    ap.add_argument('--prior', type=float, default=0.5)
    ap.add_argument('--prior-w', type=float, default=1.0)
    ap.add_argument('--prior1', type=float, default=0.1)
    ap.add_argument('--prior1-w', type=float, default=4.0)
    ap.add_argument('--decay', type=float, default=0.9)
    ap.add_argument('--ngram', default='1:4')
    ap.add_argument('--no-k0', dest='k0', action='store_false',
                    help='the rule before the k = 0 evidence')
    ap.add_argument('--kall', action='store_true',
                    help='evidence after any k whose drafts were all accepted, not only k = 0')
    ap.add_argument('-n', type=int, default=64)
    ap.add_argument('--data', default=DATA)
    ap.add_argument('--sets', default='tune-general,tune-copy')
    a = ap.parse_args()
    a.min_n, a.max_n = map(int, a.ngram.split(':'))
    # CPU-second tables measured at load (runtime/engine/README.md)
    tables = {'a8': [1, 1.059, 1.277, 1.335, 1.566, 1.694, 1.914],
              'fp16': [1, 1.055, 1.107, 1.219, 1.535, 1.87, 2.072]}
    cost = [1.0] + [float(x) for x in a.cost.split(',')] if a.cost else tables[a.eng]
    for s in a.sets.split(','):
        r = []
        for f in sorted(glob.glob(os.path.join(a.data, s + '.*.prompt'))):
            i = f.split('.')[-2]
            p = list(map(int, open(f).read().split()))
            t = list(map(int, open(f[:-len('prompt')] + a.eng).read().split()))[:a.n]
            sp, ks = replay(p, t, a, cost)
            r.append(sp)
            if a.show:
                print('%s %s %.3f %s' % (s, i, sp, ''.join(map(str, ks))))
        print('%s %s: min %.3f median %.3f max %.3f (%d prompts)' %
              (a.eng, s, min(r), statistics.median(r), max(r), len(r)))


if __name__ == '__main__':
    main()

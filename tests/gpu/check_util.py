#!/usr/bin/env python3
"""Small helpers of the GPU check (tests/gpu/run.sh): reading engine.json and
`run --json` output, comparing token lists, and joining `specwright profile`'s
measured per-op table with `specwright inspect`'s projection of the same
engine. Standard library only (a GPU machine has python3 and little else).

  check_util.py engine DIR            name, weights|shape, temperature, dtype, archs
  check_util.py field FILE KEY        a field of a JSON object (run --json, torch_ref)
  check_util.py diff FILE_A KEY_A FILE_B KEY_B
                                      first index where two token lists differ
  check_util.py roofline PROFILE INSPECT PEAK_GBS
                                      per op: measured us, projected us, error, roofline share
"""
import json
import re
import sys


def load_json(path):
    """The last JSON object in a file (run --json prints one; logs may precede it)."""
    text = open(path, encoding="utf-8", errors="replace").read()
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise SystemExit(f"{path}: no JSON object found")


def cmd_engine(d):
    e = json.load(open(f"{d}/engine.json"))
    s = e["spec"]
    t = s.get("target", {})
    kind = "weights" if t.get("path") else "shape"
    samp = s.get("sampling", {})
    print(s.get("name", d), kind, samp.get("temperature", 0), s.get("dtype", "?"),
          ",".join(s.get("archs", [])), t.get("path", ""))


def cmd_field(path, key):
    v = load_json(path).get(key)
    print(" ".join(map(str, v)) if isinstance(v, list) else ("" if v is None else v))


def cmd_diff(fa, ka, fb, kb):
    a, b = load_json(fa).get(ka) or [], load_json(fb).get(kb) or []
    n = min(len(a), len(b))
    i = next((i for i in range(n) if a[i] != b[i]), n)
    if i == n and len(a) == len(b):
        print(f"equal {n}")
    else:
        print(f"differ {i} {a[i] if i < len(a) else 'end'} {b[i] if i < len(b) else 'end'} of {n}")


def parse_profile(path):
    """profile's table: phase op launches us/iter GB/s GFLOP/s share"""
    rows = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) == 7 and f[2].isdigit() and f[6].endswith("%"):
            try:
                rows[(f[0], f[1])] = (int(f[2]), float(f[3]), float(f[4]))
            except ValueError:
                pass
    return rows


def parse_inspect(path):
    """inspect's projection: 'phase NAME (R rows)' then op rows whose last
    column is the projected us over all launches (x rep us)"""
    rows, phase = {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"^phase (\S+) \(", line)
        if m:
            phase = m.group(1)
            continue
        f = line.split()
        if phase and len(f) >= 9 and f[1] in ("kernel", "cublaslt", "memset", "pending"):
            try:
                rows[(phase, f[0])] = (f[1], float(f[-1]))
            except ValueError:
                pass
        elif phase and line.strip().startswith("phase ") and "->" in line:
            phase = None
    return rows


def cmd_roofline(prof, insp, peak):
    peak = float(peak) if peak else 0.0
    p, q = parse_profile(prof), parse_inspect(insp)
    if not p:
        raise SystemExit(f"{prof}: no profile rows")
    print(f"  {'phase':<14} {'op':<22} {'exec':<8} {'meas us':>9} {'proj us':>9} "
          f"{'meas/proj':>9} {'GB/s':>8} {'roofline':>8}")
    tm = tp = ideal = 0.0
    unmatched = []
    for (ph, op), (launches, us, gbs) in p.items():
        ex, proj = q.get((ph, op), ("?", None))
        if proj is None:
            unmatched.append(f"{ph}/{op}")
        tm += us
        tp += proj or 0.0
        ideal += gbs * us / peak if peak else 0.0
        ratio = f"{us / proj:9.2f}" if proj else f"{'-':>9}"
        roof = f"{100 * gbs / peak:7.1f}%" if peak else f"{'-':>8}"
        print(f"  {ph:<14} {op:<22} {ex:<8} {us:9.2f} {proj if proj else 0:9.2f} {ratio} "
              f"{gbs:8.1f} {roof}")
    line = f"  iteration: {tm:.1f} us measured (each op synchronised), {tp:.1f} us projected"
    if tp > 0:
        line += f", measured/projected {tm / tp:.2f}"
    if peak:
        line += f"; {100 * ideal / tm:.1f}% of the {peak:.0f} GB/s roofline"
    print(line)
    if unmatched:
        print(f"  no projection for: {' '.join(unmatched)}")


def main():
    cmds = {"engine": (cmd_engine, 1), "field": (cmd_field, 2), "diff": (cmd_diff, 4),
            "roofline": (cmd_roofline, 3)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 != cmds[sys.argv[1]][1]:
        raise SystemExit(__doc__)
    fn, _ = cmds[sys.argv[1]]
    fn(*sys.argv[2:])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The join of `profile` with `inspect` (check_util.py roofline), checked on
an engine with feature taps: run by tests/test_inspect.c with a host
profile of a tiny EAGLE-3 engine, the same engine's `inspect --gpu h100`, and
the engine's shape as its spec states it:

  test_check_util.py PROFILE INSPECT LAYERS TAPS VOCAB DIM VERIFY_ROWS LAUNCH_US EFF OVERLAP_US

Every profile row joins; each row's launches (inspect's layer segments
summed) equal the launches the runtime counted; an op split by the taps
covers all LAYERS layers in TAPS + 1 segments; the LM head's projection is
its closed form on the H100 (one launch + its bytes at EFF of 3.35 TB/s less
OVERLAP, at least its bytes at 3.35 TB/s); the printed table has a row per profile row and the summaries.
Exit 0 when all hold. Standard library only."""
import contextlib
import io
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_util  # noqa: E402

H100_BW = 3.35e12


def main():
    if len(sys.argv) != 11:
        raise SystemExit(__doc__)
    prof, insp = sys.argv[1], sys.argv[2]
    layers, taps, vocab, dim, rows = (int(x) for x in sys.argv[3:8])
    launch, eff, overlap = (float(x) for x in sys.argv[8:11])
    checks = 0

    def check(ok, what):
        nonlocal checks
        if not ok:
            raise SystemExit(f"test_check_util: FAILED: {what}")
        checks += 1

    p = check_util.parse_profile(prof)
    dev, segs, it_proj = check_util.parse_inspect(insp)
    check(len(p) > 20, f"{prof}: profile rows parsed ({len(p)})")
    check(dev == "h100", f"{insp}: the device is h100 (found {dev})")
    rows_, unmatched = check_util.join(p, segs)
    check(not unmatched, f"every profile row has a projection (none for {unmatched})")
    split = 0
    for r in rows_:
        check(r["n"] == r["prof_n"], f"{r['phase']}/{r['op']}: inspect's launches {r['n']} = "
              f"the runtime's {r['prof_n']}")
        # the target's layers split by the taps (not the taps themselves, nor
        # one op of the head's single layer run more than once)
        if len({s["layers"] for s in r["segs"]}) > 1:
            split += 1
            got = []
            for s in r["segs"]:
                a, _, b = s["layers"].partition("-")
                got += list(range(int(a), int(b or a) + 1))
            check(r["n"] == layers and sorted(got) == list(range(layers)) and
                  len(r["segs"]) == taps + 1,
                  f"{r['phase']}/{r['op']}: {r['layers']} covers layers 0-{layers - 1} in "
                  f"{taps + 1} segments, {r['n']} launches")
    # every per-layer op of the (fused) layer: 10 (gen/plan.c layer_ops)
    check(split >= 10, f"the target's per-layer ops are split by the taps ({split} rows)")
    tap = [r for r in rows_ if r["phase"] == "verify" and r["op"] == "feature_tap"]
    check(len(tap) == 1 and tap[0]["n"] == taps, f"verify/feature_tap: {taps} launches")

    # the LM head: (rows, dim) x (vocab, dim)^T -> (rows, vocab) fp32, 16-bit inputs
    head = [r for r in rows_ if r["phase"] == "verify" and r["op"] == "lm_head"]
    nbytes = rows * dim * 2 + vocab * dim * 2 + rows * vocab * 4
    want = launch + max(nbytes / H100_BW * 1e6, nbytes / (eff * H100_BW) * 1e6 - overlap)
    check(len(head) == 1 and abs(head[0]["proj"] - want) < 2e-3,
          f"verify/lm_head projected {head[0]['proj'] if head else None} us, closed form {want:.4f}")

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check_util.cmd_roofline(prof, insp, "3350")
    text = out.getvalue()
    body = [ln for ln in text.splitlines()
            if len(ln.split()) >= 12 and ln.split()[2] in check_util.EXECS]
    check(len(body) == len(p), f"one printed row per profile row ({len(body)} of {len(p)})")
    check("no projection for" not in text and "launches differ" not in text,
          "no unmatched row, no launch mismatch printed")
    m = re.search(r"^  iteration: .* ([\d.]+) us projected on h100", text, re.M)
    proj_iter = sum(r["proj"] for r in rows_ if r["phase"] != "prefill")
    check(m and it_proj and abs(float(m.group(1)) - proj_iter) < 0.05 and
          abs(it_proj - proj_iter) < 0.01 * len(rows_),
          f"the joined rows sum to inspect's iteration ({m and m.group(1)} / {it_proj} / "
          f"{proj_iter:.2f})")
    check("error per kernel" in text, "the error per kernel is printed")
    print(f"test_check_util: {checks} checks passed")


if __name__ == "__main__":
    main()

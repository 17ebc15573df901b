#!/usr/bin/env python3
"""Small helpers of the GPU check (tests/gpu/run.sh): reading engine.json and
`run --json` output, comparing token lists, joining `specwright profile`'s
measured per-op table with `specwright inspect`'s projection of the same
engine, and the projection's calibration from a check's log. Standard
library only (a GPU machine has python3 and little else).

  check_util.py engine DIR            name, weights|shape, temperature, dtype, archs
  check_util.py field FILE KEY        a field of a JSON object (run --json, torch_ref)
  check_util.py diff FILE_A KEY_A FILE_B KEY_B
                                      first index where two token lists differ
  check_util.py roofline PROFILE INSPECT PEAK_GBS [RUN_JSON|US]
                                      per phase and op (its layer segments summed):
                                      measured us, profile's synchronisation, the GPU's
                                      part, projected us, their ratio (the error per
                                      kernel), roofline share; with the graph-replay run,
                                      its iteration against the projected one
  check_util.py launches ENGINE_DIR...
                                      launches per iteration by engine, phase and op
  check_util.py calibrate LOG [LAUNCHES [BW_GBS]]
                                      from a check's log: profile's floor per launch, the
                                      per-launch cost of graph replay, the GEMMs' achieved
                                      bandwidth (gen/gpu_model.h's constants)
  check_util.py logprofile LOG ENGINE [LAUNCHES]
                                      one engine's profile table out of a check's log
  check_util.py shapes DIR...         one engine per distinct target shape (greedy first, then
                                      by name): the engines the shape check compares
  check_util.py iteration NAME MODE ENGINE_DIR RUN_JSON PEAK_GBS
                                      one row of the iteration table: measured us per
                                      iteration, launches and planned bytes per iteration
                                      (MODE graph: every phase; target-only: the verify
                                      forward on), their share of the roofline
  check_util.py shapecheck CHECK_JSON one line of tests/gpu/random_ref.py check's result
  check_util.py torchrows CHECK_JSON NAME PEAK_GBS
                                      its PyTorch timings as rows of the iteration table
  check_util.py stream HOST:PORT N    one streamed chat completion of N tokens against a
                                      `specwright serve` (its model from /v1/models): chunks,
                                      text, [DONE]; exit 1 if not
"""
import json
import math
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


# ---- the join of `profile` with `inspect` ---------------------------------

EXECS = ("kernel", "cublaslt", "memset", "pending")
UNITS = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}
# ops "small" enough that a launch of them measures the per-launch floor:
# bytes per launch below these (a kernel or memset that moves < 100 kB, a
# GEMM over < 1 MB of weights takes a few hundred ns on an H100's HBM)
TINY = {"kernel": 1e5, "memset": 1e5, "pending": 1e5, "cublaslt": 1e6}
# the H100 run's floors (tests/gpu/results/h100-2026-11-27.log, `calibrate`):
# used when a profile has too few small ops of a kind to measure its own
FLOOR_H100 = {"kernel": 10.58, "memset": 10.35, "pending": 10.58, "cublaslt": 17.77}


def parse_profile(path):
    """profile's table: phase op launches us/iter GB/s GFLOP/s share, one
    row per (phase, op) over all of its launches (every layer segment)"""
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
    """inspect's projection: the device ('projection on DEV'), then per
    phase ('phase NAME (R rows)') op rows: op exec layers x bytes flops
    t_mem t_flop launch t 'x rep us' (bytes and flops as '33.97 MB'), one
    row per layer segment; 'iteration = ...' then '= ... = X us projected'."""
    segs, phase, dev, it = {}, None, "?", None
    for line in open(path, errors="replace"):
        m = re.match(r"^projection on (\S+)", line)
        if m:
            dev = m.group(1)
            continue
        m = re.match(r"^phase (\S+) \(", line)
        if m:
            phase = m.group(1)
            continue
        m = re.match(r"^ +=.*= ([\d.]+) us projected", line)
        if m:
            it = float(m.group(1))
            continue
        f = line.split()
        if phase and len(f) == 13 and f[1] in EXECS and f[5] in UNITS:
            try:
                seg = {"exec": f[1], "layers": f[2], "n": int(f[3]),
                       "bytes": float(f[4]) * UNITS[f[5]], "launch": float(f[10]),
                       "t": float(f[11]), "proj": float(f[12])}
            except ValueError:
                continue
            segs.setdefault((phase, f[0]), []).append(seg)
        elif phase and line.startswith("  phase ") and "->" in line:
            phase = None
    return dev, segs, it


def median(v):
    v = sorted(v)
    n = len(v)
    return 0.0 if not n else v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def quantile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0.0


def run_iter_us(path):
    """us per iteration of a `run --json` (decode_s / iterations), or None;
    a number is taken as it is"""
    try:
        return float(path)
    except ValueError:
        pass
    try:
        j = load_json(path)
        return 1e6 * float(j["decode_s"]) / int(j["iterations"]) if j.get("iterations") else None
    except (SystemExit, KeyError, ValueError, TypeError, OSError):
        return None


def join(p, segs):
    """profile rows with their projection: per (phase, op) the layer segments
    inspect projects (summed: an op split by feature taps is one row of
    profile's over all its segments), launches checked against profile's"""
    out, unmatched = [], []
    for (ph, op), (launches, us, gbs) in p.items():
        s = segs.get((ph, op))
        if not s:
            unmatched.append(f"{ph}/{op}")
            out.append(dict(phase=ph, op=op, exec="?", layers="?", n=launches, us=us, gbs=gbs,
                            proj=None, launch=0.0, bytes=0.0, segs=[]))
            continue
        n = sum(x["n"] for x in s)
        out.append(dict(phase=ph, op=op, exec=s[0]["exec"],
                        layers=",".join(x["layers"] for x in s), n=n, prof_n=launches, us=us,
                        gbs=gbs, proj=sum(x["proj"] for x in s),
                        launch=sum(x["launch"] * x["n"] for x in s) / n,
                        bytes=sum(x["bytes"] * x["n"] for x in s) / n, segs=s))
    return out, unmatched


def floors(rows):
    """per exec kind: the median per-launch time of this run's small ops
    (TINY), which is profile's synchronisation plus one launch; the H100's
    where fewer than 3 such ops ran"""
    got, src = {}, {}
    for ex in EXECS:
        v = [r["us"] / r["n"] for r in rows if r["exec"] == ex and r["n"] and r["bytes"] < TINY[ex]]
        if len(v) >= 3:
            got[ex], src[ex] = median(v), f"{len(v)} ops"
        else:
            got[ex], src[ex] = FLOOR_H100[ex], "the H100 run's"
    return got, src


def cmd_roofline(prof, insp, peak, run_json=None):
    peak = float(peak) if peak else 0.0
    p = parse_profile(prof)
    dev, segs, it_proj = parse_inspect(insp)
    if not p:
        raise SystemExit(f"{prof}: no profile rows")
    if not segs:
        raise SystemExit(f"{insp}: no projection rows (not `specwright inspect` output?)")
    rows, unmatched = join(p, segs)
    fl, fsrc = floors(rows)
    print(f"  projection: `inspect --gpu {dev}` (projected, graph replay); measured: `profile` (each "
          f"op synchronised). profile's cost per launch beyond the projected launch, from this run's "
          f"smallest ops: " + ", ".join(f"{ex} {fl[ex]:.2f} us ({fsrc[ex]})" for ex in
                                        ("kernel", "cublaslt", "memset")))
    print(f"  {'phase':<14} {'op':<22} {'exec':<8} {'layers':<14} {'n':>5} {'meas us':>10} "
          f"{'sync us':>9} {'GPU us':>10} {'proj us':>9} {'GPU/proj':>8} {'GB/s':>8} {'roofline':>8}")
    tm = ts = tp = ideal = 0.0
    ratios = {}
    for r in rows:
        sync = r["n"] * max(0.0, fl.get(r["exec"], 0.0) - r["launch"]) if r["proj"] is not None else 0.0
        gpu = max(0.0, r["us"] - sync)
        tm += r["us"]
        ts += r["us"] - gpu
        tp += r["proj"] or 0.0
        ideal += r["gbs"] * r["us"] / peak if peak else 0.0
        ratio = gpu / r["proj"] if r["proj"] else None
        # the error of the op's own work: where the projection gives it at
        # least 1 us a launch beyond the launch (below, profile's jitter of
        # a microsecond or two decides the ratio)
        if ratio is not None and r["proj"] - r["launch"] * r["n"] >= r["n"]:
            ratios.setdefault(r["exec"], []).append((ratio, r))
        print(f"  {r['phase']:<14} {r['op']:<22} {r['exec']:<8} {r['layers']:<14} {r['n']:5d} "
              f"{r['us']:10.2f} {r['us'] - gpu:9.2f} {gpu:10.2f} {r['proj'] or 0:9.2f} "
              f"{(f'{ratio:8.2f}' if ratio is not None else f'{chr(45):>8}')} {r['gbs']:8.1f} "
              + (f"{100 * r['gbs'] / peak:7.1f}%" if peak else f"{'-':>8}"))
        if r.get("prof_n") is not None and r["prof_n"] != r["n"]:
            print(f"    launches differ: profile {r['prof_n']}, inspect {r['n']} (is the profile of "
                  "this engine?)")
        if len(r["segs"]) > 1 and len({(s["t"], s["exec"]) for s in r["segs"]}) > 1:
            for s in r["segs"]:  # segments that differ: each its own projection
                print(f"  {'':<14} {'':<22} {s['exec']:<8} {s['layers']:<14} {s['n']:5d} {'':>10} "
                      f"{'':>9} {'':>10} {s['proj']:9.2f}")
    line = (f"  iteration: {tm:.1f} us measured (each op synchronised; {ts:.1f} us of it the "
            f"synchronisation: {tm - ts:.1f} us on the GPU), {tp:.1f} us projected on {dev} (graph "
            f"replay): GPU/projected {(tm - ts) / tp if tp else 0:.2f}")
    if peak:
        line += f"; {100 * ideal / tm:.1f}% of the {peak:.0f} GB/s roofline"
    print(line)
    meas_it = run_iter_us(run_json) if run_json else None
    if meas_it and it_proj:
        print(f"  graph replay: {meas_it:.1f} us per iteration measured (run), {it_proj:.1f} us "
              f"projected on {dev}: error {100 * (it_proj - meas_it) / meas_it:+.1f}%")
    allr = [x for v in ratios.values() for x in v]
    if allr:
        parts = []
        for ex in ("cublaslt", "kernel", "memset"):
            v = [x[0] for x in ratios.get(ex, [])]
            if v:
                parts.append(f"{ex} {median(v):.2f} [{quantile(v, 0.1):.2f}..{quantile(v, 0.9):.2f}] "
                             f"of {len(v)}")
        worst = sorted(allr, key=lambda x: -abs(math.log(max(x[0], 1e-3))))[:3]
        print(f"  error per kernel (GPU/projected over the ops projected to work >= 1 us a launch; "
              f"median [10%..90%]): {'; '.join(parts)}; furthest: "
              + ", ".join(f"{w[1]['phase']}/{w[1]['op']} {w[0]:.2f}" for w in worst))
    else:
        print("  error per kernel: none of the ops is projected to work >= 1 us a launch")
    if unmatched:
        print(f"  no projection for: {' '.join(unmatched)}")


# ---- launches per iteration, and the calibration from a check's log -------

def cmd_launches(*dirs):
    """launches per iteration from engine.json (repeats summed over layer
    segments): one line per engine and phase, 'ENGINE PHASE[ if] op[:n] ...'
    (n omitted when 1; 'if': the phase is under an IF node)"""
    for d in dirs:
        e = json.load(open(f"{d}/engine.json"))
        name = d.rstrip("/").split("/")[-1]
        for ph in e["phases"]:
            if ph["name"] == "prefill":
                continue
            n = {}
            for o in ph["ops"]:
                n[o["name"]] = n.get(o["name"], 0) + int(o.get("repeat", 1))
            ops = " ".join(op if k == 1 else f"{op}:{k}" for op, k in n.items())
            print(f"{name} {ph['name']}{' if' if ph.get('if') else ''} {ops}")


def read_launches(path):
    """cmd_launches's lines: {(engine, phase, op): n}, the engines with IF phases"""
    lau, cond = {}, set()
    for line in open(path):
        f = line.split()
        if len(f) < 3 or line.startswith("#"):
            continue
        if f[2] == "if":
            cond.add(f[0])
        for t in f[3 if f[2] == "if" else 2:]:
            op, _, k = t.partition(":")
            lau[(f[0], f[1], op)] = int(k) if k else 1
    return lau, cond


def parse_log(path):
    """a check log: per engine its profile rows (the joined table: old rows
    'phase op exec meas proj ratio GB/s roofline%', new rows with layers, n,
    sync, GPU us between) and its graph-replay us per iteration"""
    eng, cur, graph = {}, None, {}
    for line in open(path, errors="replace"):
        m = re.match(r"^== (engine|profile|timing) (\S+)", line)
        if m:
            cur = (m.group(1), m.group(2))
            if m.group(1) != "engine":
                eng.setdefault(cur[1], [])
            continue
        if line.startswith("=="):
            cur = None
            continue
        if not cur:
            continue
        m = re.match(r"^ +(?:graph: )?tau ([\d.]+), ([\d.]+) tok/s", line)
        if m and (cur[0] == "timing" or "graph:" in line) and float(m.group(2)) > 0:
            graph.setdefault(cur[1], 1e6 * float(m.group(1)) / float(m.group(2)))
            continue
        m = re.match(r"^  graph replay: ([\d.]+) us per iteration measured", line)
        if m:
            graph[cur[1]] = float(m.group(1))
            continue
        f = line.split()
        if cur[0] == "engine" or len(f) < 8 or f[2] not in EXECS or not f[-1].endswith("%"):
            continue
        try:
            if len(f) == 8:
                r = dict(phase=f[0], op=f[1], exec=f[2], n=None, us=float(f[3]), gbs=float(f[6]))
            elif len(f) == 12:
                r = dict(phase=f[0], op=f[1], exec=f[2], n=int(f[4]), us=float(f[5]),
                         gbs=float(f[10]))
            else:
                continue
        except ValueError:
            continue
        eng[cur[1]].append(r)
    return eng, graph


def cmd_logprofile(log, name, launches=None):
    """one engine's profile table out of a check log, in profile's own
    format (launches from LAUNCHES where the log's rows lack them), then its
    graph-replay us per iteration as '# graph replay: X us'"""
    eng, graph = parse_log(log)
    if name not in eng:
        raise SystemExit(f"{log}: no profile of {name} (engines: {' '.join(sorted(eng))})")
    lau = read_launches(launches)[0] if launches else {}
    rows = eng[name]
    tot = sum(r["us"] for r in rows)
    print(f"profile of {name} from {log}")
    print(f"{'phase':<16} {'op':<18} {'launches':>8} {'us/iter':>12} {'GB/s':>10} {'GFLOP/s':>10} share")
    for r in rows:
        n = r["n"] if r["n"] is not None else lau.get((name, r["phase"], r["op"]))
        if n is None:
            print(f"# no launch count for {r['phase']}/{r['op']}: left out")
            continue
        print(f"{r['phase']:<16} {r['op']:<18} {n:8d} {r['us']:12.2f} {r['gbs']:10.2f} {0.0:10.2f} "
              f"{100 * r['us'] / tot if tot else 0:5.1f}%")
    if name in graph:
        print(f"# graph replay: {graph[name]:.1f} us per iteration")


def cmd_calibrate(log, launches=None, bw_gbs="3350"):
    """the projection's calibration constants (gen/gpu_model.h) from a check
    log: profile's per-launch floor per exec kind, the per-launch cost of
    graph replay, the GEMMs' achieved bandwidth"""
    bw = float(bw_gbs) * 1e9
    eng, graph = parse_log(log)
    lau, cond = read_launches(launches) if launches else ({}, set())
    missing = {}
    for name, rows in eng.items():
        for r in rows:
            if r["n"] is None:
                r["n"] = lau.get((name, r["phase"], r["op"]))
            if r["n"] is None:
                missing.setdefault(name, []).append(f"{r['phase']}/{r['op']}")
            else:
                r["bytes"] = r["gbs"] * 1e9 * r["us"] * 1e-6 / r["n"]  # per launch
    known = [(name, r) for name, rows in eng.items() for r in rows if r["n"]]
    fl = {}
    for ex in ("kernel", "cublaslt", "memset"):
        v = [r["us"] / r["n"] for _, r in known if r["exec"] == ex and r["bytes"] < TINY[ex]]
        fl[ex] = median(v)
        print(f"floor {ex} {fl[ex]:.2f} us per launch (median of {len(v)} ops moving < "
              f"{TINY[ex] / 1e3:.0f} kB; 10%-90% {quantile(v, 0.1):.2f}-{quantile(v, 0.9):.2f})")
    fl["pending"] = fl["kernel"]
    # graph replay: its iteration = the ops' own time + one launch cost per
    # op, and an op's own time is what profile measured beyond the floor
    num = den = 0.0
    for name, rows in eng.items():
        why = ("phases under IF nodes" if name in cond else
               f"no launch counts for {' '.join(missing[name][:3])}" if name in missing else
               "no graph-replay time" if name not in graph else None)
        if why or not rows:
            print(f"launch {name}: excluded ({why or 'no rows'})")
            continue
        n = sum(r["n"] for r in rows)
        own = sum(max(0.0, r["us"] - fl[r["exec"]] * r["n"]) for r in rows)
        print(f"launch {name}: ({graph[name]:.1f} us per iteration - {own:.1f} us of ops) / {n} "
              f"launches = {(graph[name] - own) / n:.2f} us")
        num += graph[name] - own
        den += n
    print(f"launch {num / den if den else 0:.2f} us per launch in graph replay (over every "
          f"included engine's launches)")
    # cuBLASLt: per launch beyond the floor = a + bytes / (eff * bw), fitted
    # (least squares, weighted by launches) over weights of >= 4 MB
    s = sx = sy = sxx = sxy = 0.0
    k = 0
    for _, r in known:
        if r["exec"] != "cublaslt" or r["bytes"] < 4e6:
            continue
        x, y, w = r["bytes"] / bw * 1e6, r["us"] / r["n"] - fl["cublaslt"], r["n"]
        s, sx, sy, sxx, sxy, k = s + w, sx + w * x, sy + w * y, sxx + w * x * x, sxy + w * x * y, k + 1
    if k >= 2 and s * sxx - sx * sx > 0:
        b = (s * sxy - sx * sy) / (s * sxx - sx * sx)
        a = (sy - b * sx) / s
        print(f"gemm efficiency {100 / b:.1f}% of {bw_gbs} GB/s, overlap {-a:.2f} us (time beyond "
              f"the floor = bytes / (eff * bw) - overlap; {k} ops of >= 4 MB)")


# ---- the shape check, the iteration table, the server ---------------------

def target_key(d):
    t = json.load(open(f"{d}/engine.json"))["shapes"]["target"]
    return tuple(sorted((k, v) for k, v in t.items()))


def cmd_shapes(*dirs):
    """one engine per distinct target shape: greedy engines first, then by name"""
    seen = {}
    for d in sorted(dirs, key=lambda d: (float(json.load(open(f"{d}/engine.json"))["spec"]
                                               .get("sampling", {}).get("temperature", 0)) > 0,
                                         d.rstrip("/").split("/")[-1])):
        seen.setdefault(target_key(d), d)
    print(" ".join(sorted(seen.values())))


def iteration_launches_bytes(d, mode):
    """launches and planned bytes of one iteration: every phase after the prefill (gated
    ones counted as run), or target-only's: the phases from verify on plus the draft phases'
    step ops (engine.c rt_engine_run_phases)"""
    e = json.load(open(f"{d}/engine.json"))
    n = b = 0
    on = False
    for ph in e["phases"]:
        if ph["name"] == "prefill":
            continue
        on = on or ph["name"] == "verify"
        for o in ph["ops"]:
            if mode == "graph" or on or o["op"] == "step":
                r = int(o.get("repeat", 1))
                n += r
                b += r * float(o.get("bytes", 0))
    return n, b


def cmd_iteration(name, mode, d, run_json, peak):
    j = load_json(run_json)
    it = int(j.get("iterations") or 0)
    us = 1e6 * float(j["decode_s"]) / it if it else 0.0
    n, b = iteration_launches_bytes(d, mode)
    peak = float(peak or 0)
    share = f"{100 * b / (peak * 1e9) / (us * 1e-6):.0f}%" if peak and us else "-"
    print(f"{name:<40} {mode:<12} {us / 1000:9.3f} {float(j.get('tau') or 0):6.2f} "
          f"{float(j.get('tok_per_s') or 0):9.1f} {n:8d} {b / 1e9:8.2f} {share:>6}")


def cmd_shapecheck(path):
    j = load_json(path)
    rows = [f"{'target-only' if r.get('target_only') else 'speculative'} "
            + "/".join(f"{x['rel_err']:.2e}" for x in r["rows"]) for r in j["runs"]]
    emu = j.get("emulated")
    line = (f"{j['arch']} {j['dtype']}: rel error (first step/after the last) {'; '.join(rows)}; "
            f"bound {j['bound']:.2e} ({j['bound_rule']})")
    if emu:
        line += "; rounding alone " + "/".join(f"{x['rel_err_vs_fp32']:.2e}" for x in emu)
    t = j.get("torch_time")
    if t:
        line += f"; torch {t['dtype']} eager {t['eager_tok_per_s']} tok/s"
        if "graph_tok_per_s" in t:
            line += f", CUDA graphs {t['graph_tok_per_s']} tok/s"
        if t.get("copy_gbs"):
            line += f"; device copy {t['copy_gbs']} GB/s"
    print(line)


def cmd_torchrows(path, name, peak):
    t = load_json(path).get("torch_time") or {}
    peak = float(peak or 0)
    for mode in ("eager", "graph"):
        tps = float(t.get(f"{mode}_tok_per_s") or 0)
        if not tps:
            continue
        us, b = 1e6 / tps, float(t.get("weight_bytes", 0))
        share = f"{100 * b / (peak * 1e9) / (us * 1e-6):.0f}%" if peak else "-"
        label = "torch graphs" if mode == "graph" else "torch eager"
        print(f"{name:<40} {label:<12} {us / 1000:9.3f} {1.0:6.2f} {tps:9.1f} {'-':>8} "
              f"{b / 1e9:8.2f} {share:>6}")


def cmd_stream(hostport, n):
    """POST /v1/chat/completions with stream: true; reads the server-sent events"""
    import http.client
    host, _, port = hostport.rpartition(":")
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    c.request("GET", "/v1/models")
    r = c.getresponse()
    models = json.loads(r.read() or b"{}").get("data", [])
    if r.status != 200 or not models:
        print(f"GET /v1/models: HTTP {r.status}, {len(models)} models")
        sys.exit(1)
    engine = models[0]["id"]
    body = json.dumps({"model": engine, "messages": [{"role": "user", "content": "Say hello."}],
                       "max_tokens": int(n), "temperature": 0, "stream": True})
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    ctype = r.getheader("Content-Type", "")
    chunks, text, done, finish = 0, "", False, None
    for raw in r:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        ev = json.loads(data)
        for ch in ev.get("choices", []):
            d = ch.get("delta", {})
            if d.get("content"):
                chunks += 1
                text += d["content"]
            finish = ch.get("finish_reason") or finish
    ok = r.status == 200 and "text/event-stream" in ctype and done and chunks > 0
    print(f"{engine}: HTTP {r.status} {ctype}; {chunks} content chunks, finish_reason {finish}, "
          f"{'[DONE]' if done else 'no [DONE]'}; text {text[:60]!r}")
    sys.exit(0 if ok else 1)


def main():
    cmds = {"engine": (cmd_engine, 1, 1), "field": (cmd_field, 2, 2), "diff": (cmd_diff, 4, 4),
            "roofline": (cmd_roofline, 3, 4), "launches": (cmd_launches, 1, 99),
            "calibrate": (cmd_calibrate, 1, 3), "logprofile": (cmd_logprofile, 2, 3),
            "shapes": (cmd_shapes, 1, 99), "iteration": (cmd_iteration, 5, 5),
            "shapecheck": (cmd_shapecheck, 1, 1), "stream": (cmd_stream, 2, 2),
            "torchrows": (cmd_torchrows, 3, 3)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or \
            not cmds[sys.argv[1]][1] <= len(sys.argv) - 2 <= cmds[sys.argv[1]][2]:
        raise SystemExit(__doc__)
    fn = cmds[sys.argv[1]][0]
    fn(*sys.argv[2:])


if __name__ == "__main__":
    main()

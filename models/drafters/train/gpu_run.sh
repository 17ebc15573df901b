#!/usr/bin/env bash
# The GPU EAGLE-3 job, call 2 of 2 on the device machine (carry ["build/e3gpu/b"]; call 1,
# at most 30 s before, carried build/e3gpu/a). Checks both parts are there, then runs
# gpu_e3.py (which joins the GGUF's halves in memory and checks their sha256) with a
# wall-clock budget counted from this script's start. Output in $OUT (the device's output
# folder; /tmp/e3gpu-out when unset): head/ (config.json, model.safetensors F16,
# train_record.json), smollm2-eagle3-gpu/ (the same head packed by e3pack.py: config.json,
# model.safetensors, SHA256SUMS; commit it as models/drafters/smollm2-eagle3-gpu/),
# gpu_e3.log, gpu_e3.json: 8 files, the most a device call brings back.
# Knobs: BUDGET (270 s), DEVICE (cuda), PACK (build/e3gpu), PY (python3), EXTRA (more
# gpu_e3.py options, e.g. "--n-new 256").
T0=$(date +%s.%N)
set -euo pipefail
cd "$(dirname "$0")/../../.."
PACK=${PACK:-build/e3gpu}
OUT=${OUT:-/tmp/e3gpu-out}
PY=${PY:-python3}
if [ ! -f "$PACK/a/gguf.part0" ]; then
	echo "gpu_run: $PACK/a/gguf.part0 missing: part a did not reach this machine (it was cold or"
	echo "gpu_run: released between the calls). Run call 1 (\`true\`, carry [\"$PACK/a\"]) and then, within"
	echo "gpu_run: 30 s, this call again (carry [\"$PACK/b\"])."
	exit 2
fi
if [ ! -f "$PACK/b/meta.json" ] || [ ! -f "$PACK/b/gguf.part1" ]; then
	echo "gpu_run: $PACK/b/{meta.json,gguf.part1} missing: carry [\"$PACK/b\"] with this call (make eagle3-gpu-pack)"
	exit 2
fi
mkdir -p "$OUT"
$PY -c "import torch" || { echo "gpu_run: $PY has no torch"; exit 2; }
rc=0
# shellcheck disable=SC2086
$PY models/drafters/train/gpu_e3.py --a "$PACK/a" --b "$PACK/b" --out "$OUT" --t0 "$T0" \
	--budget "${BUDGET:-270}" --device "${DEVICE:-cuda}" ${EXTRA:-} || rc=$?
ls -l "$OUT" "$OUT/head" "$OUT/smollm2-eagle3-gpu" 2>&1 || true
[ $rc = 0 ] || echo "gpu_run: gpu_e3.py FAILED (exit $rc); see $OUT/gpu_e3.log"
exit $rc

#!/usr/bin/env bash
# Reproduces the trained block drafters under models/drafters/ (make drafters).
# Stages, each with progress on stdout: prep.py (build/venv: GGUF -> fp32 weights,
# prompts tokenized), gen.py (the target's own greedy continuations, tapped hidden
# states and its top-32 distribution per generated position, PyTorch on the CPU with the
# weight products in bfloat16 (AMX), GEN_PROCS processes of one thread each over
# disjoint batches) running in the background while train.py (time-boxed distillation,
# soft labels, bfloat16 autocast) trains on the shards written so far, then the sha256
# of each drafter next to it, after check_drafter.py compares the PyTorch and C forwards
# on the trained file. One thread per process (OPENBLAS_NUM_THREADS=1 too): on 2 shared
# cores, multi-threaded BLAS/OpenMP barriers stall under load. The data grows while the
# drafter trains, so a rerun reproduces the recipe and the sizes, not the bytes.
# Knobs: MODEL, WORK (build/drafters), PROMPTS (training prompts cut, 16000),
# GEN_SECONDS (per process), GEN_PROCS (2), GEN_BATCH (128 rows), N_NEW (96),
# TRAIN_SECONDS (once the first batch is written), NICE (10; 0 on a machine of
# one's own), DRAFTER (b8, the default: smollm2-features-b8, the drafter kept in the
# tree, B = 8, 1 layer, Vd = 8192, GEN_SECONDS 1260 and TRAIN_SECONDS 2040 as it was
# made; b16: the retired smollm2-features-b16, B = 16, 2 layers, Vd = 16384,
# GEN_SECONDS 1560 and TRAIN_SECONDS 3500), TOKENS=1 to also train the retired
# tokens-conditioned smollm2-tokens-b8 afterwards (on the finished data) for
# TOKENS_SECONDS (780). models/drafters/README.md, "Retired drafters", has the commands.
set -euo pipefail
cd "$(dirname "$0")/../../.."
MODEL=${MODEL:-models/cache/SmolLM2-135M-Instruct.Q4_1.gguf}
WORK=${WORK:-build/drafters}
PROMPTS=${PROMPTS:-16000}
DRAFTER=${DRAFTER:-b8}
case "$DRAFTER" in
b8) OUT=smollm2-features-b8 BLOCK=8 LAYERS=1 VD=8192 ANCHORS=${ANCHORS:-24}
    GEN_SECONDS=${GEN_SECONDS:-1260} TRAIN_SECONDS=${TRAIN_SECONDS:-2040} ;;
b16) OUT=smollm2-features-b16 BLOCK=16 LAYERS=2 VD=16384 ANCHORS=${ANCHORS:-12}
     GEN_SECONDS=${GEN_SECONDS:-1560} TRAIN_SECONDS=${TRAIN_SECONDS:-3500} ;;
*) echo "drafters: DRAFTER: expected b8 or b16, found '$DRAFTER'"; exit 2 ;;
esac
export LAYERS ANCHORS SOFT_VD=$VD
GEN_BATCH=${GEN_BATCH:-128}
GEN_PROCS=${GEN_PROCS:-2}
N_NEW=${N_NEW:-96}
NICE=${NICE:-10}
PY=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 THREADS=1

if ! $PY -c "import torch" 2>/dev/null; then
	echo "drafters: installing python3-torch"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch >/dev/null
fi
command -v bible >/dev/null || { echo "drafters: needs bible-kjv (make deps)"; exit 1; }
[ -x build/venv/bin/python ] || tests/deps.sh
mkdir -p "$WORK"
echo "drafters: [1/4] prep: weights and prompts -> $WORK"
nice -n "$NICE" build/venv/bin/python models/drafters/train/prep.py "$MODEL" "$WORK" "$PROMPTS" 64
cd models/drafters/train
W=../../../$WORK
echo "drafters: [2/4] the target's continuations (${GEN_SECONDS}s at most), in the background"
GEN_PIDS=
for p in $(seq 0 $((GEN_PROCS - 1))); do
	GEN_PART=$p/$GEN_PROCS nice -n "$NICE" $PY gen.py "$W" train "$N_NEW" "$GEN_BATCH" "$PROMPTS" "$GEN_SECONDS" &
	GEN_PIDS="$GEN_PIDS $!"
done
trap 'kill $GEN_PIDS 2>/dev/null || true' EXIT
until ls "$W"/data_train/*.pt >/dev/null 2>&1; do
	for p in $GEN_PIDS; do
		kill -0 $p 2>/dev/null || { echo "drafters: gen.py stopped before its first batch"; exit 1; }
	done
	sleep 5
done
echo "drafters: [3/4] training the features drafter $OUT: B=$BLOCK, $LAYERS layer(s), Vd=$VD (${TRAIN_SECONDS}s) on the data so far"
nice -n "$NICE" $PY train.py "$W" ../$OUT features "$TRAIN_SECONDS" "$BLOCK" "$VD"
wait $GEN_PIDS
trap - EXIT
if [ "${TOKENS:-0}" = 1 ]; then
	echo "drafters: [3b/4] training the tokens drafter, B=8, Vd=8192 (${TOKENS_SECONDS:-780}s)"
	LAYERS=1 nice -n "$NICE" $PY train.py "$W" ../smollm2-tokens-b8 tokens "${TOKENS_SECONDS:-780}" 8 8192
fi
echo "drafters: [4/4] the C forward against PyTorch on the trained files, then sha256"
make -C ../../.. build/libspecwright.a >/dev/null
cc -std=c11 -D_GNU_SOURCE -O2 -I../../.. -I../../../runtime -o "$W/check_c" check_c.c ../../../build/libspecwright.a \
	-lopenblas -lm -lpthread -ldl
for d in ../smollm2-*/; do
	nice -n "$NICE" $PY check_drafter.py "$W" "$d" "$W/check_c" "../../../$MODEL"
done
cd ..
for d in smollm2-*/; do
	(cd "$d" && sha256sum config.json model.safetensors > SHA256SUMS && cat SHA256SUMS)
done

#!/usr/bin/env bash
# Reproduces the trained block drafters under models/drafters/ (make drafters).
# Stages, each with progress on stdout: prep.py (build/venv: GGUF -> fp32 weights,
# prompts tokenized), gen.py (the target's own greedy continuations and tapped hidden
# states, PyTorch on the CPU), train.py (time-boxed distillation), then the sha256 of
# each drafter next to it, after check_drafter.py compares the PyTorch and C forwards
# on the trained file. Niced (nice -n 10, 2 torch threads): the machine is shared.
# Knobs: MODEL, WORK (build/drafters), GEN_SECONDS, TRAIN_SECONDS, N_NEW, TOKENS=1 to
# also train the tokens-conditioned drafter.
set -euo pipefail
cd "$(dirname "$0")/../../.."
MODEL=${MODEL:-models/cache/SmolLM2-135M-Instruct.Q4_1.gguf}
WORK=${WORK:-build/drafters}
GEN_SECONDS=${GEN_SECONDS:-1500}
TRAIN_SECONDS=${TRAIN_SECONDS:-1800}
N_NEW=${N_NEW:-96}
PY=/usr/bin/python3

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
nice -n 10 build/venv/bin/python models/drafters/train/prep.py "$MODEL" "$WORK"
cd models/drafters/train
W=../../../$WORK
echo "drafters: [2/4] the target's continuations (${GEN_SECONDS}s at most)"
nice -n 10 $PY gen.py "$W" train "$N_NEW" 24 600 "$GEN_SECONDS"
echo "drafters: [3/4] training the features drafter, B=8, Vd=8192 (${TRAIN_SECONDS}s)"
nice -n 10 $PY train.py "$W" ../smollm2-features-b8 features "$TRAIN_SECONDS" 8 8192
if [ "${TOKENS:-0}" = 1 ]; then
	echo "drafters: [3b/4] training the tokens drafter, B=8, Vd=8192 (${TRAIN_SECONDS}s)"
	nice -n 10 $PY train.py "$W" ../smollm2-tokens-b8 tokens "$TRAIN_SECONDS" 8 8192
fi
echo "drafters: [4/4] the C forward against PyTorch on the trained files, then sha256"
make -C ../../.. build/libspecwright.a >/dev/null
cc -std=c11 -D_GNU_SOURCE -O2 -I../../.. -I../../../runtime -o "$W/check_c" check_c.c ../../../build/libspecwright.a \
	-lopenblas -lm -lpthread -ldl
for d in ../smollm2-*/; do
	nice -n 10 $PY check_drafter.py "$W" "$d" "$W/check_c" "../../../$MODEL"
done
cd ..
for d in smollm2-*/; do
	(cd "$d" && sha256sum config.json model.safetensors > SHA256SUMS && cat SHA256SUMS)
done

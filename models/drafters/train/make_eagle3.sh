#!/usr/bin/env bash
# Trains an EAGLE-3 head for SmolLM2-135M-Instruct on general text, end to end, in a time
# budget (make eagle3-drafter). Stages, each with progress on stdout:
#   1. prep.py (build/venv): the target's weights dequantized to fp32 under $WORK/w;
#   2. corpus.py (build/venv): Debian text sources + chat prompts, tokenized, the held-out
#      prompts (models/prompts/heldout-general.txt) checked out of every source;
#   3. tf_data.py (python3-torch, in the background for GEN_SECONDS): teacher-forced windows
#      and the target's own chat continuations, tapped features + top-K soft labels;
#   4. e3train.py (python3-torch, TRAIN_SECONDS, beside stage 3): the head with EAGLE-3's
#      training-time test, checkpoints at token milestones, the final head in $OUT;
#   5. check_e3.py (the unroll against the public forward), the learning curve (eval_tau.py:
#      held-out greedy tau of each checkpoint), sha256 of the head, and the
#      held-out bench (specwright bench --drafters, T = 0 and 0.7) into $OUT/bench.md.
# Knobs: MODEL, WORK (build/drafters/e3), OUT (build/drafters/smollm2-eagle3), GEN_SECONDS
# (2400), TRAIN_SECONDS (2700), VD (4096), TTT (3), DEVICE (cpu; cuda on a GPU), THREADS
# (1 per process), NICE (0), BENCH (1: run stage 5's bench), BENCH_N (64 new tokens).
# The data grows while the head trains, so a rerun reproduces the recipe, not the bytes;
# a rerun continues the data where it stopped (tf_data.py keeps its shards).
set -euo pipefail
cd "$(dirname "$0")/../../.."
MODEL=${MODEL:-models/cache/SmolLM2-135M-Instruct.Q4_1.gguf}
WORK=${WORK:-build/drafters/e3}
OUT=${OUT:-build/drafters/smollm2-eagle3}
GEN_SECONDS=${GEN_SECONDS:-2400}
TRAIN_SECONDS=${TRAIN_SECONDS:-2700}
VD=${VD:-4096}
TTT=${TTT:-3}
DEVICE=${DEVICE:-cpu}
NICE=${NICE:-0}
PY=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 THREADS=${THREADS:-1} RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
$PY -c "import torch" 2>/dev/null || { echo "eagle3-drafter: needs python3-torch (apt-get install python3-torch)"; exit 1; }
command -v bible >/dev/null || { echo "eagle3-drafter: needs bible-kjv (make deps)"; exit 1; }
[ -x build/venv/bin/python ] || tests/deps.sh
for p in fortunes jargon-text python3-doc bash-doc; do
	dpkg -s "$p" >/dev/null 2>&1 || echo "eagle3-drafter: note: package $p is not installed (one source fewer; apt-get install $p)"
done
mkdir -p "$WORK"
ABS_WORK=$(cd "$WORK" && pwd)
ABS_OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
ABS_MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
echo "eagle3-drafter: [1/5] prep: the target's weights -> $WORK/w"
nice -n "$NICE" build/venv/bin/python models/drafters/train/prep.py "$MODEL" "$WORK" 16 4
cd models/drafters/train
if [ ! -f "$ABS_WORK/windows.npy" ] || [ ! -f "$ABS_WORK/chat_prompts.json" ]; then
	echo "eagle3-drafter: [2/5] corpus: sources and chat prompts, tokenized"
	nice -n "$NICE" ../../../build/venv/bin/python corpus.py "$ABS_MODEL" "$ABS_WORK" ../../prompts/heldout-general.txt
else
	echo "eagle3-drafter: [2/5] corpus: $WORK/windows.npy exists, kept"
fi
echo "eagle3-drafter: [3/5] teacher-forced data (${GEN_SECONDS}s at most) in the background -> $WORK/tf"
nice -n "$NICE" $PY tf_data.py "$ABS_WORK" "$GEN_SECONDS" &
GEN_PID=$!
trap 'kill $GEN_PID 2>/dev/null || true' EXIT
echo "eagle3-drafter: [4/5] training the head (${TRAIN_SECONDS}s, Vd $VD, $TTT unrolled steps, $DEVICE) -> $OUT"
nice -n "$NICE" $PY e3train.py "$ABS_WORK" "$ABS_OUT" --seconds "$TRAIN_SECONDS" --vd "$VD" --ttt "$TTT" \
	--device "$DEVICE" --threads "$THREADS"
kill $GEN_PID 2>/dev/null || true
wait $GEN_PID 2>/dev/null || true
trap - EXIT
echo "eagle3-drafter: [5/5] checks, sha256, held-out bench"
$PY check_e3.py
echo "eagle3-drafter: the learning curve: held-out greedy tau of every checkpoint (eval_tau.py)"
../../../build/venv/bin/python heldout_ids.py "$ABS_MODEL" ../../prompts/heldout-general.txt "$ABS_WORK/heldout_ids.json"
nice -n "$NICE" $PY eval_tau.py "$ABS_WORK" "$ABS_WORK/heldout_ids.json" 64 4 "$ABS_OUT"/ck-* "$ABS_OUT"
cd ../../..
(cd "$OUT" && sha256sum config.json model.safetensors > SHA256SUMS && cat SHA256SUMS)
if [ "${BENCH:-1}" = 1 ]; then
	make build/specwright >/dev/null
	build/specwright bench "$MODEL" --prompt-set models/prompts/heldout-general.txt -n "${BENCH_N:-64}" \
		--drafters "ngram;eagle3:$OUT" | tee "$OUT/bench.md"
fi

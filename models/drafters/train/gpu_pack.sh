#!/usr/bin/env bash
# Packs the GPU EAGLE-3 job's inputs (make eagle3-gpu-pack): build/e3gpu/a (the GGUF's first
# half) and build/e3gpu/b (the rest + corpus.py's chat prompts as ids + text windows), each
# under 47.5 MiB, for two consecutive device calls (see README.md, "EAGLE-3 on a GPU"):
#   call 1: `true`                                   carry ["build/e3gpu/a"]
#   call 2: `bash models/drafters/train/gpu_run.sh`  carry ["build/e3gpu/b"]
# Knobs: MODEL, WORK (corpus.py's output, build/drafters/e3; made here when missing),
# PACK (build/e3gpu), CAP_MIB (47.5).
set -euo pipefail
cd "$(dirname "$0")/../../.."
MODEL=${MODEL:-models/cache/SmolLM2-135M-Instruct.Q4_1.gguf}
WORK=${WORK:-build/drafters/e3}
PACK=${PACK:-build/e3gpu}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
[ -f "$MODEL" ] || { echo "eagle3-gpu-pack: $MODEL: missing (make model)"; exit 1; }
[ -x build/venv/bin/python ] || tests/deps.sh
mkdir -p "$WORK"
ABS_WORK=$(cd "$WORK" && pwd)
ABS_MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
ABS_PACK=$(mkdir -p "$PACK" && cd "$PACK" && pwd)
cd models/drafters/train
if [ ! -f "$ABS_WORK/windows.npy" ]; then
	echo "eagle3-gpu-pack: corpus: sources and chat prompts, tokenized -> $WORK"
	../../../build/venv/bin/python corpus.py "$ABS_MODEL" "$ABS_WORK" ../../prompts/heldout-general.txt
else  # the windows stay; the chat prompts follow corpus.py's current recipe (~15 s)
	echo "eagle3-gpu-pack: chat prompts (corpus.py, CHAT_ONLY=1) -> $WORK"
	CHAT_ONLY=1 ../../../build/venv/bin/python corpus.py "$ABS_MODEL" "$ABS_WORK" ../../prompts/heldout-general.txt
fi
rm -rf "$ABS_PACK/a" "$ABS_PACK/b"
../../../build/venv/bin/python gpu_pack.py "$ABS_MODEL" "$ABS_WORK" ../../prompts/heldout-general.txt "$ABS_PACK" "${CAP_MIB:-47.5}"

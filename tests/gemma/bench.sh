#!/usr/bin/env bash
# Gemma 3 270M's bench beside SmolLM2's on the host decoder, with llama.cpp
# on the same files and prompt ids (make bench-gemma):
#
#   tests/gemma/bench.sh build/specwright GEMMA.gguf SMOLLM2.gguf
#
# For each model, one after the other in this run: `specwright bench MODEL
# --drafters 'ngram;layerskip:...'` (target-only, n-gram, a layer-skip
# draft of the model itself; T=0 and 0.7; medians over the prompts; no chat
# template (--no-chat): plain-text prompts, as llama.cpp gets them), which
# writes the prompt ids it used ($SW_BENCH_IDS), then
# tests/reference/llamacpp_bench.py on those ids: llama.cpp's target-only
# greedy decode of the same file and its prompt-lookup decoding. Everything
# runs on ONE thread (SW_THREADS=1, llama.cpp n_threads=1). Needs the
# llama-cpp-python build of `make check-reference` in REF_DIR (default
# build/ref; symlinks to another build's venv and source work).
# The load (uptime) is printed before and after: only ratios within one run
# mean anything on a shared machine. Speed is measured here, never asserted.
set -euo pipefail
cd "$(dirname "$0")/../.."
SW=${1:?usage: $0 SPECWRIGHT GEMMA.gguf SMOLLM2.gguf}
GEMMA=${2:?usage: $0 SPECWRIGHT GEMMA.gguf SMOLLM2.gguf}
SMOL=${3:?usage: $0 SPECWRIGHT GEMMA.gguf SMOLLM2.gguf}
BUILD=${BUILD:-build}
REF=${REF_DIR:-build/ref}
NP=${BENCH_PROMPTS:-4}
N=${BENCH_N:-64}
RUN=$BUILD/gemma-bench
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 SW_THREADS=1
for f in "$GEMMA" "$SMOL"; do
	[ -f "$f" ] || { echo "bench-gemma: $f missing (make model-gemma / make model)" >&2; exit 2; }
done
[ -x "$SW" ] || { echo "bench-gemma: $SW not built" >&2; exit 2; }
[ -x "$REF/venv/bin/python" ] && [ -f "$REF/venv/.ok" ] ||
	{ echo "bench-gemma: no llama-cpp-python build in $REF (make check-reference builds it)" >&2; exit 2; }
rm -rf "$RUN"; mkdir -p "$RUN"
bible gen1:1-rev22:21 > "$RUN/corpus.txt"
PY="$REF/venv/bin/python"
GGUF_PY=$(echo "$REF"/llama_cpp_python-*/vendor/llama.cpp/gguf-py)
echo "bench-gemma: load before: $(uptime)"
T0=$(date +%s)
# model, its layer-skip draft (about 2/3 of the layers, the last ones kept)
for pair in "$GEMMA|layerskip:0-11,16-17" "$SMOL|layerskip:0-14,22-29"; do
	m=${pair%%|*}; ls=${pair#*|}
	stem=$(basename "$m" .gguf)
	echo "bench-gemma: $stem: specwright bench, $NP prompts, $N tokens, 1 thread"
	SW_BENCH_IDS="$RUN/$stem.ids" "$SW" bench "$m" --corpus "$RUN/corpus.txt" --prompts "$NP" -n "$N" \
		--drafters "ngram;$ls" --no-chat > "$RUN/$stem.sw.md" 2> "$RUN/$stem.sw.err" ||
		{ cat "$RUN/$stem.sw.err"; echo "bench-gemma: specwright bench failed" >&2; exit 1; }
	cat "$RUN/$stem.sw.md"
	echo "bench-gemma: $stem: llama.cpp on the same ids, 1 thread"
	PYTHONPATH="$GGUF_PY:tests/reference" "$PY" tests/reference/llamacpp_bench.py "$RUN/$stem.ids" "$m" \
		--n-gen "$N" --threads 1 --lookup > "$RUN/$stem.lcp.md" 2> "$RUN/$stem.lcp.err" ||
		{ cat "$RUN/$stem.lcp.err"; echo "bench-gemma: llamacpp_bench.py failed" >&2; exit 1; }
	cat "$RUN/$stem.lcp.md"
	echo
done
echo "bench-gemma: load after: $(uptime)"
echo "bench-gemma: done ($(( $(date +%s) - T0 ))s; tables in $RUN)"

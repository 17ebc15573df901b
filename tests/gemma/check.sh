#!/usr/bin/env bash
# The second real model on the host decoder (make check-gemma):
#
#   tests/gemma/check.sh build/specwright models/cache/gemma-3-270m-q4_k_m.gguf
#
# 1. Tokenizer: build/tests/test_tokenizer's Gemma case (262144 ids against
#    sentencepiece itself on the GGUF's vocabulary, ~1.2 MB of text plus odd
#    and random strings, and decoding back byte for byte).
# 2. Logits: `specwright eval --dump` (greedy, target-only) on three prompts,
#    then tests/gemma/gemma_ref.py: transformers' Gemma3ForCausalLM on the
#    GGUF's weights dequantized by the gguf package, teacher-forced on our
#    ids in float64 and float32, every logit within the fp32 bound, greedy
#    tokens equal to transformers' argmax.
# 3. Speculative decoding: `specwright run` with the n-gram and layer-skip
#    drafters prints exactly what target-only `generate` prints.
# Needs build/venv (sentencepiece, gguf) and build/venv-hf (torch,
# transformers): make deps. One thread for every step. Prints PASS/FAIL.
set -euo pipefail
cd "$(dirname "$0")/../.."
SW=${1:?usage: $0 SPECWRIGHT MODEL}
MODEL=${2:?usage: $0 SPECWRIGHT MODEL}
N_GEN=${N_GEN:-24}
BUILD=${BUILD:-build}
RUN=$BUILD/gemma-check
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
[ -x "$SW" ] || { echo "check-gemma: $SW not built" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "check-gemma: $MODEL missing (make model-gemma)" >&2; exit 2; }
rm -rf "$RUN"; mkdir -p "$RUN"
T0=$(date +%s)
rc=0

make --no-print-directory -s "$BUILD/tests/test_tokenizer"
if SW_GEMMA_MODEL=$MODEL "$BUILD/tests/test_tokenizer" > "$RUN/tok.log" 2>&1 &&
   grep -q "gemma vs sentencepiece: .* 0 mismatches" "$RUN/tok.log"; then
	echo "check-gemma: tokenizer PASS: $(grep -o 'gemma vs sentencepiece: [^(]*' "$RUN/tok.log")"
else
	tail -20 "$RUN/tok.log"; echo "check-gemma: tokenizer FAIL"; rc=1
fi

PROMPTS=(
	"The capital of France is"
	"Once upon a time, in a small village,"
	$'def fibonacci(n):\n'
)
dumps=()
for i in "${!PROMPTS[@]}"; do
	"$SW" eval "$MODEL" --no-chat -p "${PROMPTS[$i]}" -n "$N_GEN" --dump "$RUN/p$i.bin" > "$RUN/p$i.log" 2>&1 \
		|| { cat "$RUN/p$i.log"; echo "check-gemma: specwright eval failed" >&2; exit 1; }
	dumps+=("$RUN/p$i.bin")
done
"$BUILD/venv-hf/bin/python" tests/gemma/gemma_ref.py logits "$MODEL" "${dumps[@]}" || rc=1

# and a prompt that repeats itself, so that drafts are accepted
PROMPTS+=("one two three four five six seven, one two three four five six seven, one two three")
for i in "${!PROMPTS[@]}"; do
	"$SW" generate "$MODEL" --no-chat -p "${PROMPTS[$i]}" -n "$N_GEN" > "$RUN/t$i.txt" 2> "$RUN/t$i.err"
	for d in ngram layerskip:0-15,17 layerskip:0-11,16-17; do
		"$SW" run "$MODEL" --no-chat --draft "$d" -p "${PROMPTS[$i]}" -n "$N_GEN" > "$RUN/s$i.txt" 2> "$RUN/s$i.err"
		stats=$(grep -o 'tau [0-9.]*' "$RUN/s$i.err" | head -1)
		if cmp -s "$RUN/t$i.txt" "$RUN/s$i.txt"; then
			echo "check-gemma: prompt $((i + 1)) --draft $d: $N_GEN tokens equal to target-only ($stats) PASS"
		else
			echo "check-gemma: prompt $((i + 1)) --draft $d differs from target-only FAIL"; rc=1
			diff "$RUN/t$i.txt" "$RUN/s$i.txt" | head -5
		fi
	done
done
echo "check-gemma: $([ $rc = 0 ] && echo PASS || echo FAIL) ($(( $(date +%s) - T0 ))s; logs in $RUN)"
exit $rc

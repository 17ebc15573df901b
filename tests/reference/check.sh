#!/usr/bin/env bash
# Independent check of the forward pass against llama.cpp (make check-reference).
#
#   tests/reference/check.sh build/specwright MODEL.gguf
#
# MODEL: SmolLM2-135M-Instruct Q4_1 (make check-reference) or Gemma 3 270M
# Q4_K_M (make check-reference-gemma); the bound follows each file's weight
# types (tests/reference/README.md). REF_DIR (default build/ref) may hold
# the venv and source of an earlier build, or symlinks to them.
#
# 1. Builds llama.cpp once, from the PyPI sdist of llama-cpp-python (pinned
#    below), into the venv build/ref/venv: CPU only, no BLAS, no OpenMP, no
#    llava/tools, -DGGML_NATIVE=ON, 2 compile jobs. Cached: later runs reuse it.
# 2. For each prompt, runs our greedy `eval` (32 tokens, --dump) and hands the
#    ids and logits to tests/reference/llamacpp_ref.py, which runs llama.cpp
#    on OUR prompt ids (greedy, and teacher-forced on our generated ids),
#    cross-checks llama.cpp's own tokenization of the prompt, and compares
#    tokens and logits against the derived tolerance (see README.md).
# 3. Repeats the comparison against llama.cpp on the same weights dequantized
#    to F32 (no activation quantization on llama.cpp's side either), with the
#    fp32-rounding tolerance.
# Prints PASS/FAIL per prompt and overall; exits 1 on FAIL.
set -euo pipefail
cd "$(dirname "$0")/../.."

SW=${1:?usage: $0 SPECWRIGHT MODEL}
MODEL=${2:?usage: $0 SPECWRIGHT MODEL}
N_GEN=${N_GEN:-32}
LCP_VERSION=0.3.16
REF=${REF_DIR:-build/ref}
VENV=$REF/venv
SDIST=$REF/llama_cpp_python-$LCP_VERSION.tar.gz
SRC=$REF/llama_cpp_python-$LCP_VERSION
CMAKE_FLAGS="-DGGML_NATIVE=ON -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
STAMP="llama-cpp-python==$LCP_VERSION $CMAKE_FLAGS tqdm pyyaml"
T0=$(date +%s)

[ -x "$SW" ] || { echo "check-reference: $SW not built" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "check-reference: $MODEL missing (make model)" >&2; exit 2; }

mkdir -p "$REF"
if [ ! -f "$VENV/.ok" ] || [ "$(cat "$VENV/.ok")" != "$STAMP" ]; then
	echo "check-reference: building llama.cpp from the llama-cpp-python $LCP_VERSION sdist (once; ~10 min on 2 cores)"
	if [ ! -f "$SDIST" ]; then
		python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
			"llama-cpp-python==$LCP_VERSION" -d "$REF"
	fi
	rm -rf "$SRC" "$VENV"
	tar xzf "$SDIST" -C "$REF"     # for the vendored gguf-py (reads/writes GGUF)
	python3 -m venv "$VENV"
	CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		"$VENV/bin/pip" install -q --disable-pip-version-check "$SDIST" > "$REF/build.log" 2>&1 \
		|| { tail -40 "$REF/build.log"; echo "check-reference: llama.cpp build failed (log: $REF/build.log)" >&2; exit 2; }
	"$VENV/bin/pip" install -q --disable-pip-version-check tqdm pyyaml
	echo "$STAMP" > "$VENV/.ok"
	echo "check-reference: llama.cpp built in $(( $(date +%s) - T0 ))s"
fi
case "$SRC" in /*) SRC_ABS=$SRC ;; *) SRC_ABS=$PWD/$SRC ;; esac  # REF_DIR may be absolute
export PYTHONPATH="$SRC_ABS/vendor/llama.cpp/gguf-py"
PY="$VENV/bin/python"
"$PY" -c 'import llama_cpp; print("check-reference: llama-cpp-python", llama_cpp.__version__, "|", llama_cpp.llama_print_system_info().decode().strip())'

# Our side: greedy target-only decoding with the logits dumped.
STEM=$(basename "$MODEL" .gguf)
RUN=$REF/run-$STEM
rm -rf "$RUN"; mkdir -p "$RUN"
PROMPTS=(
	"The capital of France is"
	"Once upon a time, in a small village,"
	$'def fibonacci(n):\n'
)
cases=()
for i in "${!PROMPTS[@]}"; do
	printf '%s' "${PROMPTS[$i]}" > "$RUN/p$i.txt"
	t=$(date +%s)
	"$SW" eval "$MODEL" --no-chat -p "${PROMPTS[$i]}" -n "$N_GEN" --dump "$RUN/p$i.bin" > "$RUN/p$i.log" 2>&1 \
		|| { cat "$RUN/p$i.log"; echo "check-reference: specwright eval failed" >&2; exit 1; }
	echo "check-reference: ours, prompt $((i + 1)): $N_GEN tokens in $(( $(date +%s) - t ))s"
	cases+=(--case "$RUN/p$i.txt" "$RUN/p$i.bin")
done

rc=0
"$PY" tests/reference/llamacpp_ref.py --model "$MODEL" "${cases[@]}" --rho q8 \
	--label "$(basename "$MODEL") vs llama.cpp (activations quantized to Q8_0/Q8_1/Q8_K)" --json "$RUN/q8.json" || rc=1

# The same weights dequantized to F32: llama.cpp then does no activation
# quantization, and what is left is fp32 rounding. Cached, keyed on the model.
F32=$REF/$STEM-f32.gguf
key="$(realpath "$MODEL") $(stat -c '%s %Y' "$MODEL")"
if [ ! -f "$F32" ] || [ "$(cat "$F32.key" 2>/dev/null)" != "$key" ]; then
	echo "check-reference: writing $F32 (all tensors dequantized to F32)"
	"$PY" tests/reference/llamacpp_ref.py --model "$MODEL" --convert-f32 "$MODEL" "$F32"
	echo "$key" > "$F32.key"
fi
"$PY" tests/reference/llamacpp_ref.py --model "$F32" "${cases[@]}" --rho fp32 \
	--label "same weights as F32 vs llama.cpp (fp32 throughout)" --json "$RUN/fp32.json" || rc=1

if [ $rc = 0 ]; then
	echo "check-reference: PASS ($(( $(date +%s) - T0 ))s)"
else
	echo "check-reference: FAIL ($(( $(date +%s) - T0 ))s; details above, JSON in $RUN)"
fi
exit $rc

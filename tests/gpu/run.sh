#!/usr/bin/env bash
# The checks only a machine with an NVIDIA GPU can run: the cuda backend
# against the real driver and cuBLASLt. Builds the project (or uses the
# build there is), checks dev_cuda_api.h's struct layouts against the CUDA
# headers, runs tests/test_device (which adds the real cuda backend to its
# interface tests when a device is present), builds the example engines,
# runs each one that has weights on --backend cuda and --backend host and
# compares the greedy tokens (and graph vs --eager on cuda), then prints the
# per-kernel timings of `specwright profile` against the bandwidth roofline.
# Then an adaptive (SpecDec++) engine, whose gated draft levels are CUDA IF
# nodes: graph vs --eager tokens on cuda; the same for a wide sampled tree
# (sequoia63 RRSw: verify's waiting blocks); and compute-sanitizer memcheck,
# racecheck and synccheck over one engine iteration (prefill + 1 token),
# eager (every kernel its own launch) and, for memcheck, as a graph.
# Without a GPU it says so and exits 2; a failed check exits 1.
# `tests/gpu/run.sh --offline` runs what needs no GPU (the build, the
# layout check against the CUDA headers, the engine builds with their
# driver floor, the probe's compile) and says what it skipped: the dry run
# for a machine with the toolkit but no GPU.
#
# Assumes the CLI of runtime/engine_cli.c:
#   specwright build SPEC.json -o DIR
#   specwright run DIR --backend cuda|host [--eager] -n N -p PROMPT --json
#     (one JSON object on stdout with "tokens": [...], "tok_per_s", ...)
#   specwright profile DIR --backend cuda -n ITERS   (table on stderr)
# Knobs: BUILD (build), N (32 tokens), ITERS (20), PROMPT, SPECS (the
# models/specs/*.json), OUT (a temp dir), ALLOW_DIVERGE=1 (a cuda/host
# greedy mismatch is reported, not fatal: bf16 kernels can flip a near-tie),
# PEAK_GBS (the GPU's DRAM bandwidth for the roofline; default from a table
# of known GPUs by name), SANITIZER (compute-sanitizer; default
# $CUDA_HOME/bin/compute-sanitizer), SKIP_SANITIZER=1.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
offline=0
case "${1:-}" in
--offline) offline=1 ;;
"") ;;
*) echo "usage: tests/gpu/run.sh [--offline]" >&2; exit 2 ;;
esac
BUILD=${BUILD:-build}
N=${N:-32}
ITERS=${ITERS:-20}
PROMPT=${PROMPT:-"The old lighthouse keeper climbed the stairs every night to"}
OUT=${OUT:-$(mktemp -d /tmp/specwright-gpu.XXXXXX)}
mkdir -p "$OUT" || exit 1
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export CUDA_HOME
fail=0
note() { printf '\n== %s\n' "$*"; }
bad() { echo "FAIL: $*" >&2; fail=1; }
skipped() { echo "  skipped (--offline, no GPU): $*"; }

# ---- is there a GPU at all ----
why=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
	why="nvidia-smi not found"
elif ! nvidia-smi -L >/dev/null 2>&1; then
	why="nvidia-smi finds no usable GPU: $(nvidia-smi -L 2>&1 | head -n 1)"
fi
if [ -n "$why" ] && [ $offline -eq 0 ]; then
	echo "tests/gpu/run.sh: no GPU here ($why): these checks need an NVIDIA GPU and driver" \
		"(tests/gpu/run.sh --offline runs the ones that do not)" >&2
	exit 2
fi
gpu_name=""
if [ $offline -eq 0 ]; then
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv
	gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
else
	echo "tests/gpu/run.sh --offline (${why:-a GPU is present}): only the checks that need no GPU run"
fi
# the DRAM bandwidth the roofline divides by (GB/s, the vendors' figures)
peak_gbs() {
	case "$1" in
	*H200*) echo 4800 ;;
	*H100*NVL*) echo 3900 ;;
	*H100*PCIe*) echo 2000 ;;
	*H100*) echo 3350 ;;
	*A100*80GB*PCIe*) echo 1935 ;;
	*A100*80GB*) echo 2039 ;;
	*A100*) echo 1555 ;;
	*L40S* | *L40*) echo 864 ;;
	*A10*) echo 600 ;;
	*L4*) echo 300 ;;
	*"RTX 4090"*) echo 1008 ;;
	*"RTX 3090"*) echo 936 ;;
	*) echo "" ;;
	esac
}
PEAK_GBS=${PEAK_GBS:-$(peak_gbs "$gpu_name")}

# ---- build ----
note "build"
if ! make -j"$(nproc)" BUILD="$BUILD" "$BUILD/specwright" "$BUILD/tests/test_device" "$BUILD/libspecwright.a" >"$OUT/make.log" 2>&1; then
	tail -n 30 "$OUT/make.log" >&2
	echo "tests/gpu/run.sh: build failed (log: $OUT/make.log)" >&2
	exit 1
fi

# ---- the backend can open the device (rt_dev_cuda_available / rt_dev_cuda_new) ----
# (and, opened on this thread, serves another: the backend makes its primary
# context current on every thread that enters it, runtime/device/device.h)
cat >"$OUT/probe.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "device/device.h"
static void *worker(void *arg)
{
	rt_dev *d = arg;
	sw_err err = {0};
	unsigned char a[4096], b[4096];
	rt_dptr p = 0;
	for (int i = 0; i < 4096; i++)
		a[i] = (unsigned char)(i * 7);
	if (d->ops->alloc(d, sizeof(a), &p, &err) || d->ops->upload(d, p, a, sizeof(a), &err) ||
	    d->ops->download(d, b, p, sizeof(b), &err) || d->ops->sync(d, &err)) {
		printf("second thread: %s\n", err.msg);
		return (void *)1;
	}
	d->ops->free(d, p);
	return memcmp(a, b, sizeof(a)) ? (void *)1 : NULL;
}
int main(void)
{
	sw_err err = {0};
	if (!rt_dev_cuda_available()) {
		rt_dev *d = rt_dev_cuda_new(0, &err);
		printf("unavailable: %s\n", d ? "(opened anyway?)" : err.msg);
		return 1;
	}
	rt_dev *d = rt_dev_cuda_new(0, &err);
	if (!d) {
		printf("open failed: %s\n", err.msg);
		return 1;
	}
	pthread_t th;
	void *bad = (void *)1;
	if (pthread_create(&th, NULL, worker, d) || pthread_join(th, &bad) || bad) {
		printf("%s: a second thread could not use the device\n", d->desc);
		return 1;
	}
	printf("%s, driver %d.%d, conditional nodes: %s; a second thread used it\n", d->desc,
	       d->driver_version / 1000, d->driver_version % 1000 / 10, d->no_cond ? d->no_cond : "yes");
	rt_dev_free(d);
	return 0;
}
EOF
if ! cc -std=c11 -D_GNU_SOURCE -I. -Iruntime -o "$OUT/probe" "$OUT/probe.c" \
	"$BUILD/libspecwright.a" -lopenblas -lm -lpthread -ldl; then
	echo "tests/gpu/run.sh: cannot link the probe against $BUILD/libspecwright.a" >&2
	exit 1
fi
if [ $offline -eq 1 ]; then
	echo "probe compiled and linked"
	skipped "opening the device, a second thread using it"
elif ! desc=$("$OUT/probe"); then
	echo "tests/gpu/run.sh: the cuda backend cannot open the GPU: $desc" >&2
	exit 2
else
	echo "cuda backend: $desc"
fi
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)

# ---- dev_cuda_api.h against the real headers ----
note "dev_cuda_api.h layouts vs cuda.h / cublasLt.h"
if [ -f "$CUDA_HOME/include/cuda.h" ] && [ -f "$CUDA_HOME/include/cublasLt.h" ]; then
	cat >"$OUT/layout.c" <<'EOF'
#include <stdio.h>
#include <stddef.h>
#ifdef REAL
#include <cuda.h>
#include <cublasLt.h>
#else
#include "dev_cuda_api.h"
#endif
#define P(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))
#define S(t) printf("sizeof " #t " %zu\n", sizeof(t))
int main(void)
{
	S(CUgraphEdgeData); P(CUgraphEdgeData, type);
	S(CUDA_CONDITIONAL_NODE_PARAMS); P(CUDA_CONDITIONAL_NODE_PARAMS, type);
	P(CUDA_CONDITIONAL_NODE_PARAMS, size); P(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out);
	P(CUDA_CONDITIONAL_NODE_PARAMS, ctx);
	S(CUgraphNodeParams); P(CUgraphNodeParams, conditional); P(CUgraphNodeParams, reserved2);
	S(cublasLtMatmulHeuristicResult_t); P(cublasLtMatmulHeuristicResult_t, workspaceSize);
	P(cublasLtMatmulHeuristicResult_t, state); P(cublasLtMatmulHeuristicResult_t, wavesCount);
	S(cublasLtMatmulAlgo_t); S(CUgraphConditionalHandle); S(CUdeviceptr);
	printf("%d %d %d %d %d %d %d %d %d %d %d\n", CU_GRAPH_NODE_TYPE_CONDITIONAL,
	       CU_GRAPH_COND_TYPE_IF, CU_GRAPH_COND_ASSIGN_DEFAULT, CU_STREAM_CAPTURE_MODE_RELAXED,
	       CU_STREAM_SET_CAPTURE_DEPENDENCIES, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
	       CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_COMPUTE_32F, CUDA_R_16BF,
	       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
	printf("%d %d %d %d\n", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
	       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CUDA_ERROR_INVALID_CONTEXT,
	       CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
	return 0;
}
EOF
	if cc -DREAL -I"$CUDA_HOME/include" -o "$OUT/layout_real" "$OUT/layout.c" &&
	   cc -Iruntime -Iruntime/device -o "$OUT/layout_ours" "$OUT/layout.c" &&
	   diff <("$OUT/layout_real") <("$OUT/layout_ours"); then
		echo "layouts and constants match"
	else
		bad "dev_cuda_api.h disagrees with $CUDA_HOME/include (diff above)"
	fi
else
	echo "skipped: no $CUDA_HOME/include/cuda.h + cublasLt.h"
fi

# ---- the interface tests, real cuda backend included ----
note "tests/test_device (host, host-emulate, cuda over the fake driver, cuda)"
if [ $offline -eq 1 ]; then
	skipped "tests/test_device on the real cuda backend"
	out=""
elif ! out=$("$BUILD/tests/test_device" 2>&1); then
	printf '%s\n' "$out" | tail -n 40
	bad "test_device"
else
	printf '%s\n' "$out" | grep -E '^\[  PASSED|cuda available' || true
fi
printf '%s\n' "$out" | grep -q 'cuda available but not tested' && bad "test_device did not run the real cuda backend"

# ---- end to end: engines on cuda vs host ----
json_tokens() { # the "tokens" array of a run --json object, one line
	python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["tokens"])))' 2>/dev/null ||
		sed -n 's/.*"tokens": \[\([^]]*\)\].*/\1/p' | tr -d ','
}
json_field() { # a scalar field
	sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p" | head -n 1
}
# graph_eager NAME DIR SECONDS: run engine DIR on cuda as a graph, then eager
# (same seed), each under a SECONDS limit (exit 124: a hang); outputs in
# $OUT/NAME.{graph,eager}.{json,err}; tokens in tok_graph / tok_eager
# (empty where a run failed, which is reported)
graph_eager() {
	tok_graph="" tok_eager=""
	local mode extra t
	for mode in graph eager; do
		extra=""
		[ $mode = eager ] && extra="--eager"
		if timeout "$3" "$BUILD/specwright" run "$2" --backend cuda $extra -n "$N" -p "$PROMPT" \
			--json >"$OUT/$1.$mode.json" 2>"$OUT/$1.$mode.err"; then
			t=$(json_tokens <"$OUT/$1.$mode.json")
			[ $mode = graph ] && tok_graph=$t || tok_eager=$t
			printf '  %-6s %8s tok/s  tau %s\n' $mode "$(json_field tok_per_s <"$OUT/$1.$mode.json")" \
				"$(json_field tau <"$OUT/$1.$mode.json")"
		else
			tail -n 20 "$OUT/$1.$mode.err" >&2
			bad "$1: run --backend cuda $extra (exit 124: a hang past $3 s)"
		fi
	done
}
# `specwright profile`'s table (phase op launches us/iter GB/s GFLOP/s share)
# with each row's share of the bandwidth roofline: the time its bytes take
# at PEAK_GBS over the time it took (each op synchronised: launch latency
# included, so small ops read low), and the iteration's total
roofline() {
	if [ -z "$PEAK_GBS" ]; then
		sed 's/^/  /' "$1"
		echo "  (no roofline: unknown GPU \"$gpu_name\"; set PEAK_GBS)"
		return
	fi
	awk -v peak="$PEAK_GBS" '
		/^profile of/ { print "  " $0; next }
		$1 == "phase" { printf "  %s %10s\n", $0, "roofline"; next }
		NF >= 7 && $4 ~ /^[0-9.]+$/ {
			us = $4; gbs = $5; t += us; ideal += gbs * us / peak
			printf "  %s %9.1f%%\n", $0, 100 * gbs / peak; next }
		{ print "  " $0 }
		END { if (t > 0) printf "  iteration: %.1f us measured, %.1f us at %s GB/s: %.1f%% of the roofline\n", t, ideal, peak, 100 * ideal / t }
	' "$1"
}
specs=${SPECS:-$(ls models/specs/*.json)}
for spec in $specs; do
	name=$(basename "$spec" .json)
	dir="$OUT/engines/$name"
	note "engine $name"
	if ! "$BUILD/specwright" build "$spec" -o "$dir" >"$OUT/$name.build.log" 2>&1; then
		tail -n 20 "$OUT/$name.build.log" >&2
		bad "$name: build"
		continue
	fi
	ls "$dir"/kernels.sm_*.cubin 2>/dev/null | sed 's/^/  /'
	# the driver floor the build recorded (runtime/engine refuses older drivers)
	floor=$(sed -n 's/.*"toolkit": {"nvrtc": "\([0-9.]*\)", "min_driver": \([0-9]*\)}.*/NVRTC \1, driver >= \2/p' "$dir/engine.json")
	if [ -z "$floor" ]; then
		bad "$name: engine.json has no \$.toolkit (NVRTC version, min_driver)"
	else
		echo "  $floor (this driver: ${driver:-none})"
	fi
	grep -q '"dyn_smem": ' "$dir/engine.json" || bad "$name: engine.json kernels carry no dyn_smem"
	grep -q 'sw_graph_set_cond' "$dir/kernels.cu" || bad "$name: kernels.cu lacks the set-conditional kernel"
	if [ $offline -eq 1 ]; then
		skipped "running $name on cuda and host"
		continue
	fi
	if ! grep -q '"path"' "$spec"; then
		echo "  shape-only spec (no weights): built, not run"
		continue
	fi
	model=$(sed -n 's/.*"path": *"\([^"]*\)".*/\1/p' "$spec" | head -n 1)
	if [ ! -f "$model" ]; then
		if ! models/fetch.sh "$(dirname "$model")" >/dev/null 2>&1 || [ ! -f "$model" ]; then
			echo "  weights $model missing and not fetchable here: not run"
			continue
		fi
	fi
	declare -A toks=()
	for be in cuda:graph cuda:eager host:graph; do
		backend=${be%%:*}
		extra=""
		[ "${be##*:}" = eager ] && extra="--eager"
		log="$OUT/$name.$backend.${be##*:}"
		if ! "$BUILD/specwright" run "$dir" --backend "$backend" $extra -n "$N" -p "$PROMPT" --json \
			>"$log.json" 2>"$log.err"; then
			tail -n 20 "$log.err" >&2
			bad "$name: run --backend $backend $extra"
			continue
		fi
		toks[$be]=$(json_tokens <"$log.json")
		printf '  %-11s %8s tok/s  tau %-7s prefill %ss  capture %ss  greedy match vs host fp32: %s of %s\n' \
			"$be" "$(json_field tok_per_s <"$log.json")" "$(json_field tau <"$log.json")" \
			"$(json_field prefill_s <"$log.json")" "$(json_field capture_s <"$log.json")" \
			"$(json_field greedy_match <"$log.json")" "$(json_field n_tokens <"$log.json")"
	done
	if [ -n "${toks[cuda:graph]:-}" ] && [ "${toks[cuda:graph]}" != "${toks[cuda:eager]:-}" ]; then
		bad "$name: cuda graph replay and eager launches emit different tokens"
	fi
	if [ -n "${toks[cuda:graph]:-}" ] && [ -n "${toks[host:graph]:-}" ]; then
		if [ "${toks[cuda:graph]}" = "${toks[host:graph]}" ]; then
			echo "  cuda and host emit the same $N greedy tokens"
		else
			read -ra a <<<"${toks[cuda:graph]}"
			read -ra b <<<"${toks[host:graph]}"
			i=0
			while [ $i -lt ${#a[@]} ] && [ $i -lt ${#b[@]} ] && [ "${a[$i]}" = "${b[$i]}" ]; do i=$((i + 1)); done
			msg="$name: cuda and host greedy tokens diverge at token $i (cuda ${a[$i]:-end}, host ${b[$i]:-end})"
			if [ "${ALLOW_DIVERGE:-0}" = 1 ]; then echo "  note: $msg"; else bad "$msg"; fi
		fi
	fi
	unset toks
	# per-kernel timings: synchronised after every op, with the planner's bytes
	if "$BUILD/specwright" profile "$dir" --backend cuda -n "$ITERS" -p "$PROMPT" \
		>"$OUT/$name.profile.out" 2>"$OUT/$name.profile.txt"; then
		roofline "$OUT/$name.profile.txt"
	else
		tail -n 20 "$OUT/$name.profile.txt" >&2
		bad "$name: profile --backend cuda"
	fi
done

# ---- an adaptive engine: gated draft levels as CUDA IF nodes ----
note "adaptive engine (SpecDec++ chain): cuda graph with IF nodes vs eager"
base=models/specs/smollm2-eagle25.json
adir="$OUT/engines/adaptive"
if ! python3 - "$base" "$OUT/adaptive.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] = "smollm2-135m-layerskip-adaptive-chain4"
s["tree"] = "chain:4"
s["verify"] = {"method": "rrs", "expand": "sample"}
s["sampling"] = {"temperature": 0.8, "top_k": 0, "top_p": 1}
s["adaptive"] = {"h": 0.3, "min": 1}
json.dump(s, open(sys.argv[2], "w"), indent=2)
EOF
then
	bad "adaptive: cannot write its spec from $base"
elif ! "$BUILD/specwright" build "$OUT/adaptive.json" -o "$adir" >"$OUT/adaptive.build.log" 2>&1; then
	tail -n 20 "$OUT/adaptive.build.log" >&2
	bad "adaptive: build"
elif ! grep -q '"if": ' "$adir/engine.json"; then
	bad "adaptive: engine.json gates no phase (no \"if\")"
elif [ $offline -eq 1 ]; then
	echo "  built; $(grep -c '"if": ' "$adir/engine.json") gated phase(s)"
	skipped "graph vs eager on cuda"
else
	graph_eager adaptive "$adir" 300
	ta=$tok_graph te=$tok_eager
	if grep -q "conditional graph regions unavailable" "$OUT/adaptive.graph.err"; then
		echo "  note: $(grep -m1 'conditional graph regions unavailable' "$OUT/adaptive.graph.err")"
		echo "  (the graph run fell back to eager: the IF nodes were not exercised)"
	fi
	if [ -n "$ta" ] && [ "$ta" = "$te" ]; then
		echo "  graph (IF nodes) and eager emit the same $N tokens (same seed)"
	elif [ -n "$ta" ] && [ -n "$te" ]; then
		bad "adaptive: graph with IF nodes and eager emit different tokens"
	fi
fi

# ---- a wide sampled tree: verify's blocks that wait on other blocks ----
# RRSw on sequoia63 (13 children at the root, 8 under its first): the
# blocks of the later children spin on their parent's and earlier
# siblings' counters (templates/verify.cu.tmpl), which only hardware runs
# out of order. graph vs eager tokens (same seed), under a time limit (a
# wait that never ends is a hang), then the sanitizers below.
note "wide sampled tree (sequoia63, RRSw, T 0.8): cuda graph vs eager"
wdir="$OUT/engines/wide"
if ! python3 - "$base" "$OUT/wide.json" <<'EOF2'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] = "smollm2-135m-layerskip-sequoia63-rrsw"
s["tree"] = "sequoia63"
s["verify"] = {"method": "rrsw", "expand": "sample-wor"}
s["sampling"] = {"temperature": 0.8, "top_k": 0, "top_p": 1}
json.dump(s, open(sys.argv[2], "w"), indent=2)
EOF2
then
	bad "wide: cannot write its spec from $base"
elif ! "$BUILD/specwright" build "$OUT/wide.json" -o "$wdir" >"$OUT/wide.build.log" 2>&1; then
	tail -n 20 "$OUT/wide.build.log" >&2
	bad "wide: build"
elif [ $offline -eq 1 ]; then
	echo "  built"
	skipped "graph vs eager on cuda"
else
	graph_eager wide "$wdir" 300
	tw=$tok_graph tx=$tok_eager
	if [ -n "$tw" ] && [ "$tw" = "$tx" ]; then
		echo "  graph and eager emit the same $N tokens (same seed)"
	elif [ -n "$tw" ] && [ -n "$tx" ]; then
		bad "wide: graph and eager emit different tokens"
	fi
fi

# ---- compute-sanitizer over one engine iteration ----
note "compute-sanitizer: memcheck, racecheck, synccheck (prefill + one iteration)"
SANITIZER=${SANITIZER:-$CUDA_HOME/bin/compute-sanitizer}
if [ "${SKIP_SANITIZER:-0}" = 1 ]; then
	echo "  skipped (SKIP_SANITIZER=1)"
elif [ ! -x "$SANITIZER" ]; then
	bad "no compute-sanitizer at $SANITIZER (set SANITIZER, or SKIP_SANITIZER=1)"
elif [ $offline -eq 1 ]; then
	echo "  $SANITIZER present"
	skipped "the sanitizer runs"
else
	for dir in "$OUT/engines/smollm2-ngram" "$adir" "$wdir"; do
		[ -f "$dir/engine.json" ] || continue
		name=$(basename "$dir")
		for run in memcheck:--eager racecheck:--eager synccheck:--eager memcheck:graph; do
			tool=${run%%:*}
			mode=${run##*:}
			extra=""
			[ "$mode" = --eager ] && extra="--eager"
			log="$OUT/$name.sanitizer.$tool.${mode#--}.log"
			"$SANITIZER" --tool "$tool" --error-exitcode 99 --print-limit 20 \
				"$BUILD/specwright" run "$dir" --backend cuda $extra -n 1 -p "$PROMPT" >"$log" 2>&1
			rc=$?
			summary=$(grep -m1 'ERROR SUMMARY' "$log")
			if [ $rc -ne 0 ] || ! printf '%s' "$summary" | grep -q ' 0 errors'; then
				grep -m 20 -E '=========' "$log" >&2
				bad "$name: compute-sanitizer --tool $tool (${mode#--}): exit $rc, ${summary:-no summary} (log $log)"
			else
				printf '  %-14s %-9s %-6s %s\n' "$name" "$tool" "${mode#--}" "$summary"
			fi
		done
	done
fi

note "results in $OUT"
if [ $fail -ne 0 ]; then
	echo "tests/gpu/run.sh: FAILED" >&2
	exit 1
fi
echo "tests/gpu/run.sh: all GPU checks passed"

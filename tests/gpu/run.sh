#!/usr/bin/env bash
# The hardware check: what only a machine with an NVIDIA GPU can test, run
# from a deployable bundle (`specwright bundle`, `make gpu-bundle`) on a bare
# GPU machine: no compiler, no network, no OpenBLAS, ~8 minutes. Normally
# started as `BUNDLE/run --check` (the launcher has found cuBLASLt and set
# the library path); `tests/gpu/run.sh --bundle DIR` goes through DIR/run.
#
# Every step runs under its own time limit inside one overall budget, the
# slow ones last, and prints one summary line; a step the budget cannot fit
# is skipped and says so. Steps:
#   probe      the launcher's probe (libraries found, driver, CPU level), nvidia-smi
#   device     bin/test_device: the device interface tests on the real backend
#              (allocation, cuBLASLt GEMM against a host reference, graph
#              capture and replay, an IF node set by the embedded kernel)
#   engine:N   each bundled engine with weights: cuda graph vs eager tokens
#              (equal, greedy or seeded), cuda vs host greedy tokens and the
#              fp32 reference (first divergence and its logit margin;
#              near-ties reported, ALLOW_DIVERGE=1 reports any), tau, tok/s,
#              target-only tok/s, host overhead per iteration
#   profile:N  per-op timings against the roofline, joined with `inspect
#              --gpu DEV`'s projection of the same engine on the GPU found
#              (check_util.py roofline: per phase and op over its layer
#              segments, profile's synchronisation taken out, the error per
#              kernel, and the graph-replay iteration measured by `run`
#              against the projected one)
#   timing:N   each shape-only engine (Llama-3-8B: EAGLE-3 chain:4 and a
#              64-node tree, layer-skip eagle25, block; Qwen3-8B; Gemma-3-4B)
#              with weights filled on the device (--random-weights): graph
#              replay and target-only (--target-only, eager) per iteration,
#              profile; each a row of the iteration table (summary): ms per
#              iteration, tau, tok/s, launches and planned GB per iteration,
#              their share of the roofline (PEAK_GBS)
#   serve      `specwright serve` on cuda (an engine with weights) answers one
#              streamed chat completion (server-sent events to [DONE]), and
#              stops on SIGTERM with exit 0
#   shape:N    one engine per target shape (check_util.py shapes; SHAPE_ENGINES
#              overrides): its logits on random weights (run --random-weights
#              --dump-logits, target-only and speculative, first step and after
#              SHAPE_N - 1 tokens) against tests/gpu/random_ref.py's fp32 forward
#              over the same Philox weights and the engine's tokens: relative
#              error within 4u of the engine's dtype (u = 2^-8 bf16), the
#              dtype-emulating forward's error beside it; on the Llama-3-8B
#              shape also PyTorch at the engine's dtype on those weights,
#              eager and CUDA graphs (rows of the iteration table)
#   torch      the same weights decoded by PyTorch at batch 1, greedy, eager
#              and as CUDA graphs, beside the engine's target-only and
#              speculative tok/s; PyTorch on the CPU in fp32 must give the
#              fp32 host reference's tokens (an independent forward)
#   sanitize   compute-sanitizer memcheck over one iteration (eager and
#              graph), racecheck and synccheck on each of the project's own
#              kernels that has shared memory or barriers (cuBLASLt's are
#              not ours to check; racecheck runs with SW_CUDA_GEMM=simple,
#              the plain GEMM kernel: racecheck 2025.3 stops with an internal
#              error in cuBLASLt 13's sm_90 GEMMs, measured 2026-11-27)
# Results: $OUT/gpu-check.log (everything printed) and $OUT/gpu-check.tar.gz
# (every step's outputs). Exit 0 when nothing failed, 1 on a failure, 2 when
# there is no GPU or no bundle.
# Knobs: OUT, BUDGET (s, 420), N (tokens, 32), ITERS (profile iterations, 20),
# PEAK_GBS (else from the GPU's name), INSPECT_GPU (inspect's --gpu, else
# from the GPU's name: h100, h200, or BW,TFLOPS,SMS), ALLOW_DIVERGE, SANITIZER (path),
# SKIP (space-separated step names or prefixes to skip), ONLY_ENGINES (the
# bundled engines with weights to check, by name; default all),
# TIMING_ENGINES (the engines timed with random weights, by name; default the
# shape-only ones), PYTHON (one with torch), SHAPE_ENGINES (engine names or
# directories the shape step compares), SHAPE_SPECS (the folder of their specs,
# for Gemma 3's fields engine.json lacks; default models/specs/gpu beside the
# bundle or in the working directory), SHAPE_N (33), SHAPE_IDS (the prompt),
# SHAPE_CHECK_OPTS (more random_ref.py check options: the dry run's
# --mutate lane must fail), TORCH_TIME_SHAPES (a glob of the shape engines
# PyTorch is timed on; default llama3-8b*), TORCH_N (tokens timed, N).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=""
while [ $# -gt 0 ]; do
	case "$1" in
	--bundle) B=${2:-}; shift 2 ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 0 ;;
	*) echo "tests/gpu/run.sh: unknown argument '$1' (expected --bundle DIR)" >&2; exit 2 ;;
	esac
done
[ -n "$B" ] || B=${SPECWRIGHT_BUNDLE:-$(cd "$here/.." && pwd)}
if [ ! -f "$B/bundle.json" ] || [ ! -x "$B/run" ]; then
	echo "tests/gpu/run.sh: $B is not a bundle (no bundle.json and run): build one with" \
		"\`make gpu-bundle\` or \`specwright bundle ENGINE_DIR -o DIR\`" >&2
	exit 2
fi
B=$(cd "$B" && pwd)
# through the launcher, once: it finds cuBLASLt and sets the library path
if [ "${SPECWRIGHT_BUNDLE:-}" != "$B" ]; then
	exec "$B/run" --check "$@"
fi
SW="$B/bin/specwright"
BUDGET=${BUDGET:-420}
N=${N:-32}
ITERS=${ITERS:-20}
OUT=${OUT:-$(mktemp -d /tmp/specwright-gpu.XXXXXX)}
W="$OUT/gpu-check"
rm -rf "$W"
mkdir -p "$W" || exit 2
LOG="$OUT/gpu-check.log"
exec > >(tee "$LOG") 2>&1
start=$(date +%s)
deadline=$((start + BUDGET))
npass=0 nfail=0 nskip=0
: >"$W/summary"
: >"$W/iterations.txt"
PY=${PYTHON:-python3}
export PYTHONDONTWRITEBYTECODE=1 # nothing written into the bundle's check/
util() { "$PY" "$here/check_util.py" "$@"; }

result() { # STATUS NAME DETAIL
	printf '%-5s %-26s %s\n' "$1" "$2" "$3" | tee -a "$W/summary"
	case "$1" in PASS) npass=$((npass + 1)) ;; FAIL) nfail=$((nfail + 1)) ;; *) nskip=$((nskip + 1)) ;; esac
}
skipped() { # NAME: SKIP set by the user
	local s
	for s in ${SKIP:-}; do
		case "$1" in "$s"*) return 0 ;; esac
	done
	return 1
}
# limit NAME SECONDS: the time this step may take (the budget's rest at most);
# prints nothing and fails when fewer than 15 s are left
limit() {
	local left=$((deadline - $(date +%s)))
	if [ $left -lt 15 ]; then
		result SKIP "$1" "the budget of ${BUDGET}s is spent"
		return 1
	fi
	lim=$(( $2 < left ? $2 : left ))
}
# t SECONDS CMD...: runs CMD under a limit; exit 124 is a time-out
t() { local s=$1; shift; timeout -k 5 "$s" "$@"; }
section() { printf '\n== %s (%ss into the check)\n' "$*" $(( $(date +%s) - start )); }

# ---- probe ----
section "probe"
gpu_name=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$W/nvidia-smi.txt" 2>&1; then
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv \
		>>"$W/nvidia-smi.txt" 2>&1
	cat "$W/nvidia-smi.txt"
	gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
else
	cat "$W/nvidia-smi.txt" 2>/dev/null
	echo "tests/gpu/run.sh: no usable NVIDIA GPU here (nvidia-smi)" >&2
	exit 2
fi
"$B/run" --probe >"$W/probe.txt" 2>&1
probe_rc=$?
cat "$W/probe.txt"
if [ $probe_rc -ne 0 ]; then
	result FAIL probe "the launcher's probe failed (exit $probe_rc)"
else
	result PASS probe "$gpu_name; $(grep -m1 -i 'cublaslt' "$W/probe.txt" | tr -s ' ' | cut -c1-80)"
fi
peak_gbs() {
	case "$1" in
	*H200*) echo 4800 ;; *H100*NVL*) echo 3900 ;; *H100*PCIe*) echo 2000 ;; *H100*) echo 3350 ;;
	*A100*80GB*PCIe*) echo 1935 ;; *A100*80GB*) echo 2039 ;; *A100*) echo 1555 ;;
	*L40S* | *L40*) echo 864 ;; *A10*) echo 600 ;; *L4*) echo 300 ;;
	*"RTX 4090"*) echo 1008 ;; *"RTX 3090"*) echo 936 ;; *) echo "" ;;
	esac
}
PEAK_GBS=${PEAK_GBS:-$(peak_gbs "$gpu_name")}
# the device inspect projects onto (gen/gpu_model.h): the two it describes,
# others by their paper figures (GB/s, dense 16-bit TFLOP/s, SMs); none:
# inspect's default, said in the log
inspect_gpu() {
	case "$1" in
	*H200*) echo h200 ;; *H100*PCIe*) echo 2000,756,114 ;; *H100*NVL*) echo 3900,835,132 ;;
	*H100*) echo h100 ;; *A100*80GB*PCIe*) echo 1935,312,108 ;; *A100*80GB*) echo 2039,312,108 ;;
	*A100*) echo 1555,312,108 ;; *) echo "" ;;
	esac
}
INSPECT_GPU=${INSPECT_GPU:-$(inspect_gpu "$gpu_name")}
[ -n "$INSPECT_GPU" ] || echo "no device description for '$gpu_name': inspect projects onto its default (set INSPECT_GPU)"

# a python with torch (the PyTorch steps; tests/gpu/random_ref.py)
torch_py=""
for p in "$PY" python3 /usr/bin/python3 /usr/local/bin/python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' 2>/dev/null; then torch_py=$p; break; fi
done
torch_dev=cpu
[ -n "$torch_py" ] && "$torch_py" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' &&
	torch_dev=cuda

# ---- the device interface tests on the real backend ----
section "device interface tests (bin/test_device)"
if skipped device; then
	result SKIP device "SKIP"
elif limit device 120; then
	t $lim "$B/bin/test_device" >"$W/test_device.txt" 2>&1
	rc=$?
	tail -n 25 "$W/test_device.txt"
	ok=$(grep -c '^\[       OK \]' "$W/test_device.txt")
	failed=$(grep -c '^\[  FAILED  \]' "$W/test_device.txt")
	if [ $rc -ne 0 ]; then
		result FAIL device "exit $rc ($ok ok, $((failed / 2 + failed % 2)) failed; 124: past ${lim}s)"
	elif grep -q 'cuda available but not tested' "$W/test_device.txt"; then
		result FAIL device "the real cuda backend was not tested"
	else
		result PASS device "$ok tests on host, host-emulate, fake and real cuda"
	fi
fi

# ---- the engines: which have weights, which are shapes ----
weights_file() { ls "$B"/weights/*.gguf 2>/dev/null | head -n 1; }
WEIGHTS=$(weights_file)
IDS=""
if [ -n "$WEIGHTS" ]; then
	# the prompt as ids, the same for every run and for PyTorch
	PROMPT=${PROMPT:-"The old lighthouse keeper climbed the stairs every night to"}
	"$SW" generate "$WEIGHTS" --no-chat -p "$PROMPT" -n 1 --json >/dev/null 2>"$W/prompt.json" &&
		IDS=$(util field "$W/prompt.json" prompt_ids)
	[ -n "$IDS" ] || result FAIL prompt "cannot tokenize the prompt with $WEIGHTS"
fi
real_engines=() shape_engines=()
for d in "$B"/engines/*/; do
	d=${d%/}
	[ -f "$d/engine.json" ] || continue
	read -r ename ekind etemp edtype earchs epath < <(util engine "$d") || continue
	if [ -n "${ONLY_ENGINES:-}" ] && [ $ekind = weights ] && [[ " $ONLY_ENGINES " != *" $(basename "$d") "* ]]; then
		continue
	fi
	case $ekind in weights) real_engines+=("$d") ;; *) shape_engines+=("$d") ;; esac
	printf '%-44s %-7s T %-4s %-5s %s\n' "$ename" "$ekind" "$etemp" "$edtype" "$earchs"
done

# run NAME DIR TAG ARGS...: one engine run, --json to $W/NAME.TAG.json
run_engine() {
	local name=$1 dir=$2 tag=$3
	shift 3
	t $lim "$SW" run "$dir" --model "$WEIGHTS" --ids "$IDS" -n "$N" --json "$@" \
		>"$W/$name.$tag.json" 2>"$W/$name.$tag.err"
}
fields() { # FILE: the summary of one run
	printf 'tau %s, %s tok/s, host overhead %s us' "$(util field "$1" tau)" \
		"$(util field "$1" tok_per_s)" "$(util field "$1" host_overhead_us)"
}
declare -A TPS_SPEC=() TPS_TO=()
for d in "${real_engines[@]}"; do
	name=$(basename "$d")
	section "engine $name"
	if skipped "engine:$name" || [ -z "$IDS" ]; then
		result SKIP "engine:$name" "$([ -n "$IDS" ] && echo SKIP || echo 'no weights or prompt ids')"
		continue
	fi
	limit "engine:$name" 150 || continue
	read -r ename ekind etemp _ < <(util engine "$d")
	sampled=0
	[ "$etemp" != 0 ] && sampled=1
	bad=""
	note=""
	run_engine "$name" "$d" graph --backend cuda || bad="$bad graph(exit $?)"
	run_engine "$name" "$d" eager --backend cuda --eager --no-baseline || bad="$bad eager(exit $?)"
	if [ $sampled = 0 ]; then
		run_engine "$name" "$d" host --backend host --no-baseline || bad="$bad host(exit $?)"
		run_engine "$name" "$d" target --backend cuda --target-only --no-baseline ||
			bad="$bad target-only(exit $?)"
	fi
	for f in graph eager host target; do
		[ -s "$W/$name.$f.err" ] && { echo "--- $f stderr:"; tail -n 8 "$W/$name.$f.err"; }
	done
	if [ -z "$bad" ]; then
		ge=$(util diff "$W/$name.graph.json" tokens "$W/$name.eager.json" tokens)
		case $ge in equal*) ;; *) bad="$bad graph-vs-eager($ge)" ;; esac
		if [ $sampled = 0 ]; then
			ch=$(util diff "$W/$name.graph.json" tokens "$W/$name.host.json" tokens)
			to=$(util diff "$W/$name.graph.json" tokens "$W/$name.target.json" tokens)
			m=$(util field "$W/$name.graph.json" greedy_match)
			nt=$(util field "$W/$name.graph.json" n_tokens)
			mg=$(util field "$W/$name.graph.json" diverge_margin)
			note="cuda vs host: $ch; vs target-only: $to; fp32 reference: $m of $nt${mg:+ (margin $mg)}"
			# a greedy divergence is a failure unless it is a near-tie of the
			# 16-bit dtype (margin below 0.05 in the fp32 logits) or allowed
			case $ch in equal*) ;; *)
				if [ "${ALLOW_DIVERGE:-0}" != 1 ] && ! awk -v m="${mg:-1}" 'BEGIN{exit !(m < 0.05)}'; then
					bad="$bad cuda-vs-host"
				fi ;;
			esac
			case $to in equal*) ;; *) bad="$bad speculative-vs-target-only" ;; esac
			TPS_TO[$name]=$(util field "$W/$name.target.json" tok_per_s)
		fi
		TPS_SPEC[$name]=$(util field "$W/$name.graph.json" tok_per_s)
		echo "  graph: $(fields "$W/$name.graph.json")"
		echo "  eager: $(fields "$W/$name.eager.json")"
		[ $sampled = 0 ] && echo "  target-only (eager): $(util field "$W/$name.target.json" tok_per_s) tok/s"
		echo "  acceptance by depth: $(util field "$W/$name.graph.json" acceptance)"
		echo "  $note"
	fi
	if [ -n "$bad" ]; then
		result FAIL "engine:$name" "${bad# }; $note"
	else
		result PASS "engine:$name" "graph = eager; $(fields "$W/$name.graph.json"); ${TPS_TO[$name]:+target-only ${TPS_TO[$name]} tok/s; }$note"
	fi
done

# ---- per-op timings against the projection ----
profile_engine() { # NAME DIR TAG RUN_JSON EXTRA...: RUN_JSON the graph-replay run's
	local name=$1 dir=$2 tag=$3 runj=$4
	shift 4
	local tau
	tau=$(util field "$runj" tau 2>/dev/null)
	"$SW" inspect "$dir" ${tau:+--tau "$tau"} ${INSPECT_GPU:+--gpu "$INSPECT_GPU"} \
		>"$W/$name.inspect.txt" 2>&1
	if ! t $lim "$SW" profile "$dir" --backend cuda -n "$ITERS" "$@" >"$W/$name.$tag.out" \
		2>"$W/$name.$tag.txt"; then
		tail -n 10 "$W/$name.$tag.txt"
		result FAIL "$tag:$name" "profile --backend cuda failed (exit $?)"
		return
	fi
	util roofline "$W/$name.$tag.txt" "$W/$name.inspect.txt" "${PEAK_GBS:-0}" "$runj" |
		tee "$W/$name.$tag.roofline.txt"
	result PASS "$tag:$name" "$(grep -m1 '^  iteration' "$W/$name.$tag.roofline.txt" | sed 's/^  iteration: //')"
}
for d in "${real_engines[@]}"; do
	name=$(basename "$d")
	section "profile $name"
	if skipped "profile:$name" || [ -z "$IDS" ]; then result SKIP "profile:$name" "SKIP"; continue; fi
	limit "profile:$name" 60 || continue
	profile_engine "$name" "$d" profile "$W/$name.graph.json" --model "$WEIGHTS" --ids "$IDS"
done

# ---- real shapes, random weights (timing only) ----
timing_engines=("${shape_engines[@]}")
if [ -n "${TIMING_ENGINES:-}" ]; then
	timing_engines=()
	for n in $TIMING_ENGINES; do timing_engines+=("$B/engines/$n"); done
fi
for d in "${timing_engines[@]}"; do
	name=$(basename "$d")
	section "timing $name (random weights)"
	if skipped "timing:$name"; then
		result SKIP "timing:$name" "SKIP"
		continue
	fi
	limit "timing:$name" 120 || continue
	if ! t $lim "$SW" run "$d" --backend cuda --random-weights 1 -n "${TIMING_N:-64}" --json \
		>"$W/$name.random.json" 2>"$W/$name.random.err"; then
		tail -n 10 "$W/$name.random.err"
		result FAIL "timing:$name" "run --random-weights on cuda failed (exit $?)"
		continue
	fi
	echo "  $(fields "$W/$name.random.json")"
	util iteration "$name" graph "$d" "$W/$name.random.json" "${PEAK_GBS:-0}" >>"$W/iterations.txt"
	# target-only: one verify forward a token, launch by launch (the runtime runs it eagerly)
	if t $lim "$SW" run "$d" --backend cuda --random-weights 1 --target-only -n "${TIMING_N:-64}" \
		--json >"$W/$name.random-target.json" 2>"$W/$name.random-target.err"; then
		echo "  target-only: $(util field "$W/$name.random-target.json" tok_per_s) tok/s"
		util iteration "$name" target-only "$d" "$W/$name.random-target.json" "${PEAK_GBS:-0}" \
			>>"$W/iterations.txt"
	else
		tail -n 10 "$W/$name.random-target.err"
		result FAIL "timing:$name" "run --random-weights --target-only on cuda failed"
		continue
	fi
	limit "timing:$name" 90 || continue
	profile_engine "$name" "$d" timing "$W/$name.random.json" --random-weights 1
done

# ---- the server on cuda: one streamed request ----
section "server on cuda (one streamed request)"
serve_engine=""
for d in "${real_engines[@]}"; do case $(basename "$d") in *ngram*) serve_engine=$d ;; esac; done
[ -n "$serve_engine" ] || serve_engine=${real_engines[0]:-}
if skipped serve; then
	result SKIP serve "SKIP"
elif [ -z "$serve_engine" ] || [ -z "$WEIGHTS" ]; then
	result SKIP serve "no engine with weights"
elif limit serve 120; then
	sname=$(basename "$serve_engine")
	"$SW" serve "$serve_engine" --model "$WEIGHTS" --backend cuda --port 0 >"$W/serve.log" 2>&1 &
	spid=$!
	port="" ready=0 sdead=0
	end=$(( $(date +%s) + lim ))
	while [ "$(date +%s)" -lt "$end" ]; do
		[ -n "$port" ] || port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$W/serve.log" | head -n 1)
		if [ -n "$port" ] && "$PY" -c "import sys, urllib.request as u
sys.exit(0 if b'\"ok\"' in u.urlopen('http://127.0.0.1:$port/health', timeout=2).read() else 1)" 2>/dev/null; then
			ready=1
			break
		fi
		kill -0 $spid 2>/dev/null || { sdead=1; break; }
		sleep 0.5
	done
	smsg=""
	if [ $ready = 1 ]; then
		smsg=$(t 60 "$PY" "$here/check_util.py" stream "127.0.0.1:$port" 16 2>&1)
		src=$?
	fi
	# a graceful stop: SIGTERM, exit 0 (SIGKILL after 40 s, reported)
	kill -TERM $spid 2>/dev/null
	for _ in $(seq 1 80); do kill -0 $spid 2>/dev/null || break; sleep 0.5; done
	kill -0 $spid 2>/dev/null && { echo "  serve did not stop in 40 s: SIGKILL"; kill -KILL $spid; }
	wait $spid
	stop_rc=$?
	tail -n 5 "$W/serve.log"
	if [ $ready = 0 ]; then
		result FAIL serve "$sname: $([ $sdead = 1 ] && echo "the server exited" || echo "not ready in ${lim}s") (serve.log)"
	elif [ $src -ne 0 ] || [ $stop_rc -ne 0 ]; then
		result FAIL serve "$sname on cuda: $smsg; exit on SIGTERM $stop_rc"
	else
		result PASS serve "$sname on cuda: $smsg; stopped by SIGTERM, exit 0"
	fi
fi

# ---- correctness at the shapes: the engine's logits against an fp32 forward ----
SHAPE_IDS=${SHAPE_IDS:-"17 4 250 99 3 180 42 7 299 1 64 128 5 77 200 33"}
SHAPE_N=${SHAPE_N:-33}
spec_dir=${SHAPE_SPECS:-}
if [ -z "$spec_dir" ]; then
	for c in "$B/../../../models/specs/gpu" "$PWD/models/specs/gpu"; do
		[ -d "$c" ] && { spec_dir=$(cd "$c" && pwd); break; }
	done
fi
shape_check=()
if [ -n "${SHAPE_ENGINES:-}" ]; then
	for n in $SHAPE_ENGINES; do
		case $n in */*) shape_check+=("$n") ;; *) shape_check+=("$B/engines/$n") ;; esac
	done
elif [ ${#shape_engines[@]} -gt 0 ]; then
	read -ra shape_check < <(util shapes "${shape_engines[@]}")
fi
for d in "${shape_check[@]}"; do
	name=$(basename "$d")
	section "shape $name: logits against an fp32 forward over the same weights"
	if skipped "shape:$name"; then
		result SKIP "shape:$name" "SKIP"
		continue
	elif [ -z "$torch_py" ]; then
		result SKIP "shape:$name" "no python with torch"
		continue
	fi
	limit "shape:$name" 200 || continue
	spec="$spec_dir/$name.json"
	[ -n "$spec_dir" ] && [ -f "$spec" ] || spec=""
	bad=""
	for m in to sp; do
		extra=()
		[ $m = to ] && extra=(--target-only --temperature 0)
		t $lim "$SW" run "$d" --backend cuda --random-weights 1 --ids "$SHAPE_IDS" -n "$SHAPE_N" \
			"${extra[@]}" --dump-logits "$W/$name.shape-$m.npy" --json >"$W/$name.shape-$m.json" \
			2>"$W/$name.shape-$m.err" || { bad="$bad run-$m(exit $?)"; tail -n 8 "$W/$name.shape-$m.err"; }
	done
	if [ -n "$bad" ]; then
		result FAIL "shape:$name" "${bad# }"
		continue
	fi
	timeopt=()
	# shellcheck disable=SC2254
	case $name in ${TORCH_TIME_SHAPES:-llama3-8b*}) timeopt=(--time "${TORCH_N:-$N}") ;; esac
	# shellcheck disable=SC2086
	t $lim "$torch_py" "$here/random_ref.py" check "$d" --seed 1 ${spec:+--spec "$spec"} \
		--run "$W/$name.shape-to.json:$W/$name.shape-to.npy" \
		--run "$W/$name.shape-sp.json:$W/$name.shape-sp.npy" --device "$torch_dev" --emulate \
		"${timeopt[@]}" ${SHAPE_CHECK_OPTS:-} >"$W/$name.shape.json" 2>"$W/$name.shape.err"
	rc=$?
	tail -n 5 "$W/$name.shape.err"
	if { [ $rc -eq 0 ] || [ $rc -eq 1 ]; } && [ -s "$W/$name.shape.json" ]; then
		msg=$(util shapecheck "$W/$name.shape.json")
		echo "  $msg"
		[ ${#timeopt[@]} -gt 0 ] && util torchrows "$W/$name.shape.json" "$name" "${PEAK_GBS:-0}" \
			>>"$W/iterations.txt"
		if [ $rc -eq 0 ]; then result PASS "shape:$name" "$msg"; else result FAIL "shape:$name" "$msg"; fi
	else
		result FAIL "shape:$name" "random_ref.py check exit $rc (2: an error; 124: past ${lim}s): $(tail -n 1 "$W/$name.shape.err" | cut -c1-200)"
	fi
done

# ---- PyTorch, the same weights ----
section "PyTorch side-by-side"
if skipped torch; then
	result SKIP torch "SKIP"
elif [ -z "$torch_py" ] || [ -z "$IDS" ]; then
	result SKIP torch "${torch_py:+no weights}${torch_py:-no python with torch}"
elif limit torch 180; then
	ref="" # the first 16-bit engine with a target-only run: PyTorch's dtype
	for d in "${real_engines[@]}"; do
		read -r _ _ _ edt _ < <(util engine "$d")
		case $edt in fp16 | bf16) ;; *) continue ;; esac
		[ -f "$W/$(basename "$d").target.json" ] && { ref=$(basename "$d"); break; }
	done
	dev=$torch_dev
	t $lim "$torch_py" "$here/torch_ref.py" "$WEIGHTS" --ids "$IDS" -n "$N" --device $dev \
		>"$W/torch.$dev.json" 2>"$W/torch.$dev.err"
	rc1=$?
	t 120 "$torch_py" "$here/torch_ref.py" "$WEIGHTS" --ids "$IDS" -n "$N" --device cpu --dtype fp32 \
		>"$W/torch.fp32.json" 2>"$W/torch.fp32.err"
	rc2=$?
	tail -n 5 "$W/torch.$dev.err" "$W/torch.fp32.err" 2>/dev/null
	if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ]; then
		result FAIL torch "torch_ref.py exit $rc1 ($dev) / $rc2 (cpu fp32)"
	else
		# an independent fp32 forward must give the fp32 host reference's tokens
		"$SW" generate "$WEIGHTS" --ids "$IDS" -n "$N" --json >/dev/null 2>"$W/ref.fp32.json"
		fx=$(util diff "$W/torch.fp32.json" eager_tokens "$W/ref.fp32.json" ids)
		msg="torch $(util field "$W/torch.$dev.json" torch) on $dev: eager $(util field "$W/torch.$dev.json" eager_tok_per_s) tok/s"
		[ $dev = cuda ] && msg="$msg, CUDA graphs $(util field "$W/torch.$dev.json" graph_tok_per_s) tok/s"
		if [ -n "$ref" ]; then
			msg="$msg; specwright $ref: target-only ${TPS_TO[$ref]:-?} tok/s (eager), speculative ${TPS_SPEC[$ref]:-?} tok/s (graph)"
			msg="$msg; torch $dev vs engine target-only tokens: $(util diff "$W/torch.$dev.json" eager_tokens "$W/$ref.target.json" tokens)"
		fi
		case $fx in
		equal*) result PASS torch "$msg; torch fp32 = specwright fp32 reference ($fx)" ;;
		*) result FAIL torch "$msg; torch fp32 vs specwright fp32 reference: $fx" ;;
		esac
	fi
fi

# ---- compute-sanitizer (slowest, last) ----
section "compute-sanitizer"
SAN=${SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)}
san_engine=""
for d in "${real_engines[@]}"; do case $(basename "$d") in *ngram*) san_engine=$d ;; esac; done
[ -n "$san_engine" ] || san_engine=${real_engines[0]:-}
# san NAME LIMIT TOOL EXTRA_SAN_ARGS -- RUN_ARGS: one sanitizer run of one iteration
san() {
	local name=$1 l=$2 tool=$3
	shift 3
	local sargs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do sargs+=("$1"); shift; done
	shift
	t "$l" "$SAN" --tool "$tool" --error-exitcode 99 --print-limit 20 "${sargs[@]}" \
		"$SW" run "$san_engine" --backend cuda --model "$WEIGHTS" --ids "$IDS" -n 2 --no-baseline "$@" \
		>"$W/sanitize.$name.log" 2>&1
	local rc=$?
	local sum
	# memcheck, synccheck: "ERROR SUMMARY: 0 errors"; racecheck: "RACECHECK
	# SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
	sum=$(grep -m1 -E '(ERROR|RACECHECK) SUMMARY' "$W/sanitize.$name.log")
	if [ $rc -eq 0 ] && printf '%s' "$sum" | grep -qE '[ (]0 errors'; then
		echo "PASS $name: $sum" >>"$W/sanitize.results"
	else
		grep -m 12 '=========' "$W/sanitize.$name.log" | sed "s/^/  $name: /"
		echo "FAIL $name: exit $rc (124: past ${l}s), ${sum:-no summary}" >>"$W/sanitize.results"
	fi
}
if skipped sanitize; then
	result SKIP sanitize "SKIP"
elif [ -z "$SAN" ] || [ ! -x "$SAN" ]; then
	result SKIP sanitize "no compute-sanitizer found (set SANITIZER)"
elif [ -z "$san_engine" ] || [ -z "$IDS" ]; then
	result SKIP sanitize "no engine with weights"
elif limit sanitize 150; then
	: >"$W/sanitize.results"
	"$SAN" --version >"$W/sanitize.version" 2>&1
	# the project's kernels with shared memory or barriers, from resources.json
	own=$("$PY" - "$san_engine/resources.json" <<'EOF'
import json, sys
names = set()
for k in json.load(open(sys.argv[1]))["kernels"]:
    if any(a.get("smem", 0) or a.get("barriers", 0) for a in k.get("archs", {}).values()):
        names.add(k["name"])
print(" ".join(sorted(names)))
EOF
)
	# the runs go side by side (the GPU and 16 cores take them), each with its
	# limit; waited for by pid (a bare `wait` would wait for the log's tee too)
	pids=()
	san memcheck-eager $lim memcheck -- --eager &
	pids+=($!)
	san memcheck-graph $lim memcheck -- &
	pids+=($!)
	for k in $own; do
		SW_CUDA_GEMM=simple san "racecheck-$k" $lim racecheck --kernel-name "kns=$k" -- --eager &
		pids+=($!)
		san "synccheck-$k" $lim synccheck --kernel-name "kns=$k" -- --eager &
		pids+=($!)
	done
	wait "${pids[@]}"
	nf=$(grep -c '^FAIL' "$W/sanitize.results")
	np=$(grep -c '^PASS' "$W/sanitize.results")
	grep '^FAIL' "$W/sanitize.results" | sed 's/^/  /'
	if [ "$nf" -gt 0 ]; then
		result FAIL sanitize "$nf of $((nf + np)) runs failed (memcheck eager/graph; racecheck, synccheck on: ${own:-none})"
	else
		result PASS sanitize "$np runs clean: memcheck eager and graph; racecheck and synccheck on ${own:-no kernel}"
	fi
fi

# ---- summary ----
section "summary"
if [ -s "$W/iterations.txt" ]; then
	echo "iterations on random weights (graph: the engine's replayed iteration; target-only: one"
	echo "verify forward a token, eager; torch: PyTorch a token; share: planned bytes / ${PEAK_GBS:-?} GB/s"
	echo "over the measured time):"
	printf '%-40s %-12s %9s %6s %9s %8s %8s %6s\n' engine mode ms/iter tau tok/s launches GB/iter share |
		tee "$W/iterations.table"
	tee -a "$W/iterations.table" <"$W/iterations.txt"
	echo
fi
cat "$W/summary"
echo "gpu check: passed $npass, failed $nfail, skipped $nskip; $(( $(date +%s) - start ))s of ${BUDGET}s"
tar -czf "$OUT/gpu-check.tar.gz" -C "$OUT" gpu-check 2>/dev/null
[ $nfail -eq 0 ]

#!/usr/bin/env bash
# The launcher of a specwright bundle (`specwright bundle ... -o DIR`; this
# file is DIR/run, copied from runtime/cli/bundle/run.sh by `make
# portable`). It finds the CUDA libraries the driver does not bring
# (cuBLASLt, NVRTC, nvJitLink: $CUDA_HOME, /usr/local/cuda*, then
# $LD_LIBRARY_PATH, then pip's nvidia/cu13/lib, nvidia/cublas/lib,
# nvidia/cuda_nvrtc/lib, nvidia/nvjitlink/lib under every Python
# site-packages it can find), says on stderr which it took, puts
# DIR/lib and those folders first on LD_LIBRARY_PATH (the runtime dlopens
# libcublasLt.so.13/.12 by name, so that is all it needs) and runs
# DIR/bin/specwright with the bundle's engine and weights filled in.
#
#   DIR/run COMMAND [ENGINE] [options]   COMMAND: run generate serve profile
#                                        inspect bench; ENGINE: a folder of
#                                        DIR/engines (default: the first)
#   DIR/run --probe     what was found, the driver, the CPU, glibc; exit 0
#   DIR/run --verify    the tree against bundle.json: every file's sha256,
#                       every directory, nothing else there (on every
#                       start: bin/ and lib/ by name and size before
#                       anything runs, the tree by name and size, the
#                       chosen engine's files by sha256)
#   DIR/run --check [ARGS]   the hardware check, DIR/check/run.sh ARGS
#   DIR/run --help
set -u
DIR=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
PATH=${PATH:-/usr/local/bin:/usr/bin:/bin}
export PATH

say() { printf 'run: %s\n' "$*" >&2; }

usage() {
	sed -n '/^#   DIR/,/^#   DIR\/run --help/p' "${BASH_SOURCE[0]}" | sed 's/^#//' >&2
	local e
	for e in "$DIR"/engines/*/; do [ -d "$e" ] && printf '  engine: %s\n' "$(basename "$e")" >&2; done
}

# ---- where the CUDA libraries may be ---------------------------------------

# Python site-packages folders: each python3 on PATH asked, then globs.
site_dirs() {
	local p d
	while read -r d; do
		for p in "$d"/python3 "$d"/python3.[0-9]*; do
			[ -x "$p" ] || continue
			case "$p" in *-config) continue ;; esac
			timeout 20 "$p" -c 'import site
for d in site.getsitepackages() + [site.getusersitepackages()]: print(d)' 2>/dev/null
		done
	done < <(printf '%s\n' "$PATH" | tr ':' '\n' | awk 'NF && !seen[$0]++')
	local h=${HOME:-/nonexistent}
	for d in /usr/lib/python3*/{site,dist}-packages /usr/local/lib/python3*/{site,dist}-packages \
		"$h"/.local/lib/python3*/site-packages /opt/conda/lib/python3*/site-packages \
		/opt/conda/envs/*/lib/python3*/site-packages /opt/*/lib/python3*/site-packages \
		/opt/*/*/lib/python3*/site-packages "$h"/*/lib/python3*/site-packages \
		"$h"/.*/lib/python3*/site-packages "$h"/.virtualenvs/*/lib/python3*/site-packages \
		"$h"/*/*/lib/python3*/site-packages; do
		printf '%s\n' "$d"
	done
}

# Candidate library folders, in search order, each with where it came from.
lib_dirs() {
	local d s
	if [ -n "${CUDA_HOME:-}" ]; then
		for d in "$CUDA_HOME"/lib64 "$CUDA_HOME"/lib "$CUDA_HOME"/targets/x86_64-linux/lib; do
			printf '%s\t%s\n' "$d" "CUDA_HOME"
		done
	fi
	for d in /usr/local/cuda /usr/local/cuda-*; do
		printf '%s\t%s\n' "$d/lib64" "$d" "$d/targets/x86_64-linux/lib" "$d"
	done
	while read -r d; do
		[ -n "$d" ] && printf '%s\t%s\n' "$d" "LD_LIBRARY_PATH"
	done < <(printf '%s\n' "${LD_LIBRARY_PATH:-}" | tr ':' '\n')
	while read -r s; do
		for d in nvidia/cu13/lib nvidia/cublas/lib nvidia/cuda_nvrtc/lib nvidia/nvjitlink/lib; do
			printf '%s\t%s\n' "$s/$d" "pip ($s)"
		done
	done < <(site_dirs | awk 'NF && !seen[$0]++')
}

FOUND_DIRS=""
declare -A FOUND
# find LABEL NAME... : the first folder holding NAME (names in preference order)
find_lib() {
	local label=$1 n d from
	shift
	for n in "$@"; do
		while IFS=$'\t' read -r d from; do
			if [ -e "$d/$n" ]; then
				FOUND[$label]="$n in $d (from $from)"
				case ":$FOUND_DIRS:" in *":$d:"*) ;; *) FOUND_DIRS=${FOUND_DIRS:+$FOUND_DIRS:}$d ;; esac
				return 0
			fi
		done <<<"$LIB_DIRS"
	done
	FOUND[$label]=""
	return 1
}

search() {
	LIB_DIRS=$(lib_dirs | awk -F'\t' 'NF && !seen[$1]++')
	find_lib cublasLt libcublasLt.so.13 libcublasLt.so.12
	find_lib nvrtc libnvrtc.so.13 libnvrtc.so.12
	find_lib nvJitLink libnvJitLink.so.13 libnvJitLink.so.12
}

report() {
	local quiet=$1
	if [ -n "${FOUND[cublasLt]}" ]; then
		say "cuBLASLt: ${FOUND[cublasLt]}"
	else
		say "cuBLASLt: not found (searched \$CUDA_HOME, /usr/local/cuda*, \$LD_LIBRARY_PATH and pip's" \
			"nvidia/*/lib in every site-packages): the cuda backend will refuse to start; the host backend works"
	fi
	[ "$quiet" = 1 ] && return
	say "NVRTC: ${FOUND[nvrtc]:-not found (needed only to build engines here)}"
	say "nvJitLink: ${FOUND[nvJitLink]:-not found (needed only to build engines here)}"
}

# ---- the machine -------------------------------------------------------------

kit_field() { sed -n "s/.*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" "$DIR/kit.json" | head -n 1; }

glibc_version() { getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}'; }

# version a >= b (x.y)
ver_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -t. -k1,1n -k2,2n | head -n 1)" = "$2" ]; }

cpu_flags() { grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2; }

# what -march=x86-64-v3 needs (lzcnt shows as abm)
missing_v3() {
	local f m="" fl=" $(cpu_flags) "
	for f in avx avx2 bmi1 bmi2 f16c fma abm movbe xsave sse4_2 popcnt; do
		case "$fl" in *" $f "*) ;; *) m="$m $f" ;; esac
	done
	printf '%s' "${m# }"
}

machine_ok() {
	local floor g miss
	floor=$(kit_field glibc_floor)
	g=$(glibc_version)
	if [ -n "$g" ] && [ -n "$floor" ] && ! ver_ge "$g" "$floor"; then
		say "error: this machine's glibc is $g; the kit's binaries need $floor or newer ($DIR/kit.json glibc_floor)"
		return 1
	fi
	if [ "$(kit_field x86_64_level)" = v3 ] && [ -r /proc/cpuinfo ]; then
		miss=$(missing_v3)
		if [ -n "$miss" ]; then
			say "error: the kit is built for x86-64-v3 and this CPU lacks: $miss ($DIR/kit.json x86_64_level)"
			return 1
		fi
	fi
	return 0
}

probe() {
	local fl lvl g libcuda v
	say "bundle: $DIR"
	report 0
	libcuda=$( (ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}') )
	if [ -z "$libcuda" ]; then
		for v in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64; do
			[ -e "$v/libcuda.so.1" ] && libcuda="$v/libcuda.so.1" && break
		done
	fi
	if [ -n "$libcuda" ]; then
		v=$(readlink -f "$libcuda")
		say "driver: libcuda.so.1 at $libcuda -> $(basename "$v") (driver ${v##*.so.})"
	else
		say "driver: libcuda.so.1 not found by ldconfig: no NVIDIA driver (the host backend works)"
	fi
	[ -r /proc/driver/nvidia/version ] && say "driver: $(head -n 1 /proc/driver/nvidia/version)"
	if command -v nvidia-smi >/dev/null 2>&1; then
		v=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -n 1)
		[ -n "$v" ] && say "driver: $v (nvidia-smi)"
	fi
	fl=" $(cpu_flags) "
	case "$fl" in
	*" avx512f "*) lvl="avx512f (the host GEMMs take their AVX-512 paths)" ;;
	*" avx2 "*) lvl="avx2 (no avx512f: the host GEMMs take their AVX2 paths)" ;;
	*) lvl="neither avx2 nor avx512f" ;;
	esac
	say "cpu: $(grep -m 1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //'); vector level: $lvl"
	[ -n "$(missing_v3)" ] && say "cpu: lacks $(missing_v3): the kit (x86-64-$(kit_field x86_64_level)) cannot run here"
	g=$(glibc_version)
	if ver_ge "${g:-0.0}" "$(kit_field glibc_floor)"; then
		say "glibc: ${g:-unknown}; the kit needs $(kit_field glibc_floor): ok"
	else
		say "glibc: ${g:-unknown}; the kit needs $(kit_field glibc_floor): TOO OLD"
	fi
	local e
	for e in "$DIR"/engines/*/; do [ -d "$e" ] && say "engine: $(basename "$e")"; done
	return 0
}

# ---- engines and weights -----------------------------------------------------

# launch.tsv (written by `specwright bundle`): NAME, target weights, draft
# weights; a path beginning with @ is inside the bundle
engine_field() {
	awk -F'\t' -v n="$1" -v c="$2" '$1 == n {print $c; exit}' "$DIR/launch.tsv"
}

resolve_path() {
	case "$1" in @*) printf '%s/%s' "$DIR" "${1#@}" ;; *) printf '%s' "$1" ;; esac
}

has_opt() {
	local o=$1 a
	shift
	for a in "$@"; do [ "$a" = "$o" ] && return 0; done
	return 1
}

# ---- the bundle itself ------------------------------------------------------------

# bin/ and lib/ against bundle.json (names and sizes) before anything in
# them runs: bin/specwright loads lib/ at exec, and the cuda backend
# dlopens libcublasLt from lib/ first, so an added, missing or resized file
# there is refused here, by the shell. bundle.json is written one file a
# line, "path" first (runtime/cli/bundle_cli.c write_json).
listed_files() { # "DIR1 DIR2": "path<TAB>bytes<TAB>sha256" of the listed files under them
	awk -F'"' -v pre="$1" '$2 == "path" && $6 == "bytes" && $8 == "sha256" {
		n = split(pre, ps, " ")
		for (i = 1; i <= n; i++)
			if (index($4, ps[i] "/") == 1) { b = $7; gsub(/[^0-9]/, "", b); printf "%s\t%s\t%s\n", $4, b, $10 }
	}' "$DIR/bundle.json" | LC_ALL=C sort
}
present_files() { # DIR...: "path<TAB>bytes" of what is there (anything but a file: its type)
	(cd "$DIR" && find "$@" -mindepth 1 \( -type f -printf '%p\t%s\n' \) -o \( ! -type f -printf '%p\t(%y)\n' \)) |
		LC_ALL=C sort
}
check_binlib() {
	local d
	if [ ! -f "$DIR/bundle.json" ]; then
		say "error: $DIR/bundle.json: missing: not a whole bundle (nothing was run)"
		return 1
	fi
	d=$(diff <(listed_files "bin lib" | cut -f 1,2) <(present_files bin lib)) && return 0
	say "error: $DIR/bin and $DIR/lib do not match $DIR/bundle.json (nothing was run; make the bundle again):"
	printf '%s\n' "$d" | sed -n 's/^< \([^\t]*\)\t\(.*\)/run:   listed: \1, \2 bytes/p; s/^> \([^\t]*\)\t\(.*\)/run:   there:  \1, \2/p' |
		head -n 12 >&2
	return 1
}

# The chosen engine's files against bundle.json's SHA-256 (engine.json, its
# kernels, engine.sum): the digest the deployable runtime relies on.
check_engine() {
	local e=$1 want got
	want=$(listed_files "engines/$e" | awk -F'\t' '{print $3 "  " $1}' | LC_ALL=C sort -k2)
	got=$(cd "$DIR" && find "engines/$e" -type f -print0 | xargs -0 -r sha256sum | LC_ALL=C sort -k2)
	[ -n "$want" ] && [ "$want" = "$got" ] && return 0
	say "error: engine $e: its files do not match $DIR/bundle.json's SHA-256 (edited or damaged; nothing was run):"
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | sed -n 's/^< /run:   listed: /p; s/^> /run:   there:  /p' |
		head -n 12 >&2
	return 1
}

# ---- main ----------------------------------------------------------------------

[ $# -ge 1 ] || { usage; exit 2; }
case "$1" in
-h | --help | help) usage; exit 0 ;;
--probe) ;;
*) check_binlib || exit 1 ;;
esac
case "$1" in
--verify)
	shift
	exec "$DIR/bin/specwright" bundle --verify "$DIR" "$@"
	;;
esac

search
case "$1" in
--probe) probe; exit 0 ;;
esac
machine_ok || exit 1
export LD_LIBRARY_PATH="$DIR/lib${FOUND_DIRS:+:$FOUND_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SPECWRIGHT_BUNDLE="$DIR"

case "$1" in
--check)
	shift
	report 0
	[ -x "$DIR/check/run.sh" ] || { say "error: $DIR/check/run.sh: missing (the kit carries tests/gpu/)"; exit 1; }
	exec "$DIR/check/run.sh" "$@"
	;;
run | generate | serve | profile | inspect | bench) ;;
*)
	say "error: unknown command '$1' (expected run, generate, serve, profile, inspect, bench, --probe, --verify or --check)"
	usage
	exit 2
	;;
esac

cmd=$1
shift
engine=""
if [ $# -ge 1 ] && [ -n "$1" ] && [ "${1#-}" = "$1" ] && [ -d "$DIR/engines/$1" ]; then
	engine=$1
	shift
elif [ $# -ge 1 ] && [ -n "$1" ] && [ "${1#-}" = "$1" ] && [ ! -e "$1" ]; then
	say "error: '$1': no engine of that name in $DIR/engines (there: $(ls "$DIR/engines" | tr '\n' ' '))"
	exit 2
else
	for e in "$DIR"/engines/*/; do
		[ -d "$e" ] && engine=$(basename "$e") && break
	done
fi
[ -n "$engine" ] || { say "error: $DIR/engines holds no engine"; exit 2; }
# the whole tree's listing and sizes (bin/specwright, checked above), then
# the engine's digests
"$DIR/bin/specwright" bundle --verify-listing "$DIR" || { say "error: $DIR does not match its bundle.json (nothing was run)"; exit 1; }
check_engine "$engine" || exit 1
report 1
target=$(engine_field "$engine" 2)
draft=$(engine_field "$engine" 3)
args=()
if [ "$cmd" = generate ]; then
	# target-only decoding on the host reference decoder: the weights, not the engine
	if has_opt --model "$@"; then
		say "error: generate: give the weights as the engine's ($engine), not with --model"
		exit 2
	fi
	[ -n "$target" ] || { say "error: engine $engine was built from a shape: no weights to generate with"; exit 2; }
	args=("$(resolve_path "$target")")
else
	args=("$DIR/engines/$engine")
	if [ "$cmd" != inspect ]; then
		case "$target" in @*) has_opt --model "$@" || args+=(--model "$(resolve_path "$target")") ;; esac
		case "$draft" in @*) has_opt --draft-model "$@" || args+=(--draft-model "$(resolve_path "$draft")") ;; esac
	fi
fi
exec "$DIR/bin/specwright" "$cmd" "${args[@]}" "$@"

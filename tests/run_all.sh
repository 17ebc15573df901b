#!/usr/bin/env bash
# Runs every CMocka test binary given, prints each one's summary and a final
# "N passed, N failed" line; exits non-zero if any test failed or crashed.
# libFuzzer targets (.../fuzz/fuzz_*) among the arguments get a smoke pass:
# FUZZ_SMOKE_SECONDS on the repository's corpus and seeds, one test each.
# Every binary's whole output is kept in $BUILD/test-logs/NAME.log (the
# sanitizer reports of `make asan` included); a failing one's tail is shown.
#
# TEST_JOBS binaries run at once (default 1). Much of the suite is one
# thread (NVRTC compiles, the SIMT emulator, Python references, servers
# waiting on sockets), so two at a time on two cores shortens it; with
# TEST_JOBS > 1 a binary's line is printed when it ends, the slowest of the
# last run (or, on a fresh clone, the ones listed in SLOW_FIRST) start
# first, and each line says the binary's CPU seconds beside its wall time.
set -u
pass=0; fail=0; bad=()
logs=${BUILD:-build}/test-logs
jobs=${TEST_JOBS:-1}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "run_all.sh: TEST_JOBS: expected a positive integer, found '$jobs'" >&2; exit 2; }
mkdir -p "$logs"
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT

# Longest first (classic list scheduling): the last run's wall times when
# recorded (a binary's line in test-logs/.times), else these, known slow
# on a 2-core machine (2026-11-27).
SLOW_FIRST="test_build test_engine test_kern_verify test_engine_block test_cli test_real_model
test_gpu_check test_engine_ctrl test_bundle test_deploy"
order=("$@")
if [ "$jobs" -gt 1 ]; then
	mapfile -t order < <(
		for t in "$@"; do
			n=$(basename "$t"); w=
			[ -s "$logs/.times" ] && w=$(awk -v n="$n" '$1 == n { print $2 }' "$logs/.times" | tail -n 1)
			if [ -z "$w" ]; then
				w=0; i=0
				for s in $SLOW_FIRST; do i=$((i + 1)); [ "$s" = "$n" ] && w=$((1000 - i)); done
			fi
			printf '%s %s\n' "${w:-0}" "$t"
		done | sort -s -k1,1 -g -r | cut -d' ' -f2-)
fi

# Runs one binary (in a subshell of its own, so that `times` counts it
# alone); writes rc, counts and times to $res/NAME.* and the whole
# output to the log. Prints nothing.
run_one() {
	local t=$1 name out rc p runs scratch start
	name=$(basename "$t")
	start=$(date +%s.%N)
	if [[ "$name" == fuzz_* ]]; then
		scratch=$(mktemp -d)
		mkdir -p "${BUILD:-build}/fuzz-artifacts"
		out=$("$t" -max_total_time="${FUZZ_SMOKE_SECONDS:-10}" -rss_limit_mb=2048 \
			-artifact_prefix="${BUILD:-build}/fuzz-artifacts/$name-" "$scratch" \
			$(ls -d "tests/fuzz/corpus/$name" "tests/fuzz/seeds/$name" 2>/dev/null) 2>&1); rc=$?
		rm -rf "$scratch"
		p=0; [ $rc -eq 0 ] && p=1
		runs=$(printf '%s\n' "$out" | grep -o 'Done [0-9]* runs' | tail -n 1)
		out="$out
$name: ${runs:-no summary}"
	else
		out=$("$t" 2>&1); rc=$?
		p=$(printf '%s\n' "$out" | grep -c '^\[       OK \]')
	fi
	printf '%s\n' "$out" > "$logs/$name.log"
	# this subshell's children: user and system seconds of the binary
	# this (sub)shell's children: user and system seconds of the binary;
	# `times` runs here, not in a pipeline's fork, whose counters start at 0
	local cpu
	times > "$res/$name.times"
	cpu=$(tail -n 1 "$res/$name.times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } printf "%.1f", s }')
	printf '%s %s %s %s\n' "$rc" "$p" "$(echo "$(date +%s.%N) - $start" | bc)" "$cpu" > "$res/$name.done"
}

# Prints a finished binary's line (and a failing one's tail); counts it.
report() {
	local t=$1 name rc p secs cpu f out
	name=$(basename "$t")
	read -r rc p secs cpu < "$res/$name.done"
	out=$(cat "$logs/$name.log")
	f=$(printf '%s\n' "$out" | grep -c '^\[  FAILED  \]')
	f=$(( f > 0 ? f / 2 + f % 2 : 0 ))  # cmocka prints each failure twice (inline + summary)
	pass=$((pass + p))
	if [ "$rc" -eq 0 ] && [ "$p" -eq 0 ]; then
		rc=1  # a binary that ran no test is a failure, not a pass
		out="$out
$name: ran no test"
	fi
	if [ "$rc" -ne 0 ]; then
		[ "$f" -eq 0 ] && f=1
		fail=$((fail + f)); bad+=("$name")
		[ "$rc" -gt 128 ] && out="$out
$name: killed by signal $((rc - 128))"
		printf '\n%s\n' "$out" | tail -n 40
		[ "$jobs" -eq 1 ] && printf '%-32s ' "$name"
	fi
	[ "$jobs" -gt 1 ] && printf '%-32s ' "$name"
	printf '%3d ok %3d failed  %6.1fs  (cpu %.1fs)\n' "$p" "$f" "$secs" "$cpu"
	printf '%s %s %s\n' "$name" "$secs" "$cpu" >> "$res/times"
}

echo "running $# test binaries${TEST_FILTER:+ (only names containing $TEST_FILTER)}, $jobs at a time; whole logs in $logs/"
suite_start=$(date +%s)
declare -A running=()  # pid -> binary
for t in "${order[@]}"; do
	name=$(basename "$t")
	if [ -n "${TEST_FILTER:-}" ] && [[ "$name" != *$TEST_FILTER* ]]; then continue; fi
	if [ "$jobs" -eq 1 ]; then
		printf '%-32s ' "$name"  # the name first: a long binary shows what is running
		( run_one "$t" )
		report "$t"
		continue
	fi
	while [ ${#running[@]} -ge "$jobs" ]; do
		wait -n
		for pid in "${!running[@]}"; do
			if [ -e "$res/$(basename "${running[$pid]}").done" ]; then
				wait "$pid" 2>/dev/null; report "${running[$pid]}"; unset "running[$pid]"
			fi
		done
	done
	( run_one "$t" ) &
	running[$!]=$t
done
for pid in "${!running[@]}"; do
	wait "$pid" 2>/dev/null; report "${running[$pid]}"
done
# this run's times replace those binaries' lines; the others are kept
if [ -s "$res/times" ]; then
	cat "$logs/.times" "$res/times" 2>/dev/null | awk '{ t[$1] = $0 } END { for (n in t) print t[n] }' |
		sort -k2,2 -g -r > "$res/all" && mv "$res/all" "$logs/.times"
fi
echo
[ ${#bad[@]} -gt 0 ] && echo "failing binaries: ${bad[*]} (whole logs in $logs/)"
echo "$pass passed, $fail failed ($(( $(date +%s) - suite_start )) s)"
[ $fail -eq 0 ]

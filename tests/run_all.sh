#!/usr/bin/env bash
# Runs every CMocka test binary given, prints each one's summary and a final
# "N passed, N failed" line; exits non-zero if any test failed or crashed.
# libFuzzer targets (.../fuzz/fuzz_*) among the arguments get a smoke pass:
# FUZZ_SMOKE_SECONDS on the repository's corpus and seeds, one test each.
# Every binary's whole output is kept in $BUILD/test-logs/NAME.log (the
# sanitizer reports of `make asan` included); a failing one's tail is shown.
set -u
pass=0; fail=0; bad=()
logs=${BUILD:-build}/test-logs
mkdir -p "$logs"
echo "running $# test binaries${TEST_FILTER:+ (only names containing $TEST_FILTER)}; whole logs in $logs/"
for t in "$@"; do
	name=$(basename "$t")
	if [ -n "${TEST_FILTER:-}" ] && [[ "$name" != *$TEST_FILTER* ]]; then continue; fi
	printf '%-32s ' "$name"  # the name first: a long binary shows what is running
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
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	f=$(printf '%s\n' "$out" | grep -c '^\[  FAILED  \]')
	f=$(( f > 0 ? f / 2 + f % 2 : 0 ))  # cmocka prints each failure twice (inline + summary)
	pass=$((pass + p))
	if [ $rc -eq 0 ] && [ $p -eq 0 ]; then
		rc=1  # a binary that ran no test is a failure, not a pass
		out="$out
$name: ran no test"
	fi
	if [ $rc -ne 0 ]; then
		[ $f -eq 0 ] && f=1
		fail=$((fail + f)); bad+=("$name")
		printf '\n%s\n' "$out" | tail -n 40
		printf '%-32s ' "$name"
	fi
	printf '%3d ok %3d failed  %6.1fs\n' "$p" "$f" "$secs"
done
echo
[ ${#bad[@]} -gt 0 ] && echo "failing binaries: ${bad[*]} (whole logs in $logs/)"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# Runs every CMocka test binary given, prints each one's summary and a final
# "N passed, N failed" line; exits non-zero if any test failed or crashed.
set -u
pass=0; fail=0; bad=()
for t in "$@"; do
	name=$(basename "$t")
	if [ -n "${TEST_FILTER:-}" ] && [[ "$name" != *$TEST_FILTER* ]]; then continue; fi
	start=$(date +%s.%N)
	out=$("$t" 2>&1); rc=$?
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	p=$(printf '%s\n' "$out" | grep -c '^\[       OK \]')
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
		printf '%s\n' "$out" | tail -n 40
	fi
	printf '%-32s %3d ok %3d failed  %6.1fs\n' "$name" "$p" "$f" "$secs"
done
echo
[ ${#bad[@]} -gt 0 ] && echo "failing binaries: ${bad[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

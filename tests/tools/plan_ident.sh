#!/usr/bin/env bash
# Planner refactoring check: builds every spec (default: models/specs/*.json
# and models/specs/gpu/*.json) with two specwright binaries, plan and render
# only (--no-compile), and compares their engine.json, kernels.cu and build
# output (a refusal too) byte for byte. A spec whose files are missing here
# is compared by its refusal. Prints each difference; exits 1 on any.
#
# Usage: tests/tools/plan_ident.sh OLD_BIN NEW_BIN [SPEC.json ...]
#   e.g. git stash; make build/specwright; cp build/specwright /tmp/sw.old;
#        git stash pop; make build/specwright;
#        tests/tools/plan_ident.sh /tmp/sw.old build/specwright
set -u
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
old=$1; new=$2; shift 2
for b in "$old" "$new"; do
	[ -x "$b" ] || { echo "plan_ident: $b: not an executable" >&2; exit 2; }
done
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(models/specs/*.json models/specs/gpu/*.json)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0; bad=0
for s in "${specs[@]}"; do
	n=$((n + 1))
	for side in old new; do
		bin=$old; [ $side = new ] && bin=$new
		d=$work/$side
		rm -rf "$d"; mkdir -p "$d"
		"$bin" build "$s" -o "$d/e" --no-compile > "$d/log" 2>&1
		echo "exit $?" >> "$d/log"
		# the timings and the directory differ by design
		sed -i -E "s/in [0-9.]+ m?s/in X s/; s/[0-9.]+ s compiling/X s compiling/; s@$d@DIR@g" "$d/log"
	done
	for f in engine.json kernels.cu log; do
		a=$work/old/$f; b=$work/new/$f
		[ $f = log ] || { a=$work/old/e/$f; b=$work/new/e/$f; }
		[ -e "$a" ] || [ -e "$b" ] || continue
		if ! cmp -s "$a" "$b"; then
			echo "plan_ident: $s: $f differs"
			bad=$((bad + 1))
		fi
	done
done
echo "plan_ident: $n specs, $bad files differ"
[ $bad = 0 ]

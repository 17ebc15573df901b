#!/usr/bin/env bash
# The engine `make run` (and `make serve`, `make bench`) builds: the fastest exact one for
# this machine, or ENGINE_SPEC when the user gave one.
# usage: models/specs/pick.sh SPECWRIGHT BACKEND [ENGINE_SPEC]   (from the repository root)
# stdout: the spec's path; stderr: one line saying which engine and why. BACKEND is resolved
# as `run --backend BACKEND` resolves it (`specwright backend`: auto is cuda with a driver
# and a GPU, else host). cuda: the fp16 n-gram engine (the cuda backend refuses gguf dtypes).
# host: the gguf_a8 engine with n-gram lookup first and the EAGLE-3 head where the lookup has
# nothing, when the head is in the checkout (models/drafters/smollm2-eagle3-gpu/, its
# SHA256SUMS checked: a mismatch is an error, not a fallback); else the gguf_a8 n-gram engine.
# HEAD_DIR (tests) names another head directory.
set -euo pipefail
sw=${1:?usage: models/specs/pick.sh SPECWRIGHT BACKEND [ENGINE_SPEC]}
backend=${2:-auto}
user=${3:-}
head=${HEAD_DIR:-models/drafters/smollm2-eagle3-gpu}
say() { echo "engine: $*" >&2; }
if [ -n "$user" ]; then
	[ -f "$user" ] || { echo "pick.sh: ENGINE_SPEC=$user: no such file" >&2; exit 2; }
	say "$user (ENGINE_SPEC)"
	echo "$user"
	exit 0
fi
kind=$("$sw" backend "$backend") || { echo "pick.sh: the backend '$backend' cannot be opened (above)" >&2; exit 1; }
case $kind in
cuda)
	say "models/specs/smollm2-ngram.json: fp16 with n-gram lookup, for the cuda backend (gguf_a8, faster on a CPU, is host-only)"
	echo models/specs/smollm2-ngram.json
	;;
host)
	if [ -e "$head" ]; then
		for f in config.json model.safetensors; do
			grep -q "  $f\$" "$head/SHA256SUMS" 2>/dev/null ||
				{ echo "pick.sh: $head/SHA256SUMS: expected a line for $f (the head as e3pack.py writes it), found none" >&2; exit 1; }
		done
		if ! out=$(cd "$head" && sha256sum -c SHA256SUMS 2>&1); then
			echo "pick.sh: $head: sha256 does not match SHA256SUMS:" >&2
			echo "$out" | grep -v ': OK$' >&2
			exit 1
		fi
		say "models/specs/smollm2-eagle3-ngram-gguf.json: gguf_a8, n-gram lookup first and the EAGLE-3 head ($head, sha256 checked) where it finds nothing"
		echo models/specs/smollm2-eagle3-ngram-gguf.json
	else
		say "models/specs/smollm2-ngram-gguf.json: gguf_a8 with n-gram lookup ($head is not in this checkout: the engine with the head waits for it, models/drafters/README.md)"
		echo models/specs/smollm2-ngram-gguf.json
	fi
	;;
*)
	echo "pick.sh: '$sw backend $backend' printed '$kind' (expected cuda or host)" >&2
	exit 1
	;;
esac

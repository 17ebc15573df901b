#!/usr/bin/env bash
# Held-out tau of a drafter through the C host decoder: `specwright run --no-baseline
# --json` once per held-out prompt (models/prompts/heldout-general.txt, the lines after its
# header, chat template on, seed = the prompt's index), then tau (tokens / target calls)
# and the acceptance at each position (accepted / tried, the per-prompt figures weighted by
# the prompt's draft iterations) over all prompts.
# eval_c.sh DRAFT_SPEC TEMP N_NEW [GAMMA [EXTRA_ARGS...]]   e.g. eval_c.sh eagle3:DIR 0 64 4
# LINES="0 4 8 12": only those prompts (0-based, after the header); default all.
set -euo pipefail
cd "$(dirname "$0")/../../.."
SPEC=$1 TEMP=$2 N=$3 GAMMA=${4:-4}
shift $(( $# < 4 ? $# : 4 ))
MODEL=${MODEL:-models/cache/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPTS=${PROMPTS:-models/prompts/heldout-general.txt}
SW=${SW:-build/specwright}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
i=0
tail -n +2 "$PROMPTS" | while IFS= read -r line; do
	[ -n "$line" ] || continue
	if [ -n "${LINES:-}" ] && ! [[ " $LINES " == *" $i "* ]]; then
		i=$((i + 1))
		continue
	fi
	"$SW" run "$MODEL" --no-baseline --draft "$SPEC" -t "$TEMP" -n "$N" -g "$GAMMA" --seed "$i" -p "$line" --json "$@" \
		2>&1 >/dev/null | grep '^{"label"' >> "$tmp"
	i=$((i + 1))
done
/usr/bin/python3 - "$tmp" "$SPEC" "$TEMP" "$N" "$GAMMA" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tok = sum(r["tokens"] for r in rows)
calls = sum(r["target_calls"] for r in rows)
G = len(rows[0]["per_position_acceptance"]) if rows else 0
# per prompt: per_position_acceptance[j] = accepted_j / tried_j; weight by target calls
w = [r["target_calls"] for r in rows]
acc = [sum(r["per_position_acceptance"][j] * w[i] for i, r in enumerate(rows)) / max(1, sum(w)) for j in range(G)]
print(f"eval_c: {sys.argv[2]} T={sys.argv[3]} n={sys.argv[4]} gamma={sys.argv[5]}: {len(rows)} prompts, "
      f"{tok} tokens, {calls} target calls, tau {tok / max(calls, 1):.3f} (per prompt "
      + " ".join(f"{r['tau']:.2f}" for r in rows) + "); acceptance by position (call-weighted) "
      + " ".join(f"{a:.3f}" for a in acc))
PY

#!/bin/bash
# usage: getids.sh SET ASK  -> models/prompts/replay/SET.N.{prompt,a8,fp16}
# ENGINES: a folder holding a8/ and fp16/, the engines of models/specs/smollm2-ngram-gguf.json and
# smollm2-ngram.json (specwright build SPEC -o $ENGINES/a8 --no-compile); ASK as the bench's SW_BENCH_ASK
cd "$(dirname "$0")/../../.."
set=$1; ask=$2
export SW_THREADS=1
i=0
tail -n +2 models/prompts/$set.txt | while IFS= read -r line; do
  [ -z "$line" ] && continue
  i=$((i+1))
  P="$ask

$line"
  build/specwright generate models/cache/SmolLM2-135M-Instruct.Q4_1.gguf --draft none -n 1 --json -p "$P" 2>&1 >/dev/null | grep prompt_ids | python3 -c "import json,sys; print(' '.join(map(str,json.loads(sys.stdin.read())['prompt_ids'])))" > models/prompts/replay/$set.$i.prompt
  for e in a8 fp16; do
    build/specwright run $ENGINES/$e --backend host --ids "$(cat models/prompts/replay/$set.$i.prompt)" --target-only --no-baseline --json -n 96 2>/dev/null | python3 -c "import json,sys; print(' '.join(map(str,json.loads(sys.stdin.read())['tokens'])))" > models/prompts/replay/$set.$i.$e
  done
  echo "$set $i done $(wc -w < models/prompts/replay/$set.$i.prompt) $(wc -w < models/prompts/replay/$set.$i.a8)"
done

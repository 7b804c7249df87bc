#!/usr/bin/env bash
# The 2-minute variant of the main job: SFT from scratch on 2-digit addition must reach >= 90%
# exact-match greedy accuracy on 200 held-out problems, logged as val-core/arith/acc/mean@1. Then
# `rlforge generate` samples from the checkpoint's huggingface/ folder, whose tokenizer.json is the
# built-in character tokenizer: greedy answers to 200 problems are digits ended by <eos>, about as
# often right as validation says.
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/run" \
  trainer.total_training_steps=1000 trainer.test_freq=1000 trainer.save_freq=1000 \
  > "$SCRATCH/out.log" 2>&1 || { tail -20 "$SCRATCH/out.log"; fail "sft exited with an error"; }
tail -3 "$SCRATCH/out.log"
acc=$(last_metric "$SCRATCH/run/metrics.jsonl" "val-core/arith/acc/mean@1")
python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.90 else 1)" || fail "held-out accuracy $acc < 0.90"
grep -q "sft done:" "$SCRATCH/out.log" || fail "no summary line"
grep -q "<polyline" "$SCRATCH/run/metrics.svg" || fail "no loss curve in metrics.svg"
grep -q "val-core/arith/acc/mean@1" "$SCRATCH/run/metrics.svg" || fail "no validation curve in metrics.svg"

# Each prompt framed as SFT framed it: <bos> (the character tokenizer adds none itself), then "a+b=".
python3 - "$SCRATCH/prompts.jsonl" <<'PY'
import json, random, sys
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for _ in range(200):
        a, b = rng.randrange(100), rng.randrange(100)
        f.write(json.dumps({"prompt": f"<bos>{a}+{b}=", "answer": str(a + b)}) + "\n")
PY
folder="$SCRATCH/run/global_step_1000/huggingface"
quiet "$RLFORGE" generate --model "$folder" --prompts "$SCRATCH/prompts.jsonl" --out "$SCRATCH/generated.jsonl" \
  --temperature 0 --max-new-tokens 8 --threads 2
python3 - "$SCRATCH/generated.jsonl" "$acc" <<'PY' || fail "generate on the arith checkpoint's folder"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 200, len(rows)
for r in rows:
    # Stopped at <eos> (id 2 of the character tokenizer), every character before it a digit.
    assert r["finish_reason"] == "stop" and r["response_ids"][-1] == 2, r
    assert r["response"].isdigit(), r
right = sum(r["response"] == r["prompt"]["answer"] for r in rows) / len(rows)
# Validation reached >= 0.90 on its held-out problems; these are mostly training problems.
assert right >= 0.85, f"generate answers {right:.3f} right, validation {sys.argv[2]}"
print(f"ok generate: {right:.3f} of 200 problems right (validation {sys.argv[2]})")
PY
text=$("$RLFORGE" generate --model "$folder" --prompt "<bos>12+34=" --temperature 0 --max-new-tokens 8 --threads 2)
[[ "$text" =~ ^[0-9]+$ ]] || fail "generate --prompt printed '$text', not a number"
echo "PASS: held-out accuracy $acc; generate samples from the checkpoint's folder"

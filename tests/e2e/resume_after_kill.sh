#!/usr/bin/env bash
# kill -9 during training, then resume: the following losses must equal an uninterrupted run's bit
# for bit (same thread count), and nothing saved before the kill may be damaged.
source "$(dirname "$0")/common.sh"
args=(sft --config examples/sft_arith.yaml trainer.total_training_steps=24 trainer.test_freq=0 optim.lr_warmup_steps=2
      trainer.save_freq=6 data.train_batch_size=64 trainer.num_threads=2)

"$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/straight" > "$SCRATCH/straight.log" 2>&1 \
  || { tail "$SCRATCH/straight.log"; fail "uninterrupted run failed"; }

# Start the same run and kill it hard once it has checkpointed step 12 and gone past it.
"$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/killed" > "$SCRATCH/killed.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  if [ -f "$SCRATCH/killed/latest_checkpointed_iteration.txt" ] &&
     [ "$(cat "$SCRATCH/killed/latest_checkpointed_iteration.txt")" -ge 12 ] &&
     grep -q '"step":14' "$SCRATCH/killed/metrics.jsonl" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
kill -9 "$pid" 2>/dev/null || fail "the run ended before it could be killed"
wait "$pid" 2>/dev/null || true
killed_at=$(cat "$SCRATCH/killed/latest_checkpointed_iteration.txt")
echo "killed after checkpoint $killed_at"

"$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/killed" > "$SCRATCH/resumed.log" 2>&1 \
  || { tail "$SCRATCH/resumed.log"; fail "resumed run failed"; }
grep -q "resumed from" "$SCRATCH/resumed.log" || fail "the second run did not resume"

python3 - "$SCRATCH/straight/metrics.jsonl" "$SCRATCH/killed/metrics.jsonl" <<'PY'
import json, sys
def losses(path):
    return {row["step"]: (row["train/loss"], row["train/grad_norm"]) for row in map(json.loads, open(path))}
straight, resumed = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(resumed) == list(range(1, 25)), f"resumed run logged steps {sorted(resumed)}"
bad = [s for s in straight if straight[s] != resumed[s]]
assert not bad, f"steps {bad} differ: {[(straight[s], resumed[s]) for s in bad]}"
print("PASS: 24 steps, losses and grad norms identical bit for bit")
PY

# Every checkpoint carries an HF-style folder; a new run starts from it with the trained weights.
hf="$SCRATCH/killed/global_step_24/huggingface"
for f in config.json model.safetensors tokenizer.json tokenizer_config.json special_tokens_map.json; do
  [ -f "$hf/$f" ] || fail "checkpoint lacks huggingface/$f"
done
"$RLFORGE" "${args[@]}" trainer.total_training_steps=2 optim.lr_warmup_steps=1 model.path="$hf" model.tokenizer="$hf" \
  trainer.default_local_dir="$SCRATCH/from_hf" > "$SCRATCH/from_hf.log" 2>&1 \
  || { tail "$SCRATCH/from_hf.log"; fail "could not start from the exported HF folder"; }
python3 - "$SCRATCH/straight/metrics.jsonl" "$SCRATCH/from_hf/metrics.jsonl" <<'PY'
import json, sys
fresh = json.loads(open(sys.argv[1]).readline())["train/loss"]
loaded = json.loads(open(sys.argv[2]).readline())["train/loss"]
assert loaded < fresh - 0.3, f"first loss from the exported weights {loaded} is not below a fresh model's {fresh}"
print(f"PASS: restarting from the HF export starts at loss {loaded:.3f} (fresh model: {fresh:.3f})")
PY

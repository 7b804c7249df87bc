#!/usr/bin/env bash
# RL determinism and resume (issue #9, acceptance 2): with trainer.deterministic, two runs with the
# same seed log identical metrics, and a run killed with SIGKILL after a checkpoint and restarted
# with resume_mode auto logs the same metrics for the following steps as the uninterrupted run.
# Timings and throughput are left out of the comparison; everything else must match exactly.
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=300 trainer.test_freq=300 trainer.save_freq=300 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
args=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_300/huggingface"
      data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 data.val_size=50
      data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.shuffle=true
      actor_rollout_ref.actor.ppo_epochs=2 trainer.total_training_steps=12 trainer.test_freq=6 trainer.save_freq=4
      trainer.deterministic=true trainer.num_threads=2 trainer.max_actor_ckpt_to_keep=null trainer.time_budget_s=null actor_rollout_ref.actor.optim.lr_warmup_steps=1)

run() { "$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/$1" > "$SCRATCH/$1.log" 2>&1 \
          || { tail -20 "$SCRATCH/$1.log"; fail "run $1 failed"; }; }
run straight
run again

"$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/killed" > "$SCRATCH/killed.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  if [ -f "$SCRATCH/killed/latest_checkpointed_iteration.txt" ] &&
     [ "$(cat "$SCRATCH/killed/latest_checkpointed_iteration.txt")" -ge 4 ] &&
     grep -q '"step":5' "$SCRATCH/killed/metrics.jsonl" 2>/dev/null; then
    break
  fi
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null || fail "the run ended before it could be killed"
wait "$pid" 2>/dev/null || true
echo "killed after checkpoint $(cat "$SCRATCH/killed/latest_checkpointed_iteration.txt")"
run killed
grep -q "resumed from" "$SCRATCH/killed.log" || fail "the restarted run did not resume"

python3 - "$SCRATCH/straight/metrics.jsonl" "$SCRATCH/again/metrics.jsonl" "$SCRATCH/killed/metrics.jsonl" <<'PY'
import json, sys
def rows(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r["step"]] = {k: v for k, v in r.items() if not k.startswith(("timing_s/", "perf/"))}
    return out
straight, again, resumed = (rows(p) for p in sys.argv[1:])
assert sorted(straight) == list(range(0, 13)), sorted(straight)
assert straight == again, [s for s in straight if straight[s] != again.get(s)]
assert sorted(resumed) == list(range(0, 13)), sorted(resumed)
bad = [s for s in straight if straight[s] != resumed[s]]
assert not bad, f"steps {bad} differ after the resume: " + str([(k, straight[bad[0]][k], resumed[bad[0]].get(k)) for k in straight[bad[0]] if straight[bad[0]][k] != resumed[bad[0]].get(k)][:5])
print("PASS: two deterministic runs identical; killed + resumed run identical to the uninterrupted one (12 steps)")
PY

#!/usr/bin/env bash
# RL determinism and resume (issue #9, acceptance 2; issue #21, acceptance 2): with trainer.deterministic,
# two runs with the same seed log identical metrics, and a run with save_freq=1 killed with SIGKILL 20 times at
# random moments, each time restarted with resume_mode auto, leaves intact checkpoints, no temp files, and a
# metrics.jsonl equal to the uninterrupted run's.
# Timings and throughput are left out of the comparison; everything else must match exactly.
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=300 trainer.test_freq=300 trainer.save_freq=300 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
args=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_300/huggingface"
      data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 data.val_size=50
      data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.shuffle=true
      actor_rollout_ref.actor.ppo_epochs=2 trainer.total_training_steps=40 trainer.test_freq=10 trainer.save_freq=4
      trainer.deterministic=true trainer.num_threads=2 trainer.max_actor_ckpt_to_keep=null trainer.time_budget_s=null actor_rollout_ref.actor.optim.lr_warmup_steps=1)

run() { "$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/$1" > "$SCRATCH/$1.log" 2>&1 \
          || { tail -20 "$SCRATCH/$1.log"; fail "run $1 failed"; }; }
run straight
run again

# 20 SIGKILLs at random moments of a run that checkpoints every step (seeded, so a failure replays), each
# followed by a restart that resumes, then a last restart that runs to the end. Every other kill comes within
# 2 s of the start (start-up, the resume's loading); the others wait until the restart has logged a new row,
# then come up to 0.2 s later (inside the next step or its save), so the run moves on a step or two each. A step
# takes 0.06-0.3 s on the CPUs seen, so 40 steps outlast the 20 kills (12 steps did not on a fast CPU).
RANDOM=20
rows() { [ -f "$SCRATCH/killed/metrics.jsonl" ] && wc -l < "$SCRATCH/killed/metrics.jsonl" || echo 0; }
kills=0
while [ "$kills" -lt 20 ]; do
  before=$(rows)
  "$RLFORGE" "${args[@]}" trainer.save_freq=1 trainer.default_local_dir="$SCRATCH/killed" >> "$SCRATCH/killed.log" 2>&1 &
  pid=$!
  if [ $((kills % 2)) -eq 0 ]; then
    sleep "$((RANDOM % 2)).$((RANDOM % 10))"
  else
    for _ in $(seq 1 600); do [ "$(rows)" -gt "$before" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
    sleep "0.$((RANDOM % 2))$((RANDOM % 10))"
  fi
  kill -9 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; break; }  # it had finished
  wait "$pid" 2>/dev/null || true
  kills=$((kills + 1))
done
echo "killed $kills times, last after checkpoint $(cat "$SCRATCH/killed/latest_checkpointed_iteration.txt" 2>/dev/null)"
[ "$kills" -eq 20 ] || fail "the run finished after only $kills kills"
"$RLFORGE" "${args[@]}" trainer.save_freq=1 trainer.default_local_dir="$SCRATCH/killed" > "$SCRATCH/resumed.log" 2>&1 \
  || { tail -20 "$SCRATCH/resumed.log"; fail "the last restart failed"; }
grep -q "resumed from" "$SCRATCH/resumed.log" || fail "the last restart did not resume"
# What the kills left: no temp folder or file, every step folder complete (its manifest is written last).
leftovers=$(find "$SCRATCH/killed" -maxdepth 1 -name '.*tmp*')
[ -z "$leftovers" ] || fail "temp files left behind: $leftovers"
for step_dir in "$SCRATCH"/killed/global_step_*; do
  [ -f "$step_dir/manifest.json" ] || fail "$step_dir has no manifest"
done
[ "$(wc -l < "$SCRATCH/killed/metrics.jsonl")" -eq 41 ] || fail "metrics.jsonl has $(wc -l < "$SCRATCH/killed/metrics.jsonl") rows, expected 41 (steps 0..40 once each)"

python3 - "$SCRATCH/straight/metrics.jsonl" "$SCRATCH/again/metrics.jsonl" "$SCRATCH/killed/metrics.jsonl" <<'PY'
import json, sys
def rows(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r["step"]] = {k: v for k, v in r.items() if not k.startswith(("timing_s/", "perf/"))}
    return out
straight, again, resumed = (rows(p) for p in sys.argv[1:])
assert sorted(straight) == list(range(0, 41)), sorted(straight)
assert straight == again, [s for s in straight if straight[s] != again.get(s)]
assert sorted(resumed) == list(range(0, 41)), sorted(resumed)
bad = [s for s in straight if straight[s] != resumed[s]]
assert not bad, f"steps {bad} differ after the resume: " + str([(k, straight[bad[0]][k], resumed[bad[0]].get(k)) for k in straight[bad[0]] if straight[bad[0]][k] != resumed[bad[0]].get(k)][:5])
print("PASS: two deterministic runs identical; a run killed 20 times and resumed logs the uninterrupted run's metrics (40 steps)")
PY

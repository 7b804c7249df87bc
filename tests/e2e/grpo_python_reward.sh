#!/usr/bin/env bash
# A verl-style Python reward file drives `rlforge train` (issue #10 acceptance 2):
#  1. compute_score written in Python the way rlforge's arith rule scorer scores (exact match, acc) gives a
#     run identical to the rule scorer's (deterministic mode: every metric but the timings);
#  2. a scorer that raises, hangs past timeout_s or kills its own worker process, one kind per sample:
#     with on_error: zero the run completes and counts the failures in reward/num_failed every step; with
#     on_error: fail it stops at the first bad sample with one error line naming the file and the reason;
#  3. a file without the function named by custom_reward_function.name is refused before training.
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=300 trainer.test_freq=300 trainer.save_freq=300 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
cat > "$SCRATCH/arith_reward.py" <<'PY'
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    acc = 1.0 if solution_str.strip() == str(ground_truth).strip() else 0.0
    return {"score": acc, "acc": acc}
PY
cat > "$SCRATCH/misbehaving.py" <<'PY'
import os, time
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    kind = int(ground_truth) % 4
    if kind == 1:
        raise ValueError(f"cannot score {ground_truth}")
    if kind == 2:
        time.sleep(60)
    if kind == 3:
        os._exit(7)
    return 1.0 if solution_str.strip() == str(ground_truth).strip() else 0.0
PY
args=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_300/huggingface"
      data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 trainer.save_freq=-1
      trainer.time_budget_s=null actor_rollout_ref.actor.optim.lr_warmup_steps=1 trainer.num_threads=2)

# 1. The Python arith scorer = the rule scorer.
quiet "$RLFORGE" "${args[@]}" data.val_size=50 trainer.total_training_steps=3 trainer.test_freq=3 \
  trainer.default_local_dir="$SCRATCH/rule"
quiet "$RLFORGE" "${args[@]}" data.val_size=50 trainer.total_training_steps=3 trainer.test_freq=3 \
  custom_reward_function.path="$SCRATCH/arith_reward.py" trainer.default_local_dir="$SCRATCH/python"
python3 - "$SCRATCH/rule/metrics.jsonl" "$SCRATCH/python/metrics.jsonl" <<'PY'
import json, sys
rule, python = ([json.loads(line) for line in open(p)] for p in sys.argv[1:])
assert len(rule) == len(python) == 4, (len(rule), len(python))
for a, b in zip(rule, python):
    assert b.get("reward/num_failed") in (None, 0), b
    for k, v in a.items():
        if k.startswith(("timing_s/", "perf/")):
            continue
        assert b.get(k) == v, f"step {a['step']} {k}: rule scorer {v}, Python file {b.get(k)}"
print("PASS: the Python arith reward file gives the rule scorer's run")
PY

# 2. Raising, hanging and crashing samples: zero-and-count, then fail.
small=("${args[@]}" data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.rollout.n=2
       data.val_size=8 trainer.total_training_steps=2 trainer.test_freq=2
       custom_reward_function.path="$SCRATCH/misbehaving.py" custom_reward_function.timeout_s=0.5)
quiet timeout 300 "$RLFORGE" "${small[@]}" custom_reward_function.on_error=zero trainer.default_local_dir="$SCRATCH/zero"
python3 - "$SCRATCH/zero/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
steps = [r for r in rows if r["step"] > 0]
assert len(steps) == 2, rows
for r in steps:
    assert 0 < r["reward/num_failed"] < 16, r["reward/num_failed"]
print("PASS: on_error zero: failures per step", [r["reward/num_failed"] for r in steps])
PY
# (The message ends with the scorer's Python traceback, so it is checked in the whole stderr.)
if timeout 300 "$RLFORGE" "${small[@]}" custom_reward_function.on_error=fail trainer.default_local_dir="$SCRATCH/fail" \
  > "$SCRATCH/stdout" 2> "$SCRATCH/stderr"; then fail "on_error fail: the run did not stop"; fi
grep -q "rlforge: .*custom_reward_function .*misbehaving.py could not score reward sample" "$SCRATCH/stderr" \
  || { cat "$SCRATCH/stderr"; fail "on_error fail: no error naming the reward file"; }
echo "ok: $(grep -m1 "could not score" "$SCRATCH/stderr" | cut -c1-200)"

# 3. A missing function is refused before any training.
expect_error "custom_reward_function.name" "${args[@]}" custom_reward_function.path="$SCRATCH/arith_reward.py" \
  custom_reward_function.name=score trainer.default_local_dir="$SCRATCH/missing"

#!/usr/bin/env bash
# A verl-style Python reward file drives `rlforge train` (issue #10 acceptance 2):
#  1. compute_score written in Python the way rlforge's arith rule scorer scores (exact match, acc) gives a
#     run identical to the rule scorer's (deterministic mode: every metric but the timings);
#  2. a scorer that raises, hangs past timeout_s or kills its own worker process, one kind per sample:
#     with on_error: zero the run completes and counts the failures in reward/num_failed every step; with
#     on_error: fail it stops at the first bad sample with one error line naming the file and the reason;
#  3. a file without the function named by custom_reward_function.name is refused before training;
#  4. the dapo reward manager adds the overlong penalty (verl's reward_kwargs.overlong_buffer_cfg).
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

# 4. verl's dapo reward manager with a verl command line's `+reward_model.reward_kwargs...`: each response's
# score is the scorer's plus DAPO's overlong penalty of its length (eos included), logged as extras; in
# training and validation. Responses of up to 4 tokens, max_resp_len 4 with a 3-token buffer: a length-L
# response loses (L - 1) / 3 x 0.6.
dapo=(reward_model.reward_manager=dapo +reward_model.reward_kwargs.overlong_buffer_cfg.enable=True
      +reward_model.reward_kwargs.overlong_buffer_cfg.len=3 +reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor=0.6
      +reward_model.reward_kwargs.overlong_buffer_cfg.log=True +reward_model.reward_kwargs.max_resp_len=4)
quiet "$RLFORGE" "${args[@]}" "${dapo[@]}" data.val_size=20 trainer.total_training_steps=2 trainer.test_freq=2 \
  trainer.rollout_data_dir="$SCRATCH/dapo/rollouts" trainer.validation_data_dir="$SCRATCH/dapo/val" \
  trainer.default_local_dir="$SCRATCH/dapo"
python3 - "$SCRATCH/dapo" <<'PY'
import json, sys
for path in (f"{sys.argv[1]}/rollouts/1.jsonl", f"{sys.argv[1]}/val/2.jsonl"):
    lines = [json.loads(l) for l in open(path)]
    for g in lines:
        # The arith scorer's acc is the raw score. The length (tokens, eos included) is at least the output's
        # characters (the decoded text drops special tokens), at most 4: the penalty is one of those lengths'.
        lengths = range(max(1, len(g["output"])), 5)
        assert any(abs(g["overlong_reward"] - min(-(n - 1) / 3 * 0.6, 0.0)) < 1e-12 for n in lengths), g
        assert g["overlong"] == (1.0 if g["overlong_reward"] < 0 else 0.0), g
        assert abs(g["score"] - (g["acc"] + g["overlong_reward"])) < 1e-12, g
    assert any(g["overlong_reward"] < 0 for g in lines), "no response was penalised"
    print(f"ok: {path}: {len(lines)} responses, score = acc + overlong penalty")
PY
expect_error "reward_model.reward_kwargs.max_resp_len" "${args[@]}" reward_model.reward_manager=dapo \
  +reward_model.reward_kwargs.overlong_buffer_cfg.enable=True +reward_model.reward_kwargs.overlong_buffer_cfg.len=3 \
  --check-config
expect_error "reward_model.reward_kwargs: the naive reward manager takes no arguments" "${args[@]}" \
  +reward_model.reward_kwargs.max_resp_len=4 --check-config
expect_error "reward_model.reward_manager: expected one of naive, dapo, got 'prime'" "${args[@]}" reward_model.reward_manager=prime --check-config

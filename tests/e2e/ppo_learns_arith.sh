#!/usr/bin/env bash
# Issue #10 acceptance 1: PPO with a critic (algorithm.adv_estimator gae, examples/ppo_arith.yaml) from
# the main job's SFT warm start on 3-digit addition. Within a fixed step count the training score's
# moving average must rise and the critic's values must come to explain the returns
# (critic/vf_explained_var > 0 over the last steps). Also checks the critic's stages and metrics (verl's
# names), the critic warmup (no actor update before step critic_warmup) and the critic in the checkpoint.
source "$(dirname "$0")/common.sh"
readonly steps=60 warmup=5
"$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.default_local_dir="$SCRATCH/sft" \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
warm=$SCRATCH/sft/global_step_$(cat "$SCRATCH/sft/latest_checkpointed_iteration.txt")/huggingface
"$RLFORGE" train --config examples/ppo_arith.yaml actor_rollout_ref.model.path="$warm" \
  trainer.total_training_steps=$steps trainer.critic_warmup=$warmup trainer.val_before_train=false \
  trainer.test_freq=-1 trainer.save_freq=$steps trainer.time_budget_s=null trainer.default_local_dir="$SCRATCH/ppo" \
  > "$SCRATCH/ppo.log" 2>&1 || { tail -20 "$SCRATCH/ppo.log"; fail "rlforge train failed"; }
tail -3 "$SCRATCH/ppo.log"
python3 - "$SCRATCH/ppo/metrics.jsonl" "$steps" "$warmup" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
num_steps, warmup = int(sys.argv[2]), int(sys.argv[3])
steps = [r for r in rows if r["step"] > 0]
assert len(steps) == num_steps, f"{len(steps)} step rows"
for name in ["critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm", "critic/lr",
             "critic/values/mean", "critic/values/max", "critic/values/min", "critic/vf_explained_var",
             "critic/returns/mean", "critic/advantages/mean", "timing_s/values", "timing_s/update_critic"]:
    missing = [r["step"] for r in steps if name not in r]
    assert not missing, f"{name} missing at steps {missing[:5]}"
# verl's warmup: the actor trains from step critic_warmup on (critic_warmup <= global_steps).
early = [r["step"] for r in steps if r["step"] < warmup and "actor/pg_loss" in r]
late = [r["step"] for r in steps if r["step"] >= warmup and "actor/pg_loss" not in r]
assert not early and not late, f"actor updates during the warmup at {early}, missing after it at {late}"
window = 10
score = [r["critic/score/mean"] for r in steps]
start, end = sum(score[:window]) / window, sum(score[-window:]) / window
explained = [r["critic/vf_explained_var"] for r in steps]
last_explained = sum(explained[-window:]) / window
print("score moving average:", " ".join(f"{sum(score[i - window:i]) / window:.3f}" for i in range(window, len(score) + 1, 5)))
print("vf_explained_var:", " ".join(f"{v:.2f}" for v in explained[::5]))
# Measured margins: see docs/rl_trainer.md ("PPO with a critic").
assert end >= start + 0.05, f"training score's moving average {start:.3f} -> {end:.3f}: less than +0.05"
assert last_explained > 0, f"critic/vf_explained_var over the last {window} steps averages {last_explained:.3f}"
print(f"PASS: score moving average {start:.3f} -> {end:.3f}; vf_explained_var over the last {window} steps "
      f"{last_explained:.3f}")
PY
[ -d "$SCRATCH/ppo/global_step_$steps/critic" ] || fail "no critic in the checkpoint"

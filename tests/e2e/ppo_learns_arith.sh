#!/usr/bin/env bash
# Issue #10 acceptance 1: PPO with a critic (algorithm.adv_estimator gae, examples/ppo_arith.yaml) from
# the main job's SFT warm start on 3-digit addition. Within a fixed step count the training score's
# moving average must rise and the critic's values must come to explain the returns
# (critic/vf_explained_var > 0 over the last steps). Also checks the critic's stages and metrics (verl's
# names), the critic warmup (no actor update before step critic_warmup), the critic in the checkpoint
# and its Hugging Face export (a new run's critic starts from it), max_critic_ckpt_to_keep, and
# critic.enable (a critic beside GRPO; off with gae refused).
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

# The critic's Hugging Face export: a one-label *ForTokenClassification folder a new run's critic starts
# from (critic.model.path), whole (no new head drawn: its values at step 1 are the trained critic's).
critic_hf="$SCRATCH/ppo/global_step_$steps/critic_huggingface"
python3 - "$critic_hf" <<'PY'
import json, struct, sys
folder = sys.argv[1]
config = json.load(open(f"{folder}/config.json"))
assert config["architectures"][0].endswith("ForTokenClassification"), config["architectures"]
assert config.get("num_labels", len(config.get("id2label", {}))) == 1, config
with open(f"{folder}/model.safetensors", "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
assert header["score.weight"]["shape"][0] == 1 and "lm_head.weight" not in header, sorted(header)[:5]
print("PASS: critic export", config["architectures"][0], header["score.weight"]["shape"])
PY
# Started from that export with the actor's checkpoint, the critic explains the returns at once; with
# max_critic_ckpt_to_keep 2 (actor 1), two step folders stay.
actor_hf="$SCRATCH/ppo/global_step_$steps/huggingface"
quiet "$RLFORGE" train --config examples/ppo_arith.yaml actor_rollout_ref.model.path="$actor_hf" \
  critic.model.path="$critic_hf" trainer.total_training_steps=3 trainer.critic_warmup=0 trainer.val_before_train=false \
  trainer.test_freq=-1 actor_rollout_ref.actor.optim.lr_warmup_steps=0 critic.optim.lr_warmup_steps=0 \
  trainer.save_freq=1 trainer.max_actor_ckpt_to_keep=1 trainer.max_critic_ckpt_to_keep=2 trainer.time_budget_s=null \
  trainer.default_local_dir="$SCRATCH/resumed_critic"
first=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['critic/vf_explained_var'])" \
  "$SCRATCH/resumed_critic/metrics.jsonl")
python3 -c "import sys; v = float(sys.argv[1]); assert v > 0, v; print('PASS: step-1 vf_explained_var from the export', v)" "$first"
kept=$(ls -d "$SCRATCH"/resumed_critic/global_step_* | wc -l)
[ "$kept" = 2 ] || fail "$kept step folders kept, expected 2 (max_critic_ckpt_to_keep 2 > max_actor_ckpt_to_keep 1)"
# critic.enable: a critic trained beside GRPO; and refused off with gae.
quiet "$RLFORGE" train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$warm" critic.enable=true \
  trainer.total_training_steps=2 trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 \
  trainer.time_budget_s=null actor_rollout_ref.actor.optim.lr_warmup_steps=0 critic.optim.lr_warmup_steps=0 \
  trainer.default_local_dir="$SCRATCH/grpo_critic"
[ "$(last_metric "$SCRATCH/grpo_critic/metrics.jsonl" critic/vf_loss)" != None ] || fail "critic.enable: no critic/vf_loss"
expect_error "critic.enable" train --config examples/ppo_arith.yaml critic.enable=false --check-config
echo "PASS: ppo_learns_arith"

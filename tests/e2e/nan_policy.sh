#!/usr/bin/env bash
# Non-finite losses and gradients (megatron.check_for_nan_in_loss_and_grad, megatron.nan_policy;
# src/engine/engine_config.h) with a diverging learning rate (1e6: the weights overflow the forward or the
# backward by the second update):
#   error (default)  the run stops with one rlforge: line naming the step, the role, the micro-batch and
#                    the first non-finite tensor, in SFT (one process and DP 2), in GRPO's actor update and
#                    in PPO's critic update; no checkpoint after the last finite step, and the ones before it
#                    hold finite values only;
#   skip_step        the run completes, counting train/skipped_steps (SFT) or actor/skipped_steps (GRPO),
#                    the LR schedule standing still over skipped steps, its checkpoints finite;
#   check off        the NaN reaches the weights and saving them is refused by tensor name.
source "$(dirname "$0")/common.sh"

# Every f32 value of every safetensors file under a folder is finite (plain Python, no numpy).
expect_all_finite() {
  python3 - "$1" <<'PY'
import glob, json, math, struct, sys
files = glob.glob(sys.argv[1] + "/**/*.safetensors", recursive=True)
assert files, f"no safetensors under {sys.argv[1]}"
count = 0
for path in files:
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n]); header.pop("__metadata__", None)
    for name, t in header.items():
        assert t["dtype"] == "F32", (path, name, t["dtype"])
        begin, end = t["data_offsets"]
        values = struct.unpack(f"<{(end - begin) // 4}f", data[8 + n + begin:8 + n + end])
        assert all(math.isfinite(v) for v in values), f"{path}: {name} is not finite"
        count += 1
print(f"ok: {count} tensors in {len(files)} files under {sys.argv[1]}, all finite")
PY
}

# The run folder's latest step is `step`, and no later step folder exists.
expect_last_checkpoint() {
  local dir=$1 step=$2
  [[ $(cat "$dir/latest_checkpointed_iteration.txt") == "$step" ]] || fail "$dir: latest step is not $step"
  [[ ! -e "$dir/global_step_$((step + 1))" ]] || fail "$dir: a checkpoint after step $step was written"
}

sft=(sft --config examples/sft_arith.yaml optim.lr=1e6 optim.lr_warmup_steps=0 trainer.total_training_steps=6
     trainer.save_freq=1 trainer.test_freq=0 trainer.resume_mode=disable trainer.logger='[jsonl]')

# SFT, default policy: step 1 trains, step 2's forward overflows.
expect_error "step 2, SFT update: not finite: the loss of micro-batch 0 of 2 on DP rank 0 is nan (first non-finite: log_probs at token" \
  "${sft[@]}" trainer.default_local_dir="$SCRATCH/sft_error"
grep -q "no weight changed (megatron.nan_policy: skip_step would skip such a step instead)" "$SCRATCH/stderr" ||
  fail "the error does not say that nothing was applied"
expect_last_checkpoint "$SCRATCH/sft_error" 1
expect_all_finite "$SCRATCH/sft_error"

# The same at DP 2: every rank decides alike, rank 0 reports (under mpirun the abort notice follows it).
if "$RLFORGE" --nproc 2 "${sft[@]}" trainer.default_local_dir="$SCRATCH/sft_dp2" > "$SCRATCH/stdout" 2> "$SCRATCH/stderr"; then
  fail "--nproc 2: expected the diverging run to stop"
fi
grep -q "^rlforge: \[rank 0\] step 2, SFT update: not finite: the loss of micro-batch 0 of 1 on DP rank [01] is nan" \
  "$SCRATCH/stderr" || { cat "$SCRATCH/stderr" >&2; fail "--nproc 2: no named error"; }
echo "ok: --nproc 2: $(grep '^rlforge:' "$SCRATCH/stderr" | cut -c1-120)..."
expect_last_checkpoint "$SCRATCH/sft_dp2" 1
expect_all_finite "$SCRATCH/sft_dp2"

# SFT, skip_step: every step after the first is skipped and counted; the LR stays where step 1 left it.
quiet "$RLFORGE" "${sft[@]}" megatron.nan_policy=skip_step trainer.default_local_dir="$SCRATCH/sft_skip"
grep -q "warning: step 2, SFT update: not finite: .* Skipping the optimizer step (megatron.nan_policy: skip_step; 1 skipped so far)" \
  "$SCRATCH/last.log" || fail "no warning for the skipped step 2"
python3 - "$SCRATCH/sft_skip/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
skipped = [r["train/skipped_steps"] for r in rows]
assert skipped == [0, 1, 2, 3, 4, 5], skipped
lrs = [r["train/lr"] for r in rows]
assert lrs[0] != lrs[1] and len(set(lrs[1:])) == 1, f"the schedule moved over skipped steps: {lrs}"
print(f"ok: skip_step: train/skipped_steps {skipped}, train/lr {lrs[1]:.4g} from step 2 on")
PY
expect_last_checkpoint "$SCRATCH/sft_skip" 6
expect_all_finite "$SCRATCH/sft_skip"

# Without the check the NaN is applied; its checkpoint is refused by name (the step-1 one stays the last).
expect_error "saving actor to $SCRATCH/sft_unchecked/global_step_2: refused: model.embed_tokens.weight holds NaN or Inf values" \
  "${sft[@]}" megatron.check_for_nan_in_loss_and_grad=false trainer.default_local_dir="$SCRATCH/sft_unchecked"
expect_last_checkpoint "$SCRATCH/sft_unchecked" 1

# The RL runs start from a warm start of their own (the examples' cache/warm_start/arith3 is scripts/run.sh's).
quiet "$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.total_training_steps=300 \
  trainer.stop_at_val_acc=null trainer.test_freq=0 trainer.save_freq=300 trainer.default_local_dir="$SCRATCH/warm"
warm=$SCRATCH/warm/global_step_300/huggingface
rl=(--config examples/grpo_arith.yaml actor_rollout_ref.model.path="$warm" actor_rollout_ref.actor.optim.lr=1e6 actor_rollout_ref.actor.optim.lr_warmup_steps=0
    trainer.total_training_steps=2 trainer.val_before_train=false trainer.test_freq=0 trainer.save_freq=1
    trainer.resume_mode=disable trainer.logger='[jsonl]')

# GRPO, default policy: the first mini-batch's update makes the second one's backward overflow.
expect_error "step 1, actor update, mini-batch 2 of 4: not finite: every loss is finite, but micro-batch 0 of 1 on DP rank 0" \
  train "${rl[@]}" trainer.default_local_dir="$SCRATCH/grpo_error"
grep -q "first non-finite gradient in backward order: model\." "$SCRATCH/stderr" || fail "no parameter named"
[[ ! -e "$SCRATCH/grpo_error/latest_checkpointed_iteration.txt" ]] || fail "grpo: a checkpoint was written"

# GRPO, skip_step: mini-batches 2-4 of step 1 and all of step 2 are skipped; the checkpoints are finite.
quiet "$RLFORGE" train "${rl[@]}" actor_rollout_ref.actor.megatron.nan_policy=skip_step \
  trainer.default_local_dir="$SCRATCH/grpo_skip"
[[ $(last_metric "$SCRATCH/grpo_skip/metrics.jsonl" actor/skipped_steps) == 7.0 ]] ||
  fail "actor/skipped_steps: $(last_metric "$SCRATCH/grpo_skip/metrics.jsonl" actor/skipped_steps), expected 7"
echo "ok: grpo skip_step: actor/skipped_steps 7 after 2 steps of 4 mini-batches"
expect_last_checkpoint "$SCRATCH/grpo_skip" 2
expect_all_finite "$SCRATCH/grpo_skip"

# PPO: the critic's update is checked as the actor's.
expect_error "step 1, critic update, mini-batch 2 of 4: not finite:" \
  train --config examples/ppo_arith.yaml actor_rollout_ref.model.path="$warm" critic.optim.lr=1e6 critic.optim.lr_warmup_steps=0 \
  actor_rollout_ref.actor.optim.lr_warmup_steps=0 trainer.critic_warmup=0 trainer.total_training_steps=2 \
  trainer.val_before_train=false trainer.test_freq=0 trainer.save_freq=1 trainer.resume_mode=disable \
  trainer.logger='[jsonl]' trainer.default_local_dir="$SCRATCH/ppo_error"

#!/usr/bin/env bash
# Issue #20's config defects found in review, each refused or accepted as verl and ROLL would:
#   - the critic's keys are checked with the critic off (a GRPO run): critic.strategy=mindspeed is refused;
#   - a role on TP 1 that inherits the actor's sequence_parallel: true (ROLL's reference with
#     tensor_model_parallel_size 1 under an actor on TP 2 with SP; verl's ref the same) runs without SP, as
#     Megatron turns it off at TP 1; a user's own `true` at TP 1 is still refused by name;
#   - `rlforge sft` and `rlforge train` read data.train_files / data.val_files alike (a path or a list),
#     and a built-in task beside train_files is refused by both with the same message.
# The path form of train_files running SFT end to end is sft_hf_model.sh's; RL's is grpo_jsonl_qwen3.sh's.
source "$(dirname "$0")/common.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# --- the critic's keys with the critic off --------------------------------------------------------------
expect_error "critic.strategy: 'mindspeed': expected megatron" \
  train --config examples/grpo_arith.yaml critic.strategy=mindspeed --check-config
expect_error "critic.ppo_epochs: must be positive" \
  train --config examples/grpo_arith.yaml critic.ppo_epochs=0 --check-config

# --- sequence parallelism inherited onto TP 1 -----------------------------------------------------------
sed -e '0,/tensor_model_parallel_size: 1/s//tensor_model_parallel_size: 2/' \
    -e 's/sequence_parallel: false/sequence_parallel: true/' -e 's/list(range(0,1))/list(range(0,2))/g' \
    examples/roll_grpo_arith.yaml > "$SCRATCH/roll_tp2_sp.yaml"
"$RLFORGE" --nproc 2 train --config "$SCRATCH/roll_tp2_sp.yaml" --check-config > "$SCRATCH/roll.yaml" \
  2> "$SCRATCH/roll.err" || fail "ROLL: actor TP 2 + SP, reference TP 1 refused: $(tail -1 "$SCRATCH/roll.err")"
python3 - "$SCRATCH/roll.yaml" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
actor, ref = c["actor_rollout_ref"]["actor"]["megatron"], c["actor_rollout_ref"]["ref"]["megatron"]
assert (actor["tensor_model_parallel_size"], actor["sequence_parallel"]) == (2, True), actor
assert (ref["tensor_model_parallel_size"], ref["sequence_parallel"]) == (1, False), ref
print("ok: ROLL reference on TP 1 runs without the actor's sequence parallelism")
PY
verl_tp2_sp=(train --config examples/grpo_arith.yaml actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2
             actor_rollout_ref.actor.megatron.sequence_parallel=true actor_rollout_ref.ref.megatron.tensor_model_parallel_size=1)
"$RLFORGE" --nproc 2 "${verl_tp2_sp[@]}" --check-config > "$SCRATCH/verl.yaml" 2> "$SCRATCH/verl.err" ||
  fail "verl: actor TP 2 + SP, ref TP 1 refused: $(tail -1 "$SCRATCH/verl.err")"
grep -A30 "^  ref:" "$SCRATCH/verl.yaml" | grep -q "sequence_parallel: false" || fail "verl: the ref kept SP on TP 1"
expect_error "actor_rollout_ref.ref.megatron.sequence_parallel: true needs tensor_model_parallel_size > 1" \
  "${verl_tp2_sp[@]}" actor_rollout_ref.ref.megatron.sequence_parallel=true --check-config

# --- the weight sync's keys (verl's checkpoint_engine): a GPU transport is refused by name -------------------
expect_error "actor_rollout_ref.rollout.checkpoint_engine.backend: 'nccl': expected naive" \
  train --config examples/grpo_arith.yaml actor_rollout_ref.rollout.checkpoint_engine.backend=nccl --check-config
expect_error "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes: must be positive" \
  train --config examples/grpo_arith.yaml actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=0 \
  --check-config

# --- one reading of the data keys -----------------------------------------------------------------------
printf '%s\n' '{"prompt": "1+1=", "response": "2"}' > "$SCRATCH/train.jsonl"
files=(data.train_files="$SCRATCH/train.jsonl" data.val_files="$SCRATCH/train.jsonl")
expect_error "data.task: a built-in task and data.train_files exclude each other" \
  sft --config examples/sft_arith.yaml "${files[@]}"
expect_error "data.task: a built-in task and data.train_files exclude each other" \
  train --config examples/grpo_arith.yaml "${files[@]}" --check-config
expect_error "data.val_files: null, but data.train_files is set" \
  sft --config examples/sft_arith.yaml data.train_files="$SCRATCH/train.jsonl" data.task=null data.task_kwargs=null
echo "PASS: config_review_defects"

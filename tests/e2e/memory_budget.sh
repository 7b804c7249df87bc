#!/usr/bin/env bash
# Issue #23 acceptance 4: a model and batch that exceed a device budget without activation recompute run within it
# with it, in `rlforge sft` (trainer.device_memory_budget_gb) and in `rlforge train` for the actor
# (resources.device_memory_gb with resources.enforce_device_memory). Without recompute SFT is refused before it
# allocates (the memory estimate names the dimension and the budget) and RL stops at the allocation that would
# exceed the budget, naming it; with full recompute (uniform groups of 1) both finish and their device peaks stay
# below the budget. docs/parallel.md quotes the commands.
source "$(dirname "$0")/common.sh"
# peak_mib <log>: the device tier's peak the run's closing memory line reports, in MiB.
peak_mib() {
  sed -nE 's/^memory device: [0-9.]+ [KMG]iB \(peak ([0-9.]+) (KiB|MiB|GiB)\).*/\1 \2/p' "$1" |
    awk '{ v = $1; if ($2 == "KiB") v /= 1024; if ($2 == "GiB") v *= 1024; print v }'
}
# below <log> <MiB> <what>: the run's device peak is below the budget.
below() {
  local peak; peak=$(peak_mib "$1")
  [[ -n $peak ]] || fail "$3: no memory line in $(tail -3 "$1")"
  awk -v p="$peak" -v b="$2" 'BEGIN { exit !(p < b) }' || fail "$3: device peak $peak MiB is not below $2 MiB"
  echo "ok: $3 within the budget: device peak $peak MiB < $2 MiB"
}
# exceeds <what> <expected message (a grep pattern)> <rlforge args...>: the run fails with that message.
exceeds() {
  local what=$1 expected=$2; shift 2
  if "$RLFORGE" "$@" > "$SCRATCH/exceeds.log" 2>&1; then fail "$what ran within the budget"; fi
  grep -q "$expected" "$SCRATCH/exceeds.log" || fail "$what: expected '$expected', got $(tail -2 "$SCRATCH/exceeds.log")"
  echo "ok: $what stopped: $(grep -o "$expected" "$SCRATCH/exceeds.log")"
}
recompute=(recompute_granularity=full recompute_method=uniform recompute_num_layers=1)

# SFT: 4 layers, micro-batches of 128 x 32 tokens, a 128 MiB device budget.
sft=(sft --config examples/sft_arith.yaml model.config.num_hidden_layers=4 data.micro_batch_size_per_gpu=128
     data.max_length=32 trainer.total_training_steps=2 trainer.test_freq=2 trainer.save_freq=2 optim.lr_warmup_steps=1
     trainer.device_memory_budget_gb=0.125)
exceeds "SFT without recompute" "needs at least .* more than the 128.0 MiB of the memory tracker's device budget" \
  "${sft[@]}" trainer.default_local_dir="$SCRATCH/sft_plain"
quiet "$RLFORGE" "${sft[@]}" "${recompute[@]/#/megatron.}" trainer.default_local_dir="$SCRATCH/sft"
below "$SCRATCH/last.log" 128 "SFT with full recompute"

# RL: GRPO from that SFT export, the actor's micro-batches of 128 responses, a 0.19 GiB (194.6 MiB) device budget
# for every role of the process.
rl=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_2/huggingface"
    data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 trainer.total_training_steps=1
    trainer.test_freq=0 trainer.save_freq=0 trainer.val_before_train=false trainer.time_budget_s=null
    actor_rollout_ref.actor.optim.lr_warmup_steps=0 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=128
    resources.device_memory_gb=0.19 resources.enforce_device_memory=true)
exceeds "GRPO without actor recompute" "out of device memory: allocating .* of the 194.6 MiB device budget" \
  "${rl[@]}" trainer.default_local_dir="$SCRATCH/rl_plain"
quiet "$RLFORGE" "${rl[@]}" "${recompute[@]/#/actor_rollout_ref.actor.megatron.}" trainer.default_local_dir="$SCRATCH/rl"
below "$SCRATCH/last.log" 194.6 "GRPO with the actor's full recompute"

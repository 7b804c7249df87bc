#!/usr/bin/env bash
# Issue #9's acceptance 4: a wrong `rlforge train` config fails with one clear message naming the key
# and what was expected, before any work (the run folder is never created), and never hangs. Each case
# is the main job's config (examples/grpo_arith.yaml) with one thing wrong. Then the other side of
# verl's key policy: a verl key rlforge does not implement, at verl's default, is accepted with a
# warning naming it and dropped from the resolved config.
source "$(dirname "$0")/common.sh"

readonly hang_seconds=60
base=(--config examples/grpo_arith.yaml trainer.resume_mode=disable)

# refused <case> <message> <rlforge train args...>: the command fails in time with exactly one error line,
# `rlforge: [rank 0] config error: <message>...` (<message> starts with the key path; under mpirun the
# abort notice follows it), and the run folder was not made.
refused() {
  local name=$1 message=$2; shift 2
  local run_dir="$SCRATCH/$name" status=0 start=$SECONDS
  timeout -k 5 "$hang_seconds" "$RLFORGE" train "${base[@]}" trainer.default_local_dir="$run_dir" "$@" \
    > "$SCRATCH/$name.out" 2> "$SCRATCH/$name.err" || status=$?
  [[ $status != 124 && $status != 137 ]] || fail "$name: hung, killed after $hang_seconds s: $(cat "$SCRATCH/$name.err")"
  [[ $status != 0 ]] || fail "$name: the config was accepted: $(cat "$SCRATCH/$name.err")"
  local errors; errors=$(grep "^rlforge: " "$SCRATCH/$name.err" || true)
  [[ $(grep -c . <<<"$errors") == 1 ]] || fail "$name: expected one error line, got: $(cat "$SCRATCH/$name.err")"
  [[ $errors == "rlforge: [rank 0] config error: $message"* ]] || fail "$name: expected '$message', got '$errors'"
  [[ ! -e $run_dir ]] || fail "$name: the run started before the config was refused ($run_dir exists)"
  echo "ok: $name in $((SECONDS - start)) s: $errors"
}

# An unknown key, in the tree (bind) and on the command line (the override), each with a did-you-mean.
refused unknown_key \
  "actor_rollout_ref.actor.ppo_mini_batch_szie: unknown key; did you mean 'ppo_mini_batch_size'?" \
  +actor_rollout_ref.actor.ppo_mini_batch_szie=32
refused unknown_override "actor_rollout_ref.actor.ppo_mini_batch_szie: no such key to override; did you mean \
'actor_rollout_ref.actor.ppo_mini_batch_size'?" actor_rollout_ref.actor.ppo_mini_batch_szie=32
# An unknown key inside a section only verl has.
refused unknown_key_in_verl_section "critic.checkpoint.async_sav: rlforge does not implement verl's \`critic.checkpoint\`; \
there it accepts only the keys docs/config.md lists, each at verl's default; did you mean 'async_save'?" \
  +critic.checkpoint.async_sav=false
refused bad_estimator "algorithm.adv_estimator: unknown name 'bogus'; known names: gae, grpo" \
  algorithm.adv_estimator=bogus
refused critic_mini_batch "critic.ppo_mini_batch_size: 48 does not divide data.train_batch_size = 64" \
  algorithm.adv_estimator=gae critic.ppo_mini_batch_size=48
refused bad_loss_mode "actor_rollout_ref.actor.policy_loss.loss_mode: unknown name 'clip_cov'" \
  actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov
# The example's train_batch_size is 64.
refused mini_batch_not_dividing "actor_rollout_ref.actor.ppo_mini_batch_size: 48 does not divide \
data.train_batch_size = 64: a step's prompts are cut into whole mini-batches, so expected a divisor of 64" \
  actor_rollout_ref.actor.ppo_mini_batch_size=48
refused mini_batch_larger "actor_rollout_ref.actor.ppo_mini_batch_size: 128 does not divide data.train_batch_size = 64" \
  actor_rollout_ref.actor.ppo_mini_batch_size=128
refused micro_batch_not_dividing "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu: 7 does not divide a \
mini-batch's 128 responses (ppo_mini_batch_size 16 x rollout.n 8)" actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=7
# reversal is a built-in task (its data_source is its name), but no rule scorer rewards it.
refused task_without_scorer "data.task: 'reversal': the built-in task's data_source 'reversal' has no rule scorer" \
  data.task=reversal data.task_kwargs=null
# verl keys rlforge does not implement, at a value other than verl's default.
refused verl_key_rollout_mode "actor_rollout_ref.rollout.mode: verl's key is not implemented by rlforge; only its \
default async is accepted, got sync" actor_rollout_ref.rollout.mode=sync
refused verl_key_dataloader_workers "data.dataloader_num_workers: verl's key is not implemented by rlforge; only \
its default 8 is accepted, got 4" data.dataloader_num_workers=4
# The prompt data: a truncation verl does not have, a key only JSONL rows use beside a built-in task (it
# would change nothing), and a built-in task beside JSONL files.
refused bad_truncation "data.truncation: expected one of error, left, right, middle, got 'top'" data.truncation=top
refused file_key_with_task "data.shuffle: applies to the rows of data.train_files; a built-in task" data.shuffle=false
refused task_and_files "data.task: a built-in task and data.train_files exclude each other" \
  "data.train_files=[$SCRATCH/train.jsonl]"
refused verl_key_critic_load_weight "critic.load_weight: verl's key is not implemented by rlforge; only its default \
true is accepted, got false" critic.load_weight=false
refused vllm_rollout "actor_rollout_ref.rollout.name: 'vllm': expected rlforge (rlforge's own engine; vllm, sglang \
and trtllm are not available here)" actor_rollout_ref.rollout.name=vllm
refused critic_warmup "trainer.critic_warmup: must be >= 0 (the step the actor starts training at), got -1" \
  trainer.critic_warmup=-1
refused wandb_logger "trainer.logger[1]: expected one of console, jsonl, got 'wandb'" "trainer.logger=[console, wandb]"
refused builtin_task_needs_steps "trainer.total_training_steps: required with a built-in task" \
  trainer.total_training_steps=null
# The layout against the world: every role spans all ranks, so each TP size must divide it.
refused rollout_tp_not_dividing_world \
  "actor_rollout_ref.rollout.tensor_model_parallel_size: 2 does not divide the world size 3" \
  --nproc 3 actor_rollout_ref.rollout.tensor_model_parallel_size=2
# Each megatron role's pipeline split against its own model's layers (issue #22 acceptance 5), keyed by the role
# and naming the model, on one process and on two, `--check-config` included: a 4-layer policy and a 3-layer
# critic made by init-model (no download).
for layers in 4 3; do
  quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/model$layers" --seed 1 --vocab 512 --hidden 32 \
    --layers "$layers" --heads 4 --kv-heads 2 --ffn 64 --tie 0
done
policy=(actor_rollout_ref.model.path="$SCRATCH/model4")
for ranks in 1 2; do
  refused actor_noop_np$ranks "actor_rollout_ref.actor.megatron.noop_layers: index 7 out of range [0, 5) (4 layers \
+ 1 noop) in $SCRATCH/model4/config.json" --nproc $ranks "${policy[@]}" 'actor_rollout_ref.actor.megatron.noop_layers=[7]'
done
refused ref_layout_at_pp1 "actor_rollout_ref.ref.megatron.pipeline_model_parallel_layout: 2 virtual stages need \
pipeline_model_parallel_size > 1" "${policy[@]}" 'actor_rollout_ref.ref.megatron.pipeline_model_parallel_layout=Ett|ttL'
refused critic_layers_check_config "critic.megatron.pipeline_model_parallel_size: 2 does not divide the 3 layers \
(noop_layers can pad them) in $SCRATCH/model3/config.json" --nproc 2 --check-config "${policy[@]}" \
  algorithm.adv_estimator=gae critic.model.path="$SCRATCH/model3" critic.megatron.pipeline_model_parallel_size=2
# An update cut by count (ppo_micro_batch_size_per_gpu null: a mini-batch's share in one micro-batch) is one
# micro-batch, and interleaving needs at least PP of them.
refused actor_interleaved_update "actor_rollout_ref.actor.megatron.microbatch_group_size_per_vp_stage: 2 must lie in \
[pipeline_model_parallel_size = 2, num_microbatches = 1]; an update has 1 micro-batches per data-parallel rank" \
  --nproc 2 "${policy[@]}" actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2 \
  actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size=2

# Activation recompute, by Megatron's checks, in verl's override_transformer_config spelling too (issue #23).
refused recompute_without_layers "actor_rollout_ref.actor.megatron.recompute_num_layers: null but \
recompute_granularity is full" +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full \
  +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform
refused recompute_layers_without_full "critic.megatron.recompute_num_layers: is set but recompute_granularity is not \
full" algorithm.adv_estimator=gae critic.megatron.recompute_num_layers=2
refused recompute_selective_with_layers "actor_rollout_ref.actor.megatron.recompute_num_layers: is set but \
recompute_granularity is not full" actor_rollout_ref.actor.megatron.recompute_granularity=selective \
  actor_rollout_ref.actor.megatron.recompute_num_layers=2
refused recompute_moe_act "actor_rollout_ref.actor.megatron.recompute_modules: moe_act: recomputes part of MoE layers" \
  actor_rollout_ref.actor.megatron.recompute_granularity=selective 'actor_rollout_ref.actor.megatron.recompute_modules=[core_attn,moe_act]'
refused recompute_modules_without_selective "actor_rollout_ref.actor.megatron.recompute_modules: is set but \
recompute_granularity is not selective" '+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_modules=[mlp]'
refused offload_with_pp "actor_rollout_ref.actor.megatron.cpu_offloading: true with pipeline_model_parallel_size > 1" \
  actor_rollout_ref.actor.megatron.cpu_offloading=true actor_rollout_ref.actor.megatron.cpu_offloading_num_layers=1 \
  actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2
refused offload_weights "critic.megatron.cpu_offloading_weights: true: offloading the weights during the forward is \
not built" algorithm.adv_estimator=gae critic.megatron.cpu_offloading_weights=true
refused distribute_with_sp "actor_rollout_ref.actor.megatron.distribute_saved_activations: true with sequence_parallel" \
  actor_rollout_ref.actor.megatron.recompute_granularity=full actor_rollout_ref.actor.megatron.recompute_method=uniform \
  actor_rollout_ref.actor.megatron.recompute_num_layers=1 actor_rollout_ref.actor.megatron.sequence_parallel=true \
  actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 actor_rollout_ref.actor.megatron.distribute_saved_activations=true

# A verl config that keeps verl's keys rlforge lacks at their defaults loads: each is named in a warning
# and left out of the resolved config, and `--check-config` exits 0 before any work. Some come in the
# file (verl's sections rlforge has no part of), some as overrides, which reach them as in verl.
cat examples/grpo_arith.yaml - > "$SCRATCH/verl_style.yaml" <<'EOF'
critic:
  nccl_timeout: 600
  checkpoint: {async_save: false}
reward_model: {enable: False, launch_reward_fn_async: false}
ray_kwargs: {ray_init: {num_cpus: ~}}
EOF
"$RLFORGE" train --config "$SCRATCH/verl_style.yaml" --check-config trainer.default_local_dir="$SCRATCH/ok" \
  actor_rollout_ref.rollout.mode=async data.dataloader_num_workers=8.0 +actor_rollout_ref.nccl_timeout=600 \
  "+actor_rollout_ref.actor.checkpoint={save_contents: [model, optimizer, extra], async_save: false}" \
  +actor_rollout_ref.actor._target_=verl.workers.config.McoreActorConfig \
  > "$SCRATCH/resolved.yaml" 2> "$SCRATCH/warnings.log" || fail "verl keys at their defaults were refused: $(cat "$SCRATCH/warnings.log")"
warning=$(grep "warning: verl keys rlforge does not implement, accepted at verl's default" "$SCRATCH/warnings.log") ||
  fail "no warning about the verl keys at their defaults: $(cat "$SCRATCH/warnings.log")"
for key in critic.nccl_timeout critic.checkpoint.async_save reward_model.launch_reward_fn_async ray_kwargs.ray_init.num_cpus \
           actor_rollout_ref.rollout.mode data.dataloader_num_workers actor_rollout_ref.nccl_timeout \
           actor_rollout_ref.actor.checkpoint.save_contents actor_rollout_ref.actor.checkpoint.async_save; do
  [[ $warning == *"$key"* ]] || fail "the warning does not name $key: $warning"
done
grep -q 'Hydra `_target_`' "$SCRATCH/warnings.log" || fail "no warning about the dropped _target_ key"
grep -q "ppo_mini_batch_size: 16" "$SCRATCH/resolved.yaml" ||
  fail "--check-config did not print the resolved config: $(head "$SCRATCH/resolved.yaml")"
if grep -E "dataloader_num_workers|nccl_timeout|checkpoint:|launch_reward_fn_async|^ray_kwargs|_target_|mode: async" \
     "$SCRATCH/resolved.yaml"; then
  fail "a verl key at its default reached the resolved config"
fi
[[ ! -e $SCRATCH/ok ]] || fail "--check-config started the run"
echo "ok: verl keys at their defaults accepted, one warning: ${warning:0:150}..."

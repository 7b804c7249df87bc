#!/usr/bin/env bash
# RL with pipeline parallel against one process (issue #22 acceptance 2), on a 4-layer warm start:
#  GRPO with the actor and the reference at PP 2 on two ranks (the rollout's two replicas are the pipeline's
#  stages, MEGATRON_PP_AS_DP_PROTO, each with the whole weights gathered from both stages),
#  GRPO with the actor at PP 2 x TP 2 on four ranks,
#  PPO with the actor and the critic at PP 2 on two ranks,
# each gives the one-process run: the same responses, scores and validation exactly, and losses, gradient norms,
# entropy, KL, values and returns within 1e-4 relative (f32 sums in another order: same_run.py).
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml model.config.num_hidden_layers=4 trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=150 trainer.test_freq=150 trainer.save_freq=150 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
common=(actor_rollout_ref.model.path="$SCRATCH/sft/global_step_150/huggingface" data.task_kwargs.digits=2
        data.max_response_length=4 data.max_prompt_length=8 data.val_size=50 trainer.total_training_steps=3
        trainer.test_freq=3 trainer.save_freq=-1 trainer.time_budget_s=null actor_rollout_ref.actor.optim.lr_warmup_steps=1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
actor_pp2=(actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2
           actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=2)

grpo=(train --config examples/grpo_arith.yaml "${common[@]}")
quiet timeout 300 "$RLFORGE" "${grpo[@]}" trainer.num_threads=1 trainer.default_local_dir="$SCRATCH/grpo_one"
quiet timeout 300 "$RLFORGE" --nproc 2 "${grpo[@]}" "${actor_pp2[@]}" trainer.default_local_dir="$SCRATCH/grpo_pp2"
grep -q "pp 1: \[2-3, L\]" "$SCRATCH/last.log" || fail "no pipeline split logged"
python3 tests/e2e/same_run.py "$SCRATCH/grpo_one/metrics.jsonl" "$SCRATCH/grpo_pp2/metrics.jsonl" 3 "GRPO actor PP 2" \
  actor/pg_loss actor/grad_norm
quiet timeout 300 "$RLFORGE" --nproc 4 "${grpo[@]}" "${actor_pp2[@]}" actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \
  trainer.default_local_dir="$SCRATCH/grpo_pp2_tp2"
python3 tests/e2e/same_run.py "$SCRATCH/grpo_one/metrics.jsonl" "$SCRATCH/grpo_pp2_tp2/metrics.jsonl" 3 \
  "GRPO actor PP 2 x TP 2" actor/pg_loss actor/grad_norm

ppo=(train --config examples/ppo_arith.yaml "${common[@]}" trainer.critic_warmup=1)
quiet timeout 300 "$RLFORGE" "${ppo[@]}" trainer.num_threads=1 trainer.default_local_dir="$SCRATCH/ppo_one"
quiet timeout 300 "$RLFORGE" --nproc 2 "${ppo[@]}" "${actor_pp2[@]}" critic.megatron.pipeline_model_parallel_size=2 \
  trainer.default_local_dir="$SCRATCH/ppo_pp2"
python3 tests/e2e/same_run.py "$SCRATCH/ppo_one/metrics.jsonl" "$SCRATCH/ppo_pp2/metrics.jsonl" 3 \
  "PPO actor and critic PP 2" critic/vf_loss critic/grad_norm critic/values/mean actor/pg_loss

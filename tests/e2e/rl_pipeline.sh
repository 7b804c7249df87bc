#!/usr/bin/env bash
# RL with pipeline parallel against one process (issue #22 acceptance 2), on a 4-layer warm start:
#  GRPO with the actor and the reference at PP 2 on two ranks (the rollout's two replicas are the pipeline's
#  stages, MEGATRON_PP_AS_DP_PROTO, each with the whole weights gathered from both stages),
#  GRPO with the actor at PP 2 and full activation recompute (verl's override_transformer_config spelling): bit for
#  bit the PP 2 run; in one process with selective recompute (core_attn, layernorm, MindSpeed's activation
#  function): bit for bit the one-process run,
#  GRPO with the actor at PP 2 x TP 2 on four ranks,
#  PPO with the actor and the critic at PP 2 on two ranks,
# each gives the one-process run: the same responses, scores and validation exactly, and losses, gradient norms,
# entropy, KL, values and returns within 1e-4 relative (f32 sums in another order: same_run.py). ROLL's seed shape
# (actor_train at pipeline_model_parallel_size 2 with virtual_pipeline_model_parallel_size 2) loads and runs;
# `--dump-schedule` prints the actor's and the critic's tables; a split that does not fit a role's model is refused
# before any work, naming the role's key.
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
# ... and with the actor recomputing its layers (verl's spelling): bit for bit the run that saves them.
quiet timeout 300 "$RLFORGE" --nproc 2 "${grpo[@]}" "${actor_pp2[@]}" trainer.default_local_dir="$SCRATCH/grpo_pp2_recompute" \
  +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full \
  +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform \
  +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1
grep -q "activation recompute: full, uniform groups of 1 layers" "$SCRATCH/last.log" || fail "no recompute logged"
# same_bits <a.jsonl> <b.jsonl> <what>: the runs' losses, grad norms, scores and entropies are equal bit for bit.
same_bits() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
rows = [[json.loads(line) for line in open(path)] for path in sys.argv[1:3]]
keys = ["actor/pg_loss", "actor/grad_norm", "critic/score/mean", "actor/entropy"]
for a, b in zip(*rows):
    for k in keys:
        assert a.get(k) == b.get(k), f"step {a['step']} {k}: {a.get(k)} != {b.get(k)} with recompute"
print(f"ok: {sys.argv[3]} = without, bit for bit ({len(rows[0])} rows)")
PY
}
same_bits "$SCRATCH/grpo_pp2/metrics.jsonl" "$SCRATCH/grpo_pp2_recompute/metrics.jsonl" "GRPO actor PP 2 with full recompute"
quiet timeout 300 "$RLFORGE" "${grpo[@]}" trainer.num_threads=1 trainer.default_local_dir="$SCRATCH/grpo_selective" \
  +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=selective \
  '+actor_rollout_ref.actor.megatron.override_transformer_config.recompute_modules=[core_attn,layernorm]' \
  +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_activation_function=true
grep -q "activation recompute: selective: core_attn, layernorm, activation" "$SCRATCH/last.log" || fail "no selective recompute logged"
same_bits "$SCRATCH/grpo_one/metrics.jsonl" "$SCRATCH/grpo_selective/metrics.jsonl" "GRPO with selective recompute"
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
# refused <message> <train args...>: two ranks fail with one error line, before any work.
refused() {
  local message=$1; shift
  if timeout 120 "$RLFORGE" --nproc 2 "$@" trainer.default_local_dir="$SCRATCH/refused" > "$SCRATCH/refused.log" 2>&1
  then fail "accepted: $*"; fi
  [[ $(grep -c "^rlforge: " "$SCRATCH/refused.log") == 1 ]] || fail "expected one error line: $(cat "$SCRATCH/refused.log")"
  grep -qF "rlforge: [rank 0] config error: $message" "$SCRATCH/refused.log" || fail "expected '$message': $(cat "$SCRATCH/refused.log")"
  echo "ok: refused: $message"
}
refused "actor_rollout_ref.actor.megatron.noop_layers: index 7 out of range [0, 5) (4 layers + 1 noop)" \
  "${ppo[@]}" "${actor_pp2[@]}" 'actor_rollout_ref.actor.megatron.noop_layers=[7]'
refused "critic.megatron.pipeline_model_parallel_layout: 3 virtual stages do not divide over pipeline_model_parallel_size = 2" \
  "${ppo[@]}" critic.megatron.pipeline_model_parallel_size=2 'critic.megatron.pipeline_model_parallel_layout=E|tttt|L'
[[ ! -e $SCRATCH/refused ]] || fail "a refused run left a run folder"

# ROLL's seed example shape: PP 2 x VPP 2 for actor_train, every role on both ranks. Interleaving needs at least
# PP micro-batches per pass (Megatron's rule): 2 of 64 responses per optimizer step and per old-log-prob forward.
sed -e 's|^pretrain: .*|pretrain: '"$SCRATCH/sft/global_step_150/huggingface"'|' \
    -e 's|list(range(0,1))|list(range(0,2))|' \
    -e 's|per_device_train_batch_size: 128|per_device_train_batch_size: 64|' \
    -e 's|gradient_accumulation_steps: 1|gradient_accumulation_steps: 2|' \
    -e 's|infer_batch_size: 128|infer_batch_size: 64|' \
    -e 's|      tensor_model_parallel_size: 1$|      tensor_model_parallel_size: 1\n      pipeline_model_parallel_size: 2\n      virtual_pipeline_model_parallel_size: 2|' \
    examples/roll_grpo_arith.yaml > "$SCRATCH/roll_pp.yaml"
grep -q "virtual_pipeline_model_parallel_size: 2" "$SCRATCH/roll_pp.yaml" || fail "the ROLL config was not rewritten"
quiet timeout 300 "$RLFORGE" --nproc 2 train --config "$SCRATCH/roll_pp.yaml" data.task_kwargs.digits=2 \
  trainer.total_training_steps=2 trainer.test_freq=2 trainer.save_freq=-1 trainer.time_budget_s=null \
  actor_rollout_ref.actor.optim.lr_warmup_steps=1 data.val_size=16 trainer.default_local_dir="$SCRATCH/roll_pp"
grep -q "pp 1: \[1\] \[3, L\]" "$SCRATCH/last.log" || fail "ROLL's PP 2 x VPP 2 split was not used"
[[ $(python3 -c "import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)['step'] > 0))" \
     "$SCRATCH/roll_pp/metrics.jsonl") == 2 ]] || fail "the ROLL PP 2 x VPP 2 run did not log 2 steps"
echo "ok: ROLL's pipeline_model_parallel_size 2 x virtual_pipeline_model_parallel_size 2 runs"

quiet "$RLFORGE" "${ppo[@]}" "${actor_pp2[@]}" critic.megatron.pipeline_model_parallel_size=4 --dump-schedule 4
grep -q "^critic (critic.megatron):" "$SCRATCH/last.log" || fail "--dump-schedule printed no critic table"
grep -qF "   0 | ag0 F0.0 >a0.0   | ag0 <a0.0" "$SCRATCH/last.log" || fail "--dump-schedule: not the 1F1B table"
echo "ok: --dump-schedule"

#!/usr/bin/env bash
# ROLL's MoE seed (issue #25 acceptance 5): a ROLL config with the seed's Megatron MoE settings,
# expert_model_parallel_size 4, moe_token_dispatcher_type alltoall, moe_grouped_gemm true and moe_layer_recompute
# true, translated into verl's keys and run: 2 GRPO steps of a tiny Qwen3-MoE from `init-model --arch qwen3_moe` on
# four ranks (the actor's 8 experts, 2 per EP rank). The translation is checked key by key, and the same config at
# one rank (EP 1) gives the same scores, and the same losses within f32 reduction order.
source "$(dirname "$0")/common.sh"
quiet "$RLFORGE" init-model --arch qwen3_moe --out "$SCRATCH/moe" --seed 5 --hidden 32 --layers 2 --heads 4 \
  --kv-heads 2 --ffn 64 --experts 8 --top-k 2 --moe-ffn 32 --norm-topk-prob 1

# ROLL's batch sizes are per device: at one rank 4 x 4 responses make the 4 ranks' optimizer step.
write_config() {  # $1: file, $2: the actor's and the reference's EP size, $3: ranks, $4: responses per device
  cat > "$1" <<EOF
exp_name: roll_moe_seed
seed: 42
output_dir: $SCRATCH/run_ep$2
track_with: stdout
max_steps: 2
save_steps: 100
eval_steps: 100
rollout_batch_size: 8
num_return_sequences_in_group: 4
prompt_length: 16
response_length: 6
pretrain: $SCRATCH/moe
adv_estimator: grpo
entropy_loss_coef: 0.01
actor_train:
  model_args: {dtype: fp32}
  training_args: {learning_rate: 1.0e-3, per_device_train_batch_size: $4}
  strategy_args:
    strategy_name: megatron_train
    strategy_config:
      tensor_model_parallel_size: 1
      expert_model_parallel_size: $2
      moe_token_dispatcher_type: alltoall
      moe_grouped_gemm: true
      moe_layer_recompute: true
  device_mapping: list(range(0,$3))
  infer_batch_size: 4
actor_infer:
  model_args: {dtype: fp32}
  generating_args: {max_new_tokens: 6, num_return_sequences: 4, temperature: 1.0, top_p: 1.0, top_k: -1,
                    do_sample: true}
  strategy_args:
    strategy_name: rlforge
    strategy_config: {tensor_parallel_size: 1, kv_cache_bytes: 8388608}
  device_mapping: list(range(0,$3))
reference:
  model_args: {dtype: fp32}
  strategy_args:
    strategy_name: megatron_infer
    strategy_config: {tensor_model_parallel_size: 1, expert_model_parallel_size: $2}
  device_mapping: list(range(0,$3))
  infer_batch_size: 4
rewards:
  arith: {tag_included: [arith]}
rlforge:
  data: {task: arith, task_kwargs: {digits: 2}, val_size: 8}
  trainer: {deterministic: true, num_threads: 1}
EOF
}
write_config "$SCRATCH/ep4.yaml" 4 4 4
write_config "$SCRATCH/ep1.yaml" 1 1 16

"$RLFORGE" --nproc 4 train --config "$SCRATCH/ep4.yaml" --check-config > "$SCRATCH/check.txt" 2>&1 \
  || { cat "$SCRATCH/check.txt"; fail "the ROLL MoE seed config does not load"; }
# The resolved verl tree: the actor's and the reference's megatron blocks carry the seed's settings.
[ "$(grep -c "expert_model_parallel_size: 4" "$SCRATCH/check.txt")" -ge 2 ] \
  || { cat "$SCRATCH/check.txt"; fail "the translation lacks the actor's and the reference's EP size"; }
for line in "moe_token_dispatcher_type: alltoall" "moe_grouped_gemm: true" "moe_layer_recompute: true"; do
  grep -q -- "$line" "$SCRATCH/check.txt" || { cat "$SCRATCH/check.txt"; fail "the translation lacks $line"; }
done

quiet timeout 600 "$RLFORGE" --nproc 4 train --config "$SCRATCH/ep4.yaml"
quiet timeout 300 "$RLFORGE" train --config "$SCRATCH/ep1.yaml"
python3 - "$SCRATCH/run_ep4/metrics.jsonl" "$SCRATCH/run_ep1/metrics.jsonl" <<'PY' || fail "EP 4 against one rank"
import json, sys
ep4, ep1 = ([r for r in map(json.loads, open(p)) if r["step"] > 0] for p in sys.argv[1:])
assert len(ep4) == len(ep1) == 2, (len(ep4), len(ep1))
for a, b in zip(ep4, ep1):
    assert a["critic/score/mean"] == b["critic/score/mean"], (a["step"], a["critic/score/mean"], b["critic/score/mean"])
    for key in ("actor/pg_loss", "actor/entropy", "actor/grad_norm"):
        assert abs(a[key] - b[key]) <= 1e-6 + 1e-4 * abs(b[key]), (a["step"], key, a[key], b[key])
    assert a["actor/grad_norm"] > 0, a  # the entropy bonus trains every expert the tokens reach
    assert a["moe/routing_agreement"] == 1.0 and a["moe/dropped_tokens"] == 0, a
print("ok: the ROLL MoE seed runs at EP 4 (alltoall, grouped GEMM, MoE layer recompute) as at one rank")
PY

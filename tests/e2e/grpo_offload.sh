#!/usr/bin/env bash
# Colocation (issue #9, acceptance 3): offloading the idle roles (actor params, grads and optimizer
# state; the reference's params) lowers the device tier's peak as the MemoryTracker reports it, moves
# those bytes to the host tier, and changes no result: the same metrics bit for bit, step by step. Giving
# the idle roles' activation buffers back too (release_activations: the reference's are then not held
# while the actor trains) lowers the peak further, again with the same metrics.
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=100 trainer.test_freq=100 trainer.save_freq=100 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
args=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_100/huggingface"
      data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 data.val_size=50
      trainer.total_training_steps=4 trainer.test_freq=2 trainer.save_freq=0 trainer.time_budget_s=null actor_rollout_ref.actor.optim.lr_warmup_steps=1
      trainer.num_threads=2)
offload=(actor_rollout_ref.actor.megatron.param_offload=true actor_rollout_ref.actor.megatron.grad_offload=true
         actor_rollout_ref.actor.megatron.optimizer_offload=true actor_rollout_ref.ref.megatron.param_offload=true)
quiet "$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/resident"
quiet "$RLFORGE" "${args[@]}" "${offload[@]}" trainer.default_local_dir="$SCRATCH/offloaded"
quiet "$RLFORGE" "${args[@]}" "${offload[@]}" actor_rollout_ref.actor.megatron.release_activations=true \
  actor_rollout_ref.ref.megatron.release_activations=true trainer.default_local_dir="$SCRATCH/released"
python3 - "$SCRATCH/resident/metrics.jsonl" "$SCRATCH/offloaded/metrics.jsonl" "$SCRATCH/released/metrics.jsonl" <<'PY'
import json, sys
def rows(path):
    return [json.loads(line) for line in open(path)]
resident, offloaded, released = rows(sys.argv[1]), rows(sys.argv[2]), rows(sys.argv[3])
strip = lambda r: {k: v for k, v in r.items() if not k.startswith(("timing_s/", "perf/"))}
assert [strip(r) for r in resident] == [strip(r) for r in offloaded], "offload changed a metric"
assert [strip(r) for r in resident] == [strip(r) for r in released], "released activations changed a metric"
peak = lambda rs, key: max(r.get(key, 0) for r in rs)
dev_r, dev_o = peak(resident, "perf/max_memory_device_bytes"), peak(offloaded, "perf/max_memory_device_bytes")
host_o = peak(offloaded, "perf/max_memory_host_bytes")
assert dev_o < dev_r, f"device peak {dev_o} with offload, {dev_r} without"
assert host_o > 0, "nothing reached the host tier"
dev_a = peak(released, "perf/max_memory_device_bytes")
assert dev_a < dev_o, f"device peak {dev_a} with released activations, {dev_o} without"
print(f"PASS: device peak {dev_r} -> {dev_o} bytes with offload (host peak {host_o}) -> {dev_a} with released "
      "activations; metrics identical")
PY

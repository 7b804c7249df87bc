#!/usr/bin/env bash
# `rlforge train --nproc 2` (the actor at DP 2 with its mini-batches split over the ranks, every role
# colocated on both ranks) against one process: the same responses (the draws are keyed, not
# scheduled), the same scores and validation, and losses, gradient norms, entropy and KL within 1e-4
# relative (the DP sum of the gradients adds in another order). The DP shares are balanced by token
# workload (trainer.balance_batch) and still give the one-process run.
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=300 trainer.test_freq=300 trainer.save_freq=300 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
args=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_300/huggingface"
      data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 data.val_size=50
      trainer.total_training_steps=3 trainer.test_freq=3 trainer.save_freq=3 trainer.time_budget_s=null
      actor_rollout_ref.actor.optim.lr_warmup_steps=1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
quiet timeout 300 "$RLFORGE" "${args[@]}" trainer.num_threads=1 trainer.default_local_dir="$SCRATCH/one"
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" trainer.default_local_dir="$SCRATCH/two"
[ -f "$SCRATCH/two/global_step_3/huggingface/model.safetensors" ] || fail "no checkpoint from the two-rank run"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/two/metrics.jsonl" 3 "two ranks"
# trainer.balance_batch (verl's default, on here): each pass's DP shares are balanced by token workload;
# verl's global_seqlen metrics say by how much, over the actor's 2 DP ranks.
python3 - "$SCRATCH/two/metrics.jsonl" <<'PY'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] > 0]
for r in steps:
    low, high = r["global_seqlen/balanced_min"], r["global_seqlen/balanced_max"]
    assert r["global_seqlen/min"] <= low <= high <= r["global_seqlen/max"], r
    assert abs(r["global_seqlen/mean"] - (r["global_seqlen/min"] + r["global_seqlen/max"]) / 2) < 1e-9, r
print("ok: balanced DP shares:", [(r["global_seqlen/max"] - r["global_seqlen/min"],
                                   r["global_seqlen/balanced_max"] - r["global_seqlen/balanced_min"]) for r in steps])
PY
# Context parallel (issue #24): the actor and the reference at CP 2 on the two ranks, every response split over
# both (the ring's p2p attention), the log-probs gathered back: the one-process run, as DP 2 is. The rollout is
# unaffected (CP ranks are replicas of the weights it reads).
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" actor_rollout_ref.actor.megatron.context_parallel_size=2 \
  actor_rollout_ref.ref.megatron.context_parallel_size=2 trainer.save_freq=-1 trainer.default_local_dir="$SCRATCH/cp2"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/cp2/metrics.jsonl" 3 "actor and reference at CP 2"
# use_dynamic_bsz: micro-batches by tokens (ppo_max_token_len_per_gpu 96, about 8 responses each), balanced by
# workload with the same count on both DP ranks (rl/dynamic_micro_batches.h), for the update and the
# forward passes alike; the run is the one-process run still (micro-batching moves only the gradient sum's order).
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" actor_rollout_ref.actor.use_dynamic_bsz=true \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=96 trainer.save_freq=-1 trainer.default_local_dir="$SCRATCH/dynamic"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/dynamic/metrics.jsonl" 3 "two ranks, micro-batches by tokens"
expect_error "actor_rollout_ref.actor.ppo_max_token_len_per_gpu: 8 is below the longest sequence" \
  "${args[@]}" actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8 \
  --check-config
# The actor and the rollout both at TP 2 on the two ranks: the rollout reads the actor's TP shards in place (no
# copy, 0 bytes synced), and the log-probs it samples with are the actor's recomputed ones at every step (the
# shards it reads are the ones the actor trains).
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 trainer.save_freq=-1 trainer.default_local_dir="$SCRATCH/tp2"
grep -q "rollout: reads the actor's weights in place" "$SCRATCH/last.log" \
  || fail "the TP 2 rollout does not read the actor's weights in place"
python3 - "$SCRATCH/tp2/metrics.jsonl" <<'PY'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] > 0]
assert len(steps) == 3, len(steps)
for r in steps:
    assert r["perf/update_weights_bytes"] == 0, r["perf/update_weights_bytes"]
    assert r["rollout/logprob_diff_max"] < 1e-5, (r["step"], r["rollout/logprob_diff_max"])
print("ok: TP 2 rollout on the actor's shards:", [r["rollout/logprob_diff_max"] for r in steps])
PY

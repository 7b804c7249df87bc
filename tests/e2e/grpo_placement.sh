#!/usr/bin/env bash
# Roles on many ranks (issue #10 acceptance 5), against one process at the same seed and step count:
#  1. `--nproc 4`, the actor at TP2 x DP2, the rollout at TP1 (4 replicas, each generating a quarter of the
#     prompts), the reference colocated with the actor: the held-out accuracy after 50 steps (which raise it
#     by 5 points or more) within 5 points of one process's (TP2 changes the actor's f32 sums, so the runs part
#     slowly), and step 1 (before any update) identical in its scores and lengths.
#  2. device_mapping: the actor and reference on ranks {0,1} (DP 2), the rollout on ranks {2,3} (2 replicas):
#     the weights cross from the actor's ranks to the rollout's every step, and the run equals one process
#     (scores, lengths and validation exact; losses within 1e-4 relative, the DP sum's order).
source "$(dirname "$0")/common.sh"
# The main job's warm start (3-digit addition, ~39% held-out), then the main job's GRPO for a few steps.
"$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.default_local_dir="$SCRATCH/sft" \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
warm=$SCRATCH/sft/global_step_$(cat "$SCRATCH/sft/latest_checkpointed_iteration.txt")/huggingface
args=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$warm" data.val_size=300
      trainer.save_freq=-1 trainer.time_budget_s=null)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# 1. TP2 x DP2 actor, TP1 rollout on 4 ranks.
quiet timeout 300 "$RLFORGE" "${args[@]}" trainer.total_training_steps=50 trainer.test_freq=50 trainer.num_threads=1 \
  trainer.default_local_dir="$SCRATCH/one50"
quiet timeout 600 "$RLFORGE" --nproc 4 "${args[@]}" trainer.total_training_steps=50 trainer.test_freq=50 \
  actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 trainer.default_local_dir="$SCRATCH/four"
python3 - "$SCRATCH/one50/metrics.jsonl" "$SCRATCH/four/metrics.jsonl" <<'PY'
import json, sys
one, four = ([json.loads(line) for line in open(p)] for p in sys.argv[1:])
key = "val-core/arith/acc/mean@1"
a, b = ([r[key] for r in rows if key in r] for rows in (one, four))
assert len(a) == len(b) == 2 and a[0] == b[0], f"validations {a} vs {b}"
assert a[-1] >= a[0] + 0.05, f"one process: {a[0]:.3f} -> {a[-1]:.3f}, too little learning for the comparison to mean much"
assert abs(a[-1] - b[-1]) <= 0.05, f"accuracy after 50 steps: one process {a[-1]:.3f}, 4 ranks {b[-1]:.3f}"
s1 = [next(r for r in rows if r["step"] == 1) for rows in (one, four)]
for k in ["critic/score/mean", "response_length/mean"]:
    assert s1[0][k] == s1[1][k], f"step 1 {k}: {s1[0][k]} vs {s1[1][k]}"
print(f"PASS: TP2 x DP2 actor, 4 rollout replicas: accuracy {a[0]:.3f} -> {b[-1]:.3f} (one process {a[-1]:.3f})")
PY

# 2. The rollout on ranks {2,3}, the actor and reference on {0,1}.
quiet timeout 300 "$RLFORGE" "${args[@]}" trainer.total_training_steps=3 trainer.test_freq=3 trainer.num_threads=1 \
  actor_rollout_ref.actor.optim.lr_warmup_steps=1 \
  trainer.default_local_dir="$SCRATCH/one3"
quiet timeout 300 "$RLFORGE" --nproc 4 "${args[@]}" trainer.total_training_steps=3 trainer.test_freq=3 \
  actor_rollout_ref.actor.optim.lr_warmup_steps=1 \
  actor_rollout_ref.actor.device_mapping=[0,1] actor_rollout_ref.rollout.device_mapping="list(range(2,4))" \
  trainer.default_local_dir="$SCRATCH/mapped"
python3 tests/e2e/same_run.py "$SCRATCH/one3/metrics.jsonl" "$SCRATCH/mapped/metrics.jsonl" 3 "actor on {0,1}, rollout on {2,3}"
# The weight sync (weight_sync.h): one process feeds its rollout in place (no bytes moved); mapped, the actor's
# first rank streams the weights in buckets to the rollout's two ranks only, the same bytes to each, every
# step; each sync's checksum changes with the weights.
python3 - "$SCRATCH/one3/metrics.jsonl" "$SCRATCH/mapped/metrics.jsonl" "$warm/model.safetensors" <<'PY'
import json, os, sys
one, mapped = ([r for r in map(json.loads, open(p)) if r["step"] > 0] for p in sys.argv[1:3])
assert all(r["perf/update_weights_bytes"] == 0 for r in one), [r["perf/update_weights_bytes"] for r in one]
sent = [r["perf/update_weights_bytes"] for r in mapped]
weights = os.path.getsize(sys.argv[3])  # f32 safetensors: the weights' bytes and a small header
assert len(set(sent)) == 1 and sent[0] % 2 == 0, f"bytes per step: {sent}"
assert 0.95 * weights < sent[0] / 2 < 1.05 * weights, f"{sent[0] / 2} bytes per rollout rank for {weights} of weights"
checksums = [r["rollout/weights_checksum"] for r in mapped]
assert len(set(checksums)) == len(checksums), f"checksums repeat across updates: {checksums}"
print(f"PASS: weight sync: {sent[0] / 2:.0f} bytes to each rollout rank per step, none in one process")
PY

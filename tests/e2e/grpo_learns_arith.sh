#!/usr/bin/env bash
# The 3-minute variant of the main job: GRPO from an SFT warm start on 3-digit addition must raise
# the held-out greedy accuracy (val-core/arith/acc/mean@1) by >= 10 points. Also checks what every
# RL run must show: verl's metric names, rollout log-probs within 1e-5 of the trainer's every step, the
# plot, the summary, and a checkpoint with an HF folder.
source "$(dirname "$0")/common.sh"
# The main job's warm start (3-digit addition, stopped at its first evaluation above 30%), then the
# main job's GRPO for 150 steps instead of 14 minutes.
"$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.default_local_dir="$SCRATCH/sft" \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
warm=$SCRATCH/sft/global_step_$(cat "$SCRATCH/sft/latest_checkpointed_iteration.txt")/huggingface
"$RLFORGE" train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$warm" \
  trainer.total_training_steps=150 trainer.test_freq=50 trainer.save_freq=150 trainer.time_budget_s=null \
  trainer.default_local_dir="$SCRATCH/grpo" > "$SCRATCH/grpo.log" 2>&1 \
  || { tail -20 "$SCRATCH/grpo.log"; fail "rlforge train failed"; }
tail -4 "$SCRATCH/grpo.log"
grep -q "train done:" "$SCRATCH/grpo.log" || fail "no summary line"
python3 - "$SCRATCH/grpo/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
key = "val-core/arith/acc/mean@1"
val = [(r["step"], r[key]) for r in rows if key in r]
assert val and val[0][0] == 0, f"no validation before training: {val}"
first, last = val[0][1], val[-1][1]
assert last >= first + 0.10, f"held-out accuracy {first:.3f} -> {last:.3f}: less than +10 points"
steps = [r for r in rows if r["step"] > 0]
assert len(steps) == 150, f"{len(steps)} step rows"
for name in ["critic/score/mean", "critic/advantages/mean", "actor/entropy", "actor/pg_loss", "actor/kl_loss",
             "actor/grad_norm", "actor/lr", "response_length/mean", "training/rollout_probs_diff_max",
             "training/rollout_probs_diff_mean", "rollout/logprob_diff_max", "timing_s/gen",
             "timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor", "timing_s/update_weights",
             "perf/throughput", "perf/mfu/actor", "perf/mfu/actor_infer", "perf/mfu/ref", "perf/mfu/rollout",
             "perf/tflops/actor"]:
    missing = [r["step"] for r in steps if name not in r]
    assert not missing, f"{name} missing at steps {missing[:5]}"
# MFU: each stage's model FLOPs over its time, its ranks and the GEMM peak measured at start-up. Quiet,
# the tiny model's passes read 0.3-0.6; CI runs two tests at once, and a peak measured while the other
# test ran reads low (measured: 1.03 at some steps), so the bound only catches a wrong unit or count.
for name in ["perf/mfu/actor", "perf/mfu/actor_infer", "perf/mfu/ref", "perf/mfu/rollout"]:
    bad = [(r["step"], r[name]) for r in steps if not 0.01 < r[name] < 3]
    assert not bad, f"{name} outside (0.01, 3): {bad[:5]}"
# Issue #9 acceptance 3: the main job runs in deterministic mode, where the trainer's forward computes
# the rollout's arithmetic (model/paged_order_attention.h), so the two log-probs of a token differ only by
# the trainer's f32 log-softmax rounding (~5e-7). Without it (flash attention's tiles) they differ by f32
# noise, median 2e-5 and up to 6e-4 on the sharpest policies; a wrong token, position or temperature by 0.1.
worst = max(r["rollout/logprob_diff_max"] for r in steps)
median = sorted(r["rollout/logprob_diff_max"] for r in steps)[len(steps) // 2]
over = [r["step"] for r in steps if r["rollout/logprob_diff_max"] > 1e-5]
assert not over, f"rollout vs trainer log-probs differ by more than 1e-5 at steps {over[:10]} (max {worst})"
print(f"PASS: accuracy {first:.3f} -> {last:.3f}; rollout/trainer log-prob diff median {median:.2e}, max {worst:.2e}")
PY
grep -q "<polyline" "$SCRATCH/grpo/metrics.svg" || fail "no curves in metrics.svg"
[ -f "$SCRATCH/grpo/global_step_150/huggingface/model.safetensors" ] || fail "no HF folder in the checkpoint"

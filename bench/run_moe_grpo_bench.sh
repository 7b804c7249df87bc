#!/usr/bin/env bash
# Issue #25 acceptance 4's learning run: a small Qwen3-MoE (the main job's Qwen3 shape, hidden 128, 2 layers, with
# 8 experts top-2 of FFN 128 in both layers) warm-started by SFT on the 3-digit addition task until its held-out
# greedy accuracy passes 30% (examples/sft_arith3_warm_start.yaml with the MoE fields), then GRPO
# (examples/grpo_arith.yaml) for STEPS steps; prints the held-out accuracy before and after RL. One process.
#   bash bench/run_moe_grpo_bench.sh [STEPS (default 400)]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-400}
rlforge=build/release/apps/rlforge
out=cache/bench/moe_grpo
rm -rf "$out" && mkdir -p "$out"
"$rlforge" sft --config examples/sft_arith3_warm_start.yaml \
  'model.config.architectures=[Qwen3MoeForCausalLM]' +model.config.num_experts=8 +model.config.num_experts_per_tok=2 \
  +model.config.moe_intermediate_size=128 +model.config.norm_topk_prob=true trainer.default_local_dir="$out/sft" \
  > "$out/sft.log" 2>&1
step=$(cat "$out/sft/latest_checkpointed_iteration.txt")
"$rlforge" train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$out/sft/global_step_$step/huggingface" \
  trainer.total_training_steps="$steps" trainer.time_budget_s=null trainer.save_freq=-1 trainer.resume_mode=disable \
  trainer.default_local_dir="$out/grpo" > "$out/grpo.log" 2>&1
python3 - "$out/grpo/metrics.jsonl" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "val-core/arith/acc/mean@1" in r]
first, last = rows[0], rows[-1]
print(f"held-out accuracy: step {first['step']} {100 * first['val-core/arith/acc/mean@1']:.1f}% -> step "
      f"{last['step']} {100 * last['val-core/arith/acc/mean@1']:.1f}%")
steps = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] > 0 and "timing_s/step" in r]
times = sorted(r["timing_s/step"] for r in steps)
print(f"{len(steps)} steps, median {times[len(times) // 2]:.3f} s/step (p10 {times[len(times) // 10]:.3f}, "
      f"p90 {times[9 * len(times) // 10]:.3f})")
PY

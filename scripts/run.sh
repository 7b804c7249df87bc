#!/usr/bin/env bash
# The main job, single process: installs dependencies and builds if needed, then runs GRPO on the
# built-in 3-digit addition task (examples/grpo_arith.yaml) and prints the held-out accuracy as it
# rises. It starts from an SFT warm start, built once (a few minutes, not part of the RL run) into
# cache/warm_start/arith3 by examples/sft_arith3_warm_start.yaml; delete that folder to rebuild it.
# Extra arguments are dotted config overrides of the RL run, e.g.
#   bash scripts/run.sh trainer.total_training_steps=50 actor_rollout_ref.actor.optim.lr=5e-5
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
rlforge=./build/release/apps/rlforge
warm_start=cache/warm_start/arith3
if [[ ! -f $warm_start/config.json ]]; then
  sft_run=cache/warm_start/arith3_sft
  echo "# building the SFT warm start into $warm_start (once)"
  "$rlforge" sft --config examples/sft_arith3_warm_start.yaml
  step=$(cat "$sft_run/latest_checkpointed_iteration.txt")
  rm -rf "$warm_start.tmp"
  cp -r "$sft_run/global_step_$step/huggingface" "$warm_start.tmp"
  mv "$warm_start.tmp" "$warm_start"
fi
exec "$rlforge" train --config examples/grpo_arith.yaml "$@"

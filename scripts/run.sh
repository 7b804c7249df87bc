#!/usr/bin/env bash
# The main job, single process: installs dependencies and builds if needed, then trains on the
# built-in default task (SFT of a small Qwen3-style model on 2-digit addition, from scratch) and
# prints the held-out evaluation. Extra arguments are dotted config overrides, e.g.
#   bash scripts/run.sh trainer.total_training_steps=300 megatron.dtype=bfloat16
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/release/apps/rlforge sft --config examples/sft_arith.yaml "$@"

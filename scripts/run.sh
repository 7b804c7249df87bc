#!/usr/bin/env bash
# The main job, single process: installs dependencies and builds if needed, then trains on the
# built-in default task. Extra arguments go to `rlforge demo` (e.g. --steps 100 --dtype bf16).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/release/apps/rlforge demo "$@"

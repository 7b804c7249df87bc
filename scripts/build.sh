#!/usr/bin/env bash
# Installs dependencies (if missing), configures and builds rlforge (Release) into build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ ! -f build/release/build.ninja ]; then
  cmake --preset release >/dev/null
fi
cmake --build build/release -j "$(nproc)"

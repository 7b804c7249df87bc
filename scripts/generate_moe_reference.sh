#!/usr/bin/env bash
# Regenerates tests/reference/moe/ (the MoE Hugging Face parity data of issue #25) and checks it:
# makes a throwaway venv under cache/ (git-ignored) with pinned torch / transformers from the default
# pip index, runs scripts/generate_moe_reference.py, then its --check. Never run by the build or tests.
# Usage: scripts/generate_moe_reference.sh [--seed N]
#   TORCH_INDEX_URL=<a CPU-only wheel index>  installs torch from there (smaller than the default
#   index's CUDA build, which also runs on CPU and is what produced the committed data).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/cache/moe_ref_venv"
pins=(transformers==4.57.1 safetensors==0.8.0 numpy==2.4.6 huggingface_hub==0.36.2 tokenizers==0.22.2)
torch_pin=torch==2.6.0

if ! "$venv/bin/python" -c "import torch, transformers; assert torch.__version__.split('+')[0] == '2.6.0' \
    and transformers.__version__ == '4.57.1'" 2>/dev/null; then
  python3 -m venv "$venv"
  if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    "$venv/bin/pip" install --index-url "$TORCH_INDEX_URL" "$torch_pin"
  else
    "$venv/bin/pip" install "$torch_pin"
  fi
  "$venv/bin/pip" install "${pins[@]}"
fi
cd "$root"
"$venv/bin/python" scripts/generate_moe_reference.py "$@"
"$venv/bin/python" scripts/generate_moe_reference.py --check

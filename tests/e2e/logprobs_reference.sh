#!/usr/bin/env bash
# `rlforge logprobs` against every Hugging Face reference folder (shared/reference/hf_models/*, found by
# globbing, never listed): --dtype f64 reproduces expected_logprobs.json to 1e-10 and --grads
# reproduces expected_grads.safetensors to 1e-6 relative; --dtype f32 reproduces the log-probs to 1e-4.
# Usage: logprobs_reference.sh <rlforge> <repo> <reference dir>
source "$(dirname "$0")/common.sh"
REFERENCE="$3"
COMPARE="$REPO/tests/e2e/compare_outputs.py"

folders=()
for config in "$REFERENCE"/hf_models/*/config.json; do
  [ -f "$config" ] && folders+=("$(dirname "$config")")
done
[ "${#folders[@]}" -gt 0 ] || fail "no reference folders under $REFERENCE/hf_models"

for dir in "${folders[@]}"; do
  name=$(basename "$dir")
  [ -f "$dir/expected_logprobs.json" ] || fail "$dir has no expected_logprobs.json"
  # The input: the reference's own token sequences.
  python3 -c "
import json, sys
e = json.load(open(sys.argv[1]))
json.dump({'sequences': [s['tokens'] for s in e['sequences']]}, open(sys.argv[2], 'w'))" \
    "$dir/expected_logprobs.json" "$SCRATCH/$name.in.json"

  "$RLFORGE" logprobs --model "$dir" --input "$SCRATCH/$name.in.json" --out "$SCRATCH/$name.f64.json" \
    --dtype f64 --grads "$SCRATCH/$name.grads.safetensors" > /dev/null || fail "$name: logprobs --dtype f64 failed"
  python3 "$COMPARE" logprobs "$SCRATCH/$name.f64.json" "$dir/expected_logprobs.json" 1e-10 || fail "$name: f64 log-probs"
  python3 "$COMPARE" grads "$SCRATCH/$name.grads.safetensors" "$dir/expected_grads.safetensors" 1e-6 \
    || fail "$name: gradients"

  "$RLFORGE" logprobs --model "$dir" --input "$SCRATCH/$name.in.json" --out "$SCRATCH/$name.f32.json" \
    --dtype f32 > /dev/null || fail "$name: logprobs --dtype f32 failed"
  python3 "$COMPARE" logprobs "$SCRATCH/$name.f32.json" "$dir/expected_logprobs.json" 1e-4 || fail "$name: f32 log-probs"

  # Packing must not change anything: one sequence per forward gives the same f64 numbers.
  "$RLFORGE" logprobs --model "$dir" --input "$SCRATCH/$name.in.json" --out "$SCRATCH/$name.split.json" \
    --dtype f64 --max-tokens 1 > /dev/null || fail "$name: logprobs --max-tokens 1 failed"
  python3 "$COMPARE" logprobs "$SCRATCH/$name.split.json" "$dir/expected_logprobs.json" 1e-10 || fail "$name: unpacked"
done
echo "PASS: logprobs matches the reference in f64 (1e-10, grads 1e-6 relative) and f32 (1e-4) for ${#folders[@]} folders"

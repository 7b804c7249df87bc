#!/usr/bin/env bash
# Rollout throughput (issue #7, acceptance 5), ours (rollout_bench: RolloutEngine) against PyTorch
# (torch_rollout.py: the same model and workload in plain torch, static batching, a preallocated KV
# cache, GQA without repeat), in f32 and bf16, one after the other in one run. The workload: Foundation
# III's large model (hidden 512, 8 layers, 8 heads / 4 kv, ffn 1408, vocab 8192, random weights), 64
# prompts of 64 tokens x n = 8, temperature 1, ignore_eos, per-request max_tokens from [16, 256], the
# same LCG draws on both sides. Both run on 2 threads with OPENBLAS_CORETYPE as the environment sets it
# (Haswell when unset, as CI sets it).
#   usage: bench/run_rollout_bench.sh [BUILD_DIR]   (default build/release; build first:
#          ninja -C BUILD_DIR rollout_bench)
#   env:   VARIANTS (default: every rollout_bench variant), QUIET_WAIT_S (default 600: how long each
#          case may wait for a quiet machine)
# PyTorch runs a second time with OPENBLAS_CORETYPE unset (RESULT torch_rollout/<dtype>/coretype=native):
# Debian's torch does its f32 GEMMs on OpenBLAS, whose native kernels here are AVX-512 ones.
# Output: every RESULT line of both programs, then per dtype
#   RATIO rollout/<dtype> continuous_vs_torch=.. (target f32 2, bf16 3)
#     continuous_vs_torch_native_openblas=.. static_vs_torch=..
#     continuous_vs_static=.. seats128_continuous_vs_static=.. seats32_continuous_vs_static=..
#     continuous_vs_padded_static=.. seats128_/seats32_continuous_vs_padded_static=.. (target 1.3: against
#     static batching as PyTorch runs it, finished rows computed) prefix_sharing_on_vs_off=..
# and the load before and after each program (a 2-thread OpenMP run sharing a core with another
# process slows down several-fold: each program waits for a quiet machine first). The headline pair
# (continuous and PyTorch) runs a second round; when either side's two rounds differ by more than
# MAX_SPREAD (default 0.10, relative to the slower) the machine was busy, and the line reads
# `REFUSED rollout/<dtype> continuous_vs_torch: rounds differ by ...` instead of quoting that ratio.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${BUILD_DIR:-$repo/build/release}}
ours_bin=$build/bench/rollout_bench
torch_script=$repo/bench/torch_rollout.py
python=/usr/bin/python3
variants=${VARIANTS:-continuous,static,padded_static,no_prefix_sharing,continuous_seats128,static_seats128,padded_static_seats128,continuous_seats32,static_seats32,padded_static_seats32}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}

if [[ ! -x $ours_bin ]]; then
  echo "run_rollout_bench: $ours_bin not found; build it: ninja -C $build rollout_bench" >&2
  exit 1
fi
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "# installing python3-torch (the PyTorch baseline)"
  apt-get install -y python3-torch >/dev/null
fi

source "$(dirname "$0")/quiet_machine.sh"

# tok_s of the RESULT line named $2 in $1 ("" when absent).
tok_s() {
  grep -m1 "^RESULT $2 " <<<"$1" | tr ' ' '\n' | sed -n 's/^tok_s=//p'
}

# |a - b| / min(a, b) of two rounds' tok/s ("n/a" when one is missing).
spread() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == 0 || b == 0) print "n/a";
    else printf "%.3f", (a > b ? a - b : b - a) / (a < b ? a : b) }'
}

ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.3f", a / b }'
}

# Runs "$@" after waiting for a quiet machine; its output with the load before and after.
run_quiet() {
  wait_for_quiet_machine
  echo "# load before: $(cut -d' ' -f1-4 /proc/loadavg)" >&2
  "$@"
  echo "# load after: $(cut -d' ' -f1-4 /proc/loadavg)" >&2
}

echo "# OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, $(nproc) cores, variants $variants"
for dtype in f32 bf16; do
  ours=$(run_quiet "$ours_bin" --dtype "$dtype" --variants "$variants" --threads 2)
  echo "$ours"
  # PyTorch may fail (1.13 has no bf16 matmul below AVX-512): its error is printed and no ratio is quoted.
  theirs=$(run_quiet "$python" "$torch_script" --dtype "$dtype" --threads 2 2>&1 | grep -v Warning) || true
  echo "$theirs"
  # Debian's torch runs its f32 GEMMs on OpenBLAS: again with OpenBLAS's native (AVX-512) kernels.
  native=$(run_quiet env -u OPENBLAS_CORETYPE "$python" "$torch_script" --dtype "$dtype" \
             --threads 2 2>&1 | grep -v Warning | sed "s|^RESULT torch_rollout/$dtype |RESULT torch_rollout/$dtype/coretype=native |") || true
  echo "$native"
  torch=$(tok_s "$theirs" "torch_rollout/$dtype")
  torch_native=$(tok_s "$native" "torch_rollout/$dtype/coretype=native")
  continuous=$(tok_s "$ours" "rollout/$dtype/continuous")
  ours2=$(run_quiet "$ours_bin" --dtype "$dtype" --variants continuous --threads 2)
  theirs2=$(run_quiet "$python" "$torch_script" --dtype "$dtype" --threads 2 2>&1 | grep -v Warning) || true
  ours_spread=$(spread "$continuous" "$(tok_s "$ours2" "rollout/$dtype/continuous")")
  torch_spread=$(spread "$torch" "$(tok_s "$theirs2" "torch_rollout/$dtype")")
  echo "# rollout/$dtype: rounds differ by ours=$ours_spread torch=$torch_spread"
  if awk -v a="$ours_spread" -v b="$torch_spread" -v m="${MAX_SPREAD:-0.10}" 'BEGIN { exit !(a == "n/a" || b == "n/a" || a > m || b > m) }'; then
    echo "REFUSED rollout/$dtype continuous_vs_torch: rounds differ by ours=$ours_spread torch=$torch_spread"
    torch=""  # no ratio against a disturbed baseline
  fi
  static=$(tok_s "$ours" "rollout/$dtype/static")
  echo "RATIO rollout/$dtype continuous_vs_torch=$(ratio "$continuous" "$torch")" \
    "continuous_vs_torch_native_openblas=$(ratio "$continuous" "$torch_native")" \
    "static_vs_torch=$(ratio "$static" "$torch")" \
    "continuous_vs_static=$(ratio "$continuous" "$static")" \
    "seats128_continuous_vs_static=$(ratio "$(tok_s "$ours" "rollout/$dtype/continuous_seats128")" \
                                          "$(tok_s "$ours" "rollout/$dtype/static_seats128")")" \
    "seats32_continuous_vs_static=$(ratio "$(tok_s "$ours" "rollout/$dtype/continuous_seats32")" \
                                         "$(tok_s "$ours" "rollout/$dtype/static_seats32")")" \
    "continuous_vs_padded_static=$(ratio "$continuous" "$(tok_s "$ours" "rollout/$dtype/padded_static")")" \
    "seats128_continuous_vs_padded_static=$(ratio "$(tok_s "$ours" "rollout/$dtype/continuous_seats128")" \
                                                 "$(tok_s "$ours" "rollout/$dtype/padded_static_seats128")")" \
    "seats32_continuous_vs_padded_static=$(ratio "$(tok_s "$ours" "rollout/$dtype/continuous_seats32")" \
                                                "$(tok_s "$ours" "rollout/$dtype/padded_static_seats32")")" \
    "prefix_sharing_on_vs_off=$(ratio "$continuous" "$(tok_s "$ours" "rollout/$dtype/no_prefix_sharing")")"
done

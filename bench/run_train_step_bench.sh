#!/usr/bin/env bash
# Training-step throughput, ours (train_step_bench: TrainEngine as `rlforge sft` runs it) against
# PyTorch (torch_train_step.py: the same Llama-style model, loss, clipping and AdamW in plain torch),
# in the same environment, one after the other. Cases: large (hidden 512, 8 layers, 8 heads / 4 kv,
# ffn 1408, vocab 8192, 8 x 256 tokens) in f32 and bf16, tiny (hidden 128, 2 layers, 4 heads / 2 kv,
# ffn 352, vocab 512, 16 x 64 tokens) in f32. Every case runs twice: with OPENBLAS_CORETYPE as the
# environment sets it (Haswell, as CI sets it, when unset) and with it unset (OpenBLAS picks the
# native kernels). Ours runs on 2 threads; the PyTorch baseline is the better of 1 and 2 threads.
#   usage: bench/run_train_step_bench.sh          (build first: ninja -C build/release train_step_bench)
#   env:   BUILD_DIR (default build/release), LARGE_STEPS (default 5), TINY_STEPS (default 10),
#          QUIET_WAIT_S (default 600: how long each case may wait for a quiet machine), MAX_SPREAD,
#          CORETYPES (default "<OPENBLAS_CORETYPE or Haswell> native": the OpenBLAS settings to run)
# Output, per case and OPENBLAS_CORETYPE setting:
#   RESULT train_step/<config>/<dtype>/coretype=<c> ours=<tok/s> baseline=<tok/s> ratio=<ours/baseline>
#   MFU train_step/<config>/<dtype>/coretype=<c> ours=<mfu> baseline=<mfu> peak_gflops=<p>
#   BASELINE train_step/<config>/<dtype>/coretype=<c> threads1=<tok/s> threads2=<tok/s> attention=<kind>
# and, last, attention alone (attention_bench: the fused kernel against `ref` and as % of the GEMM
# peak, f32 and bf16, forward and backward, one document per row and packed rows; it calls no BLAS,
# so it runs once):
#   RESULT attention <fwd|bwd> <dtype> <packed|unpacked> ... fused_ms=.. ref_ms=.. ratio_vs_ref=.. %gemm_peak=..
# Before each case the script waits (up to QUIET_WAIT_S) until the 1-minute load is below 1.5 and
# nothing else is runnable for 3 s, and prints the load it started at: a 2-thread OpenMP run sharing
# a core with another process slows down several-fold, which would make the ratio meaningless. After
# it, a case whose timed steps spread by more than MAX_SPREAD (default 0.15: (slowest - fastest) /
# median, ours or PyTorch's at the thread count quoted) was disturbed: it is run again, up to 3 times,
# and then reported as `REFUSED <case> spread ...` with no ratio.
# The environment picks the CPU the run sees: RLFORGE_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 (with
# OPENBLAS_CORETYPE=Haswell) measures what an AVX2-only CPU would run.
# MFU for both uses the FLOPs per token and the f32 GEMM peak (best of OpenBLAS and oneDNN, 2048^3)
# that our binary measures in the same environment. PyTorch is Debian's python3-torch, importable
# from /usr/bin/python3 only; it is installed here when missing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build/release}
ours_bin=$build/bench/train_step_bench
attention_bin=$build/bench/attention_bench
torch_script=$repo/bench/torch_train_step.py
python=/usr/bin/python3
large_steps=${LARGE_STEPS:-5}
tiny_steps=${TINY_STEPS:-10}
env_coretype=${OPENBLAS_CORETYPE:-Haswell}

for bin in "$ours_bin" "$attention_bin"; do
  if [[ ! -x $bin ]]; then
    echo "run_train_step_bench: $bin not found; build it: ninja -C $build train_step_bench attention_bench" >&2
    exit 1
  fi
done
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "# installing python3-torch (the PyTorch baseline)"
  apt-get install -y python3-torch >/dev/null
fi

# The value of `key=` on the first line of $1 that starts with $2.
field() {
  grep -m1 "^$2" <<<"$1" | tr ' ' '\n' | sed -n "s/^$3=//p"
}

source "$(dirname "$0")/quiet_machine.sh"

max_spread=${MAX_SPREAD:-0.15}

run_case() {
  local attempt
  for attempt in 1 2 3; do
    run_case_once "$@" && return 0
    echo "# $4 $1 $2: attempt $attempt disturbed (step spread above $max_spread)"
  done
  echo "REFUSED train_step/$1/$2/coretype=$4 spread above $max_spread in 3 attempts: no ratio quoted"
}

# Runs one case; returns 1 (printing no RESULT) when either side's steps spread too widely.
run_case_once() {
  local config=$1 dtype=$2 steps=$3 coretype=$4
  local name=train_step/$config/$dtype/coretype=$coretype
  local ours theirs
  wait_for_quiet_machine
  echo "# $name: load $(cut -d' ' -f1-4 /proc/loadavg)"
  if [[ $coretype == native ]]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE=$coretype; fi
  ours=$("$ours_bin" --config "$config" --dtype "$dtype" --steps "$steps" --threads 2)
  theirs=$("$python" "$torch_script" --config "$config" --dtype "$dtype" --steps "$steps" --threads 1,2)
  echo "# $name: load after $(cut -d' ' -f1-4 /proc/loadavg)"
  echo "$ours" | sed "s|^|# [$name] ours: |"
  echo "$theirs" | sed "s|^|# [$name] torch: |"

  local ours_tok t1 t2 best flops peak attention
  ours_tok=$(field "$ours" train_step tok_s)
  flops=$(field "$ours" train_step flops_per_token)
  peak=$(field "$ours" train_step peak_gflops)
  t1=$(field "$theirs" "torch_train_step .* threads=1 " tok_s)
  t2=$(field "$theirs" "torch_train_step .* threads=2 " tok_s)
  attention=$(field "$theirs" torch_train_step attention)
  best=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print (a > b ? a : b) }')
  local ours_spread their_spread
  ours_spread=$(field "$ours" train_step spread)
  if awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(a > b) }'; then
    their_spread=$(field "$theirs" "torch_train_step .* threads=1 " spread)
  else
    their_spread=$(field "$theirs" "torch_train_step .* threads=2 " spread)
  fi
  echo "# $name: spread ours=$ours_spread torch=$their_spread"
  if awk -v a="$ours_spread" -v b="$their_spread" -v m="$max_spread" 'BEGIN { exit !(a > m || b > m) }'; then
    return 1
  fi
  if [[ -z $t1 && -z $t2 ]]; then  # PyTorch failed (1.13 has no bf16 matmul below AVX-512): no ratio
    echo "RESULT $name ours=$ours_tok baseline=none (PyTorch failed; its error is above)"
    return 0
  fi
  awk -v n="$name" -v o="$ours_tok" -v b="$best" -v f="$flops" -v p="$peak" 'BEGIN {
    printf "RESULT %s ours=%.1f baseline=%.1f ratio=%.3f\n", n, o, b, o / b
    printf "MFU %s ours=%.4f baseline=%.4f peak_gflops=%.1f\n", n, o * f / (p * 1e9), b * f / (p * 1e9), p
  }'
  echo "BASELINE $name threads1=$t1 threads2=$t2 attention=$attention"
}

for coretype in ${CORETYPES:-$env_coretype native}; do
  run_case large f32 "$large_steps" "$coretype"
  run_case large bf16 "$large_steps" "$coretype"
  run_case tiny f32 "$tiny_steps" "$coretype"
done

wait_for_quiet_machine
echo "# attention: load $(cut -d' ' -f1-4 /proc/loadavg)"
OMP_NUM_THREADS=2 "$attention_bin" | grep '^RESULT attention'

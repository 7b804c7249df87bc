#!/usr/bin/env bash
# Training throughput on several ranks at the same global batch (parallel_train_step_bench: TrainEngine,
# f32, the large config: hidden 512, 8 layers, 8 heads / 4 kv, ffn 1408, vocab 8192, 8 x 256 tokens),
# one case after the other on this machine's cores:
#   one rank x 2 threads                        (the baseline)
#   DP2 x 1 thread, overlapped bucket reduction  (mpirun -np 2)
#   DP2 x 1 thread, overlap + distributed optimizer
#   DP2 x 1 thread, one bucket after the backward
#   TP2 x 1 thread
# then, at 8 micro-batches of 1 x 256 tokens (what a pipeline needs to fill), against one rank at the same:
#   one rank x 2 threads                        (the pipeline cases' baseline)
#   PP2 x 1 thread (1F1B: bubble (P-1)/M = 1/8 on paper)
#   PP2 x VPP2 x 1 thread (interleaved: 1/16 on paper)
#   usage: bench/run_parallel_train_step_bench.sh   (build first: ninja -C build/release parallel_train_step_bench)
#   env:   BUILD_DIR (default build/release), STEPS (default 5), CONFIG (default large),
#          QUIET_WAIT_S (default 600: how long each case may wait for a quiet machine)
# Output, per case: the benchmark's lines prefixed `# [<case>]`, then
#   RESULT parallel_train_step/<case> tok_s=<r> ratio_vs_one_rank=<r> exposed_comm_pct=<p> step_ms=<m>
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build/release}
bin=$build/bench/parallel_train_step_bench
steps=${STEPS:-5}
config=${CONFIG:-large}
if [[ ! -x $bin ]]; then
  echo "run_parallel_train_step_bench: $bin not found; build it: ninja -C $build parallel_train_step_bench" >&2
  exit 1
fi
mpirun_flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
if [[ $(id -u) == 0 ]]; then mpirun_flags+=(--allow-run-as-root); fi

# The value of `key=` on the summary line of $1.
field() {
  grep -m1 '^parallel_train_step ' <<<"$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

source "$(dirname "$0")/quiet_machine.sh"

baseline=""
run_case() {
  local name=$1
  shift
  wait_for_quiet_machine
  echo "# $name: load $(cut -d' ' -f1-4 /proc/loadavg)"
  local out
  out=$("$@" --config "$config" --steps "$steps")
  echo "$out" | sed "s|^|# [$name] |"
  local tok_s
  tok_s=$(field "$out" tok_s)
  if [[ -z $baseline ]]; then baseline=$tok_s; fi
  awk -v n="$name" -v t="$tok_s" -v b="$baseline" -v e="$(field "$out" exposed_pct)" -v s="$(field "$out" step_ms)" \
    'BEGIN { printf "RESULT parallel_train_step/%s tok_s=%.1f ratio_vs_one_rank=%.3f exposed_comm_pct=%.2f step_ms=%.1f\n", n, t, t / b, e, s }'
}

OMP_NUM_THREADS=2 run_case one_rank_x2threads "$bin" --threads 2
run_case dp2_x1thread_overlap mpirun "${mpirun_flags[@]}" -np 2 "$bin" --threads 1 --overlap 1
run_case dp2_x1thread_overlap_distopt mpirun "${mpirun_flags[@]}" -np 2 "$bin" --threads 1 --overlap 1 \
  --distributed-optimizer 1
run_case dp2_x1thread_no_overlap mpirun "${mpirun_flags[@]}" -np 2 "$bin" --threads 1 --overlap 0
run_case tp2_x1thread mpirun "${mpirun_flags[@]}" -np 2 "$bin" --threads 1 --tp 2
baseline=""
OMP_NUM_THREADS=2 run_case one_rank_x2threads_mb8 "$bin" --threads 2 --micro-batches 8
run_case pp2_x1thread_mb8 mpirun "${mpirun_flags[@]}" -np 2 "$bin" --threads 1 --pp 2 --micro-batches 8
run_case pp2_vpp2_x1thread_mb8 mpirun "${mpirun_flags[@]}" -np 2 "$bin" --threads 1 --pp 2 --vpp 2 --micro-batches 8

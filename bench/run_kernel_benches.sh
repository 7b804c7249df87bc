#!/usr/bin/env bash
# Runs kernel_bench and gemm_bench with OPENBLAS_CORETYPE unset (OpenBLAS picks its native kernels,
# Cooperlake/AVX-512 on this CPU) and with OPENBLAS_CORETYPE=Haswell (its AVX2 kernels), ROUNDS times,
# interleaved, and prints the markdown tables of docs/performance.md (medians over the rounds).
#   usage: bench/run_kernel_benches.sh [OUT_DIR]   (build first: ninja -C build/release kernel_bench gemm_bench)
#   env:   BUILD_DIR (default build/release), ROUNDS (default 3), QUIET_WAIT_S (default 600: how long each
#          run may wait for a quiet machine)
# Each run's output goes to OUT_DIR (default $BUILD_DIR/bench-out) as <bench>_<unset|haswell>_<round>.txt, with the
# load average before and after it and a sample of the busiest processes every 2 s during it
# (<...>.samples): a 2-thread OpenMP run sharing a core with another process slows down several-fold
# (times quantised to the scheduler tick), so a run is only worth keeping if it ran alone.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build/release}
out=${1:-$build/bench-out}
rounds=${ROUNDS:-3}
mkdir -p "$out"

for bin in kernel_bench gemm_bench; do
  if [[ ! -x $build/bench/$bin ]]; then
    echo "run_kernel_benches: $build/bench/$bin not found; build it: ninja -C $build kernel_bench gemm_bench" >&2
    exit 1
  fi
done

source "$(dirname "$0")/quiet_machine.sh"

run() {
  local bin=$1 coretype=$2 round=$3
  local name=$out/${bin%_bench}_${coretype}_$round
  wait_for_quiet_machine
  echo "# ${name##*/}: load before $(cut -d' ' -f1-4 /proc/loadavg)" | tee "$name.load"
  (while true; do
    echo "$(date +%T) $(cut -d' ' -f1-4 /proc/loadavg) | $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -4 | tr -s ' ' | tr '\n' ';')"
    sleep 2
  done) >"$name.samples" &
  local sampler=$!
  if [[ $coretype == haswell ]]; then
    OPENBLAS_CORETYPE=Haswell "$build/bench/$bin" >"$name.txt"
  else
    env -u OPENBLAS_CORETYPE "$build/bench/$bin" >"$name.txt"
  fi
  kill "$sampler"
  echo "# ${name##*/}: load after $(cut -d' ' -f1-4 /proc/loadavg)" | tee -a "$name.load"
}

for round in $(seq 1 "$rounds"); do
  for bin in kernel_bench gemm_bench; do
    for coretype in unset haswell; do run "$bin" "$coretype" "$round"; done
  done
done

python3 "$repo/bench/perf_tables.py" kernel --unset "$out"/kernel_unset_*.txt --haswell "$out"/kernel_haswell_*.txt
echo
python3 "$repo/bench/perf_tables.py" gemm --unset "$out"/gemm_unset_*.txt --haswell "$out"/gemm_haswell_*.txt

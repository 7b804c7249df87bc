#!/usr/bin/env bash
# Context parallel on one long document (issue #24 acceptance 4): parallel_train_step_bench's large config (8 layers,
# hidden 512, 8 heads, 4 kv heads, f32) training one SEQ-token document (default 4096) on one rank (2 threads), and at
# CP 2 over two ranks (one thread each) with p2p, all_gather and a2a, round-robin within each round so that all four
# see the same machine. Reports each one's median step against one rank, the per-rank activation peak against one
# rank's (the tracker), and for CP the ring attention's times on the critical rank (the most compute): the blocks'
# compute, the time waited for keys after it, the compute imbalance between the ranks, and what the step's ring
# transfers cost alone (a block's exchange timed before training). A round where any run's steps spread by more than
# MAX_SPREAD (default 0.15: (slowest - fastest) / median) was disturbed and is run again, up to ROUNDS times (default
# 3); the last is then reported as REFUSED.
#   usage: bench/run_cp_bench.sh     (build first: ninja -C build/release parallel_train_step_bench)
#   env:   BUILD_DIR (default build/release), SEQ (default 4096), STEPS (default 3), MAX_SPREAD, ROUNDS, QUIET_WAIT_S
# Output: RESULT cp/<run> step_ms=<m> ratio=<vs one rank> spread=<s> activation_peak_mib=<a> activation_ratio=<vs one>
#         [ring_compute_ms=<c> ring_wait_ms=<w> imbalance_ms=<i> transfer_ms=<t>]
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/quiet_machine.sh
BENCH=${BUILD_DIR:-build/release}/bench/parallel_train_step_bench
[[ -x $BENCH ]] || { echo "missing $BENCH: build it first"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--config large --rows 1 --seq "${SEQ:-4096}" --steps "${STEPS:-3}")
runs=("one_rank" "cp2_p2p" "cp2_all_gather" "cp2_a2a")
run() {
  case $1 in
    one_rank) OMP_NUM_THREADS=2 "$BENCH" "${common[@]}" --threads 2 ;;
    cp2_*) mpirun --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 "$BENCH" "${common[@]}" --threads 1 \
             --cp 2 --cp-comm "${1#cp2_}" ;;
  esac
}
for round in $(seq 1 "${ROUNDS:-3}"); do
  wait_for_quiet_machine
  echo "# round $round, load $(cut -d' ' -f1-3 /proc/loadavg), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  declare -A out=()
  for r in "${runs[@]}"; do out[$r]=$(run "$r" 2>&1); done
  report=$(python3 - "${MAX_SPREAD:-0.15}" "${runs[@]}" <<PY
import re, sys
max_spread = float(sys.argv[1]); runs = sys.argv[2:]
outs = dict(zip(runs, """$(for r in "${runs[@]}"; do echo "${out[$r]}"; echo "@@@"; done)""".split("@@@\n")))
rows, disturbed = [], False
for r in runs:
    text = outs[r]
    steps = [float(m) for m in re.findall(r"^step \d+ ms=([\d.]+)", text, re.M)]
    peak = re.search(r"activation_peak_mib=([\d.]+)", text)
    ring = re.search(r"^ring compute_ms=([\d.]+) wait_ms=([\d.]+) imbalance_ms=([\d.]+) transfer_ms=([\d.]+)", text, re.M)
    if not steps or not peak or (r == "cp2_p2p" and not ring):
        print(f"FAILED cp/{r}: {text[-600:]}"); sys.exit(2)
    med = sorted(steps)[len(steps) // 2]
    spread = (max(steps) - min(steps)) / med
    disturbed |= spread > max_spread
    rows.append((r, med, spread, float(peak.group(1)), ring))
base, base_peak = rows[0][1], rows[0][3]
for r, med, spread, peak, ring in rows:
    line = (f"{'REFUSED' if disturbed else 'RESULT'} cp/{r} step_ms={med:.1f} ratio={med / base:.3f} "
            f"spread={spread:.3f} activation_peak_mib={peak:.1f} activation_ratio={peak / base_peak:.3f}")
    if ring:
        line += (f" ring_compute_ms={ring.group(1)} ring_wait_ms={ring.group(2)} imbalance_ms={ring.group(3)} "
                 f"transfer_ms={ring.group(4)}")
    print(line)
sys.exit(1 if disturbed else 0)
PY
)
  status=$?
  echo "$report"
  [[ $status == 0 ]] && exit 0
  [[ $status == 2 ]] && exit 1
done
exit 1

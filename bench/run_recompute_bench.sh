#!/usr/bin/env bash
# Activation recompute's cost (issue #23 acceptance 2): parallel_train_step_bench on one rank (large config: 8
# layers, hidden 512, vocab 8192, one micro-batch of 8 x 256 tokens, f32, 2 threads) without recompute, with full
# recompute (uniform groups of 1: every layer's forward runs twice) and with selective recompute (core_attn +
# layernorm + the activation function), round-robin within each round so that all three see the same machine.
# Reports each policy's median step against no recompute, the activation peak (tracker) and the plan's, and the
# spread of each policy's timed steps; a round where any policy's steps spread by more than MAX_SPREAD (default
# 0.15: (slowest - fastest) / median) was disturbed and is run again, up to ROUNDS times (default 3), after which
# the last round is reported as REFUSED.
#   usage: bench/run_recompute_bench.sh     (build first: ninja -C build/release parallel_train_step_bench)
#   env:   BUILD_DIR (default build/release), STEPS (default 5), THREADS (default 2), MAX_SPREAD, ROUNDS,
#          QUIET_WAIT_S (default 600)
# Output: RESULT recompute/<policy> step_ms=<m> ratio=<vs none> spread=<s> activation_peak_mib=<t> planned_mib=<p>
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/quiet_machine.sh
BENCH=${BUILD_DIR:-build/release}/bench/parallel_train_step_bench
[[ -x $BENCH ]] || { echo "missing $BENCH: build it first"; exit 1; }
policies=("none" "full_uniform_1" "selective_core_attn_layernorm_activation")
args_of() {
  case $1 in
    none) echo "--recompute none" ;;
    full_uniform_1) echo "--recompute uniform --recompute-layers 1" ;;
    selective_core_attn_layernorm_activation) echo "--recompute selective --recompute-modules core_attn,layernorm,activation" ;;
  esac
}
for round in $(seq 1 "${ROUNDS:-3}"); do
  wait_for_quiet_machine
  echo "# round $round, load $(cut -d' ' -f1-3 /proc/loadavg), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  declare -A out=()
  for policy in "${policies[@]}"; do
    # shellcheck disable=SC2046
    out[$policy]=$("$BENCH" --config large --steps "${STEPS:-5}" --threads "${THREADS:-2}" $(args_of "$policy") 2>&1)
  done
  report=$(python3 - "${MAX_SPREAD:-0.15}" "${policies[@]}" <<PY
import re, sys
max_spread = float(sys.argv[1]); policies = sys.argv[2:]
outs = dict(zip(policies, """$(for p in "${policies[@]}"; do echo "${out[$p]}"; echo "@@@"; done)""".split("@@@\n")))
rows, disturbed = [], False
for p in policies:
    text = outs[p]
    steps = [float(m) for m in re.findall(r"^step \d+ ms=([\d.]+)", text, re.M)]
    summary = re.search(r"step_ms=([\d.]+).*", text)
    peak = re.search(r"activation_peak_mib=([\d.]+) planned_mib=([\d.]+)", text)
    if not steps or not summary or not peak:
        print(f"FAILED recompute/{p}: {text[-400:]}"); sys.exit(2)
    med = sorted(steps)[len(steps) // 2]
    spread = (max(steps) - min(steps)) / med
    disturbed |= spread > max_spread
    rows.append((p, med, spread, peak.group(1), peak.group(2)))
base = rows[0][1]
for p, med, spread, peak, planned in rows:
    print(f"{'REFUSED' if disturbed else 'RESULT'} recompute/{p} step_ms={med:.1f} ratio={med / base:.3f} "
          f"spread={spread:.3f} activation_peak_mib={peak} planned_mib={planned}")
sys.exit(1 if disturbed else 0)
PY
)
  status=$?
  echo "$report"
  [[ $status == 0 ]] && exit 0
  [[ $status == 2 ]] && exit 1
done
exit 1

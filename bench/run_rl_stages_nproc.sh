#!/usr/bin/env bash
# The RL step's stages on N ranks against one process (issue #10: the forward passes split over each
# role's DP replicas): the main job's config (examples/grpo_arith.yaml, from the warm start scripts/run.sh
# builds) for STEPS steps, once in one process on 2 threads and once under `--nproc 2` (one thread per
# rank), then the median of each stage's timing_s/* over the steps after the first, and the ratio.
# On this 2-core machine two ranks have the same cores as one process: a stage that splits its work over
# the ranks takes about as long as in one process (ratio ~1); one that every rank runs whole takes about
# twice as long (ratio ~2).
#   usage: bench/run_rl_stages_nproc.sh [BUILD_DIR]   (default build/release)
#   env:   STEPS (default 40), WARM (default cache/warm_start/arith3), QUIET_WAIT_S (default 600)
# Output: RESULT rl_stages/<stage> one_process_s=.. two_ranks_s=.. ratio=..
set -euo pipefail

steps=${STEPS:-40}
source "$(dirname "$0")/main_job_bench.sh"
wait_for_quiet_machine
"$rlforge" "${common[@]}" trainer.num_threads=2 trainer.default_local_dir="$scratch/one" > "$scratch/one.log" 2>&1
wait_for_quiet_machine
"$rlforge" --nproc 2 "${common[@]}" trainer.num_threads=1 trainer.default_local_dir="$scratch/two" \
  > "$scratch/two.log" 2>&1

python3 - "$scratch/one/metrics.jsonl" "$scratch/two/metrics.jsonl" <<'PY'
import json, statistics, sys
def stages(path):
    rows = [json.loads(line) for line in open(path)][1:]  # the first step builds caches
    keys = sorted({k for r in rows for k in r if k.startswith("timing_s/")})
    return {k[len("timing_s/"):]: statistics.median(r[k] for r in rows if k in r) for k in keys}
one, two = (stages(p) for p in sys.argv[1:])
for stage in one:
    print(f"RESULT rl_stages/{stage} one_process_s={one[stage]:.4f} two_ranks_s={two[stage]:.4f} "
          f"ratio={two[stage] / one[stage]:.2f}")
PY

#!/usr/bin/env bash
# The RL runtime's weight sync (issue #20): the main job's config (examples/grpo_arith.yaml from the warm
# start scripts/run.sh builds) for STEPS steps without validation or checkpoints, in three layouts:
#   in_place   one process, the rollout with the actor's TP and dtype: it reads the actor's weights in place
#   own_copy   one process, the rollout in bfloat16 (the actor in float32): its own copy, loaded by every sync
#              and dropped for the actor's update
#   streamed   --nproc 2, the actor on rank 0 and the rollout on rank 1: buckets over the network
# Output per layout: RESULT weight_sync/<layout> update_s=<median> (min-max) bytes=<per step>
#   device_params_peak=<bytes> step_s=<median>
#   usage: bench/run_weight_sync.sh [BUILD_DIR]   (default build/release)
#   env:   STEPS (default 20), WARM (default cache/warm_start/arith3), QUIET_WAIT_S (default 600)
set -euo pipefail

steps=${STEPS:-20}
source "$(dirname "$0")/main_job_bench.sh"
run() {  # <layout> <rlforge arguments...>
  local layout=$1
  shift
  wait_for_quiet_machine
  "$rlforge" "$@" trainer.default_local_dir="$scratch/$layout" > "$scratch/$layout.log" 2>&1 \
    || { cat "$scratch/$layout.log" >&2; exit 1; }
}
run in_place "${common[@]}" trainer.num_threads=2
run own_copy "${common[@]}" trainer.num_threads=2 actor_rollout_ref.rollout.dtype=bfloat16
run streamed --nproc 2 "${common[@]}" trainer.num_threads=1 actor_rollout_ref.actor.device_mapping=[0] \
  actor_rollout_ref.rollout.device_mapping=[1]

python3 - "$scratch" <<'PY'
import json, statistics, sys
for layout in ("in_place", "own_copy", "streamed"):
    rows = [json.loads(line) for line in open(f"{sys.argv[1]}/{layout}/metrics.jsonl")][1:]  # step 1 builds caches
    sync = [r["timing_s/update_weights"] for r in rows]
    print(f"RESULT weight_sync/{layout} update_s={statistics.median(sync):.5f} ({min(sync):.5f}-{max(sync):.5f}) "
          f"bytes={rows[-1]['perf/update_weights_bytes']:.0f} "
          f"device_params_peak={rows[-1].get('perf/max_memory_device_params_bytes', 0):.0f} "
          f"step_s={statistics.median(r['timing_s/step'] for r in rows):.3f}")
PY

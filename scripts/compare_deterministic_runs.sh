#!/usr/bin/env bash
# Did a change keep the numbers? Runs the deterministic GRPO and PPO examples (from the main job's warm start,
# 6 steps, validation at steps 3 and 6) with two rlforge binaries, e.g. one built at the commit before a
# refactor and HEAD's, and compares every logged value both runs have (timing_s/* and perf/* excluded: they
# measure the machine). Exit 1 when any value differs.
#   usage: scripts/compare_deterministic_runs.sh OLD_RLFORGE NEW_RLFORGE
#   env:   WARM (default cache/warm_start/arith3, which scripts/run.sh builds)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
old=$1 new=$2 warm=${WARM:-$repo/cache/warm_start/arith3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for cfg in grpo_arith ppo_arith; do
  for which in old new; do
    (cd "$repo" && "${!which}" train --config "examples/$cfg.yaml" actor_rollout_ref.model.path="$warm" \
      trainer.total_training_steps=6 trainer.test_freq=3 trainer.save_freq=-1 trainer.time_budget_s=null \
      trainer.num_threads=2 actor_rollout_ref.actor.optim.lr_warmup_steps=2 critic.optim.lr_warmup_steps=2 \
      trainer.default_local_dir="$out/$cfg-$which" > "$out/$cfg-$which.log" 2>&1) \
      || { cat "$out/$cfg-$which.log" >&2; exit 1; }
  done
  python3 - "$out/$cfg-old/metrics.jsonl" "$out/$cfg-new/metrics.jsonl" "$cfg" <<'PY' || status=1
import json, sys
old = [json.loads(line) for line in open(sys.argv[1])]
new = [json.loads(line) for line in open(sys.argv[2])]
if len(old) != len(new):
    sys.exit(f"{sys.argv[3]}: {len(old)} rows vs {len(new)}")
compared = differ = 0
for a, b in zip(old, new):
    for key in a:
        if key.startswith(("timing_s/", "perf/")) or key not in b:
            continue
        compared += 1
        if a[key] != b[key]:
            differ += 1
            print("DIFF", sys.argv[3], "step", a["step"], key, a[key], b[key])
print(f"{sys.argv[3]}: {len(old)} rows, {compared} values compared, {differ} differ")
sys.exit(1 if differ else 0)
PY
done
exit $status

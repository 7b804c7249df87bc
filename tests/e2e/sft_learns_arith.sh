#!/usr/bin/env bash
# The 2-minute variant of the main job: SFT from scratch on 2-digit addition must reach >= 90%
# exact-match greedy accuracy on 200 held-out problems, logged as val-core/arith/acc/mean@1.
source "$(dirname "$0")/common.sh"
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/run" \
  trainer.total_training_steps=1000 trainer.test_freq=1000 trainer.save_freq=0 \
  > "$SCRATCH/out.log" 2>&1 || { tail -20 "$SCRATCH/out.log"; fail "sft exited with an error"; }
tail -3 "$SCRATCH/out.log"
acc=$(last_metric "$SCRATCH/run/metrics.jsonl" "val-core/arith/acc/mean@1")
python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.90 else 1)" || fail "held-out accuracy $acc < 0.90"
grep -q "sft done:" "$SCRATCH/out.log" || fail "no summary line"
grep -q "<polyline" "$SCRATCH/run/metrics.svg" || fail "no loss curve in metrics.svg"
grep -q "val-core/arith/acc/mean@1" "$SCRATCH/run/metrics.svg" || fail "no validation curve in metrics.svg"
echo "PASS: held-out accuracy $acc"

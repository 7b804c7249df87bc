#!/usr/bin/env bash
# `rlforge sft --nproc 2` with tensor (and sequence) parallel trains like one process: 20 steps of the
# main job's config, per-step losses equal to 1e-5 relative, the same held-out accuracy; and what a
# multi-rank run cannot do yet (checkpoints, resuming) is refused once, naming the key.
source "$(dirname "$0")/common.sh"

base=(--config examples/sft_arith.yaml trainer.total_training_steps=20 trainer.test_freq=10 trainer.save_freq=0
      trainer.resume_mode=disable optim.lr_warmup_steps=5 trainer.logger='[jsonl]')
OMP_NUM_THREADS=2 quiet "$RLFORGE" sft "${base[@]}" trainer.default_local_dir="$SCRATCH/one"
for sp in false true; do
  quiet "$RLFORGE" sft --nproc 2 "${base[@]}" trainer.default_local_dir="$SCRATCH/tp2_sp_$sp" \
    megatron.tensor_model_parallel_size=2 megatron.sequence_parallel=$sp
  python3 - "$SCRATCH/one/metrics.jsonl" "$SCRATCH/tp2_sp_$sp/metrics.jsonl" "$sp" <<'PY'
import json, sys
one = [json.loads(line) for line in open(sys.argv[1])]
tp = [json.loads(line) for line in open(sys.argv[2])]
assert len(one) == len(tp) == 20, (len(one), len(tp))
worst = max(abs(a["train/loss"] - b["train/loss"]) / abs(a["train/loss"]) for a, b in zip(one, tp))
assert worst <= 1e-5, f"TP2 (sp {sys.argv[3]}) losses differ by {worst:.2e} relative"
acc = "val-core/arith/acc/mean@1"
assert [r[acc] for r in one if acc in r] == [r[acc] for r in tp if acc in r], "held-out accuracy differs"
assert all(a["perf/tokens"] == b["perf/tokens"] for a, b in zip(one, tp)), "token counts differ"
print(f"ok: TP2 sp={sys.argv[3]} 20 steps, losses within {worst:.1e} relative of one process")
PY
done

out=$("$RLFORGE" sft --nproc 2 "${base[@]}" trainer.default_local_dir="$SCRATCH/refused" trainer.save_freq=5 \
      megatron.tensor_model_parallel_size=2 2>&1) && fail "a checkpointing multi-rank run was accepted"
[[ $(grep -c "rlforge: .*trainer.save_freq" <<<"$out") == 1 ]] || fail "expected one trainer.save_freq error: $out"
out=$("$RLFORGE" sft --nproc 2 "${base[@]}" trainer.default_local_dir="$SCRATCH/refused" \
      megatron.tensor_model_parallel_size=2 megatron.context_parallel_size=2 2>&1) && fail "CP 2 was accepted"
grep -q "context_parallel_size" <<<"$out" || fail "expected a context_parallel_size error: $out"
echo "ok: refusals"

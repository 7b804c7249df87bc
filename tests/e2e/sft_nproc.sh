#!/usr/bin/env bash
# `rlforge sft --nproc N` trains like one process: 20 steps of the main job's config at TP2, TP2+SP and
# (4 ranks) TP2 x DP2 + SP + distributed optimizer, per-step losses equal to 1e-5 relative, the same
# token counts and held-out accuracy; and what a multi-rank run cannot do yet (checkpoints, resuming)
# is refused once, naming the key.
source "$(dirname "$0")/common.sh"

base=(--config examples/sft_arith.yaml trainer.total_training_steps=20 trainer.test_freq=10 trainer.save_freq=0
      trainer.resume_mode=disable optim.lr_warmup_steps=5 trainer.logger='[jsonl]')
OMP_NUM_THREADS=2 quiet "$RLFORGE" sft "${base[@]}" trainer.default_local_dir="$SCRATCH/one"
# name ranks megatron overrides...: the run's per-step losses against the one-process run's.
compare() {
  local name=$1 ranks=$2; shift 2
  quiet "$RLFORGE" sft --nproc "$ranks" "${base[@]}" trainer.default_local_dir="$SCRATCH/$name" "$@"
  python3 - "$SCRATCH/one/metrics.jsonl" "$SCRATCH/$name/metrics.jsonl" "$name" <<'PY'
import json, sys
one = [json.loads(line) for line in open(sys.argv[1])]
run = [json.loads(line) for line in open(sys.argv[2])]
assert len(one) == len(run) == 20, (len(one), len(run))
worst = max(abs(a["train/loss"] - b["train/loss"]) / abs(a["train/loss"]) for a, b in zip(one, run))
assert worst <= 1e-5, f"{sys.argv[3]}: losses differ by {worst:.2e} relative"
acc = "val-core/arith/acc/mean@1"
assert [r[acc] for r in one if acc in r] == [r[acc] for r in run if acc in r], "held-out accuracy differs"
assert all(a["perf/tokens"] == b["perf/tokens"] for a, b in zip(one, run)), "token counts differ"
print(f"ok: {sys.argv[3]}: 20 steps, losses within {worst:.1e} relative of one process")
PY
}
compare tp2 2 megatron.tensor_model_parallel_size=2
compare tp2_sp 2 megatron.tensor_model_parallel_size=2 megatron.sequence_parallel=true
# Issue #6's acceptance 2: TP2 x DP2 with SP and the distributed optimizer on four ranks.
compare tp2_sp_dp2_distopt 4 megatron.tensor_model_parallel_size=2 megatron.sequence_parallel=true \
  megatron.use_distributed_optimizer=true

out=$("$RLFORGE" sft --nproc 2 "${base[@]}" trainer.default_local_dir="$SCRATCH/refused" trainer.save_freq=5 \
      megatron.tensor_model_parallel_size=2 2>&1) && fail "a checkpointing multi-rank run was accepted"
[[ $(grep -c "rlforge: .*trainer.save_freq" <<<"$out") == 1 ]] || fail "expected one trainer.save_freq error: $out"
out=$("$RLFORGE" sft --nproc 2 "${base[@]}" trainer.default_local_dir="$SCRATCH/refused" \
      megatron.tensor_model_parallel_size=2 megatron.context_parallel_size=2 2>&1) && fail "CP 2 was accepted"
grep -q "context_parallel_size" <<<"$out" || fail "expected a context_parallel_size error: $out"
echo "ok: refusals"

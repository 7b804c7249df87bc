#!/usr/bin/env bash
# Context parallel trains what one rank has no room for (issue #24, "long sequences for real"):
# examples/sft_long_context.yaml (micro-batches of up to 16.9k tokens under a 0.5 GiB device budget) is stopped
# on one process by the budget, naming its key, and trains at CP 2 (p2p, two ranks) and CP 4 (all_gather, four
# ranks): the same losses (1e-5 relative), each rank's device peak, validation's decoding included, within the
# budget and smaller at CP 4 than at CP 2.
source "$(dirname "$0")/common.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
base=(sft --config examples/sft_long_context.yaml trainer.resume_mode=disable trainer.logger='[console,jsonl]')
expect_error "out of device memory" "${base[@]}" megatron.context_parallel_size=1 \
  trainer.default_local_dir="$SCRATCH/one"
grep -q "trainer.device_memory_budget_gb" "$SCRATCH/stderr" || fail "the refusal does not name the budget's key"
quiet timeout 300 "$RLFORGE" --nproc 2 "${base[@]}" trainer.default_local_dir="$SCRATCH/cp2"
cp "$SCRATCH/last.log" "$SCRATCH/cp2.log"
quiet timeout 300 "$RLFORGE" --nproc 4 "${base[@]}" megatron.context_parallel_size=4 megatron.cp_comm_type=all_gather \
  trainer.default_local_dir="$SCRATCH/cp4"
cp "$SCRATCH/last.log" "$SCRATCH/cp4.log"
python3 - "$SCRATCH" <<'PY'
import json, re, sys
scratch = sys.argv[1]
def run(name):
    losses = [r["train/loss"] for r in map(json.loads, open(f"{scratch}/{name}/metrics.jsonl")) if "train/loss" in r]
    peak = re.search(r"^memory device: [\d.]+ MiB \(peak ([\d.]+) MiB\)", open(f"{scratch}/{name}.log").read(), re.M)
    assert losses and peak, name
    return losses, float(peak.group(1))
(l2, p2), (l4, p4) = run("cp2"), run("cp4")
assert len(l2) == len(l4) == 4, (len(l2), len(l4))
worst = max(abs(a - b) / abs(a) for a, b in zip(l2, l4))
assert worst <= 1e-5, f"CP 2 and CP 4 losses differ by {worst:.1e}"
assert p2 <= 512 and p4 < p2, (p2, p4)
print(f"ok: CP 2 and CP 4 train it (losses within {worst:.1e}), device peaks {p2} and {p4} MiB of 512")
PY

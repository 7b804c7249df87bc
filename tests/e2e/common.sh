# Shared helpers of the e2e scripts: a scratch folder removed on exit, and assertions that print
# what went wrong before failing.
set -euo pipefail
RLFORGE="$1"
REPO="$2"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
cd "$REPO"

fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs a command that must succeed, showing its output only when it fails.
quiet() { "$@" > "$SCRATCH/last.log" 2>&1 || { cat "$SCRATCH/last.log" >&2; fail "command failed: $*"; }; }

# expect_error <fragment> <rlforge args...>: the command fails and its last stderr line is one
# `rlforge:` line containing <fragment>.
expect_error() {
  local fragment="$1"; shift
  if "$RLFORGE" "$@" > "$SCRATCH/stdout" 2> "$SCRATCH/stderr"; then fail "expected failure: $*"; fi
  local last; last=$(tail -n 1 "$SCRATCH/stderr")
  [[ "$last" == rlforge:* ]] || fail "last stderr line is not an rlforge error: '$last' ($*)"
  [[ "$last" == *"$fragment"* ]] || fail "error '$last' does not mention '$fragment'"
  echo "ok: $last"
}

# The value of `key` in the last metrics.jsonl row that has it.
last_metric() {
  python3 -c "
import json, sys
value = None
for line in open(sys.argv[1]):
    row = json.loads(line)
    if sys.argv[2] in row: value = row[sys.argv[2]]
print(value)" "$1" "$2"
}

# Every tensor of two safetensors files, bit for bit.
same_weights() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n]); header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
bad = [k for k in a if a[k] != b[k]]
assert not bad, f"differ: {bad}"
print(f"ok: {len(a)} tensors bit for bit")
PY
}

# expect_sft_like BASE RUN: the SFT run in $SCRATCH/RUN logged the steps of $SCRATCH/BASE with per-step losses
# within 1e-5 relative, the same token counts and the same held-out accuracy (a multi-rank run against one process).
expect_sft_like() {
  python3 - "$SCRATCH/$1/metrics.jsonl" "$SCRATCH/$2/metrics.jsonl" "$2" <<'PY'
import json, sys
one = [json.loads(line) for line in open(sys.argv[1])]
run = [json.loads(line) for line in open(sys.argv[2])]
assert len(one) == len(run) > 0, (len(one), len(run))
worst = max(abs(a["train/loss"] - b["train/loss"]) / abs(a["train/loss"]) for a, b in zip(one, run))
assert worst <= 1e-5, f"{sys.argv[3]}: losses differ by {worst:.2e} relative"
acc = "val-core/arith/acc/mean@1"
assert [r[acc] for r in one if acc in r] == [r[acc] for r in run if acc in r], "held-out accuracy differs"
assert all(a["perf/tokens"] == b["perf/tokens"] for a, b in zip(one, run)), "token counts differ"
print(f"ok: {sys.argv[3]}: {len(run)} steps, losses within {worst:.1e} relative")
PY
}

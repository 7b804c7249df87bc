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

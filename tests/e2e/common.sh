# Shared helpers of the e2e scripts: a scratch folder removed on exit, and assertions that print
# what went wrong before failing.
set -euo pipefail
RLFORGE="$1"
REPO="$2"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
cd "$REPO"

fail() { echo "FAIL: $*" >&2; exit 1; }

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

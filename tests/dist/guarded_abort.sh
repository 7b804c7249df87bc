#!/usr/bin/env bash
# run_guarded under mpirun: an error on one rank (while the others wait in a collective) or on every
# rank ends the whole job well within the time limit, with a non-zero exit code and the message printed
# exactly once, naming the failing rank. A run without errors exits 0.
set -uo pipefail
probe="$1"; mpirun="$2"
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*"; cat "$scratch/err" 2>/dev/null; exit 1; }

# run <np> <mode>: sets rc and seconds; stderr in $scratch/err
run() {
  local start; start=$(date +%s)
  timeout 60 "$mpirun" --oversubscribe --bind-to none -np "$1" "$probe" "$2" > "$scratch/out" 2> "$scratch/err"
  rc=$?
  seconds=$(( $(date +%s) - start ))
}

for np in 2 4; do
  for mode in last all; do
    run "$np" "$mode"
    [ "$rc" -ne 124 ] || fail "np=$np mode=$mode: the job hung until the time limit"
    [ "$rc" -ne 0 ] || fail "np=$np mode=$mode: exit code 0 after an error"
    count=$(grep -c '^probe: .*config error: probe.key: failing on purpose' "$scratch/err")
    [ "$count" -eq 1 ] || fail "np=$np mode=$mode: the message appears $count times, expected once"
    rank=$([ "$mode" = last ] && echo $((np - 1)) || echo 0)
    grep -q "^probe: \[rank $rank\] config error" "$scratch/err" || fail "np=$np mode=$mode: not reported by rank $rank"
    echo "ok: np=$np mode=$mode: exit $rc after ${seconds}s, one message from rank $rank"
  done
  run "$np" none
  [ "$rc" -eq 0 ] || fail "np=$np mode=none: exit code $rc"
  echo "ok: np=$np mode=none: exit 0"
done
echo "PASS"

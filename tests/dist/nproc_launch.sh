#!/usr/bin/env bash
# `rlforge <command> --nproc N`: the re-launch under mpirun with the flags a container needs and the
# per-rank thread count; a command that runs on one process only refuses a multi-rank job on every
# rank, and the job ends, non-zero, within the time limit, with the message printed once; more ranks than
# cores are warned about up front; bad values of --nproc name the option; plain mpirun gives the same refusal.
set -uo pipefail
rlforge="$1"; mpirun="$2"
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*"; cat "$scratch/err" 2>/dev/null; exit 1; }
# The launcher itself must pass --allow-run-as-root, so CTest's blanket permission is taken away here.
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM

# run <cmd...>: sets rc; stdout and stderr in $scratch/out and $scratch/err
run() {
  timeout 120 "$@" > "$scratch/out" 2> "$scratch/err"
  rc=$?
  [ "$rc" -ne 124 ] || fail "timed out: $*"
}
refused_once() {  # the one-process refusal, non-zero, exactly once
  [ "$rc" -ne 0 ] || fail "exit code 0 for a multi-rank run of a one-process command"
  count=$(grep -c '^rlforge: \[rank [0-9]*\] rlforge info runs on one process only for now, but this job has 2 ranks' "$scratch/err")
  [ "$count" -eq 1 ] || fail "the refusal appears $count times, expected once"
}

cores=$(nproc)
expected_threads=$(( cores / 2 > 0 ? cores / 2 : 1 ))
unset OMP_NUM_THREADS
run "$rlforge" info --nproc 2
refused_once
launch=$(grep -- '--nproc 2: mpirun -np 2' "$scratch/err") || fail "no launch line"
for flag in --oversubscribe "--bind-to none" "OMP_NUM_THREADS=$expected_threads)"; do
  [[ "$launch" == *"$flag"* ]] || fail "launch line lacks '$flag': $launch"
done
if [ "$(id -u)" -eq 0 ]; then [[ "$launch" == *--allow-run-as-root* ]] || fail "root, but no --allow-run-as-root"; fi
[[ "$launch" == *"/rlforge info (OMP_NUM_THREADS"* ]] || fail "the ranks must get the command without --nproc: $launch"
echo "ok: info --nproc 2 refused once (exit $rc); $launch"

OMP_NUM_THREADS=3 run "$rlforge" --nproc=2 info
refused_once
grep -q -- '--nproc 2: mpirun .*(OMP_NUM_THREADS=3)' "$scratch/err" || fail "a thread count the user set was not kept"
echo "ok: --nproc=2 before the command; OMP_NUM_THREADS=3 kept"

# More ranks than cores: said up front, with the oversubscription factor (the job then refuses as above).
# The cores of the affinity mask, as rlforge counts them (GNU nproc alone honours OMP_NUM_THREADS).
mask_cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
over=$(( mask_cores + 1 ))
run "$rlforge" info --nproc "$over"
factor=$(python3 -c "print(f'{$over / $mask_cores:.1f}')")
grep -q -- "warning: --nproc $over: $over ranks on $mask_cores cores (${factor}x oversubscribed)" "$scratch/err" ||
  fail "no oversubscription warning for --nproc $over on $mask_cores cores"
run "$rlforge" info --nproc "$mask_cores"
! grep -q "oversubscribed" "$scratch/err" || fail "warned at --nproc $mask_cores"
echo "ok: --nproc $over on $mask_cores cores warned (${factor}x oversubscribed)"

run "$rlforge" info --nproc 1
[ "$rc" -eq 0 ] || fail "info --nproc 1: exit $rc"
grep -q "OpenMP pool" "$scratch/out" || fail "info --nproc 1 did not run in this process"
! grep -q mpirun "$scratch/err" || fail "--nproc 1 must not start mpirun"
echo "ok: --nproc 1 runs in this process"

for bad in 0 -2 abc 2x ""; do
  run "$rlforge" info --nproc "$bad"
  [ "$rc" -ne 0 ] || fail "--nproc '$bad' accepted"
  grep -q "^rlforge: \[rank 0\] config error: --nproc: expected a positive number of processes, got '$bad'" "$scratch/err" \
    || fail "--nproc '$bad': no error naming --nproc"
done
run "$rlforge" info --nproc
grep -q "config error: --nproc: expected a number of processes after it" "$scratch/err" || fail "--nproc without a value"
echo "ok: bad --nproc values name the option"

# Plain mpirun: the process is already a rank; --nproc, if given, must agree with the world size.
run "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$rlforge" info
refused_once
run "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$rlforge" info --nproc 3
[ "$rc" -ne 0 ] || fail "--nproc 3 under a 2-rank mpirun accepted"
count=$(grep -c 'config error: --nproc: 3 does not match the 2 ranks this job was started with' "$scratch/err")
[ "$count" -eq 1 ] || fail "the --nproc mismatch appears $count times, expected once"
echo "ok: plain mpirun refused once; --nproc mismatch named"

# Help and parse errors are printed by one rank only.
run "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$rlforge" --help
[ "$rc" -eq 0 ] || fail "--help under mpirun: exit $rc"
[ "$(grep -c '^Any command takes --nproc N' "$scratch/out")" -eq 1 ] || fail "--help printed other than once"
echo "PASS"

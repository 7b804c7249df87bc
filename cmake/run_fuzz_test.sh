#!/usr/bin/env bash
# Runs a libFuzzer target for CTest (see Fuzzing.cmake):
#   run_fuzz_test.sh <fuzzer> <seed corpus dir> <work dir> <seconds> [libFuzzer flags...]
# for <seconds>, or RF_FUZZ_SECONDS when set (for a longer hunt, or a quick local run). New inputs go to a
# fresh scratch corpus under the work dir, so the committed seeds are only read; an input that
# crashes is saved under <work dir>/artifacts/ (libFuzzer prints its path) and the test fails.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
rm -rf "$work/corpus"
mkdir -p "$work/corpus" "$work/artifacts"
exec "$fuzzer" -max_total_time="${RF_FUZZ_SECONDS:-$seconds}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds"

#!/usr/bin/env bash
# The whole test suite from a fresh machine: install dependencies, build, then run every test group
# (CTest label), printing how long each phase took and one closing "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."

phase_start=$(date +%s)
phase() {  # phase <name>: prints the time since the previous phase ended
  local now; now=$(date +%s)
  printf '== phase %-22s %5ds\n' "$1" "$((now - phase_start))"
  phase_start=$now
}

bash scripts/install-deps.sh || { echo "install failed"; exit 1; }
phase install
if [ ! -f build/release/build.ninja ]; then cmake --preset release >/dev/null || exit 1; fi
cmake --build build/release -j "$(nproc)" || { echo "build failed"; exit 1; }
phase build

passed=0; failed=0
for label in core formats data config kernels mpi model checkpoint engine rl e2e; do
  log=$(mktemp)
  ctest --test-dir build/release -L "^${label}\$" -j "$(nproc)" --output-on-failure --timeout 900 >"$log" 2>&1
  grep -vE '^ *([0-9]+/[0-9]+ Test +#[0-9]+: .* Passed|Start +[0-9]+:)' "$log"  # failures and the summary
  # CTest's summary: "100% tests passed, 0 tests failed out of 57"
  summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
  f=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
  if [ -z "$summary" ]; then total=0; f=1; fi  # no summary: the run itself broke
  passed=$((passed + total - f)); failed=$((failed + f))
  rm -f "$log"
  phase "tests:$label"
done
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]

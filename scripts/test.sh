#!/usr/bin/env bash
# The whole test suite from a fresh machine: install dependencies, build, then run every test group
# (CTest label), printing how long each phase took and one closing "N passed, N failed" line.
# Then the lowest-ISA passes, so that an AVX-512 machine sees what an AVX2-only one would
# (RLFORGE_MAX_CPU_ISA caps rlforge's kernel registry, ONEDNN_MAX_CPU_ISA oneDNN, OPENBLAS_CORETYPE
# OpenBLAS): the kernels, model, engine (rollout), rl and mpi groups and the end-to-end tests that assert
# bit-equality at AVX2, and the kernel conformance tests at baseline x86-64 (cpu_generic). Last, the input
# layers' unit tests under ASan + UBSan.
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
# run_group <phase name> <ctest selection...>: runs the selected tests of $test_dir, adds their counts,
# prints the phase.
test_dir=build/release
run_group() {
  local name=$1; shift
  local log; log=$(mktemp)
  ctest --test-dir "$test_dir" "$@" -j "$(nproc)" --output-on-failure --timeout 900 >"$log" 2>&1
  grep -vE '^ *([0-9]+/[0-9]+ Test +#[0-9]+: .* Passed|Start +[0-9]+:)' "$log"  # failures and the summary
  # CTest's summary: "100% tests passed, 0 tests failed out of 57"
  local summary total f
  summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
  f=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
  if [ -z "$summary" ]; then total=0; f=1; fi  # no summary: the run itself broke
  passed=$((passed + total - f)); failed=$((failed + f))
  rm -f "$log"
  phase "$name"
}

for label in core formats data config kernels mpi model checkpoint engine rl e2e; do
  run_group "tests:$label" -L "^${label}\$"
done

# The end-to-end tests whose assertions are bit-equalities (rollout vs trainer log-probs, DP vs one
# process, resumed vs uninterrupted) or bf16 runs.
avx2_e2e='^e2e\.(grpo_learns_arith|grpo_resume|grpo_nproc|grpo_reward_model|hf_models|sft_hf_model|ppo_nproc)$'
for label in kernels mpi model engine rl; do
  RLFORGE_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell \
    run_group "avx2:$label" -L "^${label}\$"
done
RLFORGE_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell run_group "avx2:e2e" -R "$avx2_e2e"
RLFORGE_MAX_CPU_ISA=generic ONEDNN_MAX_CPU_ISA=SSE41 OPENBLAS_CORETYPE=Prescott run_group "generic:kernels" -L '^kernels$'

# The sanitizer pass: the unit tests of the layers that read input (core, formats, data, config,
# checkpoint) built with AddressSanitizer and UndefinedBehaviorSanitizer (the debug-asan preset). Left
# out: the fuzz targets (sanitized already, and run above), data.tokenize_command (it needs the whole
# rlforge binary), roll_config_tests (it links every layer, as rlforge does) and the speed tests (*Quickly:
# a time bound means nothing at -O0 under the sanitizers).
if [ ! -f build/debug-asan/build.ninja ]; then cmake --preset debug-asan >/dev/null || exit 1; fi
cmake --build build/debug-asan -j "$(nproc)" --target core_tests formats_tests data_tests config_tests checkpoint_tests \
  || { echo "sanitizer build failed"; exit 1; }
phase "asan:build"
test_dir=build/debug-asan run_group "asan:tests" -L '^(core|formats|data|config|checkpoint)$' \
  -E '(fuzz|^data\.tokenize_command$|Quickly$)'
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]

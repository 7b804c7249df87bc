#!/usr/bin/env bash
# Installs exactly the Debian packages rlforge's build and test suite need. Idempotent: when every
# package is already installed it touches nothing and needs no network.
#   libopenblas-openmp-dev: the OpenMP build of OpenBLAS, so BLAS shares our one OpenMP pool
#                           (the default pthread build fights OpenMP for the cores).
#   libdnnl-dev:            oneDNN, bf16 matmul (AVX512-BF16 / AMX kernels).
#   python3:                the end-to-end test scripts read metrics.jsonl with it.
#   libpcre2-dev:           PCRE2, the Unicode regexes of tokenizer.json pre-tokenizers (UTF + UCP, JIT).
#   libutf8proc-dev:        utf8proc, the NFC normalizer of Qwen's tokenizer.json.
#   clang, libclang-rt-14-dev: libFuzzer (clang's -fsanitize=fuzzer and its runtime) for the safetensors fuzz test.
#   openmpi-bin, libopenmpi-dev: Open MPI (mpirun and the MPI library) for src/dist, `--nproc` and the `mpi` tests.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenblas-openmp-dev libdnnl-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libutf8proc-dev
  python3
  clang libclang-rt-14-dev
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

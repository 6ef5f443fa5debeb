#!/usr/bin/env bash
# Installs (as root, from Debian's registry) whatever kvshard's offline Bazel build needs and is missing.
#   tools/install_deps.sh [fuzz]   fuzz: also clang, libFuzzer and the sanitizer runtimes (tools/fuzz.sh build)
set -euo pipefail
pkgs=(bazel-bootstrap bazel-rules-java bazel-platforms googletest libgtest-dev librapidcheck-dev libeigen3-dev
      libboost-program-options-dev libopenmpi-dev nlohmann-json3-dev libbenchmark-dev libjemalloc-dev python3 g++
      clang-format)
# clang-14's libclang_rt.fuzzer/asan/ubsan archives are in libclang-rt-14-dev; llvm-14 has llvm-symbolizer.
[[ ${1:-} == fuzz ]] && pkgs+=(clang libclang-rt-14-dev llvm-14)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kvshard: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
# SGLang's own code (../shared/sglang_ref, beside the clone in CI) needs torch for the parity test; best effort:
# without it that test skips, saying why.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -d "$root/../shared/sglang_ref" ]] && ! dpkg -s python3-torch >/dev/null 2>&1; then
  echo "kvshard: installing python3-torch for the SGLang parity test" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q --no-install-recommends python3-torch >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends python3-torch >&2; }; } ||
    echo "kvshard: note: python3-torch not installed; the SGLang parity test will skip" >&2
fi
if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "kvshard: note: no CUDA toolkit at /usr/local/cuda; building CPU targets only (GPU support not built)" >&2
fi

#!/usr/bin/env bash
# Checks the package layers (tools/check_layers.sh) and the format (tools/check_format.sh), builds every target (CUDA code too, when the toolkit is
# present, for one architecture: --config=test_archs; the bundle and a plain `bazel build` stay fat) and runs
# every test. Under CI (CI=true, as .ci/run sets it) it then runs the CPU tests again under AddressSanitizer and
# UBSan at once (--config=asan_ubsan: docs/building.md); a local run skips that rebuild and says how to run it.
# Prints a line per run, the time of each phase, and, last, "N passed, N failed, N skipped" over all runs,
# counted per test case from Bazel's JUnit XML. GPU tests skip without a GPU. Under CI it also builds the fuzzers
# (clang) and runs their seeds once (KVSHARD_FUZZ_SEEDS, below).
# KVSHARD_SANITIZERS=asan_ubsan (or asan,ubsan: two builds) runs the sanitizer run locally; =0 skips it in CI.
set -uo pipefail
cd "$(dirname "$0")/.."
phases=()
phase_start=$SECONDS
phase() {  # name: records the time since the last phase ended
  phases+=("$1 $((SECONDS - phase_start)) s")
  phase_start=$SECONDS
}
print_phases() { local p; for p in "${phases[@]}"; do echo "kvshard: phase: $p"; done; }
bash tools/install_deps.sh || exit 1
phase "install"
bash tools/check_layers.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
bash tools/check_format.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
phase "layers and format"
bazel build --config=test_archs //... || { print_phases; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
phase "build"
rc=0
runs=()
# Bazel exits 3 when tests failed (the XML says which) and 4 when none ran; anything else left no results.
run_tests() {  # name, config options...
  local name="$1" code start=$SECONDS
  shift
  bazel test --test_summary=terse "$@" ${1:+--build_tests_only} //...
  code=$?
  echo "kvshard: $name tests: bazel exit $code, $((SECONDS - start)) s"
  ((code == 0)) || rc=1
  if ((code == 0 || code == 3)); then
    runs+=("$name=$(bazel info "$@" bazel-testlogs)")
  else
    runs+=(--failed "$name:bazel test exited $code (no test results)")
  fi
}
run_tests normal --config=test_archs
phase "normal tests"
# KVSHARD_SANITIZERS: which sanitizer runs follow the normal one (comma list; 0 = none). CI runs asan_ubsan: one
# instrumented build with both sanitizers, instead of two builds (docs/RELIABILITY.md, "Sanitizers"); a local run
# skips it unless asked.
if [[ ${CI:-} == true ]]; then
  sans=${KVSHARD_SANITIZERS:-asan_ubsan}
else
  sans=${KVSHARD_SANITIZERS:-0}
  [[ $sans == 0 ]] && echo "kvshard: note: sanitizer run skipped (CI runs it; KVSHARD_SANITIZERS=asan_ubsan bash tools/test.sh runs it here)"
fi
[[ $sans == 1 ]] && sans=asan_ubsan
for san in ${sans//,/ }; do
  case $san in
    0) ;;
    asan|ubsan|asan_ubsan) run_tests "$san" --config="$san"; phase "$san tests" ;;
    *) echo "kvshard: error: KVSHARD_SANITIZERS: unknown run '$san' (asan_ubsan, asan, ubsan or 0)" >&2; rc=1 ;;
  esac
done
# KVSHARD_FUZZ_SEEDS=1 (CI's default; 0 skips it): the libFuzzer targets built by clang with ASan + UBSan
# (tools/fuzz.sh build: another compiler than the build's) and every seed input run once through them, a case per
# target, so a change that breaks the fuzz build or trips a sanitizer on a seed shows here (docs/RELIABILITY.md).
fuzz_seeds=${KVSHARD_FUZZ_SEEDS:-0}
[[ ${CI:-} == true ]] && fuzz_seeds=${KVSHARD_FUZZ_SEEDS:-1}
if [[ $fuzz_seeds == 1 ]]; then
  fuzz_out=$(mktemp -d)  # the fuzzers, their logs and an output base of their own (the disk cache is shared)
  export KVSHARD_FUZZ_OUTPUT_BASE=$fuzz_out/output_base
  if bash tools/fuzz.sh build "$fuzz_out"; then
    bash tools/fuzz.sh seeds "$fuzz_out" || rc=1
    runs+=("fuzz_seeds=$fuzz_out/junit")
  else
    rc=1
    runs+=(--failed "fuzz_seeds:tools/fuzz.sh build failed")
  fi
  bazel --output_base="$KVSHARD_FUZZ_OUTPUT_BASE" shutdown 2>/dev/null
  chmod -R u+w "$KVSHARD_FUZZ_OUTPUT_BASE" 2>/dev/null
  rm -rf "$KVSHARD_FUZZ_OUTPUT_BASE"
  phase "fuzz build and seeds"
elif [[ ${CI:-} != true ]]; then
  echo "kvshard: note: fuzz build and seeds skipped (CI runs them; KVSHARD_FUZZ_SEEDS=1 bash tools/test.sh runs them here)"
fi
print_phases
python3 tools/test_summary.py "${runs[@]}" || rc=1
# The fuzzers and their logs stay where a case failed (the failing line names the log), to rerun the seed.
[[ -n ${fuzz_out:-} && $rc == 0 ]] && rm -rf "$fuzz_out"
exit $rc

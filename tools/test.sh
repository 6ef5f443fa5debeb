#!/usr/bin/env bash
# Checks the package layers (tools/check_layers.sh), builds every target (CUDA code too, when the toolkit is
# present) and runs every test; then runs the CPU tests again under AddressSanitizer and UBSan at once
# (--config=asan_ubsan: docs/building.md). Prints a line per run and, last, "N passed, N failed, N skipped" over
# all runs, counted per test case from Bazel's JUnit XML. GPU tests skip without a GPU.
# KVSHARD_SANITIZERS=0 skips the sanitizer run (a quick local check); =asan,ubsan runs the two separately.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh || exit 1
bash tools/check_layers.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
bazel build //... || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
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
run_tests normal
# KVSHARD_SANITIZERS: which sanitizer runs follow the normal one (comma list; 0 = none). CI runs asan_ubsan: one
# instrumented build with both sanitizers, instead of two builds (docs/RELIABILITY.md, "Sanitizers").
sans=${KVSHARD_SANITIZERS:-asan_ubsan}
[[ $sans == 1 ]] && sans=asan_ubsan
for san in ${sans//,/ }; do
  case $san in
    0) ;;
    asan|ubsan|asan_ubsan) run_tests "$san" --config="$san" ;;
    *) echo "kvshard: error: KVSHARD_SANITIZERS: unknown run '$san' (asan_ubsan, asan, ubsan or 0)" >&2; rc=1 ;;
  esac
done
python3 tools/test_summary.py "${runs[@]}" || rc=1
exit $rc

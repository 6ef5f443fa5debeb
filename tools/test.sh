#!/usr/bin/env bash
# Checks the package layers (tools/check_layers.sh), builds every target (CUDA code too, when the toolkit is
# present) and runs every test; prints "N passed, N failed, N skipped" counted per test case from Bazel's JUnit
# XML. GPU tests skip without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh || exit 1
bash tools/check_layers.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
bazel build //... || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
bazel test --test_summary=terse //...
rc=$?
python3 tools/test_summary.py bazel-testlogs || rc=1
exit $rc

#!/usr/bin/env bash
# Builds the kvshard CLI (installing missing packages first) and runs it with the given arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bazel build -c opt --ui_event_filters=-info,-stdout,-stderr --noshow_progress //cli:kvshard >&2
exec ./bazel-bin/cli/kvshard "$@"

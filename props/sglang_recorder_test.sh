#!/usr/bin/env bash
# sh_test wrapper of sglang_recorder_test.py: runs it with the first python that imports torch ($KVSHARD_PYTHON,
# /usr/bin/python3, python3); without one it prints "SKIPPED: <why>", writes a skipped JUnit case and exits 0.
set -u
here="${0%/*}"; [[ "$0" == */* ]] || here=.  # bash only: this path must work without coreutils on PATH
script="$here/sglang_recorder_test.py"
[[ -f "$script" ]] || script="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-kvshard}/props/sglang_recorder_test.py"

tried=()
for py in ${KVSHARD_PYTHON:-} /usr/bin/python3 python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  tried+=("$py")
  if "$py" -c "import torch" >/dev/null 2>&1; then
    exec "$py" "$script" "$@"
  fi
done

# No python with torch. A plain python3 still runs the script, which skips saying why (folder or torch).
if [[ ${#tried[@]} -gt 0 ]]; then
  exec "${tried[0]}" "$script" "$@"
fi
why="no python3 found (tried \$KVSHARD_PYTHON, /usr/bin/python3, python3); needs python3 with torch"
echo "SKIPPED: $why"
if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
  printf '%s\n' '<?xml version="1.0" encoding="UTF-8"?>' \
    '<testsuites tests="1" failures="0" skipped="1"><testsuite name="sglang_recorder_test" tests="1" failures="0" skipped="1">' \
    "<testcase classname=\"SglangRecorder\" name=\"all\" result=\"skipped\"><skipped message=\"$why\"/></testcase>" \
    '</testsuite></testsuites>' > "$XML_OUTPUT_FILE"
fi
exit 0

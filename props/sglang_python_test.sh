#!/usr/bin/env bash
# sh_test wrapper of the SGLang comparison tests: `sglang_python_test.sh <script>.py [args]` runs props/<script>.py
# with the first python that imports torch ($KVSHARD_PYTHON, /usr/bin/python3, python3); without any python it
# prints "SKIPPED: <why>", writes a skipped JUnit case and exits 0 (a python without torch skips in the script).
set -u
here="${0%/*}"; [[ "$0" == */* ]] || here=.  # bash only: this path must work without coreutils on PATH
name="${1:?usage: sglang_python_test.sh SCRIPT.py [args]}"; shift
script="$here/$name"
[[ -f "$script" ]] || script="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-kvshard}/props/$name"

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
  suite="${name%.py}"
  printf '%s\n' '<?xml version="1.0" encoding="UTF-8"?>' \
    "<testsuites tests=\"1\" failures=\"0\" skipped=\"1\"><testsuite name=\"$suite\" tests=\"1\" failures=\"0\" skipped=\"1\">" \
    "<testcase classname=\"$suite\" name=\"all\" result=\"skipped\"><skipped message=\"$why\"/></testcase>" \
    '</testsuite></testsuites>' > "$XML_OUTPUT_FILE"
fi
exit 0

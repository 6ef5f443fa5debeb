#!/usr/bin/env bash
# sh_test wrapper of sglang_parity_test.py: runs it with the first python that imports torch ($KVSHARD_PYTHON,
# /usr/bin/python3, python3); without one it prints "SKIPPED: <why>", writes a skipped JUnit case and exits 0.
set -u
here="$(dirname "$0")"
script="$here/sglang_parity_test.py"
[[ -f "$script" ]] || script="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-kvshard}/props/sglang_parity_test.py"

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
  cat > "$XML_OUTPUT_FILE" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" failures="0" skipped="1"><testsuite name="sglang_parity_test" tests="1" failures="0" skipped="1">
<testcase classname="SglangParity" name="all" result="skipped"><skipped message="$why"/></testcase>
</testsuite></testsuites>
EOF
fi
exit 0

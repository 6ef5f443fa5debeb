#!/usr/bin/env bash
# Checks that the C++/CUDA sources of the project's packages are formatted as .clang-format says (clang-format 14,
# Debian's clang-format package). Prints each file that differs and the command that fixes it; exit 1 when any
# differs, exit 0 with "format: ok (N files)". Without clang-format it says so and exits 0 (tools/install_deps.sh
# installs it). Run by tools/test.sh.
#   bash tools/check_format.sh                 check every package
#   bash tools/check_format.sh --fix [DIR...]  reformat them (or DIR...) in place
# A new top-level package joins `formatted` when it is created (tools/check_layers.sh names it too).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check_format: note: clang-format not installed; format not checked (apt-get install clang-format)"
  exit 0
fi
formatted=(bench cli core cpu_fast cpu_ref fuzz gpu props replay sim)
fix=0
if [[ ${1:-} == --fix ]]; then
  fix=1
  shift
  (($#)) && formatted=("$@")
fi
mapfile -t files < <(for d in "${formatted[@]}"; do git ls-files "$d/*.h" "$d/*.cc" "$d/*.cu" "$d/*.cuh"; done)
if ((fix)); then
  clang-format -i "${files[@]}"
  echo "format: reformatted ${#files[@]} files"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format "$f" | cmp -s - "$f"; then
    echo "check_format: $f is not formatted (bash tools/check_format.sh --fix)"
    bad=$((bad + 1))
  fi
done
if ((bad)); then
  echo "check_format: $bad of ${#files[@]} files differ from .clang-format"
  exit 1
fi
echo "format: ok (${#files[@]} files)"

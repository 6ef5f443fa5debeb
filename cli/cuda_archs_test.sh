#!/usr/bin/env bash
# The fat binary: kvshard embeds SASS for every SM of $1 (the build's CUDA_ARCHS, e.g. 80,86,89,90) and PTX for
# the highest, listed by tools/cuda_archs.py (the ELF's .nv_fatbin) and, where installed, by cuobjdump too.
set -u
KV="${TEST_SRCDIR}/kvshard/cli/kvshard"
LIST="${TEST_SRCDIR}/kvshard/tools/cuda_archs.py"
IFS=, read -r -a archs <<<"${1:?usage: cuda_archs_test.sh ARCHS}"
got=$(python3 "$LIST" "$KV") || { echo "FAIL: no fatbin in kvshard"; exit 1; }
echo "embedded: $(tr '\n' ' ' <<<"$got")"
want=""
for a in "${archs[@]}"; do want+="sm_$a elf"$'\n'; done
want+="sm_${archs[-1]} ptx"
want=$(sort -u <<<"$want")
fail=0
# Every kernel library contributes the same set, so the union is exactly the configured list.
if [[ "$(sort -u <<<"$got")" != "$want" ]]; then
  echo "FAIL: want exactly: $(tr '\n' ' ' <<<"$want")"; fail=1
fi
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
if [[ -x "$CUOBJDUMP" ]]; then
  elfs=$("$CUOBJDUMP" --list-elf "$KV" | grep -o 'sm_[0-9]*' | sort -u)
  for a in "${archs[@]}"; do
    grep -qx "sm_$a" <<<"$elfs" || { echo "FAIL: cuobjdump --list-elf lacks sm_$a"; fail=1; }
  done
  "$CUOBJDUMP" --list-ptx "$KV" | grep -q "sm_${archs[-1]}" || { echo "FAIL: cuobjdump: no PTX for sm_${archs[-1]}"; fail=1; }
else
  echo "cuobjdump not installed: checked with tools/cuda_archs.py only"
fi
exit $fail

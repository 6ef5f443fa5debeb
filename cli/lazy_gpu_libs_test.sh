#!/usr/bin/env bash
# Lazy GPU libraries: the kvshard binary has no load-time dependency on NCCL or the CUDA driver (readelf -d), CPU
# commands run where NCCL cannot be found (KVSHARD_NCCL_LIBRARY=/nonexistent), and a GPU command there without a
# usable GPU or NCCL exits 3 with exactly one line "kvshard: error: ...".
set -u
KV="${TEST_SRCDIR}/kvshard/cli/kvshard"
fail=0
needed=$(readelf -d "$KV" | awk '/\(NEEDED\)/ {print $NF}' | tr -d '[]')
echo "NEEDED: $(tr '\n' ' ' <<<"$needed")"
if grep -E '^lib(nccl|cuda)\.so' <<<"$needed"; then
  echo "FAIL: kvshard links NCCL or the CUDA driver at load time"; fail=1
fi
export KVSHARD_NCCL_LIBRARY=/nonexistent/libnccl.so.2
out=$("$KV" place --shard-size 4 --page-size 16 --rank 1 --locs 0,17,80,359 2>&1); rc=$?
if [[ $rc -ne 0 || "$out" != *'filter_local(rank 1)'* ]]; then
  echo "FAIL: CPU command without NCCL: rc=$rc: $out"; fail=1
fi
out=$("$KV" simulate --help 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL: simulate --help without NCCL: rc=$rc"; fail=1; }
# A GPU command: bench all-gather over 2 GPUs needs both a device and NCCL; here at least one is missing.
err=$("$KV" bench --gpus 2 --op allgather --min-bytes 1024 --max-bytes 1024 2>&1 >/dev/null); rc=$?
lines=$(printf '%s\n' "$err" | grep -c .)
if [[ $rc -ne 3 || $lines -ne 1 || "$err" != 'kvshard: error: '* ]]; then
  echo "FAIL: GPU command without NCCL: rc=$rc (want 3), $lines stderr line(s) (want 1): $err"; fail=1
else
  echo "ok: $err"
fi
exit $fail

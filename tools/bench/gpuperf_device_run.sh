#!/usr/bin/env bash
# One device session for issue 14 (rerange, device plan): the two differential test binaries, the same-run
# bench (copy, gather_rows, rerange, plan scaling), torch index_select where torch exists, and Nsight Compute
# kernel durations of the rerange and plan launches at 64 MiB. Writes logs to $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpuperf_out}; mkdir -p "$out"
nvidia-smi -L | tee "$out/device.txt"
RC_PARAMS=max_success=100 .bundle/bin/gpu_cp_ops_test 2>&1 | tail -25 | tee "$out/cp_ops_test.txt"
RC_PARAMS=max_success=100 .bundle/bin/gpu_gather_plan_test 2>&1 | tail -25 | tee "$out/plan_test.txt"
.bundle/bin/kvshard bench --op gather_rows,rerange,plan --min-bytes 67108864 --max-bytes 268435456 --layers 16 \
  --iters 50 2>&1 | tee "$out/bench.txt"
python3 tools/bench/torch_index_select.py 2>&1 | tee "$out/torch.txt"
if command -v ncu >/dev/null; then
  for ops in plan gather_rows,rerange; do
    timeout 150 ncu --clock-control none -k regex:"Rerange|ResetAndFlag|PlaceKernel|CheckAndExpand|DeviceScan|GatherRows" \
      -c 5 --section SpeedOfLight .bundle/bin/kvshard bench --op $ops --min-bytes 67108864 --max-bytes 67108864 \
      --iters 1 --warmup 0 2>&1 | grep -E "Rerange|ResetAndFlag|Place|CheckAndExpand|DeviceScan|GatherRows|Duration|DRAM Throughput" \
      | tee -a "$out/ncu.txt"
  done
fi

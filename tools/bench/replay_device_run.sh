#!/usr/bin/env bash
# One device session for issue 27 (replay and rerange speed), on a GPU host with the bundle unpacked in .bundle:
# the GPU differential tests (run_all.sh), the same-run rerange bench (gather_rows, the rerange per call and with
# a per-batch table), Nsight Compute durations of the rerange kernels at 64 MiB, and `replay`
# wall time and peak memory per backend on the default `gen` trace and on a `simulate --emit-trace` Mooncake trace.
# Writes logs to $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/replay_out}; mkdir -p "$out"
k=.bundle/bin/kvshard
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } | tee "$out/device.txt"
timeout 200 .bundle/run_all.sh > "$out/run_all.txt" 2>&1; echo "run_all exit $?" >> "$out/run_all.txt"
tail -3 "$out/run_all.txt"
$k bench --op gather_rows,rerange --min-bytes 67108864 --max-bytes 268435456 --layers 16 --iters 50 2>&1 \
  | tee "$out/bench.txt"
if command -v ncu >/dev/null; then
  timeout 120 ncu --clock-control none -k regex:"Rerange|GatherRows" -c 8 --section SpeedOfLight \
    $k bench --op gather_rows,rerange --min-bytes 67108864 --max-bytes 67108864 --iters 1 --warmup 0 2>&1 \
    | grep -E "Rerange|GatherRows|Duration|DRAM Throughput" > "$out/ncu.txt"
fi
$k gen --seed 1 --records 100000 --batch-size 8 --out /tmp/g.jsonl
$k gen --seed 1 --records 100000 --batch-size 8 --allocator-only --out /tmp/a.jsonl
$k simulate testdata/workloads/mooncake_conversation_trace.jsonl --shard-size 8 --page-size 64 \
  --cache-tokens 20000000 --emit-trace /tmp/m.jsonl --emit-max-batches 200 --emit-layers 2 --quiet
ls -la /tmp/g.jsonl /tmp/a.jsonl /tmp/m.jsonl | tee "$out/traces.txt"
# Wall and user seconds and peak RSS of one command (GNU time may be missing there).
measure() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
r = subprocess.run(["timeout", "120"] + sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
tail = " | ".join(r.stdout.strip().splitlines()[-2:])
print(f"exit {r.returncode}: {time.time() - t:.2f} s wall, {u.ru_utime:.2f} s user, {u.ru_maxrss / 1024:.1f} MB: {tail}")
PY
}
for t in g a m; do
  for b in ref gpu diff; do
    echo "$t $b: $(measure $k replay /tmp/$t.jsonl --backend $b)" | tee -a "$out/replay.txt"
  done
done

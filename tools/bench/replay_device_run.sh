#!/usr/bin/env bash
# One device session for issue 27 (replay and rerange speed), on a GPU host, from the repository root with the bundle
# unpacked in .bundle (tools/gpu_bundle.sh): the GPU tests (run_all.sh), the same-run rerange bench (gather_rows, the
# rerange per call and with a per-batch table, twice), Nsight Compute durations of the rerange kernels at 64 MiB, what a
# CUDA process pays to start and per call (cuda_start_costs.py, cuda_call_costs.cu), then `replay` of the default `gen`
# trace, the 200-batch Mooncake `simulate --emit-trace` trace and a header-only trace: ROUNDS interleaved rounds of
# ref / gpu / diff, each run's wall and user seconds, peak RSS and the replay's own report (threads' busy and wait
# seconds); SEVERAL copies of each trace in SEVERAL processes against one process (`replay A B C`), and that process
# with --jobs 1, 2, 4 and 8, and with --jobs 4 and 1, 2 or 4 reader threads a replay. Writes logs to $OUT
# (docs/PERFORMANCE.md quotes them).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
export PATH=$PATH:/usr/local/cuda/bin
out=${OUT:-/tmp/replay_out}; mkdir -p "$out"
k=.bundle/bin/kvshard
rounds=${ROUNDS:-4}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; lscpu | grep 'Model name'; } | tee "$out/device.txt"
(cd .bundle && timeout 300 ./run_all.sh) > "$out/run_all.txt" 2>&1; echo "run_all exit $?" >> "$out/run_all.txt"
tail -3 "$out/run_all.txt"
for i in 1 2; do
  $k bench --op gather_rows,rerange --min-bytes 67108864 --max-bytes 268435456 --layers 16 --iters 50 2>&1
done | tee "$out/bench.txt"
if command -v ncu >/dev/null; then
  timeout 120 ncu --clock-control none -k regex:"Rerange|GatherRows" -c 8 --section SpeedOfLight \
    $k bench --op gather_rows,rerange --min-bytes 67108864 --max-bytes 67108864 --iters 1 --warmup 0 2>&1 \
    | grep -E "Rerange|GatherRows|Duration|DRAM Throughput" > "$out/ncu.txt"
fi
for i in 1 2 3; do python3 tools/bench/cuda_start_costs.py; done 2>&1 | tee "$out/cuda_start.txt"
(nvcc -O2 -arch=sm_90 -o /tmp/cuda_call_costs tools/bench/cuda_call_costs.cu && /tmp/cuda_call_costs) 2>&1 \
  | tee "$out/cuda_calls.txt"
$k gen --seed 1 --records 100000 --batch-size 8 --out /tmp/g.jsonl
$k simulate testdata/workloads/mooncake_conversation_trace.jsonl --shard-size 8 --page-size 64 \
  --cache-tokens 20000000 --emit-trace /tmp/m.jsonl --emit-max-batches 200 --emit-layers 2 --quiet
head -n 1 /tmp/g.jsonl > /tmp/h.jsonl
ls -la /tmp/g.jsonl /tmp/m.jsonl | tee "$out/traces.txt"
# Wall and user seconds, peak RSS and the replay's summary and thread report of one command (GNU time may be missing).
measure() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
r = subprocess.run(["timeout", "120"] + sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
report = " | ".join(l for l in r.stdout.splitlines() if "mismatch" in l or "busy" in l or "error" in l)
print(f"exit {r.returncode}: {time.time() - t:.3f} s wall, {u.ru_utime:.2f} s user, {u.ru_maxrss / 1024:.1f} MB: {report}")
PY
}
for b in gpu diff; do echo "header-only $b: $(measure $k replay /tmp/h.jsonl --backend $b)"; done | tee "$out/header.txt"
for round in $(seq "$rounds"); do
  for t in g m; do
    for b in ref gpu diff; do echo "round $round $t $b: $(measure $k replay /tmp/$t.jsonl --backend $b)"; done
  done
done | tee "$out/replay.txt"
# Several traces a process (`replay A B C`): SEVERAL copies of each trace replayed by SEVERAL processes, then by one
# (the driver and context started once), interleaved, two rounds.
several=${SEVERAL:-5}
for round in 1 2; do
  for t in g m; do
    copies=(); for _ in $(seq "$several"); do copies+=("/tmp/$t.jsonl"); done
    for b in ref gpu diff; do
      s=$(date +%s.%N)
      for c in "${copies[@]}"; do timeout 120 $k replay "$c" --backend $b > /dev/null 2>&1; done
      e=$(date +%s.%N)
      echo "round $round $t $b: $several processes $(python3 -c "print(f'{$e - $s:.3f}')") s; one process: $(measure $k replay "${copies[@]}" --backend $b)"
    done
  done
done | tee "$out/several.txt"
# Several traces at once (`replay --jobs N`): the same SEVERAL copies by one process, one at a time and up to 2, 4
# and 8 at once, two rounds.
for round in 1 2; do
  for t in g m; do
    copies=(); for _ in $(seq "$several"); do copies+=("/tmp/$t.jsonl"); done
    for b in ref gpu diff; do
      for j in 1 2 4 8; do
        echo "round $round $t $b --jobs $j: $(measure $k replay "${copies[@]}" --backend $b --jobs $j)"
      done
    done
  done
done | tee "$out/jobs.txt"
# Reader threads a replay under --jobs: each replay at once starts the default's four reader threads on a 16-core
# host, however many run at once. SEVERAL copies of the default trace, four at once, with 1, 2 and 4 readers each.
for round in 1 2; do
  copies=(); for _ in $(seq "$several"); do copies+=("/tmp/g.jsonl"); done
  for b in ref gpu diff; do
    for r in 1 2 4; do
      echo "round $round g $b --jobs 4 --read-threads $r: $(measure $k replay "${copies[@]}" --backend $b --jobs 4 --read-threads $r)"
    done
  done
done | tee "$out/readers.txt"

#!/usr/bin/env bash
# One device session for issue 27 (replay and rerange speed), on a GPU host, from the repository root with the bundle
# unpacked in .bundle (tools/gpu_bundle.sh). In the order a short lease wants them:
#   1. the GPU tests: run_all.sh, or with TESTS="a_test b_test" those binaries alone (their gtest lines);
#   2. `replay` of the default `gen` trace and the 200-batch Mooncake `simulate --emit-trace` trace: ROUNDS interleaved
#      rounds of ref / gpu / diff, each run's wall and user seconds, peak RSS and the replay's own report;
#   3. with BASE=DIR (another bundle, e.g. an older commit's), an A/B of that bundle against this one: `ref` and `gpu`
#      of the default trace, one trace a process and SEVERAL in one process, interleaved;
#   4. SEVERAL copies of each trace by SEVERAL processes against one process (`replay A B C`), then that process with
#      --jobs 1, 2, 4 and 8, then --jobs 4 with 1, 2 or 4 reader threads a replay;
#   5. the same-run rerange bench (gather_rows, the rerange per call and with a per-batch table, twice), Nsight Compute
#      durations of the rerange kernels at 64 MiB, what a CUDA process pays to start and per call.
# LIMIT (seconds, default 540) bounds the whole run: a step that would start with too little time left is skipped
# and says so, so a lease shorter than the plan still brings back the first steps' logs. Writes two logs to $OUT
# (the device tool brings back at most eight files): run_all.txt (the tests) and replay_device_run.txt (every other
# step, each line led by its step's name: device, traces, header, replay, ab, several, jobs, readers, bench, ncu,
# cuda_start, cuda_calls). docs/PERFORMANCE.md quotes them.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
export PATH=$PATH:/usr/local/cuda/bin
out=${OUT:-/tmp/replay_out}; mkdir -p "$out"
k=.bundle/bin/kvshard
rounds=${ROUNDS:-4}
several=${SEVERAL:-5}
start=$(date +%s)
limit=${LIMIT:-540}
log=$out/replay_device_run.txt
: > "$log"
# step NAME: stdin to the log (and the screen), each line led by "NAME: ".
step() { sed -u "s/^/$1: /" | tee -a "$log"; }
left() { echo $((limit - ($(date +%s) - start))); }
# time_for NEED STEP: true when NEED seconds are left, else says in the log (and on the screen) that STEP stops.
time_for() {
  (($(left) >= $1)) && return 0
  echo "$2: skipped (LIMIT: $(left) s left, $1 s wanted)" | tee -a "$log" >&2
  return 1
}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; lscpu | grep 'Model name'; } | step device
if [[ -n "${TESTS:-}" ]]; then
  for t in $TESTS; do
    echo "== $t"
    timeout 150 ".bundle/bin/$t" 2>&1 | grep -E '^\[ +(PASSED|FAILED|SKIPPED|OK) |^\[==========\]|Failure'
  done > "$out/run_all.txt" 2>&1
else
  budget=$(($(left) - 30)); ((budget > 270)) && budget=270; ((budget < 10)) && budget=10
  (cd .bundle && timeout $budget ./run_all.sh) > "$out/run_all.txt" 2>&1
  echo "run_all exit $?" >> "$out/run_all.txt"
fi
echo "tests done at $(($(date +%s) - start)) s" >> "$out/run_all.txt"
grep -E "passed|FAILED|done at" "$out/run_all.txt" | tail -5
$k gen --seed 1 --records 100000 --batch-size 8 --out /tmp/g.jsonl
$k simulate testdata/workloads/mooncake_conversation_trace.jsonl --shard-size 8 --page-size 64 \
  --cache-tokens 20000000 --emit-trace /tmp/m.jsonl --emit-max-batches 200 --emit-layers 2 --quiet
head -n 1 /tmp/g.jsonl > /tmp/h.jsonl
ls -la /tmp/g.jsonl /tmp/m.jsonl | step traces
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
copies_of() { for _ in $(seq "$several"); do echo "/tmp/$1.jsonl"; done; }
for b in gpu diff; do echo "header-only $b: $(measure $k replay /tmp/h.jsonl --backend $b)"; done | step header
for round in $(seq "$rounds"); do
  time_for 40 replay || break
  for t in g m; do
    for b in ref gpu diff; do echo "round $round $t $b: $(measure $k replay /tmp/$t.jsonl --backend $b)"; done
  done
done | step replay
if [[ -n "${BASE:-}" ]]; then
  for round in $(seq "$rounds"); do
    time_for 60 ab || break
    mapfile -t copies < <(copies_of g)
    for v in base new; do
      kk=$k; [[ $v == base ]] && kk=$BASE/bin/kvshard
      echo "round $round $v g ref: $(measure $kk replay /tmp/g.jsonl --backend ref)"
      echo "round $round $v g gpu: $(measure $kk replay /tmp/g.jsonl --backend gpu)"
      echo "round $round $v g x$several gpu: $(measure $kk replay "${copies[@]}" --backend gpu)"
    done
  done | step ab
fi
# Several traces a process (`replay A B C`): SEVERAL copies of each trace replayed by SEVERAL processes, then by one
# (the driver and context started once), interleaved, two rounds.
for round in 1 2; do
  for t in g m; do
    mapfile -t copies < <(copies_of $t)
    for b in ref gpu diff; do
      time_for 40 several || break 3
      s=$(date +%s.%N)
      for c in "${copies[@]}"; do timeout 120 $k replay "$c" --backend $b > /dev/null 2>&1; done
      e=$(date +%s.%N)
      echo "round $round $t $b: $several processes $(python3 -c "print(f'{$e - $s:.3f}')") s; one process: $(measure $k replay "${copies[@]}" --backend $b)"
    done
  done
done | step several
# Several traces at once (`replay --jobs N`): the same SEVERAL copies by one process, one at a time and up to 2, 4
# and 8 at once, two rounds.
for round in 1 2; do
  for t in g m; do
    mapfile -t copies < <(copies_of $t)
    for b in ref gpu diff; do
      for j in 1 2 4 8; do
        time_for 20 jobs || break 4
        echo "round $round $t $b --jobs $j: $(measure $k replay "${copies[@]}" --backend $b --jobs $j)"
      done
    done
  done
done | step jobs
# Reader threads a replay under --jobs: each replay at once starts the default's four reader threads on a 16-core
# host, however many run at once. SEVERAL copies of the default trace, four at once, with 1, 2 and 4 readers each.
for round in 1 2; do
  mapfile -t copies < <(copies_of g)
  for b in ref gpu diff; do
    for r in 1 2 4; do
      time_for 20 readers || break 3
      echo "round $round g $b --jobs 4 --read-threads $r: $(measure $k replay "${copies[@]}" --backend $b --jobs 4 --read-threads $r)"
    done
  done
done | step readers
# The per-call rerange against gather_rows in the same run, and what a CUDA process pays (measured many times
# before: last).
if time_for 60 bench; then
  for i in 1 2; do
    $k bench --op gather_rows,rerange --min-bytes 67108864 --max-bytes 268435456 --layers 16 --iters 50 2>&1
  done | step bench
fi
if command -v ncu > /dev/null && time_for 60 ncu; then
  timeout 120 ncu --clock-control none -k regex:"Rerange|GatherRows" -c 8 --section SpeedOfLight \
    $k bench --op gather_rows,rerange --min-bytes 67108864 --max-bytes 67108864 --iters 1 --warmup 0 2>&1 \
    | grep -E "Rerange|GatherRows|Duration|DRAM Throughput" | step ncu
fi
if time_for 40 cuda_start; then
  for i in 1 2 3; do python3 tools/bench/cuda_start_costs.py; done 2>&1 | step cuda_start
  (nvcc -O2 -arch=sm_90 -o /tmp/cuda_call_costs tools/bench/cuda_call_costs.cu && /tmp/cuda_call_costs) 2>&1 \
    | step cuda_calls
fi
echo "at $(($(date +%s) - start)) s of LIMIT $limit" | step done

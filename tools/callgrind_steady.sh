#!/bin/bash
# Steady per-call instruction count of one function under a Google Benchmark, for machines without hardware
# counters (this VM): runs the benchmark twice under callgrind at two --benchmark_min_time values and divides the
# difference of the inclusive counts by the difference of the calls, so the first call's set-up cancels out.
# usage: tools/callgrind_steady.sh BENCHMARK_BINARY FILTER [FUNCTION_GLOB]
#   e.g. tools/callgrind_steady.sh bazel-bin/bench/gather_plan_benchmark 'BM_GatherPlan/fast/shared:1/send_rows:0$'
set -euo pipefail
bin=$1
filter=$2
fn=${3:-kvshard::fast::GatherPlanner::Build*}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for t in 0.01 0.06; do
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.$t" --toggle-collect="$fn" "$bin" \
    --benchmark_filter="$filter" --benchmark_min_time="$t" >/dev/null 2>&1
done
python3 - "$out" "${fn%\*}" <<'PY'
import re, sys
out, name = sys.argv[1], sys.argv[2]
def counts(path):
    names, calls, current = {}, 0, None
    lines = open(path).read().split("\n")
    for line in lines:
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            current = m.group(1) if line.startswith("cfn=") else None
            continue
        if line.startswith("calls=") and current and names.get(current, "").startswith(name):
            calls += int(line.split()[0].split("=")[1])
        current = None if not line.startswith("calls=") else current
    total = int([l for l in lines if l.startswith("summary:")][0].split()[1])
    return total, calls
(a_ir, a_calls), (b_ir, b_calls) = counts(f"{out}/cg.0.01"), counts(f"{out}/cg.0.06")
if b_calls == a_calls:
    sys.exit("callgrind_steady: both runs made the same number of calls; raise the second --benchmark_min_time")
print(f"{(b_ir - a_ir) / (b_calls - a_calls):.0f} instructions per call (steady; {a_calls} and {b_calls} calls)")
PY

#!/usr/bin/env bash
# Measures the cost model's operations on a GPU machine with the bundle (tools/gpu_bundle.sh) and writes the
# raw JSON into OUT_DIR: kernel bytes sweeps, the device and host plan builds at 8..512 requests, and the
# compute benchmark (PyTorch). tools/calibrate/make_calibration.py turns them into a calibration file.
#   tools/calibrate/measure.sh .bundle OUT_DIR
set -euo pipefail
bundle=${1:?usage: measure.sh BUNDLE OUT_DIR}; out=${2:?usage: measure.sh BUNDLE OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
"$bundle/bin/kvshard" bench --json --op gather-rows,owner-write,stage-chunk,rerange --min-bytes 262144 \
  --max-bytes 1073741824 --factor 2 > "$out/bench_bytes.json"
for b in 8 16 32 64 128 256 512; do
  "$bundle/bin/kvshard" bench --json --op plan --batch-size "$b" --iters 50 > "$out/plan_$b.tmp"
done
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
docs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "plan_*.tmp")))]
json.dump({"device": docs[0]["device"], "rows": [r for d in docs for r in d["rows"]]},
          open(os.path.join(out, "bench_plan.json"), "w"), indent=1)
PY
rm -f "$out"/plan_*.tmp
python3 "$here/compute_bench.py" > "$out/compute.json"

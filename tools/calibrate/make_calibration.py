#!/usr/bin/env python3
"""Merges GPU-machine measurements into a kvshard cost-model calibration file (docs/simulate.md).

  make_calibration.py --device NAME --made-by CMD [--made-by CMD ...] --nccl-busbw B --nccl-latency-us L
                      --nccl-source TEXT BENCH_OR_COMPUTE.json ... > testdata/calibration/NAME.json

Inputs are `kvshard bench --json` outputs (rows with op, bytes, time_us, wrong) and compute_bench.py outputs
(rows with op, x, time_us). Bench rows that failed their check (wrong > 0) are refused; ops the cost model does
not use are left out, and so are repeated (op, size) bench rows (every bench run re-measures the copy limit). Standard library only.
"""
import argparse
import json
import sys

# bench op -> calibration op
BENCH_OPS = {
    "copy": "copy",
    "gather_rows": "gather_rows",
    "owner_write": "owner_write",
    "stage_chunk": "stage_chunk",
    "rerange_fused": "rerange",
    "gather_plan_build": "gather_plan_build",
    "host_gather_plan_build": "host_gather_plan_build",
}
COMPUTE_OPS = {"compute_dense", "compute_attention"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", required=True)
    ap.add_argument("--made-by", action="append", default=[])
    ap.add_argument("--nccl-busbw", type=float, required=True, help="all-gather bus bandwidth, bytes/s")
    ap.add_argument("--nccl-latency-us", type=float, required=True)
    ap.add_argument("--nccl-source", required=True)
    ap.add_argument("--dense-shape", default="",
                    help="keep only compute_dense rows whose note contains this (the model's GEMM shape)")
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args()
    rows = []
    seen = set()
    for path in args.inputs:
        with open(path) as f:
            doc = json.load(f)
        for i, r in enumerate(doc["rows"]):
            if "bytes" in r:  # a kvshard bench row
                if r.get("wrong", 0):
                    sys.exit(f"{path}: rows[{i}] ({r['op']}) failed its correctness check")
                op = BENCH_OPS.get(r["op"])
                if op is None or (op, r["bytes"]) in seen:  # the plan runs repeat the copy limit rows
                    continue
                seen.add((op, r["bytes"]))
                rows.append({"op": op, "x": r["bytes"], "time_us": round(r["time_us"], 4),
                             "note": f"{doc.get('device', '')}: {r.get('note', '')}".strip()})
            elif r["op"] in COMPUTE_OPS:
                if args.dense_shape and r["op"] == "compute_dense" and args.dense_shape not in r.get("note", ""):
                    continue
                rows.append({"op": r["op"], "x": r["x"], "time_us": round(r["time_us"], 4),
                             "note": f"{doc.get('device', '')} torch {doc.get('torch', '')}: {r.get('note', '')}"})
    out = {
        "kvshard_calibration": 1,
        "device": args.device,
        "made_by": args.made_by,
        "limits": {"nccl_busbw_bytes_per_s": args.nccl_busbw, "collective_latency_us": args.nccl_latency_us,
                   "nccl_source": args.nccl_source},
        "rows": rows,
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

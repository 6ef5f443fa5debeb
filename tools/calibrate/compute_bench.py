#!/usr/bin/env python3
"""Times a transformer layer's compute on the GPU with PyTorch, for kvshard's cost-model calibration.

Prints one JSON object {"device", "rows": [{"op", "x", "time_us", "note"}]}: `compute_dense` rows are bf16 GEMMs
(x = FLOPs), `compute_attention` rows are scaled-dot-product attention of T new tokens over C context tokens
(x = FLOPs = 4 T C H D). Timed with CUDA events, median of --iters after --warmup. Needs torch with CUDA.
"""
import argparse
import json
import statistics
import sys

import torch


def time_us(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--heads", type=int, default=16, help="attention heads per rank (128 heads / TP 8)")
    ap.add_argument("--head-dim", type=int, default=128)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("compute_bench: no CUDA device visible to torch", file=sys.stderr)
        return 3
    dev = torch.device("cuda")
    rows = []
    k = 7168  # DeepSeek-V3 / Kimi K2 hidden size
    for m in (2048, 9216):
        w = torch.randn(k, m, device=dev, dtype=torch.bfloat16)
        for t in (16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768):
            a = torch.randn(t, k, device=dev, dtype=torch.bfloat16)
            us = time_us(lambda: torch.matmul(a, w), args.warmup, args.iters)
            rows.append({"op": "compute_dense", "x": 2.0 * t * k * m, "time_us": us,
                         "note": f"bf16 GEMM [{t},{k}]x[{k},{m}]"})
            del a
        del w
    h, d = args.heads, args.head_dim
    for t in (128, 512, 2048, 8192):
        for ratio in (1, 4, 16):
            c = t * ratio
            if c > 131072:
                continue
            q = torch.randn(1, h, t, d, device=dev, dtype=torch.bfloat16)
            kv = torch.randn(1, h, c, d, device=dev, dtype=torch.bfloat16)
            us = time_us(lambda: torch.nn.functional.scaled_dot_product_attention(q, kv, kv), args.warmup, args.iters)
            rows.append({"op": "compute_attention", "x": 4.0 * t * c * h * d, "time_us": us,
                         "note": f"SDPA q=[1,{h},{t},{d}] kv=[1,{h},{c},{d}] bf16"})
            del q, kv
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""torch.index_select (dim 0) with a host-built index, for the PERFORMANCE.md table beside kvshard's gather_rows
and rerange: rows of --row-bytes uint8 at each --bytes size in a shuffled order (torch.randperm on the host,
copied to the device untimed), timed with CUDA events; prints one line per size (median and mean of --iters),
busbw = read + written bytes / time. Exits 3 without torch or a GPU."""
import argparse
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, nargs="+", default=[64 << 20, 256 << 20])
    ap.add_argument("--row-bytes", type=int, default=1152)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_index_select: torch is not installed on this machine", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_index_select: no CUDA device", file=sys.stderr)
        return 3
    dev = torch.device("cuda:0")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    for size in args.bytes:
        rows = size // args.row_bytes
        src = torch.randint(0, 255, (rows, args.row_bytes), dtype=torch.uint8, device=dev)
        index = torch.randperm(rows, generator=torch.Generator().manual_seed(7)).to(dev)  # host-built index
        out = torch.empty_like(src)
        times = []
        for i in range(args.warmup + args.iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.index_select(src, 0, index, out=out)
            end.record()
            end.synchronize()
            if i >= args.warmup:
                times.append(start.elapsed_time(end) * 1e3)  # us
        if not torch.equal(out, src[index]):
            print("torch_index_select: wrong result", file=sys.stderr)
            return 1
        med, mean = statistics.median(times), statistics.fmean(times)
        moved = 2.0 * rows * args.row_bytes
        print(f"index_select bytes={rows * args.row_bytes} rows={rows} median_us={med:.2f} mean_us={mean:.2f} "
              f"busbw_median_GBs={moved / med / 1e3:.1f} busbw_mean_GBs={moved / mean / 1e3:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

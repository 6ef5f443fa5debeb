# Aggregates `perf script -F tid,ip,sym` output (with call chains) per thread: for the six threads with the most
# samples, the share of each symbol as the sampled frame (self) and anywhere on the stack (inclusive). A thread whose
# stacks hold both DeviceWorker and GpuPoolPath is marked "device" (replay's device thread).
#   python3 tools/bench/perf_threads.py perf_script.txt
import collections
import re
import sys


def main(path):
    threads = collections.defaultdict(lambda: [0, collections.Counter(), collections.Counter()])
    tid, stack = None, []

    def flush():
        if tid is None or not stack:
            return
        t = threads[tid]
        t[0] += 1
        t[1][stack[0]] += 1
        for s in set(stack):
            t[2][s] += 1

    for line in open(path, errors="replace"):
        if re.match(r"^\s*\d+\s*$", line):  # a sample's header: its thread id
            flush()
            tid, stack = int(line), []
        elif line.strip():  # a frame: address, then symbol
            parts = line.strip().split(None, 1)
            sym = parts[1] if len(parts) > 1 else "?"
            stack.append(re.sub(r"\(.*", "", sym.replace("(anonymous namespace)", "anon"))[:110])
    flush()
    for tid, (n, self_, incl) in sorted(threads.items(), key=lambda kv: -kv[1][0])[:6]:
        device = any("DeviceWorker" in s for s in incl) and any("GpuPoolPath" in s for s in incl)
        print(f"== tid {tid}: {n} samples{' device' if device else ''}")
        print("  self:", "; ".join(f"{s} {100 * c / n:.1f}%" for s, c in self_.most_common(25)))
        print("  incl:", "; ".join(f"{s} {100 * c / n:.1f}%" for s, c in incl.most_common(45)))


if __name__ == "__main__":
    main(sys.argv[1])

# Which frames call malloc, free and page faults on kvshard replay's checking thread (the thread with the most samples
# that runs Replayer::Replay), from `perf script -F tid,ip,sym` output recorded with call graphs:
#   python3 tools/bench/perf_malloc_callers.py perf_script.txt
import collections, re, sys
stacks = collections.defaultdict(list)
tid, stack = None, []
def flush():
    if tid is not None and stack: stacks[tid].append(stack)
for line in open(sys.argv[1], errors="replace"):
    if re.match(r"^\s*\d+\s*$", line):
        flush(); tid, stack = int(line), []
    elif line.strip():
        parts = line.strip().split(None, 1)
        sym = parts[1] if len(parts) > 1 else "?"
        stack.append(re.sub(r"\(.*", "", sym.replace("(anonymous namespace)", "anon"))[:90])
flush()
main = max((t for t in stacks if any(any("Replayer::Replay" in f for f in s) for s in stacks[t])), key=lambda t: len(stacks[t]))
ss = stacks[main]
print("checking thread", main, len(ss), "samples")
for what in ("malloc", "free", "page_fault", "[unknown]"):
    callers = collections.Counter(); n = 0
    for s in ss:
        idx = [i for i, f in enumerate(s) if what in f]
        if not idx: continue
        n += 1
        i = idx[-1] if what != "[unknown]" else 0
        if what == "[unknown]" and s[0] != "[unknown]": n -= 1; continue
        caller = next((f for f in s[i + 1:] if "kvshard" in f or "std::" in f or "nlohmann" in f), "?")
        callers[caller] += 1
    print(f"== {what}: {n} samples ({100*n/len(ss):.1f}%)")
    for c, k in callers.most_common(14): print(f"   {100*k/len(ss):5.1f}%  {c}")

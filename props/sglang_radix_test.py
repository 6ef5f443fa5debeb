# Radix differential property: random serving streams (admit with match and lock, chunked and whole extends in
# pipelined batches, allocation with evict-until-allocatable, cache_unfinished_req / cache_finished_req, aborts,
# evictions) run through SGLang's own RadixCache and PageInterleavePoolAllocator (loaded at run time from
# ../shared/sglang_ref/radix.py) and are recorded, SGLang's answer as each record's `expect`, as a kvshard trace
# that `kvshard replay` must pass: every answer, the tree's evictable/protected sizes and the allocator's class
# free and release lists are compared after every step. A failure prints the seed, the stream, the first
# mismatch and the trace cut after it (kept as a test output) with the command that replays it.
import argparse
import collections
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_env  # noqa: E402 (props/sglang_env.py: paths, skipping, JUnit XML)

SUITE, CLASSNAME = "sglang_radix_test", "SglangRadix"
OOM = "Prefill out of memory"


class Clock:
    """time.monotonic() for SGLang's radix module: one strictly increasing tick per call (LRU order is all that
    matters, and wall-clock ties would make the order depend on the machine)."""

    def __init__(self):
        self.t = 0

    def monotonic(self):
        self.t += 1
        return float(self.t)


class Sglang:
    """One stream's SGLang state: the radix cache over the allocator, with free() and insert() observed."""

    def __init__(self, radix, rc, n, ps, ppr, need_sort):
        self.radix, self.rc, self.n, self.ps = radix, rc, n, ps
        rc.time = types.SimpleNamespace(monotonic=Clock().monotonic, perf_counter=time.perf_counter)
        self.cache = radix.make_radix_cache(page_size=ps, shard_size=n, pages_per_rank=ppr, max_reqs=64,
                                            max_context_len=4096, need_sort=need_sort)
        self.alloc = self.cache.token_to_kv_pool_allocator
        self.frees, self.inserts, self.evicted = [], [], 0
        free, insert, evict = self.alloc.free, self.cache.insert, self.cache.evict

        def observed_free(index):
            if index.numel():
                self.frees.append(sorted({int(x) // ps for x in index.tolist()}))
            return free(index)

        def observed_insert(params):
            result = insert(params)
            self.inserts.append(result)
            return result

        def observed_evict(params):
            result = evict(params)
            self.evicted += result.num_tokens_evicted
            return result

        self.alloc.free, self.cache.insert, self.cache.evict = observed_free, observed_insert, observed_evict

    def reset_observed(self):
        self.frees, self.inserts, self.evicted = [], [], 0

    def state(self, answer):
        answer["evictable_size"] = self.cache.evictable_size()
        answer["protected_size"] = self.cache.protected_size()
        answer["class_free_pages"] = [t.tolist() for t in self.alloc.class_free_pages]
        answer["class_release_pages"] = [t.tolist() for t in self.alloc.class_release_pages]
        return answer


class Stream:
    """Generates one random stream, driving SGLang and writing the trace records with SGLang's answers."""

    def __init__(self, rng, sg, stats):
        self.rng, self.sg, self.stats = rng, sg, stats
        self.records, self.live, self.next_id = [], {}, 0
        # Documents share prefixes; requests take a document prefix (sometimes all of it) plus a private suffix.
        self.docs = [[rng.randrange(1000) for _ in range(rng.randint(1, 4 * sg.ps * sg.n))] for _ in range(3)]

    def record(self, op, expect, **fields):
        self.records.append(dict(op=op, **fields, expect=expect))
        self.stats[op] += 1

    def new_tokens(self):
        rng, doc = self.rng, self.rng.choice(self.docs)
        head = doc[: rng.randint(0, len(doc))] if rng.random() < 0.7 else doc
        return head + [rng.randrange(1000, 2000) for _ in range(rng.randint(0 if head else 1, 3 * self.sg.ps))]

    def chunk_end(self, req, start):
        """A page-aligned chunk boundary past `start`, or the whole input (SGLang floors chunks to the page)."""
        total, ps = len(req.origin_input_ids), self.sg.ps
        if self.rng.random() < 0.35:
            ends = list(range((start // ps + 1) * ps, total, ps))
            if ends:
                self.stats["chunked extends"] += 1
                return self.rng.choice(ends)
        return total

    def admit(self, req, new):
        sg, rc = self.sg, self.sg.rc
        fields = dict(req=req.rid)
        if new:
            fields["tokens"] = list(req.origin_input_ids)
            sg.radix.admit_req(sg.cache, req)
            end = self.chunk_end(req, len(req.prefix_indices))
            req.set_extend_range(len(req.prefix_indices), end)
        else:  # add_chunked_req: the next chunk from the prefix, no match
            end = self.chunk_end(req, len(req.prefix_indices))
            req.set_extend_range(len(req.prefix_indices), end)
            req.inflight_middle_chunks = 1
        fields["extend_end"] = end
        base = req.last_node.rotation_base if isinstance(req.last_node, rc.TreeNode) else None
        self.record("admit_req", sg.state(dict(prefix_len=len(req.prefix_indices), rotation_base=base)), **fields)

    def batch(self):
        sg, rng = self.sg, self.rng
        waiting = [r for r in self.live.values() if r.stage == "unfinished" and r.kv_end < len(r.origin_input_ids)]
        batch = rng.sample(waiting, min(len(waiting), rng.randint(0, 1)))
        for req in batch:
            self.admit(req, new=False)
        for _ in range(rng.randint(0 if batch else 1, 3)):
            if len(self.live) >= 12:
                break
            req = sg.radix.Req(f"r{self.next_id}", self.new_tokens())
            self.next_id += 1
            req.stage, req.kv_end = "admitted", 0  # kv_end: the KV written (kv_len_to_handle when it finishes)
            self.live[req.rid] = req
            self.admit(req, new=True)
            batch.append(req)
        if not batch:
            return
        sg.reset_observed()
        try:
            out = sg.radix.alloc_extend_reqs(sg.cache, batch)
        except RuntimeError as e:
            if OOM not in str(e):
                raise
            self.stats["alloc out of memory"] += 1
            self.record("alloc_reqs", dict(error=OOM), reqs=[r.rid for r in batch])
            for req in batch:
                if req.stage == "admitted":  # a new request: unlock, release the slot
                    sg.cache.dec_lock_ref(req.last_node)
                    sg.cache.req_to_token_pool.free(req)
                    del self.live[req.rid]
                    self.record("abort_req", sg.state(dict(live_requests=len(self.live))), req=req.rid)
                else:
                    req.stage = "unfinished"
            return
        if sg.evicted:
            self.stats["evict-until-allocatable"] += 1
        pages, at = [], 0
        for req in batch:
            n = req.extend_range.end - req.extend_range.start
            pages.append([int(x) // sg.ps for x in out[at:at + n:sg.ps].tolist()])
            at += n
            req.stage, req.kv_end = "allocated", req.extend_range.end
        self.record("alloc_reqs", sg.state(dict(pages=pages, rotation_bases=[r.kv_rotation_base for r in batch],
                                                evicted_tokens=sg.evicted, evicted=sg.frees)),
                    reqs=[r.rid for r in batch])

    def cache_req(self, req, finished):
        sg = self.sg
        sg.reset_observed()
        if finished:
            kv_len = req.kv_end
            sg.cache.cache_finished_req(req, kv_len_to_handle=kv_len)
            sg.cache.req_to_token_pool.free(req)
            del self.live[req.rid]
        else:
            sg.cache.cache_unfinished_req(req, chunked=req.extend_range.end < len(req.origin_input_ids))
            req.stage = "unfinished"
        ins = sg.inserts[-1]
        self.stats["declined tails"] += bool(ins.rotation_tail_declined)
        answer = dict(rotation_tail_declined=bool(ins.rotation_tail_declined), prefix_len=ins.prefix_len,
                      cache_protected_len=req.cache_protected_len, freed=sg.frees)
        if finished:
            self.record("cache_finished_req", sg.state(answer), req=req.rid, kv_len=kv_len)
        else:
            answer["row_pages"] = [int(x) // sg.ps for x in req.prefix_indices[::sg.ps].tolist()]
            self.record("cache_unfinished_req", sg.state(answer), req=req.rid)

    def step(self):
        rng, sg = self.rng, self.sg
        allocated = [r for r in self.live.values() if r.stage == "allocated"]
        unfinished = [r for r in self.live.values() if r.stage == "unfinished"]
        roll = rng.random()
        if roll < 0.35 or not (allocated or unfinished):
            self.batch()
        elif roll < 0.75 and allocated:  # a batch result: unfinished (cached so others can match) or finished
            req = rng.choice(allocated)
            whole = req.kv_end == len(req.origin_input_ids)
            self.cache_req(req, finished=whole and rng.random() < 0.6)
        elif roll < 0.9 and unfinished:
            req = rng.choice(unfinished)
            self.cache_req(req, finished=True) if req.kv_end == len(req.origin_input_ids) else self.batch()
        else:
            sg.reset_observed()
            n = rng.randint(0, 4 * sg.ps * sg.n)
            res = sg.cache.evict(sg.rc.EvictParams(num_tokens=n))
            self.record("evict_tokens", sg.state(dict(evicted_tokens=res.num_tokens_evicted, evicted=sg.frees)),
                        num_tokens=n)


def run_stream(index, seed, radix, rc, kvshard, tmpdir, stats):
    """One stream: SGLang runs it and records; kvshard replays. Returns (records, None) or (records, failure)."""
    rng = random.Random(f"{seed}/{index}")
    n, ps = rng.randint(2, 4), rng.choice([1, 2, 4])
    # Mostly pools that hold a few requests (evictions, declined grafts), one in four so small that classes run out.
    ppr, need_sort = (rng.randint(2, 6) if rng.random() < 0.25 else rng.randint(8, 40)), rng.random() < 0.3
    sg = Sglang(radix, rc, n, ps, ppr, need_sort)
    stream = Stream(rng, sg, stats)
    for _ in range(rng.randint(5, 60)):
        stream.step()
    header = dict(kvshard_trace=1, allocator=dict(shard_size=n, page_size=ps, pages_per_rank=ppr,
                                                  need_sort=need_sort))
    lines = [json.dumps(header)] + [json.dumps(r) for r in stream.records]
    path = os.path.join(tmpdir, f"radix_{index}.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    p = subprocess.run([kvshard, "replay", path], capture_output=True, text=True)
    if p.returncode == 0:
        return len(stream.records), None
    return len(stream.records), report(index, seed, lines, p, kvshard)


def report(index, seed, lines, p, kvshard):
    """Prints the failure with the trace cut after the failing line (the shortest prefix that still fails)."""
    message = (p.stderr or p.stdout).strip()
    cut = len(lines)
    if "line " in message:
        try:
            cut = int(message.split("line ", 1)[1].split(":", 1)[0])
        except ValueError:
            pass
    keep_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.gettempdir()
    kept = os.path.join(keep_dir, f"sglang_radix_seed{seed}_stream{index}.jsonl")
    with open(kept, "w") as f:
        f.write("\n".join(lines[:cut]) + "\n")
    print(f"MISMATCH in stream {index} (seed {seed}), exit {p.returncode}: {message}")
    print(f"shrunk: the first {cut - 1} records (the trace cut after the failing line), kept at {kept}:")
    for line in lines[max(1, cut - 6):cut]:
        print("  " + (line if len(line) < 600 else line[:600] + " ..."))
    print(f"reproduce: {shlex.quote(kvshard)} replay {shlex.quote(kept)}   "
          f"(SGLang side: props/sglang_radix_test.py --seed {seed} --streams {index + 1})")
    return f"stream {index}: {message.splitlines()[0] if message else 'exit ' + str(p.returncode)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: time-based, printed)")
    ap.add_argument("--streams", type=int, default=800, help="random streams to run")
    args = ap.parse_args()
    ref_dir, _, kvshard = sglang_env.require_inputs(SUITE, CLASSNAME, "radix.py")
    sys.path.insert(0, ref_dir)
    import radix  # noqa: E402 (../shared/sglang_ref/radix.py: SGLang's RadixCache on CPU)
    rc = radix.load_radix()
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1_000_000_007
    print(f"sglang_radix_test: seed {seed} (rerun: --seed {seed} --streams {args.streams}), SGLang code from {ref_dir}")
    stats, start, records, failure = collections.Counter(), time.time(), 0, None
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmpdir:
        for i in range(args.streams):
            count, failure = run_stream(i, seed, radix, rc, kvshard, tmpdir, stats)
            records += count
            if failure:
                break
    done = i + 1
    print("  records: " + ", ".join(f"{k} {stats[k]}" for k in sorted(stats)))
    print(f"sglang_radix_test: {'FAIL' if failure else 'PASS'}: {done} streams, {records} records compared "
          f"in {time.time() - start:.1f} s (seed {seed})")
    sglang_env.write_xml(SUITE, CLASSNAME, [("streams", "failed" if failure else "passed", failure or "")])
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Records a small serving session of SGLang's own code through kvshard_recorder.py into a kvshard trace: the worked
example of docs/trace-format.md ("Recording from SGLang") and the source of
testdata/traces/sglang_serving_n4_ps16.jsonl, which it re-records byte for byte:

  /usr/bin/python3 tools/recorder/record_sglang_example.py --out testdata/traces/sglang_serving_n4_ps16.jsonl
  bazel build //cli:kvshard && bazel-bin/cli/kvshard replay testdata/traces/sglang_serving_n4_ps16.jsonl

SGLang's code is loaded at run time from its reference folder (--sglang-ref, else $KVSHARD_SGLANG_REF, else
../shared/sglang_ref beside the repository; never copied here): the kv-shard branch's PageInterleavePoolAllocator
and seed 000's begin_shard_extend / translate_loc_to_scratch on one minimal pool per rank. Needs torch (Debian:
python3-torch; /usr/bin/python3 has it). //props:sglang_recorder_test runs this file and checks that the committed
trace is what it records.

The session: a shard group of N = 4 ranks, physical page 16, 12 allocatable pages per rank, a scratch of 2 prefix
blocks (max_prefix_tokens 128) and 8 chunk pages (chunk_tokens 128), 2 layers. A seeded scheduler admits documents
with chunked prefill: each batch takes up to three requests (unfinished prefills first), each one chunk (page-
aligned unless it is the request's last) that fits the batch's chunk and prefix-block budget, as SGLang's
PrefillAdder gates admission on the scratch capacities. Per batch: alloc_extend, begin_shard_extend on every rank's
pool, per layer set_kv_buffer then get_key_buffer, end_shard_extend. A finished request frees its partial last page
and either keeps its whole pages for a follow-up turn (a later extend of it gathers that prefix from all four
ranks) or frees them; requests finishing together free in one free group; a deferred batch evicts a kept chain."""
import argparse
import collections
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kvshard_recorder as kr  # noqa: E402 (beside this file)

N, PS, PAGES_PER_RANK = 4, 16, 12
MAX_PREFIX_TOKENS, CHUNK_TOKENS = N * PS * 2, PS * 8
NUM_LAYERS, ROW_WORDS = 2, 2
DEFAULT_SEED, DEFAULT_BATCHES = 7, 24
TRACE = "testdata/traces/sglang_serving_n4_ps16.jsonl"


def default_ref_dir():
    return os.environ.get("KVSHARD_SGLANG_REF") or os.path.join(HERE, "..", "..", "..", "shared", "sglang_ref")


def load_sglang(ref_dir):
    """(torch, PageInterleavePoolAllocator, shard_plan module) from SGLang's reference folder."""
    if not os.path.isfile(os.path.join(ref_dir, "shard_plan.py")):
        raise FileNotFoundError(f"SGLang reference folder not found at {ref_dir} (--sglang-ref or KVSHARD_SGLANG_REF)")
    import torch
    sys.path.insert(0, ref_dir)
    import allocator  # noqa: E401 (modules of the reference folder)
    import shard_plan
    return torch, allocator.load_allocator(), shard_plan


def ceil_div(a, b):
    return -(-a // b)


class Session:
    def __init__(self, out, ref_dir, seed):
        self.torch, Alloc, shard_plan = load_sglang(ref_dir)
        self.rng = random.Random(seed)
        self.alloc = Alloc(size=PAGES_PER_RANK * PS, physical_page_size=PS, shard_size=N, dtype=self.torch.int64,
                           device="cpu", kvcache=None, need_sort=False)
        self.pools = [shard_plan.Pool(shard_plan.Spec(rank, N, PS, MAX_PREFIX_TOKENS, CHUNK_TOKENS),
                                      PAGES_PER_RANK * PS) for rank in range(N)]  # one per rank of the group
        # line 1: the allocator's config and the pool's scratch (pool_header checks the geometries agree)
        self.writer = kr.TraceWriter(
            out, allocator=kr.allocator_header(self.alloc),
            pool=kr.pool_header(self.pools[0], NUM_LAYERS, ROW_WORDS, payload_seed=seed, allocator=self.alloc),
            generator={"tool": "tools/recorder/record_sglang_example.py", "seed": seed})
        kr.AllocatorRecorder(self.alloc, self.writer)  # alloc_extend, free, free groups recorded from here on
        self.req_to_token = self.torch.zeros((8, PAGES_PER_RANK * N * PS), dtype=self.torch.int32)
        self.free_rows = list(range(8))
        self.running = []  # requests mid-prefill: dict(row, length, target, base, pages)
        self.kept = []  # finished requests whose whole pages stay for a follow-up turn
        self.stats = collections.Counter()

    def t(self, values):
        return self.torch.tensor(values, dtype=self.torch.int64)

    # -- scheduling ----------------------------------------------------------------------------------------------

    def new_request(self):
        return dict(row=self.free_rows.pop(), length=0, target=self.rng.randint(20, 250), base=None, pages=[])

    def follow_up(self, r):
        r["target"] = r["length"] + self.rng.randint(16, 120)
        return r

    def schedule(self):
        """Up to three requests, unfinished prefills first, then follow-up turns and new documents, each with one
        chunk that fits what is left of the batch's chunk pages and prefix blocks. A chunk that is not the
        request's last must leave a remainder that one later batch can take whole (its prefix within the prefix
        blocks, the rest within the chunk pages), so the first unfinished prefill always finishes."""
        candidates = list(self.running)
        while len(candidates) < 3 and self.free_rows:
            if self.kept and self.rng.random() < 0.4:
                candidates.append(self.follow_up(self.kept.pop(self.rng.randrange(len(self.kept)))))
            else:
                candidates.append(self.new_request())
        batch, chunk_pages, blocks = [], CHUNK_TOKENS // PS, MAX_PREFIX_TOKENS // (N * PS)
        max_blocks = MAX_PREFIX_TOKENS // (N * PS)
        for r in candidates:
            need_blocks, left = ceil_div(r["length"] // PS, N), r["target"] - r["length"]
            room = min(left, chunk_pages * PS)
            if room < left:
                room -= room % PS  # a chunk that is not the request's last ends on a page boundary
                if left - room > CHUNK_TOKENS or ceil_div((r["length"] + room) // PS, N) > max_blocks:
                    room = 0
            if len(batch) == 3 or room <= 0 or need_blocks > blocks:
                self.unschedule(r)
                continue
            batch.append((r, r["length"] + room))
            chunk_pages -= ceil_div(room, PS)
            blocks -= need_blocks
        return batch

    def unschedule(self, r):
        if r in self.running:
            return
        if r["length"]:
            self.kept.append(r)
        else:
            self.free_rows.append(r["row"])

    # -- the model forward of one batch on the shard group -------------------------------------------------------

    def step(self):
        batch = self.schedule()
        if not batch:
            return False
        prefix, seq = [r["length"] for r, _ in batch], [s for _, s in batch]
        bases = [r["base"] for r, _ in batch]  # None: a new chain (the allocator resolves it in place)
        last = [r["pages"][-1] * PS + PS - 1 if r["pages"] else 0 for r, _ in batch]
        out_cache_loc = self.alloc.alloc_extend(self.t(prefix), self.t(prefix), self.t(seq), self.t(seq),
                                                self.t(last), sum(seq) - sum(prefix), rotation_bases=bases)
        if out_cache_loc is None:  # deferred: evict a kept chain and try again next step
            self.stats["deferred batches"] += 1
            for r, _ in batch:
                self.unschedule(r)
            if self.kept:
                self.finish([self.kept.pop(0)], keep=False)
            return True
        slots, at = out_cache_loc.tolist(), 0
        for (r, s), base in zip(batch, bases):
            new = slots[at:at + s - r["length"]]
            at += len(new)
            self.req_to_token[r["row"], r["length"]:s] = self.torch.tensor(new, dtype=self.torch.int32)
            r["pages"] += [x // PS for x in new[(-r["length"]) % PS::PS]]
            r["base"] = base
        rows = [r["row"] for r, _ in batch]
        for pool in self.pools:  # every rank of the shard group plans the same batch
            pool.begin_shard_extend(self.req_to_token, rows, prefix, seq)
        kr.record_begin_shard_extend(self.writer, self.pools, self.req_to_token, rows, prefix, seq,
                                     out_cache_loc=out_cache_loc)
        self.stats["extends"] += 1
        self.stats["extends with a prefix gather"] += self.pools[0]._block_pages > 0
        for layer in range(NUM_LAYERS):
            kr.record_set_kv_buffer(self.writer, layer, out_cache_loc)  # the layer's new K/V rows
            kr.record_get_key_buffer(self.writer, self.pools[layer % N], layer)  # attention reads prefix + chunk
        kr.record_end_shard_extend(self.writer)
        finished = []
        for r, s in batch:
            r["length"] = s
            if s == r["target"]:
                finished.append(r)
                if r in self.running:
                    self.running.remove(r)
            elif r not in self.running:
                self.running.append(r)
        if finished:
            self.finish(finished, keep=None)
        return True

    def finish(self, reqs, keep):
        """Frees each request's partial last page, then keeps its whole pages (keep None: at random) or frees them
        all; several whole-chain frees go in one free group."""
        whole = []
        for r in reqs:
            tail = r["length"] % PS
            if tail:
                self.alloc.free(self.req_to_token[r["row"], r["length"] - tail:r["length"]].long())
                r["length"] -= tail
                r["pages"] = r["pages"][:r["length"] // PS]
            followable = 0 < r["length"] <= MAX_PREFIX_TOKENS and len(self.kept) < 4  # its prefix fits the blocks
            if followable and (keep if keep is not None else self.rng.random() < 0.5):
                self.kept.append(r)
            else:
                whole.append(r)
        if len(whole) > 1:
            self.alloc.free_group_begin()
        for r in whole:
            self.alloc.free(self.req_to_token[r["row"], :r["length"]].long())
            self.free_rows.append(r["row"])
        if len(whole) > 1:
            self.alloc.free_group_end()

    def run(self, batches):
        while self.stats["extends"] < batches:
            if not self.step():
                raise RuntimeError("record_sglang_example: the scheduler found no batch")
        self.finish(self.running + self.kept, keep=False)  # the session ends: every page back to the allocator
        self.running, self.kept = [], []
        return self.stats


def record_session(out, ref_dir=None, seed=DEFAULT_SEED, batches=DEFAULT_BATCHES):
    """Records the session into `out` (a text file); returns its counters."""
    return Session(out, ref_dir or default_ref_dir(), seed).run(batches)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="-", help=f"the trace file (default: stdout; the committed one: {TRACE})")
    p.add_argument("--sglang-ref", default=None, help="SGLang's reference folder (default: ../shared/sglang_ref)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--batches", type=int, default=DEFAULT_BATCHES, help="extend batches to record")
    args = p.parse_args()
    ref_dir = args.sglang_ref or default_ref_dir()
    if not os.path.isfile(os.path.join(ref_dir, "shard_plan.py")):
        sys.exit(f"record_sglang_example: SGLang reference folder not found at {ref_dir} (--sglang-ref or "
                 f"KVSHARD_SGLANG_REF)")
    args.sglang_ref = ref_dir
    if args.out == "-":
        stats = record_session(sys.stdout, args.sglang_ref, args.seed, args.batches)
    else:
        with open(args.out, "w") as f:
            stats = record_session(f, args.sglang_ref, args.seed, args.batches)
    print("record_sglang_example: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())), file=sys.stderr)


if __name__ == "__main__":
    main()

# End-to-end test of the SGLang recorder (tools/recorder/kvshard_recorder.py): SGLang's own code (loaded at run time
# from ../shared/sglang_ref, never copied here) runs a seeded serving stream through the recorder into kvshard traces
# (allocator records, gather plans, the sharded pool's pipeline: begin_shard_extend, set_kv_buffer, get_key_buffer,
# end_shard_extend; CP splits and reranges), and `kvshard replay` must pass every one of them. The worked example
# tools/recorder/record_sglang_example.py must re-record testdata/traces/sglang_serving_n4_ps16.jsonl byte for byte.
# Then deliberately broken variants of SGLang's code (patched here, at run time, in this test only: the allocator's
# merge, the CP split plan, the pool's translate_loc_to_scratch and begin_shard_extend plan) are recorded, and replay
# must fail at the exact line and field where the broken decision was recorded: that line is computed by re-running
# the broken trace's own inputs through unpatched SGLang.
import argparse
import collections
import contextlib
import importlib.util
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import types

SUITE = "sglang_recorder_test"


# ---- environment: where things are, skipping, JUnit XML ----------------------------------------------------

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_env  # noqa: E402 (props/sglang_env.py, beside this file: paths, skipping, JUnit XML)
from sglang_env import kvshard_binary, runfile, sglang_ref_dir  # noqa: E402

CLASSNAME = "SglangRecorder"


def write_xml(cases):
    sglang_env.write_xml(SUITE, CLASSNAME, cases)


def skip(why):
    sglang_env.skip(SUITE, CLASSNAME, why)


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Sglang:
    """SGLang's reference modules, imported from the folder at run time."""

    def __init__(self, ref_dir, torch):
        sys.path.insert(0, ref_dir)
        import allocator, cp_planning, shard_plan  # noqa: E401 (modules of ../shared/sglang_ref)
        self.torch, self.Alloc, self.shard_plan, self.cp = torch, allocator.load_allocator(), shard_plan, cp_planning

    def new_allocator(self, n, ps, pages_per_rank, need_sort):
        return self.Alloc(size=pages_per_rank * ps, physical_page_size=ps, shard_size=n, dtype=self.torch.int64,
                          device="cpu", kvcache=None, need_sort=need_sort)

    def tensor(self, values):
        return self.torch.tensor(values, dtype=self.torch.int64)

    def new_pools(self, n, ps, pages_per_rank, max_prefix_tokens, chunk_tokens):
        """One SGLang shard pool per rank (seed 000's plan state), as a shard group holds them."""
        return [self.shard_plan.Pool(self.shard_plan.Spec(rank, n, ps, max_prefix_tokens, chunk_tokens),
                                     pages_per_rank * ps) for rank in range(n)]

    def begin_extend(self, n, ps, pages_per_rank, max_prefix_tokens, chunk_tokens, req_to_token, indices, prefix,
                     seq):
        """One SGLang Pool per rank runs begin_shard_extend: (pools, None), or (None, the AssertionError)."""
        pools = []
        for rank in range(n):
            spec = self.shard_plan.Spec(rank, n, ps, max_prefix_tokens, chunk_tokens)
            pool = self.shard_plan.Pool(spec, pages_per_rank * ps)
            try:
                pool.begin_shard_extend(req_to_token, indices, prefix, seq)
            except AssertionError as e:
                return None, e
            pools.append(pool)
        return pools, None

    def split_plan(self, extend, prefix, ps, cp_size, cp_rank):
        """SGLang's in-seq batch plan: (plan, None), or (None, the fail-fast RuntimeError)."""
        try:
            return self.cp.build_batch_page_aligned_in_seq_split_plan(
                extend_lens=list(extend), prefix_lens=list(prefix), page_size=ps, cp_size=cp_size,
                cp_rank=cp_rank), None
        except RuntimeError as e:
            if not str(e).startswith("[CP_SHARED_KV_FAIL_FAST]"):
                raise
            return None, e


# ---- recording SGLang's decisions (shared by the stream and the oracle) ----------------------------------------

def record_begin_extend(sg, rec, writer, n, ps, ppr, mpt, ct, req_to_token, indices, prefix, seq, ranks=None):
    """Runs begin_shard_extend on one pool per rank and records the plan (of `ranks` only, if given) or the
    error. Returns True when SGLang planned the batch."""
    pools, error = sg.begin_extend(n, ps, ppr, mpt, ct, req_to_token, indices, prefix, seq)
    if error is not None:
        spec = sg.shard_plan.Spec(0, n, ps, mpt, ct)
        rec.record_error(writer, "gather_plan", rec.error_text(error),
                         batch=rec.extend_batch(spec, req_to_token, indices, prefix, seq, ppr))
        return False
    rec.record_gather_plan(writer, pools if ranks is None else [pools[r] for r in ranks], req_to_token, indices,
                           prefix, seq, ppr)
    return True


def record_pipeline_begin(rec, writer, pools, req_to_token, indices, prefix, seq, out_cache_loc=None, ranks=None):
    """Every rank's persistent pool runs begin_shard_extend; records the plan (of `ranks` only, if given), the
    epoch and out_cache_loc, or SGLang's rejection (which changes no pool). Returns True when SGLang planned."""
    try:
        for pool in pools:
            pool.begin_shard_extend(req_to_token, indices, prefix, seq)
    except AssertionError as e:
        if pool is not pools[0]:
            raise RuntimeError(f"harness: rank {pool.shard_rank} rejected a batch rank 0 planned: {e}") from e
        rec.record_error(writer, "begin_shard_extend", rec.error_text(e),
                         requests=rec.extend_requests(pools[0].shard_spec.page_size, req_to_token, indices, prefix,
                                                      seq))
        return False
    rec.record_begin_shard_extend(writer, pools if ranks is None else [pools[r] for r in ranks], req_to_token,
                                  indices, prefix, seq, out_cache_loc=out_cache_loc)
    return True


def record_split(sg, rec, writer, extend, prefix, ps, cp_size, cp_rank):
    plan, error = sg.split_plan(extend, prefix, ps, cp_size, cp_rank)
    if error is not None:
        rec.record_error(writer, "split", rec.error_text(error), cp_size=cp_size, cp_rank=cp_rank, page_size=ps,
                         extend_lens=list(extend), prefix_lens=list(prefix))
        return None, rec.error_text(error)
    rec.record_split(writer, plan, extend, prefix, ps, cp_size, cp_rank)
    return plan, None


def record_rerange(sg, rec, writer, extend, prefix, ps, cp_size):
    """SGLang's batch rerange of an arange all-gather buffer: output row k holds its source row's index."""
    plan, error = sg.split_plan(extend, prefix, ps, cp_size, 0)
    if error is not None:
        rec.record_error(writer, "rerange", rec.error_text(error), cp_size=cp_size, page_size=ps,
                         extend_lens=list(extend), prefix_lens=list(prefix))
        return False
    _, max_rank = sg.cp.max_rank_len_from_plan(plan)
    gathered = sg.torch.arange(cp_size * max_rank, dtype=sg.torch.int64)
    rows = sg.cp.torch_batch_rerange(gathered, plan["request_split_lists"], max_rank, cp_size).tolist()
    rec.record_rerange(writer, rows, max_rank, extend, prefix, ps, cp_size)
    return True


# ---- 1. the seeded serving stream ---------------------------------------------------------------------------------

class Stream:
    """One SGLang allocator and one shard group of persistent SGLang pools (one trace: its header carries the
    allocator and the pool) driven by a seeded serving loop: alloc batches (new chains with null or explicit
    bases, extensions of live page-aligned chains with their last_loc), and for each committed batch its
    stateless gather plan (fresh pools, random capacities), the pipeline on the persistent pools
    (begin_shard_extend, per layer set_kv_buffer then get_key_buffer, end_shard_extend), its in-seq split for
    a random cp_rank and its rerange; frees of tail pages or whole chains, free groups, and writes outside an
    extend (decode-like) to live chains. Everything goes through the recorder."""

    def __init__(self, sg, rec, rng, out, need_sort, merge_impl=None, tag=""):
        self.sg, self.rec, self.rng = sg, rec, rng
        self.n, self.ps = rng.randint(2, 6), rng.choice([1] + [2, 3, 4, 16] * 2)  # ps 1: every CP split falls back
        self.ppr, self.need_sort = rng.randint(3, 12), need_sort
        self.alloc = sg.new_allocator(self.n, self.ps, self.ppr, need_sort)
        # the pipeline's scratch: most batches fit, some hit SGLang's capacity assertions (error records)
        n, ps, ppr = self.n, self.ps, self.ppr
        self.pools = sg.new_pools(n, ps, ppr, n * ps * rng.randint(max(1, ppr // 3), ppr),
                                  ps * rng.randint(max(1, n * ppr // 3), n * ppr))
        self.num_layers = rng.randint(1, 3)
        pool = rec.pool_header(self.pools[0], self.num_layers, rng.randint(1, 4), rng.randrange(1 << 32), self.alloc)
        self.writer = rec.TraceWriter(out, allocator=rec.allocator_header(self.alloc), pool=pool,
                                      generator={"tool": "props/sglang_recorder_test.py", "stream": tag})
        rec.AllocatorRecorder(self.alloc, self.writer)
        self.stats = collections.Counter()
        self.chains = []  # dicts: base, length (tokens), pages (position order)
        self.merge_impl = merge_impl
        self.first_skipped_merge_line = None  # broken merge: where it first left a non-short class unmerged
        self.plan_changes = None  # broken split: the list its patch appends to when it changes a plan
        self.changed_split_lines = []  # broken split: the split records whose plan the patch changed
        self.pipeline_changes = None  # broken pipeline: the list its patch appends to when it changes an answer
        self.changed_pipeline_lines = []  # broken pipeline: the records whose answer the patch changed
        self._orig_merge = self.alloc.merge_and_sort_free
        self.alloc.merge_and_sort_free = self._merge

    def next_line(self):
        return self.writer.records + 2  # the header is line 1

    def _merge(self):
        """SGLang's alloc_extend merges the release lists under need_sort; counted here (`needs` read from
        alloc_extend's frame), and replaced by the broken variant's merge when the test runs one."""
        a = self.alloc
        needs = sys._getframe(1).f_locals.get("needs")
        if needs is None:
            raise RuntimeError("harness: merge_and_sort_free was not called from alloc_extend (no `needs`)")
        self.stats["need_sort merges"] += 1
        wide = any(len(a.class_release_pages[c]) and need <= len(a.class_free_pages[c])
                   for c, need in enumerate(needs))
        self.stats["need_sort merges of a non-short class"] += wide
        if self.merge_impl is None:
            return self._orig_merge()
        if wide and self.first_skipped_merge_line is None:
            self.first_skipped_merge_line = self.next_line()
        return self.merge_impl(a, needs)

    # -- allocator ops --

    def new_request(self):
        base = None if self.rng.random() < 0.7 else self.rng.randrange(self.n)
        self.stats["new chains" if base is None else "new chains with an explicit base"] += 1
        return dict(chain=None, prefix=0, seq=self.rng.randint(1, max(1, self.n * self.ps * self.ppr // 4)),
                    base=base, last_loc=0)

    def extend_request(self, chain):
        self.stats["extensions"] += 1
        ps = self.ps
        return dict(chain=chain, prefix=chain["length"], seq=chain["length"] + self.rng.randint(1, self.n * ps),
                    base=chain["base"], last_loc=chain["pages"][-1] * ps + ps - 1)

    def alloc_step(self):
        rng = self.rng
        aligned = [c for c in self.chains if c["length"] % self.ps == 0]
        rng.shuffle(aligned)
        reqs = [self.extend_request(aligned.pop()) if aligned and rng.random() < 0.5 else self.new_request()
                for _ in range(rng.choice([1, 1, 2, 3, 4]))]
        prefix, seq = [r["prefix"] for r in reqs], [r["seq"] for r in reqs]
        bases = [r["base"] for r in reqs]  # SGLang resolves the None entries in place
        t = self.sg.tensor
        out = self.alloc.alloc_extend(t(prefix), t(prefix), t(seq), t(seq), t([r["last_loc"] for r in reqs]),
                                      sum(seq) - sum(prefix), rotation_bases=bases)
        self.stats["alloc batches"] += 1
        if out is None:
            self.stats["deferred batches"] += 1
            return
        slots, cursor = out.tolist(), 0
        self.out_cache_loc = slots  # SGLang's forward_batch.out_cache_loc of this batch: the allocator's answer
        for r, base in zip(reqs, bases):
            mine = [s // self.ps for s in slots[cursor:cursor + r["seq"] - r["prefix"]:self.ps]]
            cursor += r["seq"] - r["prefix"]
            if r["chain"] is None:
                r["chain"] = dict(base=base, length=r["seq"], pages=mine)
                self.chains.append(r["chain"])
            else:
                r["chain"]["pages"] += mine
                r["chain"]["length"] = r["seq"]
        self.batch_follow_ups(reqs, prefix, seq)

    def pick_free(self, chain):
        """Frees the whole chain or its tail pages; returns the slots (shuffled, or one slot per page)."""
        n_pages = len(chain["pages"])
        keep = 0 if n_pages == 1 or self.rng.random() < 0.5 else self.rng.randint(1, n_pages - 1)
        locs = [chain["pages"][k // self.ps] * self.ps + k % self.ps for k in range(keep * self.ps, chain["length"])]
        if self.rng.random() < 0.3:
            locs = locs[::self.ps]
        self.rng.shuffle(locs)
        if keep == 0:
            self.chains.remove(chain)
            self.stats["frees of whole chains"] += 1
        else:
            chain["pages"], chain["length"] = chain["pages"][:keep], keep * self.ps
            self.stats["frees of tail pages"] += 1
        return locs

    def free_step(self):
        locs = [] if self.rng.random() < 0.03 else self.pick_free(self.rng.choice(self.chains))
        self.stats["empty frees (not recorded)" if not locs else "free ops"] += 1
        self.alloc.free(self.sg.tensor(locs))

    def free_group_step(self):
        frees = [self.pick_free(c) for c in self.rng.sample(self.chains, self.rng.randint(1, min(4, len(self.chains))))]
        if self.rng.random() < 0.1:
            frees.insert(self.rng.randint(0, len(frees)), [])
        self.stats["free groups"] += 1
        self.alloc.free_group_begin()
        for locs in frees:
            self.alloc.free(self.sg.tensor(locs))
        self.alloc.free_group_end()

    # -- the committed batch's gather plan, split and rerange --

    def batch_follow_ups(self, reqs, prefix, seq):
        sg, rec, rng, n, ps = self.sg, self.rec, self.rng, self.n, self.ps
        # req_to_token rows at random pool indices, as SGLang's req_to_token_pool hands them out
        rows = rng.sample(range(len(reqs) + 3), len(reqs))
        width = max(len(r["chain"]["pages"]) for r in reqs) * ps
        req_to_token = sg.torch.zeros((len(reqs) + 3, width), dtype=sg.torch.int32)
        for row, r in zip(rows, reqs):
            slots = [p * ps + o for p in r["chain"]["pages"] for o in range(ps)]
            req_to_token[row, :len(slots)] = sg.torch.tensor(slots, dtype=sg.torch.int32)
        block = sum(-(-(p // ps) // n) for p in prefix)
        chunk_pages = sum(-(-s // ps) - p // ps for p, s in zip(prefix, seq))
        mpt = n * ps * (block + rng.choice([0, 0, 1, 2]))
        ct = ps * (chunk_pages + rng.choice([0, 0, 1, 3]))
        if rng.random() < 0.08:  # one page under the bound: SGLang's capacity assertion
            if block and rng.random() < 0.5:
                mpt = n * ps * (block - 1)
            else:
                ct = ps * (chunk_pages - 1)
        ranks = sorted(rng.sample(range(n), rng.randint(1, n))) if rng.random() < 0.15 else None
        planned = record_begin_extend(sg, rec, self.writer, n, ps, self.ppr, mpt, ct, req_to_token, rows,
                                      prefix, seq, ranks)
        self.stats["gather plans" if planned else "gather plan errors"] += 1
        self.pipeline(req_to_token, rows, prefix, seq)
        extend = [s - p for p, s in zip(prefix, seq)]
        prefix = list(prefix)
        roll = rng.random()
        if roll < 0.05:
            extend[rng.randrange(len(extend))] = 0
        elif roll < 0.1 and ps > 1:
            prefix[rng.randrange(len(prefix))] += rng.randint(1, ps - 1)
        cp_size = rng.randint(1, 8)
        cp_rank = rng.randrange(cp_size)
        line, changes = self.next_line(), len(self.plan_changes or [])
        plan, error = record_split(sg, rec, self.writer, extend, prefix, ps, cp_size, cp_rank)
        if len(self.plan_changes or []) > changes:
            self.changed_split_lines.append(line)
        if error is not None:
            self.stats[f"split errors {error}"] += 1
        else:
            self.stats["splits"] += 1
            self.stats["splits with compute padding"] += plan["compute_padding_enabled"]
        self.stats["reranges" if record_rerange(sg, rec, self.writer, extend, prefix, ps, cp_size)
                   else "rerange errors"] += 1

    def watched(self, record):
        """Runs record() (one recorder call); notes its line when a broken pipeline patch changed its answer."""
        line, changes = self.next_line(), len(self.pipeline_changes or [])
        result = record()
        if len(self.pipeline_changes or []) > changes:
            self.changed_pipeline_lines.append(line)
        return result

    def pipeline(self, req_to_token, rows, prefix, seq):
        """The batch on the shard group's persistent pools, as SGLang's model forward runs it: begin_shard_extend
        (its plan, epoch and out_cache_loc recorded), then for each layer set_kv_buffer of out_cache_loc and
        get_key_buffer (scratch_rows: SGLang's translate_loc_to_scratch of every batch slot, or of a random
        subset in random order, repeats allowed; sometimes read twice, as get_key/get_value_buffer do), then
        end_shard_extend."""
        sg, rec, rng, w = self.sg, self.rec, self.rng, self.writer
        ranks = sorted(rng.sample(range(self.n), rng.randint(1, self.n))) if rng.random() < 0.15 else None
        if not self.watched(lambda: record_pipeline_begin(rec, w, self.pools, req_to_token, rows, prefix, seq,
                                                          self.out_cache_loc, ranks)):
            self.stats["pipeline extends rejected (capacity)"] += 1
            return
        self.stats["pipeline extends"] += 1
        self.stats["pipeline extends with a prefix gather"] += self.pools[0]._block_pages > 0
        every = w.extend["locs"]
        for layer in range(self.num_layers):
            rec.record_set_kv_buffer(w, layer, sg.tensor(self.out_cache_loc))
            for _ in range(2 if rng.random() < 0.15 else 1):
                locs = None
                if rng.random() < 0.3:
                    locs = sg.tensor([rng.choice(every) for _ in range(rng.randint(1, len(every)))])
                    self.stats["get_key_buffer records with explicit locs"] += 1
                pool = self.pools[rng.randrange(self.n)]  # any rank's: the plan is mirrored
                self.watched(lambda: rec.record_get_key_buffer(w, pool, layer, locs))
                self.stats["get_key_buffer records"] += 1
        rec.record_end_shard_extend(w)

    def write_step(self):
        """A write outside an extend (decode-like: owner-filtered, no staging) to a live chain's last slots, of
        one layer; later extends of the chain must gather the new rows."""
        chain = self.rng.choice(self.chains)
        k = self.rng.randint(1, chain["length"])
        locs = [chain["pages"][p // self.ps] * self.ps + p % self.ps
                for p in range(chain["length"] - k, chain["length"])]
        self.rec.record_set_kv_buffer(self.writer, self.rng.randrange(self.num_layers), self.sg.tensor(locs))
        self.stats["set_kv_buffer records outside an extend"] += 1

    def step(self):
        """Allocates more while the pool is emptier, so batches commit, defer and hit the need_sort merge."""
        free_share = self.alloc.aggregate_free_size() / (self.n * self.ppr * self.ps)
        if not self.chains or self.rng.random() < 0.2 + 0.6 * free_share:
            return self.alloc_step()
        if self.rng.random() < 0.1:
            return self.write_step()
        return self.free_step() if self.rng.random() < 0.5 else self.free_group_step()

    def run(self, steps):
        for _ in range(steps):
            self.step()
        return self


# ---- 2. replay -----------------------------------------------------------------------------------------------------

def replay(kvshard, path):
    """Runs `kvshard replay FILE --json`: (exit status, summary or None, stderr)."""
    p = subprocess.run([kvshard, "replay", path, "--json"], capture_output=True, text=True)
    try:
        summary = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        summary = None
    return p.returncode, summary, p.stderr


class Failure(Exception):
    pass


def keep(path):
    """Keeps a trace for the failure report (Bazel: undeclared test outputs)."""
    keep_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.gettempdir()
    kept = os.path.join(keep_dir, os.path.basename(path))
    if os.path.abspath(kept) != os.path.abspath(path):
        shutil.copyfile(path, kept)
    return kept


def clean_case(args, seed, sg, rec, kvshard, tmpdir, coverage):
    """Streams alternating need_sort off and on; each trace must replay with exit 0 and 0 mismatches."""
    records = fields = 0
    for k in range(args.streams):
        path = os.path.join(tmpdir, f"sglang_recorder_seed{seed}_stream{k}.jsonl")
        with open(path, "w") as f:
            s = Stream(sg, rec, random.Random(f"{seed}/clean/{k}"), f, need_sort=bool(k % 2), tag=f"clean/{k}")
            s.run(args.steps)
        coverage.update(s.stats)
        rc, summary, err = replay(kvshard, path)
        where = f"stream {k} (N={s.n} ps={s.ps} pages_per_rank={s.ppr} need_sort={s.need_sort}; trace kept at "
        if rc != 0 or summary is None or summary.get("mismatches") != 0:
            raise Failure(f"{where}{keep(path)}): replay exit {rc}, summary {summary}: {err.strip()}")
        if summary["records"] != s.writer.records:
            raise Failure(f"{where}{keep(path)}): replay read {summary['records']} records, "
                          f"the recorder wrote {s.writer.records}")
        print(f"  clean stream {k}: N={s.n} ps={s.ps} pages_per_rank={s.ppr} need_sort={str(s.need_sort).lower()}: "
              f"replayed {summary['records']} records, {summary['fields_checked']} fields checked, "
              f"{summary['mismatches']} mismatches")
        records += summary["records"]
        fields += summary["fields_checked"]
    for what in ("pipeline extends with a prefix gather", "get_key_buffer records with explicit locs",
                 "pipeline extends rejected (capacity)", "set_kv_buffer records outside an extend"):
        if not coverage[what]:
            raise Failure(f"the clean streams recorded no {what} (harness: raise --steps or --streams)")
    return records, fields


EXAMPLE_TRACE = os.path.join("testdata", "traces", "sglang_serving_n4_ps16.jsonl")


def example_case(sg_ref_dir, kvshard, tmpdir):
    """tools/recorder/record_sglang_example.py records its session from SGLang's code again: the trace must replay
    with 0 mismatches, hold every pipeline op with expects, and equal the committed EXAMPLE_TRACE byte for byte
    (else SGLang's reference code or the recorder changed: re-record it, testdata/README.md says how)."""
    example = load_module("record_sglang_example",
                          runfile(os.path.join("tools", "recorder", "record_sglang_example.py")))
    path = os.path.join(tmpdir, "sglang_serving_n4_ps16.jsonl")
    with open(path, "w") as f:
        stats = example.record_session(f, sg_ref_dir)
    rc, summary, err = replay(kvshard, path)
    if rc != 0 or summary is None or summary.get("mismatches") != 0:
        raise Failure(f"example: replay of {keep(path)} exit {rc}, summary {summary}: {err.strip()}")
    with open(path) as f:
        text = f.read()
    ops = collections.Counter(json.loads(line).get("op", "header") for line in text.splitlines())
    for op in ("alloc", "free", "free_group", "begin_shard_extend", "set_kv_buffer", "get_key_buffer",
               "end_shard_extend"):
        if not ops[op]:
            raise Failure(f"example: the recorded session {keep(path)} has no {op} record")
    if not stats["extends with a prefix gather"]:
        raise Failure(f"example: no extend of {keep(path)} gathers a prefix")
    committed = runfile(EXAMPLE_TRACE)
    if not os.path.isfile(committed):
        raise Failure(f"example: {EXAMPLE_TRACE} is missing (runfile {committed})")
    with open(committed) as f:
        if f.read() != text:
            raise Failure(f"example: {EXAMPLE_TRACE} is not what record_sglang_example.py records from SGLang's code "
                          f"now ({keep(path)}); re-record it: /usr/bin/python3 tools/recorder/record_sglang_example.py "
                          f"--out {EXAMPLE_TRACE}")
    print(f"  example: {EXAMPLE_TRACE} re-recorded from SGLang's code byte for byte ({len(text)} bytes), replayed "
          f"{summary['records']} records, {summary['fields_checked']} fields checked, 0 mismatches: "
          + ", ".join(f"{op} {ops[op]}" for op in sorted(ops) if op != "header"))


# ---- 3. broken variants: the oracle and the expected mismatch line ---------------------------------------------

def short_json(value, max_chars=120):
    """kvshard's ShortJson: compact JSON, cut to max_chars with '...'."""
    s = json.dumps(value, separators=(",", ":"))
    return s[:max_chars] + "..." if len(s) > max_chars else s


def first_difference(expect, got, path=""):
    """replay's expect matcher (core/trace.cc): the first (path, expected, got) where `got` does not match."""
    if isinstance(expect, dict) and isinstance(got, dict):
        for key, value in expect.items():
            sub = key if not path else f"{path}.{key}"
            if key not in got:
                return sub, short_json(value), "(absent)"
            d = first_difference(value, got[key], sub)
            if d:
                return d
        return None
    if isinstance(expect, list) and isinstance(got, list) and len(expect) == len(got):
        for i, (e, g) in enumerate(zip(expect, got)):
            d = first_difference(e, g, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if json.dumps(expect) == json.dumps(got) else (path, short_json(expect), short_json(got))


def oracle_mismatch(sg, rec, text):
    """Re-records the trace's own inputs, record by record, through unpatched SGLang code and the recorder;
    returns the mismatch line replay must print for the first record whose decision differs (None if none)."""
    lines = text.splitlines()
    header = json.loads(lines[0])
    h = header["allocator"]
    alloc = sg.new_allocator(h["shard_size"], h["page_size"], h["pages_per_rank"], h["need_sort"])
    pools = None
    if "pool" in header:
        pools = sg.new_pools(h["shard_size"], h["page_size"], h["pages_per_rank"], header["pool"]["max_prefix_tokens"],
                             header["pool"]["chunk_tokens"])
    buf = io.StringIO()
    writer = rec.TraceWriter(buf, **header)
    rec.AllocatorRecorder(alloc, writer)
    for number, line in enumerate(lines[1:], start=2):
        r = json.loads(line)
        try:
            rerecord(sg, rec, writer, alloc, pools, r)
        except Exception as e:
            raise Failure(f"oracle: line {number}: {r['op']}: SGLang raised {e!r} on the recorded inputs") from e
        again = json.loads(buf.getvalue().splitlines()[-1])
        if again == r:
            continue
        op = r["op"]
        if {k: v for k, v in again.items() if k != "expect"} != {k: v for k, v in r.items() if k != "expect"}:
            raise RuntimeError(f"harness: line {number}: the oracle re-recorded other inputs: {again} vs {r}")
        want, got = r["expect"], again["expect"]
        if "error" in want or "error" in got:
            return number, op, f"line {number}: {op}: error: "  # a prefix: the message's wording is kvshard's
        path, expected, actual = first_difference(want, got)
        return number, op, f"line {number}: {op}: {path}: expected {expected}, got {actual}"
    return None


def req_to_token_of(sg, reqs, ps):
    """A req_to_token table (row i: request i's slots, page by page) for recorded requests {..., pages}."""
    req_to_token = sg.torch.zeros((len(reqs), max([len(q["pages"]) * ps for q in reqs] + [1])), dtype=sg.torch.int32)
    for i, q in enumerate(reqs):
        slots = [p * ps + o for p in q["pages"] for o in range(ps)]
        req_to_token[i, :len(slots)] = sg.torch.tensor(slots, dtype=sg.torch.int32)
    return req_to_token


def rerecord(sg, rec, writer, alloc, pools, r):
    """Runs one record's inputs through SGLang's code (the allocator and the shard group's pools carry their
    state from record to record); the recorder writes the record again."""
    t, op = sg.tensor, r["op"]
    if op == "alloc":
        prefix, seq = r["prefix_lens"], r["seq_lens"]
        alloc.alloc_extend(t(prefix), t(prefix), t(seq), t(seq), t(r["last_locs"]), sum(seq) - sum(prefix),
                           rotation_bases=list(r["rotation_bases"]))
    elif op == "free":
        alloc.free(t(r["locs"]))
    elif op == "free_group":
        alloc.free_group_begin()
        for locs in r["frees"]:
            alloc.free(t(locs))
        alloc.free_group_end()
    elif op == "gather_plan":
        b = r["batch"]
        n, ps, reqs = b["shard_size"], b["page_size"], b["requests"]
        req_to_token = req_to_token_of(sg, reqs, ps)
        ranks = r["expect"].get("ranks")
        ranks = None if ranks is None else [i for i, x in enumerate(ranks) if x]
        record_begin_extend(sg, rec, writer, n, ps, b["pages_per_rank"], b["max_prefix_tokens"],
                            b["chunk_tokens"], req_to_token, list(range(len(reqs))),
                            [q["prefix_len"] for q in reqs], [q["seq_len"] for q in reqs], ranks)
    elif op == "begin_shard_extend":
        reqs = r["requests"]
        ranks = None if "error" in r.get("expect", {}) else r["expect"].get("ranks")
        ranks = None if ranks is None else [i for i, x in enumerate(ranks) if x]
        record_pipeline_begin(rec, writer, pools, req_to_token_of(sg, reqs, alloc.page_size),
                              list(range(len(reqs))), [q["prefix_len"] for q in reqs], [q["seq_len"] for q in reqs],
                              ranks=ranks)
    elif op == "set_kv_buffer":
        rec.record_set_kv_buffer(writer, r["layer"], r.get("locs"))
    elif op == "get_key_buffer":
        rec.record_get_key_buffer(writer, pools[0], r["layer"], r.get("locs"))
    elif op == "end_shard_extend":
        rec.record_end_shard_extend(writer)
    elif op == "split":
        record_split(sg, rec, writer, r["extend_lens"], r["prefix_lens"], r["page_size"], r["cp_size"],
                     r["cp_rank"])
    elif op == "rerange":
        record_rerange(sg, rec, writer, r["extend_lens"], r["prefix_lens"], r["page_size"], r["cp_size"])
    else:
        raise RuntimeError(f"harness: the oracle does not know op {op!r}")


@contextlib.contextmanager
def patched(obj, name, value):
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


def merge_only_short(torch):
    """Broken need_sort merge: merges the release list only into the classes whose free list is too short for
    this batch (SGLang merges every class with released pages, so later pops take the smallest page)."""
    def merge(a, needs):
        for r in range(a.shard_size):
            if len(a.class_release_pages[r]) and needs[r] > len(a.class_free_pages[r]):
                a.class_free_pages[r], _ = torch.sort(torch.cat((a.class_free_pages[r], a.class_release_pages[r])))
                a.class_release_pages[r] = torch.empty((0,), dtype=torch.int64)
    return merge


def kv_lens_from_compute_split(original, changed):
    """Broken in-seq plan: request_kv_len_prev/next (the KV a rank's two segments attend to) summed over the
    compute (padded) split list instead of the valid one; differs only where compute padding is on."""
    def plan(**kwargs):
        p = original(**kwargs)
        rank, segments = p["cp_rank"], 2 * p["cp_size"]
        for i, compute in enumerate(p["request_compute_split_lists"]):
            prev, nxt = sum(compute[:rank + 1]), sum(compute[:segments - rank])
            if (prev, nxt) != (p["request_kv_len_prev"][i], p["request_kv_len_next"][i]):
                changed.append(i)
            p["request_kv_len_prev"][i], p["request_kv_len_next"][i] = prev, nxt
        return p
    return plan


def translate_offset_in_logical_page(torch, original, changed):
    """Broken translate_loc_to_scratch: the in-page offset taken within the logical page (loc % (N*ps)) instead
    of the physical page (loc % ps); differs for every slot of a page that rank 0 does not own."""
    def translate(self, loc):
        want = original(self, loc)
        spec, loc64 = self.shard_spec, loc.long()
        got = self._page_pos[loc64 // spec.page_size].long() * spec.page_size + loc64 % spec.logical_page_size
        if not torch.equal(got, want):
            changed.append(1)
        return got
    return translate


def prefix_block_reversed(torch, original, changed):
    """Broken begin_shard_extend plan: each owner's prefix pages laid out in its scratch block in descending
    instead of ascending local-page order (page_pos permuted within a block; send_rows left as SGLang packs
    them); differs wherever one rank owns two or more prefix pages of the batch."""
    def begin(self, *args):
        original(self, *args)
        block, pos = self._block_pages, self._page_pos
        for owner in range(self.shard_spec.shard_size):
            mapped = ((pos >= owner * block) & (pos < (owner + 1) * block)).nonzero().flatten()
            if mapped.numel() > 1:
                order = torch.argsort(pos[mapped])
                pos[mapped[order]] = pos[mapped[order]].flip(0)
                changed.append(owner)
    return begin


# broken pipeline variants: (the method of SGLang's shard pool it replaces on the stream's persistent pools only, so
# the stateless gather_plan records stay SGLang's; the patch; the op and field it must be caught at)
PIPELINE_BREAKS = {
    "broken_translate": ("translate_loc_to_scratch", translate_offset_in_logical_page, "get_key_buffer",
                         "scratch_rows["),
    "broken_plan": ("begin_shard_extend", prefix_block_reversed, "begin_shard_extend", "page_pos["),
}


def broken_case(name, args, seed, sg, rec, kvshard, tmpdir, coverage):
    """Records streams under the broken variant until one records a decision that differs from SGLang's (the
    oracle finds the line); replay must exit 1 naming that line, op and field. Returns (line, message)."""
    for attempt in range(args.broken_attempts):
        rng = random.Random(f"{seed}/{name}/{attempt}")
        path = os.path.join(tmpdir, f"sglang_recorder_seed{seed}_{name}{attempt}.jsonl")
        changed, hint = [], None
        with open(path, "w") as f:
            if name == "broken_merge":
                s = Stream(sg, rec, rng, f, need_sort=True, merge_impl=merge_only_short(sg.torch), tag=name)
                s.run(args.steps)
                hint = s.first_skipped_merge_line
            elif name in PIPELINE_BREAKS:
                attr, make, _, _ = PIPELINE_BREAKS[name]
                s = Stream(sg, rec, rng, f, need_sort=bool(attempt % 2), tag=name)
                broken = make(sg.torch, getattr(sg.shard_plan.Pool, attr), changed)
                for pool in s.pools:
                    setattr(pool, attr, types.MethodType(broken, pool))
                s.pipeline_changes = changed  # the pipeline records whose answer it changed
                s.run(args.steps)
                hint = s.changed_pipeline_lines[0] if s.changed_pipeline_lines else None
            else:
                fn = sg.cp.build_batch_page_aligned_in_seq_split_plan
                with patched(sg.cp, "build_batch_page_aligned_in_seq_split_plan",
                             kv_lens_from_compute_split(fn, changed)):
                    s = Stream(sg, rec, rng, f, need_sort=bool(attempt % 2), tag=name)
                    s.plan_changes = changed  # the split records it changed (its rerange calls don't count)
                    s.run(args.steps)
                hint = s.changed_split_lines[0] if s.changed_split_lines else None
        if name == "broken_merge":
            coverage.update({f"{name}: " + k: v for k, v in s.stats.items() if "merge" in k})
        with open(path) as f:
            want = oracle_mismatch(sg, rec, f.read())
        if want is None:
            continue
        line, op, message = want
        rc, summary, err = replay(kvshard, path)
        got = err.strip().splitlines()[-1] if err.strip() else ""
        prefix = "kvshard: mismatch: "
        ok = rc == 1 and got.startswith(prefix + message) and (message.endswith(": ") or got == prefix + message)
        if not ok:
            raise Failure(f"{name}: replay of {keep(path)} must exit 1 with '{prefix}{message}', got exit {rc}: "
                          f"{err.strip()[:500]}")
        if summary is None or not str(summary.get("first_mismatch", "")).startswith(f"line {line}: "):
            raise Failure(f"{name}: the --json summary names another first mismatch: {summary}")
        detail = ""
        if name == "broken_merge":
            if hint is None or line < hint or op != "alloc":
                raise Failure(f"{name}: the first difference (line {line}, {op}) is not an alloc at or after the "
                              f"first merge the patch changed (line {hint}); trace {keep(path)}")
            detail = f" (the broken merge first skipped a class at line {hint})"
        elif name in PIPELINE_BREAKS:
            _, _, want_op, field = PIPELINE_BREAKS[name]
            if op != want_op or line != hint or not message.startswith(f"line {line}: {op}: {field}"):
                raise Failure(f"{name}: the first difference ({message}) is not the {field}...] of the first "
                              f"{want_op} record whose answer the patch changed (line {hint}); trace {keep(path)}")
            detail = f" (the first {want_op} record whose answer the patch changed)"
        else:
            if op != "split" or line != hint:
                raise Failure(f"{name}: the first difference (line {line}, {op}) is not the first split record "
                              f"whose plan the patch changed (line {hint}); trace {keep(path)}")
            detail = " (the first split record whose plan the patch changed)"
        print(f"  {name}: attempt {attempt}, N={s.n} ps={s.ps} pages_per_rank={s.ppr} need_sort="
              f"{str(s.need_sort).lower()}, {s.writer.records} records: caught at line {line}{detail}: {got}")
        return line, got
    raise Failure(f"{name}: the broken variant never recorded a decision different from SGLang's in "
                  f"{args.broken_attempts} streams of {args.steps} steps (harness: raise --steps)")


# ---- driver ----------------------------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description="Records SGLang's decisions through tools/recorder and replays them.")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: time-based, printed)")
    p.add_argument("--streams", type=int, default=8, help="clean streams (traces), need_sort alternating off/on")
    p.add_argument("--steps", type=int, default=500, help="serving-loop steps per stream")
    p.add_argument("--broken-attempts", type=int, default=30, help="streams tried per broken variant")
    return p.parse_args()


def main():
    args = parse_args()
    ref_dir = os.path.realpath(sglang_ref_dir())
    if not os.path.isfile(os.path.join(ref_dir, "allocator.py")):
        skip(f"SGLang reference folder not found at {ref_dir} (set KVSHARD_SGLANG_REF)")
    try:
        import torch
    except ImportError:
        skip(f"torch is not importable by {sys.executable} (Debian: apt-get install python3-torch)")
    kvshard = kvshard_binary()
    if not os.access(kvshard, os.X_OK):
        sys.exit(f"kvshard binary not found at {kvshard} (bazel build //cli:kvshard)")
    recorder_file = runfile(os.path.join("tools", "recorder", "kvshard_recorder.py"))
    rec = load_module("kvshard_recorder", recorder_file)
    sg = Sglang(ref_dir, torch)
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1_000_000_007
    print(f"{SUITE}: seed {seed} (rerun: --seed {seed} --streams {args.streams} --steps {args.steps}), "
          f"SGLang code from {ref_dir}, recorder {recorder_file}")
    cases, coverage, start = [], collections.Counter(), time.time()
    totals = [0, 0]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmpdir:
        for name in ("clean", "example", "broken_merge", "broken_split", *PIPELINE_BREAKS):
            try:
                if name == "clean":
                    totals = clean_case(args, seed, sg, rec, kvshard, tmpdir, coverage)
                elif name == "example":
                    example_case(ref_dir, kvshard, tmpdir)
                else:
                    broken_case(name, args, seed, sg, rec, kvshard, tmpdir, coverage)
                cases.append((name, "passed", ""))
            except Exception as e:  # Failure, or SGLang/harness raising: reported, and the other cases still run
                if not isinstance(e, Failure):
                    traceback.print_exc()
                print(f"FAILED: {name}: {e}")
                cases.append((name, "failed", str(e) or repr(e)))
    print("  coverage: " + ", ".join(f"{key} {coverage[key]}" for key in sorted(coverage)))
    ok = all(status == "passed" for _, status, _ in cases)
    status = dict((n, s) for n, s, _ in cases)
    clean = (f"{totals[0]} records, {totals[1]} fields checked, 0 mismatches in {args.streams} clean traces"
             if status["clean"] == "passed" else "clean traces FAILED")
    caught = sum(1 for n, s in status.items() if n.startswith("broken_") and s == "passed")
    example = "example trace re-recorded and replayed" if status["example"] == "passed" else "example FAILED"
    broken = sum(n.startswith("broken_") for n in status)
    print(f"{SUITE}: {'PASS' if ok else 'FAIL'}: {clean}; {example}; broken variants caught at their line and "
          f"field: {caught} of {broken} ({time.time() - start:.1f} s, seed {seed})")
    write_xml(cases)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

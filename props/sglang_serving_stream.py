# SGLang's reference modules (loaded at run time from ../shared/sglang_ref, never copied here) and a seeded serving
# stream that drives them through the recorder (tools/recorder/kvshard_recorder.py) into one kvshard trace: the
# allocator, stateless gather plans, the sharded pool's pipeline on persistent pools, CP splits and reranges. Shared
# by //props:sglang_recorder_test (clean streams, broken variants and their oracle) and //props:sglang_attach_test
# (the same stream under the attached recorder).
import collections
import sys

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
                                      generator={"tool": "props/sglang_serving_stream.py", "stream": tag})
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

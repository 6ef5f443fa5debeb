"""Records what an SGLang engine decided as a kvshard trace (docs/trace-format.md, version 1, JSON Lines), so
`kvshard replay` can check every decision against the reference model: allocator records, gather plans, CP splits
and reranges, and the sharded pool's pipeline (begin_shard_extend, set_kv_buffer, get_key_buffer,
end_shard_extend). Standard library only; torch optional (imported only to hand a list of slots to SGLang's
translate_loc_to_scratch). Usage: docs/trace-format.md, "Recording from SGLang"; a worked example:
record_sglang_example.py beside this file; tested end to end by //props:sglang_recorder_test.

Attached to a running engine (docs/trace-format.md, "Attaching to a running SGLang"):
    python3 tools/recorder/kvshard_recorder.py --out DIR -- python3 -m sglang.launch_server ...
runs the command with an import hook (kvshard_hook/sitecustomize.py) that records every
PageInterleavePoolAllocator the engine's processes create, one trace per allocator (a rank), each record with a
`meta` object (rank, pid, step, time, the request ids of the batch where the caller holds them), written whole
and flushed; tested by //props:sglang_attach_test."""
import argparse
import importlib.abc
import importlib.machinery
import itertools
import json
import os
import sys
import time

TRACE_VERSION = 1


def _plain(value):
    """JSON-ready copy: tensors and tuples become lists, torch/numpy scalars become ints."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class TraceWriter:
    """Appends one JSON object per line: the header first, then records {"op": ..., inputs, "expect": ...}.
    `meta` (optional): a function returning the record's `meta` object (context replay prints with a mismatch);
    `flush`: flush after every record, each written with one write() call, so a killed engine leaves whole records
    (and at most one cut last line, which replay reports as truncated after checking the rest)."""

    def __init__(self, out, meta=None, flush=False, **header):
        self._out, self._meta, self._flush = out, meta, flush
        self.records = 0
        self.inside = None  # inside a recorded radix call: the pages of each free() it made
        self.extend = None  # the sharded extend in flight (record_begin_shard_extend .. record_end_shard_extend)
        self._write({"kvshard_trace": TRACE_VERSION, **_plain(header)})

    def _write(self, obj):
        self._out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        if self._flush:
            self._out.flush()

    def record(self, op, expect=None, **inputs):
        rec = {"op": op, **_plain(inputs)}
        if expect is not None:
            rec["expect"] = _plain(expect)
        if self._meta is not None and self._meta is not False:
            rec["meta"] = _plain(self._meta(self))
        self._write(rec)
        self.records += 1


def allocator_header(alloc):
    """The header's "allocator" object for an SGLang PageInterleavePoolAllocator."""
    return {"shard_size": alloc.shard_size, "page_size": alloc.page_size,
            "pages_per_rank": alloc.num_pages // alloc.shard_size, "need_sort": bool(alloc.need_sort)}


class AllocatorRecorder:
    """Wraps an SGLang PageInterleavePoolAllocator in place: every alloc_extend, free and free group is
    recorded with the allocator's answer (pages, resolved bases, class counts) as the record's expect."""

    def __init__(self, alloc, writer):
        self.alloc, self.writer = alloc, writer
        self._group = None  # the frees of the open free group, or None outside one
        self._closing = False  # inside free_group_end, whose flush calls free() again: not a free of its own
        self._alloc_extend, self._free = alloc.alloc_extend, alloc.free
        self._group_begin, self._group_end = alloc.free_group_begin, alloc.free_group_end
        alloc.alloc_extend, alloc.free = self.alloc_extend, self.free
        alloc.free_group_begin, alloc.free_group_end = self.free_group_begin, self.free_group_end

    def _state(self):
        a = self.alloc
        return {"class_free_page_counts": list(a.class_free_page_counts()),
                "available_size": int(a.available_size()), "aggregate_free_size": int(a.aggregate_free_size())}

    def alloc_extend(self, prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens,
                     num_new_pages=None, rotation_bases=None):
        inputs = {"prefix_lens": [int(x) for x in prefix_lens_cpu], "seq_lens": [int(x) for x in seq_lens_cpu],
                  "rotation_bases": list(rotation_bases), "last_locs": [int(x) for x in _plain(last_loc)]}
        out = self._alloc_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens,
                                 num_new_pages, rotation_bases=rotation_bases)
        expect = {"op": "alloc", "ok": out is not None}
        if out is not None:
            expect["rotation_bases"] = [int(b) for b in rotation_bases]
            expect["pages"] = self._pages(inputs, _plain(out))
        expect.update(self._state())
        self.writer.record("alloc", expect=expect, **inputs)
        return out

    def _pages(self, inputs, slots):
        """Each request's new pages in position order: the page of every ps-th slot of its run."""
        ps, pages, at = self.alloc.page_size, [], 0
        for prefix, seq in zip(inputs["prefix_lens"], inputs["seq_lens"]):
            run = slots[at:at + seq - prefix]
            pages.append([s // ps for s in run[::ps]])
            at += seq - prefix
        return pages

    def free(self, free_index):
        if self._closing:  # SGLang's free_group_end frees the group's concatenated slots through self.free
            return self._free(free_index)
        if self.writer.inside is not None:  # a free inside a recorded radix call: part of that call's answer
            locs = [int(x) for x in _plain(free_index)]
            if locs:
                self.writer.inside.append(sorted({x // self.alloc.page_size for x in locs}))
            return self._free(free_index)
        if self._group is not None:
            self._group.append([int(x) for x in _plain(free_index)])
            return self._free(free_index)
        locs = [int(x) for x in _plain(free_index)]
        self._free(free_index)
        if locs:  # SGLang returns early on an empty free: nothing happened
            self.writer.record("free", expect={"op": "free", **self._state()}, locs=locs)

    def free_group_begin(self):
        self._group = []
        return self._group_begin()

    def free_group_end(self):
        frees, self._group, self._closing = self._group, None, True
        try:
            result = self._group_end()
        finally:
            self._closing = False
        self.writer.record("free_group", expect={"op": "free_group", **self._state()}, frees=frees)
        return result


def extend_requests(page_size, req_to_token, req_pool_indices, prefix_lens, seq_lens):
    """The batch's "requests" ([{prefix_len, seq_len, pages}], `pages` the page of every page_size-th slot of the
    request's req_to_token row) for one begin_shard_extend(req_to_token, req_pool_indices, prefix_lens, seq_lens)."""
    ps, requests = page_size, []
    for i, (prefix, seq) in enumerate(zip(_plain(prefix_lens), _plain(seq_lens))):
        row = _plain(req_to_token[int(req_pool_indices[i])])
        requests.append({"prefix_len": int(prefix), "seq_len": int(seq),
                         "pages": [int(row[k]) // ps for k in range(0, int(seq), ps)]})
    return requests


def extend_batch(spec, req_to_token, req_pool_indices, prefix_lens, seq_lens, pages_per_rank):
    """The record's "batch" (the object `kvshard gather-plan --batch` reads) for one begin_shard_extend call on
    pools of `spec` (their PageShardSpec); `pages_per_rank` as in record_gather_plan."""
    return {"shard_size": spec.shard_size, "page_size": spec.page_size, "pages_per_rank": int(pages_per_rank),
            "max_prefix_tokens": int(spec.max_prefix_tokens), "chunk_tokens": int(spec.chunk_tokens),
            "requests": extend_requests(spec.page_size, req_to_token, req_pool_indices, prefix_lens, seq_lens)}


def _plan_expect(pools):
    """The plan fields SGLang's shard pools hold after begin_shard_extend, under kvshard's names: block_pages,
    trash_page, chunk_base_page, page_pos (the mapped pages, ascending) and, for each pool given, its rank's
    send_rows and send_local_pages (the local page of every page_size-th send row); ranks whose pool is not
    given are {} (they match anything). The plan is mirrored, so the shared fields come from pools[0]."""
    spec = pools[0].shard_spec
    ps, n = spec.page_size, spec.shard_size
    p0 = pools[0]
    trash = p0._trash_base // ps
    ranks = [{} for _ in range(n)]
    for pool in pools:
        rows = [] if pool._send_rows is None else [int(x) for x in _plain(pool._send_rows)]
        ranks[pool.shard_rank] = {"rank": pool.shard_rank, "send_local_pages": [r // ps for r in rows[::ps]],
                                  "send_rows": rows}
    return {"block_pages": int(p0._block_pages), "trash_page": trash, "chunk_base_page": p0._chunk_base // ps,
            "page_pos": [[l, s] for l, s in enumerate(_plain(p0._page_pos)) if s != trash], "ranks": ranks}


def record_gather_plan(writer, pools, req_to_token, req_pool_indices, prefix_lens, seq_lens, pages_per_rank):
    """Records one begin_shard_extend that `pools` (SGLang shard pools, one per rank or only some ranks, all
    of one shard group) have just run, as a stateless gather_plan record: the batch and the plan fields each
    pool holds. `pages_per_rank` is the pool's size // page_size: allocatable pages per rank, the trash page
    (local page 0) not counted. Where begin_shard_extend raised e instead:
    record_error(writer, "gather_plan", error_text(e), batch=extend_batch(spec, req_to_token, ...))."""
    batch = extend_batch(pools[0].shard_spec, req_to_token, req_pool_indices, prefix_lens, seq_lens, pages_per_rank)
    writer.record("gather_plan", expect=_plan_expect(pools), batch=batch)


# ---- pipeline records: the sharded pool (docs/trace-format.md, "Pipeline records: the sharded pool") ----------

def pool_header(pool, num_layers, row_words=None, payload_seed=None, allocator=None, buffers=None):
    """The header's "pool" object for an SGLang shard pool (its shard_spec carries the scratch capacities
    max_prefix_tokens and chunk_tokens). Replay simulates the rows: `num_layers` layers of `row_words` 32-bit
    words per KV row, filled from `payload_seed` (the model's real row width is not needed). Instead of
    `row_words`, `buffers` lists the per-layer buffers as (name, row_bytes) pairs, or "pool" to read them from
    the pool's `_gather_pairs(0)` (MHA: k and v; MLA: kv; bytes of one token row each). With `allocator`
    (the PageInterleavePoolAllocator whose allocator_header the trace carries) the geometries must agree:
    replay takes shard_size, page_size and pages_per_rank from the header's "allocator"."""
    spec = pool.shard_spec
    if allocator is not None:
        want = allocator_header(allocator)
        got = {"shard_size": spec.shard_size, "page_size": spec.page_size,
               "pages_per_rank": pool.size // spec.page_size}
        if any(want[k] != v for k, v in got.items()):
            raise ValueError(f"pool_header: the pool's geometry {got} differs from the allocator's {want}")
    header = {"max_prefix_tokens": int(spec.max_prefix_tokens), "chunk_tokens": int(spec.chunk_tokens),
              "num_layers": int(num_layers)}
    if (row_words is None) == (buffers is None):
        raise ValueError("pool_header: give either row_words or buffers")
    if buffers == "pool":
        buffers = [(name, buf[0].numel() * buf.element_size()) for buf, name in pool._gather_pairs(0)]
    if buffers is None:
        header["row_words"] = int(row_words)
    else:
        header["buffers"] = [{"name": str(n), "row_bytes": int(b)} for n, b in buffers]
    if payload_seed is not None:
        header["payload_seed"] = int(payload_seed)
    return header


def _slots(page_size, req_to_token, req_pool_indices, prefix_lens, seq_lens):
    """(every slot of the batch, its chunk slots): req_to_token[row, 0:seq] and [prefix:seq], request-major."""
    every, chunk = [], []
    for i, (prefix, seq) in enumerate(zip(_plain(prefix_lens), _plain(seq_lens))):
        row = [int(x) for x in _plain(req_to_token[int(req_pool_indices[i])])[:int(seq)]]
        every += row
        chunk += row[int(prefix):]
    return every, chunk


def record_begin_shard_extend(writer, pools, req_to_token, req_pool_indices, prefix_lens, seq_lens,
                              out_cache_loc=None, epoch=True):
    """Records one begin_shard_extend(req_to_token, req_pool_indices, prefix_lens, seq_lens) that `pools` (one
    per rank, or only some ranks, of one shard group) have just run, and opens the extend that the following
    record_set_kv_buffer / record_get_key_buffer calls default to. expect: the plan fields (as
    record_gather_plan), SGLang's `_epoch` (pass epoch=False unless every begin_shard_extend of these pools
    since their start is recorded: replay counts from 1) and `out_cache_loc` (the batch's forward_batch
    .out_cache_loc, i.e. the allocator's answer; default: the chunk slots read from req_to_token). Where
    begin_shard_extend raised e instead: record_error(writer, "begin_shard_extend", error_text(e),
    requests=extend_requests(page_size, req_to_token, ...)), and no extend opens."""
    ps = pools[0].shard_spec.page_size
    requests = extend_requests(ps, req_to_token, req_pool_indices, prefix_lens, seq_lens)
    every, chunk = _slots(ps, req_to_token, req_pool_indices, prefix_lens, seq_lens)
    expect = _plan_expect(pools)
    if epoch:
        expect["epoch"] = int(pools[0]._epoch)
    expect["out_cache_loc"] = chunk if out_cache_loc is None else [int(x) for x in _plain(out_cache_loc)]
    writer.record("begin_shard_extend", expect=expect, requests=requests)
    writer.extend = {"locs": every, "out_cache_loc": chunk}


def record_set_kv_buffer(writer, layer, locs=None, expect=None):
    """Records a set_kv_buffer(layer, loc, ...) of every rank. `locs` (the loc tensor or list) is written only
    where it differs from the extend's out_cache_loc (replay's default); outside an extend it is required. No
    expect by default: SGLang's write plan (_get_write_plan's owned_idx/local_rows) is not in the reference
    code this recorder is tested against; pass `expect` (docs: owned_counts, ranks, staged, generation) to
    record one."""
    inputs = {"layer": int(layer)}
    if locs is not None:
        locs = [int(x) for x in _plain(locs)]
        if writer.extend is None or locs != writer.extend["out_cache_loc"]:
            inputs["locs"] = locs
    elif writer.extend is None:
        raise ValueError("record_set_kv_buffer: locs are required outside a sharded extend")
    writer.record("set_kv_buffer", expect=expect, **inputs)


def _loc_tensor(pool, locs):
    if hasattr(locs, "long"):
        return locs
    import torch  # only to hand a list of slots to SGLang's translate_loc_to_scratch
    return torch.tensor(locs, dtype=torch.int64, device=getattr(pool, "device", "cpu"))


def record_get_key_buffer(writer, pool, layer, locs=None):
    """Records a read of layer `layer` inside the extend: expect.scratch_rows is SGLang's
    pool.translate_loc_to_scratch(locs) (`pool`: any rank's pool; the plan is mirrored). `locs` (tensor or
    list; default: every slot of the extend, prefix and chunk, request-major, replay's default) is written only
    where it differs from that default. Every locs entry must be a slot of the batch: translate maps any other
    slot to the trash page, which replay rejects as a malformed record."""
    if writer.extend is None:
        raise ValueError("record_get_key_buffer: no sharded extend in flight (record_begin_shard_extend first)")
    default = writer.extend["locs"]
    plain = default if locs is None else [int(x) for x in _plain(locs)]
    rows = pool.translate_loc_to_scratch(_loc_tensor(pool, default if locs is None else locs))
    inputs = {"layer": int(layer)}
    if plain != default:
        inputs["locs"] = plain
    writer.record("get_key_buffer", expect={"scratch_rows": [int(x) for x in _plain(rows)]}, **inputs)


def record_end_shard_extend(writer):
    """Records the end of the sharded extend (SGLang's end_shard_extend) and closes it in the writer."""
    writer.record("end_shard_extend")
    writer.extend = None


def record_split(writer, plan, extend_lens, prefix_lens, page_size, cp_size, cp_rank):
    """Records SGLang's build_batch_page_aligned_in_seq_split_plan result (its dict, SGLang's field names)."""
    writer.record("split", expect=plan, cp_size=cp_size, cp_rank=cp_rank, page_size=page_size,
                  extend_lens=list(extend_lens), prefix_lens=list(prefix_lens))


FAIL_FAST = "[CP_SHARED_KV_FAIL_FAST]"
_CAPACITY_TAGS = ("exceeds the scratch prefix capacity", "exceeds the scratch chunk capacity")


def error_text(error):
    """The part of an SGLang rejection (an exception or its message) that kvshard's error message carries
    too: a CP fail-fast's "[CP_SHARED_KV_FAIL_FAST][<reason>]" tag, a scratch capacity assertion's tag (kvshard
    adds the sizes), otherwise the whole message (alignment, cyclic owners)."""
    text = str(error)
    if text.startswith(FAIL_FAST) and "]" in text[len(FAIL_FAST):]:
        return text[:text.index("]", len(FAIL_FAST)) + 1]
    for tag in _CAPACITY_TAGS:
        if tag in text:
            return tag
    return text


def record_error(writer, op, message, **inputs):
    """Records a call SGLang rejected, with the inputs its record would carry: replay requires the record to
    be rejected with a message containing `message` (error_text(e) of SGLang's exception e)."""
    writer.record(op, expect={"error": message}, **inputs)


def record_rerange(writer, source_rows, max_rank_token, extend_lens, prefix_lens, page_size, cp_size):
    """Records a batch rerange: output row k came from all-gather row source_rows[k] (rank blocks of
    max_rank_token rows)."""
    writer.record("rerange", expect={"max_rank_token": max_rank_token, "source_rows": list(source_rows)},
                  cp_size=cp_size, page_size=page_size, extend_lens=list(extend_lens), prefix_lens=list(prefix_lens))


class RadixRecorder:
    """Wraps an SGLang RadixCache in place: every match_prefix, insert, inc_lock_ref, dec_lock_ref, evict,
    cache_unfinished_req and cache_finished_req the engine makes is a radix_* record with SGLang's answer (calls
    the cache makes inside one of them, and their allocator frees, are part of that record). Nodes are named by
    handles numbered in the order records first name them (0: the root), as replay numbers them. Not recorded:
    bigram (EAGLE) keys, extra_key namespaces, cache_finished_req(is_insert=False) (they raise here)."""

    def __init__(self, cache, writer):
        import weakref
        self.cache, self.writer, self.ps = cache, writer, cache.page_size
        self.handles = weakref.WeakKeyDictionary({cache.root_node: 0})
        self.next_handle = 1
        for name in ("match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "cache_unfinished_req",
                     "cache_finished_req"):
            setattr(cache, name, self._wrap(name, getattr(cache, name)))

    def handle(self, node):
        if node is None:  # no last node: SGLang skips its dec_lock_ref, as one of the root does nothing
            return 0
        if node not in self.handles:
            self.handles[node] = self.next_handle
            self.next_handle += 1
        return self.handles[node]

    def _wrap(self, name, call):
        def wrapped(*args, **kwargs):
            if self.writer.inside is not None:  # a call the recorded one makes: not a record of its own
                result = call(*args, **kwargs)
                if name == "insert":  # cache_*_req's insert: its answer is part of the outer record's
                    self.inner_insert = result
                return result
            before = getattr(self, "_before_" + name)(*args, **kwargs)
            self.writer.inside, self.inner_insert = [], None
            try:
                result = call(*args, **kwargs)
            finally:
                freed, self.writer.inside = self.writer.inside, None
            op, inputs, expect = getattr(self, "_after_" + name)(before, result, freed, *args, **kwargs)
            expect["evictable_size"] = int(self.cache.evictable_size())
            expect["protected_size"] = int(self.cache.protected_size())
            self.writer.record(op, expect=expect, **inputs)
            return result
        return wrapped

    @staticmethod
    def _key_tokens(key):
        if key.is_bigram or key.extra_key is not None:
            raise NotImplementedError("kvshard recorder: bigram (EAGLE) keys and extra_key namespaces are not modelled")
        return [int(t) for t in key.raw_token_ids()]

    def _pages(self, locs):
        return [int(x) // self.ps for x in _plain(locs)[::self.ps]]

    def _before_match_prefix(self, params):
        return self._key_tokens(params.key)

    def _after_match_prefix(self, tokens, m, freed, params):
        return "radix_match_prefix", {"tokens": tokens}, {
            "prefix_len": len(m.device_indices), "pages": self._pages(m.device_indices),
            "node": self.handle(m.last_device_node)}

    def _before_insert(self, params):
        tokens = self._key_tokens(params.key)
        locs = tokens if params.value is None else [int(x) for x in _plain(params.value)]
        return tokens, locs, params.rotation_base

    def _after_insert(self, before, r, freed, params):
        tokens, locs, base = before
        return "radix_insert", {"tokens": tokens, "locs": locs, "rotation_base": base}, {
            "prefix_len": int(r.prefix_len), "rotation_tail_declined": bool(r.rotation_tail_declined),
            "node": self.handle(r.last_device_node)}

    def _before_inc_lock_ref(self, node):
        return self.handle(node)

    def _after_inc_lock_ref(self, handle, r, freed, node):
        return "radix_inc_lock_ref", {"node": handle}, {}

    def _before_dec_lock_ref(self, node, params=None):
        return self.handle(node)

    def _after_dec_lock_ref(self, handle, r, freed, node, params=None):
        return "radix_dec_lock_ref", {"node": handle}, {}

    def _before_evict(self, params):
        return int(params.num_tokens)

    def _after_evict(self, num_tokens, r, freed, params):
        return "radix_evict", {"num_tokens": num_tokens}, {"evicted_tokens": int(r.num_tokens_evicted),
                                                           "evicted": freed}

    def _req_inputs(self, req, tokens):
        row = self.cache.req_to_token_pool.req_to_token[req.req_pool_idx, : len(tokens)]
        return {"fill_ids": [int(t) for t in tokens], "row": [int(x) for x in _plain(row)],
                "cache_protected_len": int(req.cache_protected_len), "last_node": self.handle(req.last_node),
                "rotation_base": req.kv_rotation_base}

    def _before_cache_unfinished_req(self, req, chunked=False):
        return self._req_inputs(req, req.get_fill_ids())

    def _inserted(self):
        r = self.inner_insert
        return {"rotation_tail_declined": bool(r.rotation_tail_declined), "prefix_len": int(r.prefix_len)}

    def _after_cache_unfinished_req(self, inputs, r, freed, req, chunked=False):
        return "radix_cache_unfinished_req", inputs, {
            **self._inserted(), "freed": freed, "cache_protected_len": int(req.cache_protected_len),
            "last_node": self.handle(req.last_node), "row_pages": self._pages(req.prefix_indices)}

    def _before_cache_finished_req(self, req, is_insert=True, *, kv_len_to_handle):
        if not is_insert or self.cache.disable_finished_insert:
            raise NotImplementedError("kvshard recorder: cache_finished_req without insert is not modelled")
        return self._req_inputs(req, (req.origin_input_ids + req.output_ids)[:kv_len_to_handle])

    def _after_cache_finished_req(self, inputs, r, freed, req, is_insert=True, *, kv_len_to_handle):
        return "radix_cache_finished_req", inputs, {**self._inserted(), "freed": freed}


# ---- attaching to a running engine --------------------------------------------------------------------------

ENV_OUT = "KVSHARD_RECORD_DIR"
HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kvshard_hook")
_traces = itertools.count()


def _rank():
    """This process's rank: torch.distributed's when it is up (the allocator is built after it), else $RANK."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except (RuntimeError, ValueError):
        pass
    rank = os.environ.get("RANK")
    return int(rank) if rank is not None and rank.isdigit() else None


def _calling_rids(max_frames=12):
    """The request ids of the batch the engine is working on, where a caller holds it (SGLang's ScheduleBatch keeps
    `reqs`, each with `rid`): best effort, [] when no frame has them."""
    frame = sys._getframe(2)
    for _ in range(max_frames):
        if frame is None:
            break
        for holder in (frame.f_locals.get("self"), frame.f_locals.get("batch")):
            reqs = getattr(holder, "reqs", None)
            if isinstance(reqs, list) and reqs and all(hasattr(r, "rid") for r in reqs):
                return [str(r.rid) for r in reqs]
        reqs = frame.f_locals.get("reqs")
        if isinstance(reqs, list) and reqs and all(hasattr(r, "rid") for r in reqs):
            return [str(r.rid) for r in reqs]
        frame = frame.f_back
    return []


def _meta(rank):
    def meta(writer):
        m = {"rank": rank, "pid": os.getpid(), "step": writer.records, "time": round(time.time(), 6)}
        rids = _calling_rids()
        if rids:
            m["rids"] = rids
        return m
    return meta


def record_allocator(alloc, out_dir):
    """Records `alloc` (a PageInterleavePoolAllocator) into a new trace DIR/rank<R>.pid<P>.<K>.jsonl: its header,
    then every alloc_extend, free and free group with meta, flushed record by record. Returns the trace's path."""
    rank = _rank()
    name = f"rank{'x' if rank is None else rank}.pid{os.getpid()}.{next(_traces)}.jsonl"
    path = os.path.join(out_dir, name)
    out = open(path, "w", encoding="utf-8")
    writer = TraceWriter(out, meta=_meta(rank), flush=True, allocator=allocator_header(alloc))
    AllocatorRecorder(alloc, writer)
    alloc.kvshard_trace, alloc.kvshard_writer = path, writer
    return path


def _attach_init(cls, after):
    """Wraps cls.__init__ (once) so after(instance) runs when an instance is built."""
    if cls is None or getattr(cls, "_kvshard_attached", False):
        return
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        after(self)

    cls.__init__ = __init__
    cls._kvshard_attached = True


def attach_allocator_class(cls, out_dir):
    """Every PageInterleavePoolAllocator built from now on records itself into its own trace in out_dir."""
    _attach_init(cls, lambda alloc: record_allocator(alloc, out_dir))


def attach_radix_class(cls, out_dir=None):
    """Every RadixCache built from now on over a recorded allocator records its calls into that allocator's trace."""
    def after(cache):
        writer = getattr(cache.token_to_kv_pool_allocator, "kvshard_writer", None)
        if writer is not None:
            RadixRecorder(cache, writer)
    _attach_init(cls, after)


_plan_writers = {}  # out_dir -> this process's plan trace


def _plan_writer(out_dir):
    """This process's plan trace, DIR/plans.rank<R>.pid<P>.jsonl: the stateless gather_plan and split records (they
    need no header state), opened lazily."""
    if out_dir not in _plan_writers:
        rank = _rank()
        path = os.path.join(out_dir, f"plans.rank{'x' if rank is None else rank}.pid{os.getpid()}.jsonl")
        _plan_writers[out_dir] = TraceWriter(open(path, "w", encoding="utf-8"), meta=_meta(rank), flush=True)
    return _plan_writers[out_dir]


def attach_pool_class(cls, out_dir):
    """Records every begin_shard_extend of a shard pool of `cls` (SGLang's PageInterleaveKVPoolMixin) as a
    `gather_plan` record: the batch read from req_to_token and the plan this rank's pool holds after the call (or
    SGLang's capacity or cyclic-owner assertion as the expected error)."""
    begin = getattr(cls, "begin_shard_extend", None) if cls is not None else None
    if begin is None or getattr(begin, "_kvshard_attached", False):
        return

    def begin_shard_extend(self, req_to_token, req_pool_indices, prefix_lens_cpu, seq_lens_cpu, *args, **kwargs):
        ppr = self.size // self.shard_spec.page_size
        try:
            result = begin(self, req_to_token, req_pool_indices, prefix_lens_cpu, seq_lens_cpu, *args, **kwargs)
        except AssertionError as e:
            record_error(_plan_writer(out_dir), "gather_plan", error_text(e),
                         batch=extend_batch(self.shard_spec, req_to_token, req_pool_indices, prefix_lens_cpu,
                                            seq_lens_cpu, ppr))
            raise
        record_gather_plan(_plan_writer(out_dir), [self], req_to_token, req_pool_indices, prefix_lens_cpu,
                           seq_lens_cpu, pages_per_rank=ppr)
        return result

    begin_shard_extend._kvshard_attached = True
    cls.begin_shard_extend = begin_shard_extend


def attach_cp_module(module, out_dir):
    """Records every build_batch_page_aligned_in_seq_split_plan call of `module` (SGLang's nsa/utils.py) as a
    `split` record: the plan SGLang built, or its fail-fast as the expected error. Calls that raise anything else
    (argument errors) are not recorded."""
    plan_fn = getattr(module, "build_batch_page_aligned_in_seq_split_plan", None)
    if plan_fn is None or getattr(plan_fn, "_kvshard_attached", False):
        return

    def build_batch_page_aligned_in_seq_split_plan(*, extend_lens, prefix_lens, page_size, cp_size, cp_rank):
        inputs = dict(cp_size=int(cp_size), cp_rank=int(cp_rank), page_size=int(page_size),
                      extend_lens=[int(x) for x in _plain(extend_lens)],
                      prefix_lens=[int(x) for x in _plain(prefix_lens)])
        try:
            plan = plan_fn(extend_lens=extend_lens, prefix_lens=prefix_lens, page_size=page_size, cp_size=cp_size,
                           cp_rank=cp_rank)
        except RuntimeError as e:
            if str(e).startswith(FAIL_FAST):
                record_error(_plan_writer(out_dir), "split", error_text(e), **inputs)
            raise
        _plan_writer(out_dir).record("split", expect=plan, **inputs)
        return plan

    build_batch_page_aligned_in_seq_split_plan._kvshard_attached = True
    module.build_batch_page_aligned_in_seq_split_plan = build_batch_page_aligned_in_seq_split_plan


def _direct_write_error(text):
    """What a cp_direct_write record expects of SGLang's direct-write fail-fast: its `reason=<tag>`."""
    if text.startswith(FAIL_FAST + "[direct_write]") and " reason=" in " " + text:
        return text.split(" ")[1]
    return error_text(text)


def attach_direct_write(module, out_dir):
    """Records every get_cp_shared_kv_local_out_cache_loc of `module` (SGLang's nsa/utils.py) that computes a CP
    rank's direct-write locs (a shared-KV batch, not the cached answer) as a `cp_direct_write` record: the batch's
    extend and prefix lengths, out_cache_loc and static padding, with the rank, CP size and page size read from
    the batch's cp_shared_kv_layout (`cp_rank`, `cp_size`, `page_size`, as ../shared/sglang_ref's layout stub holds
    them); SGLang's local locs, or its fail-fast reason, as expect."""
    locs_fn = getattr(module, "get_cp_shared_kv_local_out_cache_loc", None)
    if locs_fn is None or getattr(locs_fn, "_kvshard_attached", False):
        return

    def get_cp_shared_kv_local_out_cache_loc(forward_batch, *args, **kwargs):
        layout = getattr(forward_batch, "cp_shared_kv_layout", None)
        out_cache_loc = getattr(forward_batch, "out_cache_loc", None)
        if (getattr(forward_batch, "cp_local_out_cache_loc", None) is not None
                or not getattr(forward_batch, "uses_cp_shared_kv", False) or layout is None or out_cache_loc is None
                or getattr(forward_batch, "extend_seq_lens_cpu", None) is None):
            return locs_fn(forward_batch, *args, **kwargs)
        extend = [int(x) for x in _plain(forward_batch.extend_seq_lens_cpu)]
        prefix = getattr(forward_batch, "extend_prefix_lens_cpu", None)
        inputs = dict(cp_size=int(layout.cp_size), cp_rank=int(layout.cp_rank), page_size=int(layout.page_size),
                      extend_lens=extend, prefix_lens=[0] * len(extend) if prefix is None else
                      [int(x) for x in _plain(prefix)], out_cache_loc=[int(x) for x in _plain(out_cache_loc)])
        static = getattr(forward_batch, "extend_num_tokens", None)
        if static is not None:
            inputs["extend_num_tokens"] = int(static)
        try:
            locs = locs_fn(forward_batch, *args, **kwargs)
        except (RuntimeError, AssertionError) as e:
            if str(e).startswith(FAIL_FAST):
                record_error(_plan_writer(out_dir), "cp_direct_write", _direct_write_error(str(e)), **inputs)
            raise
        if locs is not None:
            _plan_writer(out_dir).record("cp_direct_write", expect={"cp_local_out_cache_loc": locs}, **inputs)
        return locs

    get_cp_shared_kv_local_out_cache_loc._kvshard_attached = True
    module.get_cp_shared_kv_local_out_cache_loc = get_cp_shared_kv_local_out_cache_loc


def attach_nsa_utils(module, out_dir):
    """Seed 003's module: the batch planner and the CP shared-KV direct write."""
    attach_cp_module(module, out_dir)
    attach_direct_write(module, out_dir)


# SGLang module -> what attaching to it does.
ATTACH = {
    "sglang.srt.layers.attention.nsa.utils": attach_nsa_utils,
    "sglang.srt.mem_cache.page_interleave_pool":
        lambda module, out_dir: attach_pool_class(getattr(module, "PageInterleaveKVPoolMixin", None), out_dir),
    "sglang.srt.mem_cache.allocator.page_interleave":
        lambda module, out_dir: attach_allocator_class(getattr(module, "PageInterleavePoolAllocator", None), out_dir),
    "sglang.srt.mem_cache.radix_cache":
        lambda module, out_dir: attach_radix_class(getattr(module, "RadixCache", None), out_dir),
}


class _AttachingLoader(importlib.abc.Loader):
    def __init__(self, inner, attach, out_dir):
        self.inner, self.attach, self.out_dir = inner, attach, out_dir

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.attach(module, self.out_dir)


class _AttachingFinder(importlib.abc.MetaPathFinder):
    """Finds the ATTACH modules as the other finders would, then attaches once the module has run."""

    def __init__(self, out_dir):
        self.out_dir = out_dir

    def find_spec(self, name, path, target=None):
        if name not in ATTACH:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _AttachingLoader(spec.loader, ATTACH[name], self.out_dir)
                return spec
        return None


def install(out_dir):
    """Attaches to the ATTACH modules of this process: those imported already, and (an import hook) the rest."""
    os.makedirs(out_dir, exist_ok=True)
    for name, attach in ATTACH.items():
        if name in sys.modules:
            attach(sys.modules[name], out_dir)
    if not any(isinstance(f, _AttachingFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AttachingFinder(out_dir))


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="kvshard_recorder", description="Runs COMMAND (e.g. python3 -m sglang.launch_server ...) with the "
        "kvshard recorder attached to every Python process it starts: one trace per allocator (rank) in --out.")
    ap.add_argument("--out", required=True, help="folder for the traces (created if missing)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --")
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ)
    env[ENV_OUT] = out_dir
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HOOK_DIR, env.get("PYTHONPATH")) if p)
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        sys.exit(f"kvshard_recorder: cannot run {command[0]}: {e.strerror}")


if __name__ == "__main__":
    main()

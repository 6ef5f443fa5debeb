"""Records what an SGLang engine decided as a kvshard trace (docs/trace-format.md, version 1, JSON Lines), so
`kvshard replay` can check every decision against the reference model. Standard library only; torch optional.
Usage: docs/trace-format.md, "Recording from SGLang"; tested end to end by //props:sglang_recorder_test."""
import json

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
    """Appends one JSON object per line: the header first, then records {"op": ..., inputs, "expect": ...}."""

    def __init__(self, out, **header):
        self._out = out
        self.records = 0
        self._write({"kvshard_trace": TRACE_VERSION, **_plain(header)})

    def _write(self, obj):
        self._out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def record(self, op, expect=None, **inputs):
        rec = {"op": op, **_plain(inputs)}
        if expect is not None:
            rec["expect"] = _plain(expect)
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


def extend_batch(spec, req_to_token, req_pool_indices, prefix_lens, seq_lens, pages_per_rank):
    """The record's "batch" (the object `kvshard gather-plan --batch` reads) for one begin_shard_extend call on
    pools of `spec` (their PageShardSpec); `pages_per_rank` as in record_gather_plan."""
    ps, n = spec.page_size, spec.shard_size
    requests = []
    for i, (prefix, seq) in enumerate(zip(prefix_lens, seq_lens)):
        row = _plain(req_to_token[int(req_pool_indices[i])])
        requests.append({"prefix_len": int(prefix), "seq_len": int(seq),
                         "pages": [int(row[k]) // ps for k in range(0, int(seq), ps)]})
    return {"shard_size": n, "page_size": ps, "pages_per_rank": int(pages_per_rank),
            "max_prefix_tokens": int(spec.max_prefix_tokens), "chunk_tokens": int(spec.chunk_tokens),
            "requests": requests}


def record_gather_plan(writer, pools, req_to_token, req_pool_indices, prefix_lens, seq_lens, pages_per_rank):
    """Records one begin_shard_extend that `pools` (SGLang shard pools, one per rank or only some ranks, all
    of one shard group) have just run: the batch and the plan fields each pool holds. `pages_per_rank` is the
    pool's size // page_size: allocatable pages per rank, the trash page (local page 0) not counted. Where
    begin_shard_extend raised e instead:
    record_error(writer, "gather_plan", error_text(e), batch=extend_batch(spec, req_to_token, ...))."""
    spec = pools[0].shard_spec
    ps, n = spec.page_size, spec.shard_size
    batch = extend_batch(spec, req_to_token, req_pool_indices, prefix_lens, seq_lens, pages_per_rank)
    p0 = pools[0]
    trash = p0._trash_base // ps
    ranks = [{} for _ in range(n)]  # a subset: ranks not recorded match anything
    for pool in pools:
        rows = [] if pool._send_rows is None else _plain(pool._send_rows)
        ranks[pool.shard_rank] = {"rank": pool.shard_rank, "send_rows": rows}
    expect = {"block_pages": p0._block_pages, "trash_page": trash, "chunk_base_page": p0._chunk_base // ps,
              "page_pos": [[l, s] for l, s in enumerate(_plain(p0._page_pos)) if s != trash], "ranks": ranks}
    writer.record("gather_plan", expect=expect, batch=batch)


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

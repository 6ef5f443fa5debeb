# The "cp_helpers" kind of the SGLang parity test (props/sglang_parity_test.py): seed 003's host helpers from
# ../shared/sglang_ref/cp_helpers.py (loaded at run time, never copied) on seeded random inputs, each call written as a
# kvshard trace record whose expect is SGLang's answer (or SGLang's error tag), replayed in batches by one
# `kvshard replay --keep-going` each. A mismatch names the function, the record and the field.
import dataclasses
import json
import os
import random
import shutil
import subprocess
import tempfile

torch = None  # imported by run_cp_helpers (the test skips, saying why, where torch is missing)

FAIL_FAST = "[CP_SHARED_KV_FAIL_FAST]"
PAGE_SIZES = [1, 2, 3, 4, 4, 16]


class Pool:
    """token_to_kv_pool: the helpers read only its page_size."""

    def __init__(self, page_size):
        self.page_size = page_size


def value(q, t):
    """Row t of request q: the request and the row are both visible in the value (never 0: zero pads stand out)."""
    return (q + 1) * 100000 + t + 1


def batch_rows(extend):
    return [value(q, t) for q, e in enumerate(extend) for t in range(max(e, 0))]


def error_needle(e):
    """What kvshard's error must contain: SGLang's fail-fast tag (direct write: its reason), else the message."""
    text = str(e)
    if text.startswith(FAIL_FAST + "[direct_write]"):
        return text.split(" ")[1]  # reason=<tag>
    if text.startswith(FAIL_FAST):
        return text[:text.index("]", len(FAIL_FAST)) + 1]
    return text


def call(fn, python_errors=None):
    """SGLang's answer as an expect: the dict fn returns, or {"error": needle} for its fail-fast error, or for a
    Python error listed in python_errors (type -> the field kvshard's error names)."""
    try:
        return fn()
    except (RuntimeError, AssertionError) as e:
        return {"error": error_needle(e)}
    except tuple(python_errors or {}) as e:
        return {"error": python_errors[type(e)]}


class CpHelperCases:
    """Draws cases; each is (function name, trace record with SGLang's expect)."""

    def __init__(self, ch, rng):
        self.ch, self.rng = ch, rng

    # ---- inputs ----

    def batch(self, allow_faults=True):
        """(N, ps, extend, prefix): one to four requests, empty prefixes, partial pages, rarely an extend <= 0 or a
        misaligned prefix (SGLang's planner rejects both)."""
        rng = self.rng
        n, ps, bs = rng.randint(1, 8), rng.choice(PAGE_SIZES), rng.choice([1, 1, 2, 3, 4])
        extend = [rng.choice([rng.randint(1, 3 * ps), rng.randint(1, 3 * n * ps + 2)]) for _ in range(bs)]
        prefix = [0 if rng.random() < 0.4 else ps * rng.randint(1, 6) for _ in range(bs)]
        if allow_faults and rng.random() < 0.06:
            extend[rng.randrange(bs)] = 0 if rng.random() < 0.7 else -rng.randint(1, 3)
        if allow_faults and rng.random() < 0.04 and ps > 1:
            prefix[rng.randrange(bs)] += rng.randint(1, ps - 1)
        return n, ps, extend, prefix

    def globals(self, n, rank=0, mode="in-seq-split", **kw):
        return self.ch.CPGlobals(enable_nsa_prefill_context_parallel=True, nsa_prefill_cp_mode=mode, attn_cp_size=n,
                                 attn_cp_rank=rank, **kw)

    def plan(self, n, ps, extend, prefix, rank):
        ch = self.ch
        return ch.batch_plan_from_dict(ch.build_batch_page_aligned_in_seq_split_plan(
            extend_lens=extend, prefix_lens=prefix, page_size=ps, cp_size=n, cp_rank=rank))

    @staticmethod
    def record(op, n, ps, extend, prefix, **kw):
        return dict(op=op, cp_size=n, page_size=ps, extend_lens=extend, prefix_lens=prefix, **kw)

    # ---- one case per modelled function ----

    def split_rows(self):
        rng, ch = self.rng, self.ch
        n, ps, extend, prefix = self.batch()
        rank, mode = rng.randrange(n), rng.choice(["data", "1d", "position"])
        kind = rng.choice(["compute", "compute", "valid"])
        rows = batch_rows(extend)
        static = None
        roll = rng.random()
        if roll < 0.2:  # trailing static padding rows, allowed up to static_padded_tokens
            static = len(rows) + rng.randint(0, 4)
            rows += [0] * rng.randint(1, 4)
        elif roll < 0.3:
            rows += [7] * rng.randint(1, 3 * ps)  # extra rows: allowed only within the compute padding
        elif roll < 0.35 and rows:
            rows.pop()
        rec = self.record("cp_split_rows", n, ps, extend, prefix, cp_rank=rank, rows=rows, mode=mode,
                          split_kind=kind)
        if static is not None:
            rec["static_padded_tokens"] = static

        def run():
            out = ch.split_tensor_by_cp_batch_plan(torch.tensor(rows, dtype=torch.int64),
                                                   self.plan(n, ps, extend, prefix, rank), mode=mode,
                                                   split_kind=kind, static_padded_tokens=static)
            return {"rows": out.tolist()}
        rec["expect"] = call(run)
        return "split_tensor_by_cp_batch_plan", rec

    def pad_request(self):
        """_pad_cp_request_tensor_for_split on its own: one request's rows, wider rows, shorter or empty requests."""
        rng, ch = self.rng, self.ch
        width, mode = rng.choice([1, 1, 1, 2, 3]), rng.choice(["data", "1d", "position"])
        current = rng.choice([0, 1, rng.randint(1, 9)])
        target = current + rng.choice([0, rng.randint(1, 5)]) if rng.random() < 0.9 else current - rng.randint(1, 2)
        req_id = rng.randrange(4)
        rows = [value(req_id, t) + w for t in range(current) for w in range(width)]
        rec = dict(op="cp_pad_request", rows=rows, row_width=width, target_len=target, mode=mode, req_id=req_id)

        def run():
            t = torch.tensor(rows, dtype=torch.int64)
            t = t if width == 1 else t.view(-1, width)
            out = ch._pad_cp_request_tensor_for_split(t, target_len=target, mode=mode, req_id=req_id)
            return {"rows": out.reshape(-1).tolist()}
        rec["expect"] = call(run)
        return "_pad_cp_request_tensor_for_split", rec

    def valid_rows(self):
        rng, ch = self.rng, self.ch
        n, ps, extend, prefix = self.batch()
        rank = rng.randrange(n)
        rows = batch_rows(extend)
        rec = self.record("cp_valid_rows", n, ps, extend, prefix, cp_rank=rank)

        def run():
            plan = self.plan(n, ps, extend, prefix, rank)
            local = ch.split_tensor_by_cp_batch_plan(torch.tensor(rows, dtype=torch.int64), plan, mode="1d")
            if rng.random() < 0.1:
                local = torch.cat([local, torch.tensor([9], dtype=torch.int64)])  # not the compute rows
            rec["rows"] = local.tolist()
            fb = ch.ForwardBatchStub(nsa_cp_metadata=ch._build_batch_metadata_from_plan(plan, device="cpu"))
            return {"rows": ch.select_cp_local_valid_rows_for_cache_write(fb, local).tolist()}
        rec["expect"] = call(run)
        rec.setdefault("rows", rows)
        return "select_cp_local_valid_rows_for_cache_write", rec

    def direct_write(self):
        rng, ch = self.rng, self.ch
        n, ps, extend, prefix = self.batch()
        rank = rng.randrange(n)
        own_classes = rng.random() < 0.7
        owner = self.owners(n, ps, extend, prefix)
        locs = []
        for q, e in enumerate(extend):
            first = prefix[q] // ps
            for t in range(e):
                page = first + t // ps
                cls = owner(q, page) if own_classes else rng.randrange(n)
                loc = ((page + 10 * q + 1) * n + cls) * ps + t % ps
                locs.append(0 if rng.random() < 0.05 else loc)
        static = None
        roll = rng.random()
        if roll < 0.2:
            static = len(locs) + rng.randint(0, 3)
            locs += [0] * rng.randint(1, 3)
        elif roll < 0.25:
            locs.append(ps * n)
        rec = self.record("cp_direct_write", n, ps, extend, prefix, cp_rank=rank, out_cache_loc=locs)
        if static is not None:
            rec["extend_num_tokens"] = static

        def run():
            g = self.globals(n, rank)
            md = ch.prepare_input_dp_with_cp_dsa(sum(extend), rank, n, extend, page_size=ps, g=g, device="cpu",
                                                 forward_batch=self.shared_fb(extend, prefix, ps))
            fb = self.shared_fb(extend, prefix, ps, nsa_cp_metadata=md, extend_num_tokens=static,
                                out_cache_loc=torch.tensor(locs, dtype=torch.int64),
                                cp_shared_kv_layout=ch.CpSharedKVLayoutStub(rank, n, ps))
            physical = ch.get_cp_shared_kv_local_physical_out_cache_loc(fb, g=g)
            return {"cp_local_out_cache_loc": fb.cp_local_out_cache_loc.tolist(),
                    "cp_local_physical_out_cache_loc": physical.tolist()}
        rec["expect"] = call(run)
        return "get_cp_shared_kv_local_[physical_]out_cache_loc", rec

    def owners(self, n, ps, extend, prefix):
        """owner(q, page): the rank whose valid segment holds the page (where SGLang's split sends its rows)."""
        try:
            plan = self.plan(n, ps, extend, prefix, 0)
        except RuntimeError:
            return lambda q, page: 0

        def owner(q, page):
            starts, ends = plan.request_valid_segment_page_starts[q], plan.request_valid_segment_page_ends[q]
            for s in range(2 * n):
                if starts[s] <= page < ends[s]:
                    return s if s < n else 2 * n - 1 - s
            return 0
        return owner

    def shared_fb(self, extend, prefix, ps, **kw):
        return self.ch.ForwardBatchStub(uses_cp_shared_kv=True, extend_seq_lens_cpu=extend,
                                        extend_prefix_lens_cpu=prefix, token_to_kv_pool=Pool(ps), **kw)

    def can_cp_split(self):
        rng, ch = self.rng, self.ch
        n, ps, extend, prefix = self.batch()
        rec = dict(op="can_cp_split", seq_len=sum(extend) if rng.random() < 0.8 else rng.randint(0, 40), cp_size=n,
                   use_nsa=rng.random() < 0.9, uses_cp_shared_kv=rng.random() < 0.6,
                   is_context_parallel_extend=rng.random() < 0.85, sglang_cp_draft_shared_kv=rng.random() < 0.3,
                   is_draft_extend=rng.random() < 0.3, page_size=ps if rng.random() < 0.9 else 0,
                   nsa_prefill_cp_mode="round-robin-split" if rng.random() < 0.2 else "in-seq-split",
                   enable_nsa_prefill_context_parallel=rng.random() < 0.9)
        roll = rng.random()
        if roll < 0.05:
            prefix = prefix + [0]
        elif roll < 0.1:
            extend[rng.randrange(len(extend))] = -rng.randint(1, 3)
        elif roll < 0.14:
            prefix = None
        if rng.random() > 0.03:
            rec["extend_seq_lens_cpu"] = extend
        if prefix is not None:
            rec["extend_prefix_lens_cpu"] = prefix

        def run():
            fb = ch.ForwardBatchStub(uses_cp_shared_kv=rec["uses_cp_shared_kv"],
                                     extend_seq_lens_cpu=rec.get("extend_seq_lens_cpu"),
                                     extend_prefix_lens_cpu=rec.get("extend_prefix_lens_cpu"),
                                     forward_mode=ch.ForwardModeStub(rec["is_context_parallel_extend"],
                                                                     rec["is_draft_extend"]))
            if rec["page_size"]:
                fb.token_to_kv_pool = Pool(rec["page_size"])
            g = self.ch.CPGlobals(enable_nsa_prefill_context_parallel=rec["enable_nsa_prefill_context_parallel"],
                                  nsa_prefill_cp_mode=rec["nsa_prefill_cp_mode"], attn_cp_size=n,
                                  cp_draft_shared_kv=rec["sglang_cp_draft_shared_kv"])
            try:
                return {"can_cp_split": ch.can_cp_split(rec["seq_len"], n, rec["use_nsa"], fb, g=g)}
            except TypeError:  # sum(None): SGLang reads extend_seq_lens_cpu
                return {"error": "extend_seq_lens_cpu"}
            except AssertionError as e:  # "seq_len 7 is not divisible ...": kvshard names the field, "seq_len: 7 ..."
                text = str(e)
                return {"error": text.replace("seq_len ", "seq_len: ", 1)}
        rec["expect"] = call(run)
        return "can_cp_split", rec

    def padding_state(self, tokens_required):
        rng = self.rng
        n, dp = rng.randint(1, 8), rng.choice([1, 1, 2, 4])
        rec = dict(cp_size=n, extend_seq_lens_cpu=[rng.randint(0, 40) for _ in range(rng.randint(1, 3))],
                   is_extend_in_batch=rng.random() < 0.5, attention_dp_size=dp, attention_dp_rank=rng.randrange(dp),
                   uses_cp_shared_kv=rng.random() < 0.2, is_context_parallel_extend=rng.random() < 0.85,
                   nsa_prefill_cp_mode="round-robin-split" if rng.random() < 0.5 else "in-seq-split",
                   enable_nsa_prefill_context_parallel=rng.random() < 0.9)
        if tokens_required or rng.random() < 0.6:
            rec["global_num_tokens_cpu"] = [rng.choice([0, rng.randint(1, 9), rng.randint(1, 200)])
                                            for _ in range(dp)]
        return rec

    def padding_fb_g(self, rec):
        ch = self.ch
        fb = ch.ForwardBatchStub(extend_seq_lens_cpu=rec["extend_seq_lens_cpu"],
                                 global_num_tokens_cpu=rec.get("global_num_tokens_cpu"),
                                 is_extend_in_batch=rec["is_extend_in_batch"],
                                 uses_cp_shared_kv=rec["uses_cp_shared_kv"],
                                 forward_mode=ch.ForwardModeStub(rec["is_context_parallel_extend"]))
        g = ch.CPGlobals(enable_nsa_prefill_context_parallel=rec["enable_nsa_prefill_context_parallel"],
                         nsa_prefill_cp_mode=rec["nsa_prefill_cp_mode"], attn_cp_size=rec["cp_size"],
                         attn_dp_size=rec["attention_dp_size"], attn_dp_rank=rec["attention_dp_rank"])
        return fb, g

    def cal_padded_tokens(self):
        rec = dict(op="cal_padded_tokens", **self.padding_state(True))
        fb, g = self.padding_fb_g(rec)
        rec["expect"] = call(lambda: {"cal_padded_tokens": self.ch.cal_padded_tokens(fb, g=g)})
        return "cal_padded_tokens", rec

    def pad_nsa_cache_seqlens(self):
        rec = dict(op="pad_nsa_cache_seqlens", **self.padding_state(False))
        rec["nsa_cache_seqlens"] = [self.rng.randint(0, 99) for _ in range(self.rng.randint(0, 12))]
        fb, g = self.padding_fb_g(rec)
        seqlens = torch.tensor(rec["nsa_cache_seqlens"], dtype=torch.int64)
        rec["expect"] = call(lambda: {"nsa_cache_seqlens": self.ch.pad_nsa_cache_seqlens(fb, seqlens, g=g).tolist()},
                             {AttributeError: "global_num_tokens_cpu: missing"})  # None.copy(): SGLang reads it
        return "pad_nsa_cache_seqlens", rec

    def compute_nsa_seqlens(self):
        rng = self.rng
        lens = [rng.choice([0, rng.randint(1, 50), rng.randint(1, 5000)]) for _ in range(rng.randint(0, 8))]
        topk = rng.choice([1, 2, 64, 2048])
        out = self.ch.compute_nsa_seqlens(torch.tensor(lens, dtype=torch.int64), topk).tolist()
        return "compute_nsa_seqlens", dict(op="compute_nsa_seqlens", seq_lens=lens, nsa_index_topk=topk,
                                           expect={"nsa_seqlens": out})

    def round_robin_split(self):
        rng = self.rng
        n = rng.randint(1, 8)
        rank = rng.randrange(n)
        rows = [value(0, t) for t in range(rng.choice([0, rng.randint(1, n), rng.randint(1, 40), n * 5]))]
        g = self.globals(n, rank, mode="round-robin-split")
        out = self.ch.nsa_cp_round_robin_split_data(torch.tensor(rows, dtype=torch.int64), g=g).tolist()
        return "nsa_cp_round_robin_split_data", dict(op="cp_round_robin_split", cp_size=n, cp_rank=rank, rows=rows,
                                                     expect={"rows": out})

    def last_tokens(self):
        rng, ch = self.rng, self.ch
        n, ps, extend, prefix = self.batch()
        mode = rng.choice(["in-seq", "in-seq", "round-robin", "scalar"])
        if mode == "scalar":  # one request without a batch plan
            extend, prefix = [rng.choice([1, rng.randint(1, 2 * n), rng.randint(1, 60)])], [0]
        trim = rng.choice([0] * 8 + [1, 2])
        rows = batch_rows(extend)
        rec = self.record("cp_last_tokens", n, ps, extend, prefix, rows=rows, mode=mode, trim_tail=trim)
        h = torch.tensor(rows, dtype=torch.int64).view(-1, 1)

        def run():
            if mode == "round-robin":
                g0 = self.globals(n, mode="round-robin-split")
                hidden = [ch.nsa_cp_round_robin_split_data(h, g=dataclasses.replace(g0, attn_cp_rank=r))
                          for r in range(n)]
                fbs = [ch.ForwardBatchStub(extend_seq_lens_cpu=extend)] * n
            elif mode == "scalar":
                g0 = self.globals(n)
                mds = [ch.prepare_input_dp_with_cp_dsa(extend[0], r, n, extend,
                                                       g=dataclasses.replace(g0, attn_cp_rank=r), device="cpu")
                       for r in range(n)]
                fbs = [ch.ForwardBatchStub(extend_seq_lens_cpu=extend, nsa_cp_metadata=md) for md in mds]
                hidden = [ch.cp_split_and_rebuild_data(fbs[r], h, g=dataclasses.replace(g0, attn_cp_rank=r))
                          for r in range(n)]
            else:
                g0 = self.globals(n)
                plans = [self.plan(n, ps, extend, prefix, r) for r in range(n)]
                hidden = [ch.split_tensor_by_cp_batch_plan(h, p, mode="data") for p in plans]
                fbs = [self.shared_fb(extend, prefix, ps, nsa_cp_metadata=ch._build_batch_metadata_from_plan(
                    p, device="cpu")) for p in plans]
            hidden = [x[:max(0, x.shape[0] - trim)] for x in hidden]
            out = gather_sim(lambda r, g: ch.cp_collect_last_token_hidden(hidden[r], fbs[r], n, g=g), n, g0)
            assert all(torch.equal(o, out[0]) for o in out), "harness: ranks collected different rows"
            return {"last_tokens": out[0].view(-1).tolist()}
        rec["expect"] = call(run)
        return "cp_collect_last_token_hidden", rec

    def prepare_metadata(self):
        rng, ch = self.rng, self.ch
        n, ps, extend, prefix = self.batch()
        rank = rng.randrange(n)
        shared = rng.random() < 0.6
        rec = dict(op="cp_prepare_metadata", kv_len=sum(extend), cp_size=n, cp_rank=rank)
        page_size = ps if rng.random() < 0.9 else None
        if page_size is not None:
            rec["page_size"] = page_size
        fb = None
        if shared:
            rec.update(uses_cp_shared_kv=True, extend_lens=extend, prefix_lens=prefix)
            fb = self.shared_fb(extend, prefix, ps)

        def run():
            m = ch.prepare_input_dp_with_cp_dsa(sum(extend), rank, n, list(extend), forward_batch=fb,
                                                page_size=page_size, g=self.globals(n, rank), device="cpu")
            return {"nsa_cp_metadata": metadata_json(m)}
        rec["expect"] = call(run, {ValueError: "total_len"})  # the scalar path's token-balanced split of kv_len < 0
        return "prepare_input_dp_with_cp_dsa", rec

    def cp_seq_idx(self):
        rng = self.rng
        seqs = [rng.choice([0, rng.randint(1, 9), rng.randint(1, 60)]) for _ in range(rng.randint(1, 5))]
        total = sum(seqs) + rng.choice([0, 0, 0, rng.randint(-3, 6)])
        chunks, left = [], max(total, 0)
        for _ in range(rng.randint(1, 6)):
            c = rng.randint(0, left) if left else 0
            chunks.append(c)
            left -= c
        if left:
            chunks.append(left)
        out = self.ch.calculate_cp_seq_idx(list(chunks), list(seqs))
        return "calculate_cp_seq_idx", dict(op="cp_seq_idx", cp_chunks_len=chunks, seqs_len=seqs,
                                            expect={"cp_seq_idx": [[list(t) for t in c] for c in out]})

    def local_pair(self):
        rng = self.rng
        rows = [value(0, t) for t in range(rng.randint(0, 20))]
        prev = rng.randint(0, len(rows))
        nxt = len(rows) - prev if rng.random() < 0.85 else rng.randint(0, 5)
        rec = dict(op="cp_local_pair", rows=rows, prev_len=prev, next_len=nxt)

        def run():
            a, b = self.ch.split_in_seq_cp_local_pair(torch.tensor(rows, dtype=torch.int64), prev, nxt, name="rows")
            return {"prev": a.tolist(), "next": b.tolist()}
        rec["expect"] = call(run)
        return "split_in_seq_cp_local_pair", rec

    GENERATORS = ("split_rows", "pad_request", "valid_rows", "direct_write", "can_cp_split", "cal_padded_tokens",
                  "pad_nsa_cache_seqlens", "compute_nsa_seqlens", "round_robin_split", "last_tokens",
                  "prepare_metadata", "cp_seq_idx", "local_pair")


# The NSAContextParallelMetadata fields kvshard's nsa_cp_metadata carries (tensors as lists).
METADATA_KEYS = ("split_list", "split_list_tensor", "split_prefix_tensor", "max_rank_len", "zigzag_index",
                 "per_rank_actual_token", "reverse_split_len", "cp_reverse_index", "kv_len_prev", "kv_len_next",
                 "actual_seq_q_prev", "actual_seq_q_next", "actual_seq_q_prev_cu_tensor",
                 "actual_seq_q_next_cu_tensor", "total_seq_lens", "page_aligned", "page_size", "extend_prefix_len",
                 "segment_page_starts", "segment_page_ends", "extend_valid_tokens", "extend_padded_pages",
                 "extend_padded_tokens", "extend_padding_tokens", "batch_size")
BATCH_METADATA_KEYS = ("request_actual_seq_q_prev_cu_tensor", "request_actual_seq_q_next_cu_tensor")


def metadata_json(m):
    keys = METADATA_KEYS + (BATCH_METADATA_KEYS if m.batch_plan is not None else ())
    out = {}
    for k in keys:
        v = getattr(m, k)
        out[k] = v.tolist() if isinstance(v, torch.Tensor) else list(v) if isinstance(v, (list, tuple)) else v
    return out


def gather_sim(per_rank, cp_size, g0):
    """Runs per_rank(rank, g) on every CP rank twice: once capturing each rank's all-gather input, then with an
    all-gather returning the captured inputs concatenated in rank order (as cp_helpers.py's self-test)."""
    captured = {}
    for r in range(cp_size):
        def cap(out, inp, r=r):
            captured[r] = inp.clone()
            out.zero_()
        per_rank(r, dataclasses.replace(g0, attn_cp_rank=r, attn_cp_all_gather_into_tensor=cap))

    def gather(out, inp):
        out.copy_(torch.cat([captured[r] for r in range(cp_size)]))
    return [per_rank(r, dataclasses.replace(g0, attn_cp_rank=r, attn_cp_all_gather_into_tensor=gather))
            for r in range(cp_size)]


def replay_batch(kvshard, path, cases):
    """Writes the cases' records as one trace and replays it once; returns {case index: mismatch line} and the
    number of fields replay compared."""
    with open(path, "w") as f:
        f.write(json.dumps({"kvshard_trace": 1}) + "\n")
        for _, rec in cases:
            f.write(json.dumps(rec) + "\n")
    p = subprocess.run([kvshard, "replay", path, "--keep-going", "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"kvshard replay {path} exited {p.returncode}: {p.stderr.strip()[:2000]}")
    bad, rest = {}, []
    for line in p.stdout.splitlines():  # --keep-going: one "mismatch: line N: ..." line each, then the summary
        if line.startswith("mismatch: line "):
            n = int(line[len("mismatch: line "):].split(":", 1)[0])
            bad[n - 2] = line  # line 1 is the header
        else:
            rest.append(line)
    summary = json.loads("\n".join(rest))
    if summary["mismatches"] != len(bad) or summary["records"] != len(cases):
        raise RuntimeError(f"kvshard replay {path}: summary {summary} disagrees with {len(bad)} mismatch lines "
                           f"and {len(cases)} records")
    return bad, summary["fields_checked"]


def run_cp_helpers(count, seed, ch, kvshard, tmpdir, stats, batch_size=400):
    """`count` cases of every function, replayed in batches; returns (cases, fields, failure or None)."""
    global torch
    import torch
    ch.logger.disabled = True  # SGLang logs every fail-fast error it raises; the test reports them itself
    rng = random.Random(f"{seed}/cp_helpers")
    gen = CpHelperCases(ch, rng)
    cases = []
    for _ in range(count):
        for name in CpHelperCases.GENERATORS:
            cases.append(getattr(gen, name)())
    stats["cp_helpers records"] = len(cases)
    fields, failures = 0, []
    for start in range(0, len(cases), batch_size):
        chunk = cases[start:start + batch_size]
        path = os.path.join(tmpdir, f"cp_helpers_{start}.jsonl")
        bad, f = replay_batch(kvshard, path, chunk)
        fields += f
        for i, line in sorted(bad.items()):
            fn, rec = chunk[i]
            failures.append(f"{fn}: {line}\n  record: {json.dumps(rec)[:1500]}")
        if bad:  # keep the batch's trace (Bazel: undeclared test outputs) for the command printed below
            keep_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or tempfile.gettempdir()
            kept = os.path.join(keep_dir, f"sglang_parity_cp_helpers_seed{seed}_{start}.jsonl")
            shutil.copyfile(path, kept)
            print(f"reproduce: {kvshard} replay {kept} --keep-going")
    per_fn = {}
    for fn, rec in cases:
        row = per_fn.setdefault(fn, [0, {}])
        row[0] += 1
        if "error" in rec["expect"]:
            tag = rec["expect"]["error"]
            tag = tag[len(FAIL_FAST):] if tag.startswith(FAIL_FAST) else tag.split(":")[0]
            row[1][tag] = row[1].get(tag, 0) + 1
    for fn, (n, tags) in per_fn.items():
        print(f"  cp_helpers {fn}: {n} cases, {sum(tags.values())} errors ("
              + ", ".join(f"{t} {k}" for t, k in sorted(tags.items())) + ")")
    if failures:
        for f in failures[:20]:
            print("MISMATCH in cp_helpers (seed %d): %s" % (seed, f))
        return len(cases), fields, f"{len(failures)} records differ from SGLang, first: {failures[0][:600]}"
    return len(cases), fields, None

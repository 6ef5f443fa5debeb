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
from sglang_env import runfile  # noqa: E402
# props/sglang_serving_stream.py: SGLang's modules, the seeded serving stream and the recording helpers
from sglang_serving_stream import (Sglang, Stream, record_begin_extend, record_pipeline_begin,  # noqa: E402
                                   record_rerange, record_split)

CLASSNAME = "SglangRecorder"


def write_xml(cases):
    sglang_env.write_xml(SUITE, CLASSNAME, cases)


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- 1. replay: the clean streams and the worked example -----------------------------------------------------------

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


# ---- 2. broken variants: the oracle and the expected mismatch line ---------------------------------------------

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
    ref_dir, torch, kvshard = sglang_env.require_inputs(SUITE, CLASSNAME, "allocator.py")
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

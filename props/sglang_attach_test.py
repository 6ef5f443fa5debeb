# The recorder attached to a running engine: SGLang's allocator module (../shared/sglang_ref's copy, laid out at
# test time as sglang/srt/mem_cache/allocator/page_interleave.py in a temporary site folder, with the same base
# stubs as ../shared/sglang_ref/allocator.py) is imported by an engine process started through
#   python3 tools/recorder/kvshard_recorder.py --out DIR -- python3 engine.py
# so the recorder attaches through its import hook alone, as it would to `python3 -m sglang.launch_server`. The
# engine runs thousands of alloc_extend / free / free-group steps (batches of requests with ids) over several
# allocators; every trace must replay clean and carry meta (rank, pid, step, time, the batch's request ids). Then
# the same with a one-token change planted in the copy of SGLang's allocator: replay must catch it at a line and
# print that record's meta, so the mismatch leads back to the engine's request ids.
import argparse
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_env  # noqa: E402 (props/sglang_env.py: paths, skipping, JUnit XML)
from sglang_env import runfile  # noqa: E402

SUITE, CLASSNAME = "sglang_attach_test", "SglangAttach"
ALLOCATOR = "page_interleave_allocator.py"
# The planted change: a new chain's base breaks ties between equally free classes to the HIGHEST class id (one
# token of alloc_extend's pass 1: `-r` -> `r`).
PLANT = ("key=lambda r: (sim_counts[r], -r)", "key=lambda r: (sim_counts[r], r)")

# The stubs ../shared/sglang_ref/allocator.py installs in sys.modules, as files of a site folder.
STUBS = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/mem_cache/__init__.py": "",
    "sglang/srt/mem_cache/memory_pool.py": "KVCache = object\n",
    "sglang/srt/mem_cache/allocator/__init__.py": "",
    "sglang/srt/mem_cache/allocator/base.py": "class BaseTokenToKVPoolAllocator:\n    pass\n",
    "sglang/srt/mem_cache/allocator/paged.py": '''import torch
from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator


class PagedTokenToKVPoolAllocator(BaseTokenToKVPoolAllocator):
    def __init__(self, size, page_size, dtype, device, kvcache, need_sort):
        self.size, self.page_size, self.dtype, self.device = size, page_size, dtype, device
        self.need_sort = need_sort
        self.num_pages = size // page_size
        self.debug_mode = True
        self.clear()

    def free_group_begin(self):
        self.is_not_in_free_group = False
        self.free_group = []

    def free_group_end(self):
        self.is_not_in_free_group = True
        if self.free_group:
            self.free(torch.cat(self.free_group))
''',
}

# The engine: a plain import of SGLang's allocator module, then batches of requests driving it.
ENGINE = '''import random, sys
import torch
sys.path.insert(0, sys.argv[1])  # props/: the parity test's allocator driver
from sglang.srt.mem_cache.allocator.page_interleave import PageInterleavePoolAllocator
from sglang_parity_alloc import AllocModel


class Req:
    def __init__(self, rid):
        self.rid = rid


class ScheduleBatch:  # as SGLang's: the batch holds its requests; the allocator is called from its method
    def __init__(self, reqs):
        self.reqs = reqs

    def prepare_for_extend(self, model):
        roll = model.rng.random()
        if roll < 0.55 or not model.chains:
            model.alloc_op()
        elif roll < 0.85:
            model.free_op()
        else:
            model.free_group_op()


rng = random.Random(int(sys.argv[2]))
for stream in range(int(sys.argv[3])):
    model = AllocModel(PageInterleavePoolAllocator, torch, rng)
    for step in range(int(sys.argv[4])):
        ScheduleBatch([Req(f"s{stream}-b{step}-r{k}") for k in range(rng.randint(1, 3))]).prepare_for_extend(model)
print("engine: done")
'''


# The radix case: SGLang's RadixCache (../shared/sglang_ref/radix.py's loader) driven by the radix differential
# test's random serving streams, with the recorder attached to its classes as the import hook attaches them; the
# planted change inverts the rotation-base decline (one token: `!=` -> `==`).
RADIX_PLANT = ("and node.rotation_base != rotation_base", "and node.rotation_base == rotation_base")
RADIX_ENGINE = '''import collections, random, sys
props, ref_dir, recorder_dir, out, seed, streams, steps = sys.argv[1:8]
sys.path[:0] = [props, ref_dir, recorder_dir]
import radix, kvshard_recorder, sglang_radix_test as t
rc = radix.load_radix()
kvshard_recorder.attach_allocator_class(rc.PageInterleavePoolAllocator, out)
kvshard_recorder.attach_radix_class(rc.RadixCache)
stats = collections.Counter()
for i in range(int(streams)):
    rng = random.Random(f"{seed}/{i}")
    n, ps, ppr = rng.randint(2, 4), rng.choice([1, 2, 4]), rng.randint(6, 30)
    stream = t.Stream(rng, t.Sglang(radix, rc, n, ps, ppr, rng.random() < 0.3), stats)
    for _ in range(int(steps)):
        stream.step()
print("engine: done", dict(stats))
'''




# The CP case: seed 003's batch planner (../shared/sglang_ref/cp_planning.py, imported as a module) with the recorder
# attached as the import hook attaches it to sglang.srt.layers.attention.nsa.utils; random batches, fail-fasts
# included. The planted change pairs rank r with segment 2N-2-r instead of 2N-1-r for the plan's kv and q lengths
# (one token).
CP_PLANT = ("mirror_idx = cp_segment_num - cp_rank - 1", "mirror_idx = cp_segment_num - cp_rank - 2")
CP_ENGINE = '''import importlib.util, random, sys
props, ref_dir, recorder_dir, out, seed, cases = sys.argv[1:7]
sys.path[:0] = [recorder_dir]
import kvshard_recorder
spec = importlib.util.spec_from_file_location("cp_planning", ref_dir + "/cp_planning.py")
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)
kvshard_recorder.attach_cp_module(cp, out)
rng = random.Random(int(seed))
planned = failed = 0
for _ in range(int(cases)):
    n, ps = rng.randint(1, 8), rng.choice([1, 2, 4, 16])
    bs = rng.randint(1, 4)
    extend = [rng.randint(0 if rng.random() < 0.05 else 1, 6 * n * ps) for _ in range(bs)]
    prefix = [rng.randint(0, 3) * ps + (rng.randint(1, ps - 1) if ps > 1 and rng.random() < 0.05 else 0)
              for _ in range(bs)]
    try:
        cp.build_batch_page_aligned_in_seq_split_plan(extend_lens=extend, prefix_lens=prefix, page_size=ps,
                                                      cp_size=n, cp_rank=rng.randrange(n))
        planned += 1
    except RuntimeError:
        failed += 1
# the CP shared-KV direct write: seed 003's helpers module, driven by the parity test's direct-write cases
sys.path[:0] = [props, ref_dir]
import cp_helpers, sglang_parity_cp
cp_helpers.logger.disabled = True
sglang_parity_cp.torch = __import__("torch")
kvshard_recorder.attach_direct_write(cp_helpers, out)
gen = sglang_parity_cp.CpHelperCases(cp_helpers, rng)
writes = int(cases) // 3
for _ in range(writes):
    gen.direct_write()
print("engine: done", planned, "planned", failed, "failed fast,", writes, "direct writes")
'''




# The pool case: seed 000's begin_shard_extend (../shared/sglang_ref/shard_plan.py's pool state) with the recorder
# attached to the pool class, driven by the serving streams of props/sglang_serving_stream.py (allocations,
# extensions, every rank's begin_shard_extend, capacity rejections). The planted change places a prefix page one slot
# before its rank-major position (one token: `+ within` -> `- within`).
POOL_PLANT = ("(sorted_owners * block_pages + within)", "(sorted_owners * block_pages - within)")
POOL_ENGINE = '''import os, random, sys
import torch
props, ref_dir, recorder_dir, out, seed, streams, steps = sys.argv[1:8]
sys.path[:0] = [props, recorder_dir]
import kvshard_recorder, sglang_serving_stream as stream
sg = stream.Sglang(ref_dir, torch)
kvshard_recorder.attach_pool_class(sg.shard_plan.Pool, out)
for k in range(int(streams)):
    with open(os.devnull, "w") as f:  # the stream's own trace: not this test's
        stream.Stream(sg, kvshard_recorder, random.Random(f"{seed}/{k}"), f, need_sort=bool(k % 2), tag="attach").run(
            int(steps))
print("engine: done")
'''




def run_script_engine(tmpdir, tag, ref_dir, plant, script, *args):
    """Runs an engine script (argv: props/, the SGLang folder, the recorder's folder, the trace folder, then
    `args`) under the attached recorder, on ../shared/sglang_ref or, with `plant` (file, text, replacement), on a
    copy with that one change. Returns (the trace paths, the engine's last line)."""
    ref = ref_dir
    if plant:
        name, old, new = plant
        ref = os.path.join(tmpdir, tag, "sglang_ref")
        shutil.copytree(ref_dir, ref)
        path = os.path.join(ref, name)
        with open(path) as f:
            code = f.read()
        if code.count(old) != 1:
            raise RuntimeError(f"harness: the planted change's text {old!r} is not once in {name}")
        with open(path, "w") as f:
            f.write(code.replace(old, new))
    out = os.path.join(tmpdir, tag, "traces")
    os.makedirs(out, exist_ok=True)
    engine = os.path.join(tmpdir, tag, "engine.py")
    with open(engine, "w") as f:
        f.write(script)
    recorder_dir = os.path.dirname(runfile(os.path.join("tools", "recorder", "kvshard_recorder.py")))
    props = os.path.dirname(os.path.realpath(__file__))
    p = subprocess.run([sys.executable, engine, props, ref, recorder_dir, out, *map(str, args)], capture_output=True,
                       text=True)
    if p.returncode != 0 or "engine: done" not in p.stdout:
        raise RuntimeError(f"{tag} engine under the recorder failed ({p.returncode}): {(p.stdout + p.stderr)[-2000:]}")
    return sorted(glob.glob(os.path.join(out, "*.jsonl"))), p.stdout.strip()


def write_site(root, ref_dir, planted):
    for rel, text in STUBS.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    with open(os.path.join(ref_dir, ALLOCATOR)) as f:
        code = f.read()
    if planted:
        if code.count(PLANT[0]) != 1:
            raise RuntimeError(f"harness: the planted change's text {PLANT[0]!r} is not once in {ALLOCATOR}")
        code = code.replace(PLANT[0], PLANT[1])
    with open(os.path.join(root, "sglang/srt/mem_cache/allocator/page_interleave.py"), "w") as f:
        f.write(code)


def run_engine(tmpdir, tag, ref_dir, planted, seed, streams, steps):
    """Runs the engine under the recorder; returns the trace paths."""
    site, out = os.path.join(tmpdir, tag, "site"), os.path.join(tmpdir, tag, "traces")
    write_site(site, ref_dir, planted)
    engine = os.path.join(tmpdir, tag, "engine.py")
    with open(engine, "w") as f:
        f.write(ENGINE)
    recorder = runfile(os.path.join("tools", "recorder", "kvshard_recorder.py"))
    env = dict(os.environ, PYTHONPATH=site)
    props = os.path.dirname(os.path.realpath(__file__))
    cmd = [sys.executable, recorder, "--out", out, "--", sys.executable, engine, props, str(seed), str(streams),
           str(steps)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0 or "engine: done" not in p.stdout:
        raise RuntimeError(f"engine under the recorder failed ({p.returncode}): {(p.stdout + p.stderr)[-2000:]}")
    return sorted(glob.glob(os.path.join(out, "*.jsonl")))


def check_meta(path):
    """Every record of the trace carries meta with rank, pid, step (its record index) and time; those made inside
    a batch carry its request ids. Returns how many records named request ids."""
    with_rids = 0
    with open(path) as f:
        for step, line in enumerate(f.read().splitlines()[1:]):
            meta = json.loads(line).get("meta")
            if not (isinstance(meta, dict) and meta.get("step") == step and "rank" in meta and "pid" in meta
                    and isinstance(meta.get("time"), float)):
                raise RuntimeError(f"{path}: record {step + 1}: meta missing or wrong: {meta}")
            with_rids += bool(meta.get("rids"))
    return with_rids


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--streams", type=int, default=6, help="allocators (traces) the engine creates")
    ap.add_argument("--steps", type=int, default=500, help="batches per allocator")
    ap.add_argument("--radix-streams", type=int, default=40, help="radix caches (traces) of the radix case")
    ap.add_argument("--radix-steps", type=int, default=60, help="serving steps per radix cache")
    ap.add_argument("--cp-cases", type=int, default=1500, help="batch plans of the CP case")
    ap.add_argument("--pool-streams", type=int, default=4, help="serving streams of the pool case")
    ap.add_argument("--pool-steps", type=int, default=80, help="steps per stream of the pool case")
    args = ap.parse_args()
    ref_dir, _, kvshard = sglang_env.require_inputs(SUITE, CLASSNAME, ALLOCATOR)
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1_000_000_007
    print(f"{SUITE}: seed {seed} (rerun: --seed {seed}), SGLang code from {ref_dir}")
    cases, start = [], time.time()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmpdir:
        try:
            traces = run_engine(tmpdir, "clean", ref_dir, False, seed, args.streams, args.steps)
            if len(traces) != args.streams:
                raise RuntimeError(f"expected {args.streams} traces (one per allocator), found {len(traces)}")
            records = rids = 0
            for path in traces:
                p = subprocess.run([kvshard, "replay", path], capture_output=True, text=True)
                if p.returncode != 0 or " 0 mismatches" not in p.stdout:
                    raise RuntimeError(f"{os.path.basename(path)} did not replay clean: {p.stdout}{p.stderr}")
                records += int(p.stdout.split()[1])
                rids += check_meta(path)
            print(f"  clean: {len(traces)} traces, {records} records replayed clean, {rids} with request ids")
            if rids == 0:
                raise RuntimeError("no record carried the batch's request ids")
            cases.append(("clean", "passed", ""))
        except RuntimeError as e:
            print(f"FAILED: clean: {e}")
            cases.append(("clean", "failed", str(e)))
        try:
            traces = run_engine(tmpdir, "planted", ref_dir, True, seed, args.streams, args.steps)
            caught = []
            for path in traces:
                p = subprocess.run([kvshard, "replay", path], capture_output=True, text=True)
                if p.returncode == 1:
                    caught.append(p.stderr.strip())
                elif p.returncode != 0:
                    raise RuntimeError(f"{os.path.basename(path)}: exit {p.returncode}: {p.stderr}")
            if not caught:
                raise RuntimeError(f"the planted change ({PLANT[0]} -> {PLANT[1]}) was not caught in any trace")
            if not all("mismatch: line " in c and "meta=" in c and '"rids"' in c for c in caught):
                raise RuntimeError(f"a mismatch without its line or meta: {caught[0]}")
            print(f"  planted {PLANT[0]!r} -> {PLANT[1]!r}: caught in {len(caught)} of {len(traces)} traces, "
                  f"e.g. {caught[0][:300]}")
            cases.append(("planted", "passed", ""))
        except RuntimeError as e:
            print(f"FAILED: planted: {e}")
            cases.append(("planted", "failed", str(e)))
        try:
            traces, _ = run_script_engine(tmpdir, "radix", ref_dir, None, RADIX_ENGINE, seed, args.radix_streams,
                                          args.radix_steps)
            records, ops = 0, collections.Counter()
            for path in traces:
                p = subprocess.run([kvshard, "replay", path], capture_output=True, text=True)
                if p.returncode != 0 or " 0 mismatches" not in p.stdout:
                    raise RuntimeError(f"{os.path.basename(path)} did not replay clean: {p.stdout}{p.stderr}")
                records += int(p.stdout.split()[1])
                with open(path) as f:
                    ops.update(json.loads(line)["op"] for line in f.read().splitlines()[1:])
            if not all(ops[op] for op in ("radix_match_prefix", "radix_inc_lock_ref", "radix_dec_lock_ref",
                                           "radix_evict", "radix_cache_unfinished_req", "radix_cache_finished_req")):
                raise RuntimeError(f"some radix call was never recorded: {dict(ops)}")
            print(f"  radix: {len(traces)} traces, {records} records replayed clean: "
                  + ", ".join(f"{k} {ops[k]}" for k in sorted(ops)))
            traces, _ = run_script_engine(tmpdir, "radix_planted", ref_dir, ("radix_cache.py", *RADIX_PLANT),
                                          RADIX_ENGINE, seed, args.radix_streams, args.radix_steps)
            caught = []
            for path in traces:
                p = subprocess.run([kvshard, "replay", path], capture_output=True, text=True)
                if p.returncode == 1:
                    caught.append(p.stderr.strip())
                elif p.returncode != 0:
                    raise RuntimeError(f"{os.path.basename(path)}: exit {p.returncode}: {p.stderr}")
            if not caught or not all("mismatch: line " in c and "meta=" in c for c in caught):
                raise RuntimeError(f"the planted radix change was not caught at a line with meta: {caught[:1]}")
            print(f"  radix planted {RADIX_PLANT[0]!r} -> {RADIX_PLANT[1]!r}: caught in {len(caught)} of "
                  f"{len(traces)} traces, e.g. {caught[0][:300]}")
            cases.append(("radix", "passed", ""))
        except RuntimeError as e:
            print(f"FAILED: radix: {e}")
            cases.append(("radix", "failed", str(e)))
        try:
            (trace,), said = run_script_engine(tmpdir, "cp", ref_dir, None, CP_ENGINE, seed, args.cp_cases)
            p = subprocess.run([kvshard, "replay", trace], capture_output=True, text=True)
            if p.returncode != 0 or " 0 mismatches" not in p.stdout:
                raise RuntimeError(f"the CP trace did not replay clean: {p.stdout}{p.stderr}")
            with open(trace) as f:
                recs = [json.loads(line) for line in f.read().splitlines()[1:]]
            writes = [r for r in recs if r["op"] == "cp_direct_write"]
            refused = sum("error" in r["expect"] for r in writes)
            if not writes or refused in (0, len(writes)):
                raise RuntimeError(f"the CP case needs direct writes that pass and fail: {len(writes)}, {refused}")
            print(f"  cp: {said}; {len(writes)} direct writes recorded ({refused} failing fast); {p.stdout.strip()}")
            (trace,), _ = run_script_engine(tmpdir, "cp_planted", ref_dir, ("cp_planning.py", *CP_PLANT), CP_ENGINE,
                                            seed, args.cp_cases)
            p = subprocess.run([kvshard, "replay", trace], capture_output=True, text=True)
            if p.returncode != 1 or "mismatch: line " not in p.stderr or "meta=" not in p.stderr:
                raise RuntimeError(f"the planted CP change was not caught at a line with meta: {p.returncode} "
                                   f"{p.stderr.strip()[:300]}")
            print(f"  cp planted {CP_PLANT[0]!r} -> {CP_PLANT[1]!r}: {p.stderr.strip()[:300]}")
            cases.append(("cp", "passed", ""))
        except (RuntimeError, ValueError) as e:
            print(f"FAILED: cp: {e}")
            cases.append(("cp", "failed", str(e)))
        try:
            (trace,), _ = run_script_engine(tmpdir, "pool", ref_dir, None, POOL_ENGINE, seed, args.pool_streams,
                                            args.pool_steps)
            p = subprocess.run([kvshard, "replay", trace], capture_output=True, text=True)
            if p.returncode != 0 or " 0 mismatches" not in p.stdout:
                raise RuntimeError(f"the pool's plan trace did not replay clean: {p.stdout}{p.stderr}")
            with open(trace) as f:
                recs = [json.loads(line) for line in f.read().splitlines()[1:]]
            errors = sum("error" in r.get("expect", {}) for r in recs)
            if not errors or errors == len(recs):
                raise RuntimeError(f"the pool case needs plans and rejections: {len(recs)} records, {errors} errors")
            print(f"  pool: {len(recs)} begin_shard_extend calls ({errors} rejected); {p.stdout.strip()}")
            (trace,), _ = run_script_engine(tmpdir, "pool_planted", ref_dir, ("shard_plan.py", *POOL_PLANT),
                                            POOL_ENGINE, seed, args.pool_streams, args.pool_steps)
            p = subprocess.run([kvshard, "replay", trace], capture_output=True, text=True)
            if p.returncode != 1 or "mismatch: line " not in p.stderr or "meta=" not in p.stderr:
                raise RuntimeError(f"the planted pool change was not caught at a line with meta: {p.returncode} "
                                   f"{p.stderr.strip()[:300]}")
            print(f"  pool planted {POOL_PLANT[0]!r} -> {POOL_PLANT[1]!r}: {p.stderr.strip()[:300]}")
            cases.append(("pool", "passed", ""))
        except (RuntimeError, ValueError) as e:
            print(f"FAILED: pool: {e}")
            cases.append(("pool", "failed", str(e)))
    ok = all(s == "passed" for _, s, _ in cases)
    print(f"{SUITE}: {'PASS' if ok else 'FAIL'} in {time.time() - start:.1f} s (seed {seed})")
    sglang_env.write_xml(SUITE, CLASSNAME, cases)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

# Parity test: random cases run through SGLang's own code (loaded at run time from ../shared/sglang_ref) and
# through kvshard's CLI (--json); every field is compared, so the reference model stays bit-exact with SGLang.
# Kind alloc is props/sglang_parity_alloc.py, a case's CLI run and comparison props/sglang_parity_case.py.
# Kind cp_helpers (props/sglang_parity_cp.py) compares seed 003's host helpers through `kvshard replay` of trace
# records; kind divergences (props/sglang_divergences.py) checks SGLang's own documented inconsistencies.
import argparse
import collections
import os
import random
import sys
import tempfile
import time

SUITE = "sglang_parity_test"
KINDS = ("alloc", "gather_plan", "split", "rerange", "owners", "cp_helpers", "divergences")
FAIL_FAST = "[CP_SHARED_KV_FAIL_FAST]"


# ---- environment: where things are, skipping, JUnit XML ----------------------------------------------------

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_env  # noqa: E402 (props/sglang_env.py, beside this file: paths, skipping, JUnit XML)
import sglang_divergences  # noqa: E402 (props/: the documented SGLang divergences, docs/model.md)
import sglang_parity_cp  # noqa: E402 (props/: the cp_helpers kind)
from sglang_parity_alloc import alloc_case  # noqa: E402 (props/: the alloc kind)
from sglang_parity_case import Case, Mismatch, check_dict  # noqa: E402 (props/: a case, run and compared)

CLASSNAME = "SglangParity"


def write_xml(cases):
    sglang_env.write_xml(SUITE, CLASSNAME, cases)


def load_sglang(ref_dir):
    """Imports SGLang's reference modules from the folder (never copied into the repository)."""
    sys.path.insert(0, ref_dir)
    import allocator, cp_helpers, cp_planning, shard_plan  # noqa: E401 (modules of ../shared/sglang_ref)
    return allocator.load_allocator(), shard_plan, cp_planning, cp_helpers


# ---- 1. gather plans ---------------------------------------------------------------------------------------

class PagePool:
    """Distinct logical pages by owner class, drawn at random (an allocator-like pool, order scrambled)."""

    def __init__(self, rng, n, pages_per_rank):
        self.n = n
        self.free = [[i * n + c for i in range(1, pages_per_rank + 1)] for c in range(n)]
        for lst in self.free:
            rng.shuffle(lst)

    def take(self, owner):
        lst = self.free[owner % self.n]
        return lst.pop() if lst else None

    def cyclic_run(self, start_owner, count):
        run = []
        for k in range(count):
            page = self.take(start_owner + k)
            if page is None:
                break
            run.append(page)
        return run


def gen_batch(rng):
    n, ps = rng.choice([1, 2, 2, 3, 4, 4, 5, 8]), rng.choice([1, 2, 3, 4, 16])
    ppr = rng.randint(1, 11)  # allocatable pages per rank (each rank's local page 0 is the trash page)
    pool = PagePool(rng, n, ppr)
    chains = [pool.cyclic_run(rng.randrange(n), rng.randint(0, 3 * n)) for _ in range(rng.randint(1, 3))]
    reqs = []
    for _ in range(rng.randint(1, 4)):
        chain = rng.choice(chains)
        k = rng.randint(0, len(chain))
        chunk_owner = (chain[k - 1] + 1) if k else rng.randrange(n)
        chunk = pool.cyclic_run(chunk_owner if rng.random() < 0.8 else rng.randrange(n), rng.randint(0, 2 * n))
        seq = (k + len(chunk)) * ps - (rng.randrange(ps) if chunk else 0)
        reqs.append(dict(prefix_len=k * ps, seq_len=seq, pages=chain[:k] + chunk))
    block = sum(-(-r["prefix_len"] // ps // n) for r in reqs)
    chunk_pages = sum(len(r["pages"]) - r["prefix_len"] // ps for r in reqs)
    batch = dict(shard_size=n, page_size=ps, pages_per_rank=ppr,
                 max_prefix_tokens=n * ps * (block + rng.randint(0, 2)),
                 chunk_tokens=ps * (chunk_pages + rng.randint(0, 3)), requests=reqs)
    inject_faults(rng, batch, block, chunk_pages)
    return batch


def inject_faults(rng, batch, block, chunk_pages):
    """About one batch in five gets a fault (sometimes two): non-cyclic, misaligned, over capacity."""
    n, ps, reqs = batch["shard_size"], batch["page_size"], batch["requests"]
    for _ in range(2):
        roll = rng.random()
        if roll > 0.2:
            return
        req = rng.choice(reqs)
        k = req["prefix_len"] // ps
        if roll < 0.06 and n > 1 and k >= 2 and req["prefix_len"] % ps == 0:
            j = rng.randrange(k - 1)
            req["pages"] = list(req["pages"])
            req["pages"][j], req["pages"][j + 1] = req["pages"][j + 1], req["pages"][j]
        elif roll < 0.11 and ps > 1 and k >= 1 and req["prefix_len"] % ps == 0:  # once: twice may re-align
            req["prefix_len"] -= rng.randint(1, ps - 1)
        elif roll < 0.16 and block > 0:
            batch["max_prefix_tokens"] = n * ps * rng.randrange(block)
        elif chunk_pages > 0:
            batch["chunk_tokens"] = ps * rng.randrange(chunk_pages)


def sglang_plans(shard_plan, torch, batch):
    """One SGLang Pool per rank runs begin_shard_extend; returns (pools, None) or (None, error text)."""
    n, ps = batch["shard_size"], batch["page_size"]
    reqs = batch["requests"]
    width = max([len(r["pages"]) * ps for r in reqs] + [1])
    req_to_token = torch.zeros((len(reqs), width), dtype=torch.int32)
    for i, r in enumerate(reqs):
        row = [p * ps + o for p in r["pages"] for o in range(ps)]
        req_to_token[i, :len(row)] = torch.tensor(row, dtype=torch.int32)
    prefix = [r["prefix_len"] for r in reqs]
    seq = [r["seq_len"] for r in reqs]
    pools = []
    for rank in range(n):
        spec = shard_plan.Spec(rank, n, ps, batch["max_prefix_tokens"], batch["chunk_tokens"])
        pool = shard_plan.Pool(spec, batch["pages_per_rank"] * ps)  # SGLang's size excludes the trash page
        try:
            pool.begin_shard_extend(req_to_token, list(range(len(reqs))), prefix, seq)
        except AssertionError as e:
            return None, str(e)
        pools.append(pool)
    return pools, None


def gather_error_needles(message):
    """What kvshard's one-line error must carry: SGLang's whole assertion text (alignment, cyclic owners), or
    for capacity errors, whose kvshard text adds the sizes, the tag."""
    for tag in ("exceeds the scratch prefix capacity", "exceeds the scratch chunk capacity"):
        if tag in message:
            return [tag]
    return [message]


def translate_slots(rng, batch):
    n, ps, ppr = batch["shard_size"], batch["page_size"], batch["pages_per_rank"]
    slots = {p * ps + o for r in batch["requests"] for p in r["pages"] for o in range(ps)}
    limit = n * (ppr + 2) * ps  # page_pos covers N * (pages_per_rank + 2) pages
    slots |= {rng.randrange(limit) for _ in range(16)} | {0, limit - 1}
    return sorted(slots)


def gather_case(case, sg, rng, stats):
    torch = sg["torch"]
    batch = gen_batch(rng)
    path = case.write_input(batch)
    pools, error = sglang_plans(sg["shard_plan"], torch, batch)
    if error is not None:
        stats["gather_plan errors"] += 1
        return case.check_error(gather_error_needles(error), ["gather-plan", "--batch", path, "--json"])
    slots = translate_slots(rng, batch)
    got = case.run_json("gather-plan", "--batch", path, "--json", "--translate", ",".join(map(str, slots)))
    compare_plan(case, got, pools, batch)
    want_rows = pools[0].translate_loc_to_scratch(torch.tensor(slots, dtype=torch.int64)).tolist()
    case.check("scratch_rows", got.get("scratch_rows"), want_rows)


def compare_plan(case, got, pools, batch):
    n, ps = batch["shard_size"], batch["page_size"]
    p0 = pools[0]
    trash = p0._trash_base // ps
    case.check("block_pages", got["block_pages"], p0._block_pages)
    case.check("n_prefix_slots", got["n_prefix_slots"], n * p0._block_pages)
    case.check("trash_page", got["trash_page"], trash)
    case.check("chunk_base_page", got["chunk_base_page"], p0._chunk_base // ps)
    pos = p0._page_pos.tolist()
    case.check("page_pos", got["page_pos"], [[l, s] for l, s in enumerate(pos) if s != trash])
    case.check("len(ranks)", len(got["ranks"]), n)
    for rank, pool in enumerate(pools):
        rows = [] if pool._send_rows is None else pool._send_rows.tolist()
        g = got["ranks"][rank]
        case.check(f"ranks[{rank}].rank", g["rank"], rank)
        case.check(f"ranks[{rank}].send_rows", g["send_rows"], rows)
        case.check(f"ranks[{rank}].send_local_pages", g["send_local_pages"], [r // ps for r in rows[::ps]])


# ---- 2. split plans, 3. rerange --------------------------------------------------------------------------------

def gen_in_seq(rng):
    """A batch for the in-seq plan; a few carry SGLang's fail-fast faults (empty extend, misaligned, ps 1)."""
    n, ps = rng.randint(1, 8), rng.choice([2, 3, 4, 16, 64] * 6 + [1])
    bs = rng.randint(1, 6)
    big = rng.random() < 0.5
    extend = [rng.randint(1, (8 if big else 2) * n * ps) for _ in range(bs)]
    prefix = [ps * rng.randint(0, 10) for _ in range(bs)]
    roll = rng.random()
    if roll < 0.05:
        extend[rng.randrange(bs)] = 0
    elif roll < 0.1 and ps > 1:
        prefix[rng.randrange(bs)] += rng.randint(1, ps - 1)
    return n, ps, extend, prefix


def sglang_plan(cp, n, ps, extend, prefix, rank):
    """(plan, None) or (None, what the CLI's error must carry: the fail-fast tag and SGLang's req_id=... tail)."""
    try:
        return cp.build_batch_page_aligned_in_seq_split_plan(
            extend_lens=extend, prefix_lens=prefix, page_size=ps, cp_size=n, cp_rank=rank), None
    except (RuntimeError, ValueError) as e:
        text = str(e)
        if not text.startswith(FAIL_FAST) or "req_id=" not in text:
            return None, [text]
        return None, [text[:text.index("]", len(FAIL_FAST)) + 1], text[text.index("req_id="):]]


def in_seq_args(cmd, n, ps, extend, prefix):
    return [cmd, "--cp-size", n, "--page-size", ps, "--extend-lens", ",".join(map(str, extend)),
            "--prefix-lens", ",".join(map(str, prefix)), "--json"]


def split_case(case, sg, rng, stats):
    roll = rng.random()
    mode = "round-robin" if roll < 0.15 else "token-balanced" if roll < 0.25 else "in-seq"
    stats[f"split {mode}"] += 1
    if mode == "round-robin":
        return round_robin_case(case, sg["cp"], rng)
    if mode == "token-balanced":
        return token_balanced_case(case, sg["cp"], rng)
    n, ps, extend, prefix = gen_in_seq(rng)
    rank = rng.randrange(n)
    args = in_seq_args("split", n, ps, extend, prefix) + ["--cp-rank", rank]
    plan, error = sglang_plan(sg["cp"], n, ps, extend, prefix, rank)
    if error is not None:
        stats["split errors"] += 1
        return case.check_error(error, args)
    check_dict(case, "", case.run_json(*args), plan)
    stats["split compute-padding"] += plan["compute_padding_enabled"]


def round_robin_case(case, cp, rng):
    n = rng.randint(1, 8)
    rank = rng.randrange(n)
    extend = [rng.choice([0, rng.randint(1, 3 * n), rng.randint(1, 200)]) for _ in range(rng.randint(1, 8))]
    q_lens, bs_idx = cp.round_robin_q_seqs_cpu(list(extend), n, rank)
    got = case.run_json("split", "--mode", "round-robin", "--cp-size", n, "--cp-rank", rank,
                        "--extend-lens", ",".join(map(str, extend)), "--json")
    check_dict(case, "", got, dict(q_lens=q_lens, bs_idx=bs_idx))


def token_balanced_case(case, cp, rng):
    n, total = rng.randint(1, 8), rng.choice([rng.randint(0, 20), rng.randint(0, 5000)])
    got = case.run_json("split", "--mode", "token-balanced", "--cp-size", n, "--total-len", total, "--json")
    check_dict(case, "", got, dict(split_list=cp.build_token_balanced_in_seq_split_list(total, n)))


def rerange_case(case, sg, rng, stats):
    cp, torch = sg["cp"], sg["torch"]
    n, ps, extend, prefix = gen_in_seq(rng)
    args = in_seq_args("rerange", n, ps, extend, prefix)
    plan, error = sglang_plan(cp, n, ps, extend, prefix, 0)
    if error is not None:
        stats["rerange errors"] += 1
        return case.check_error(error, args)
    per_rank, max_rank = cp.max_rank_len_from_plan(plan)
    splits = plan["request_split_lists"]
    gathered = torch.arange(n * max_rank, dtype=torch.int64)
    source_rows = cp.torch_batch_rerange(gathered, splits, max_rank, n).tolist()
    valid = [sum(s[r] + s[2 * n - 1 - r] for s in splits) for r in range(n)]
    want = dict(max_rank_token=max_rank, per_rank_actual_token=per_rank, per_rank_tokens=valid,
                compute_padding_enabled=plan["compute_padding_enabled"], source_rows=source_rows)
    check_dict(case, "", case.run_json(*args), want)


def owners_case(case, sg, rng, stats):
    """Page compute owners and direct-write locs against SGLang's own plan: an extent page's owner is the rank of
    the SGLang segment whose page range holds it (the derived build_in_seq_page_compute_owners must agree), and the
    direct-write locs are out_cache_loc split by SGLang's valid split lists and zigzag indices (pages allocated from
    their owner's class, some slots trash)."""
    n, ps, extend, prefix = gen_in_seq(rng)
    rank = rng.randrange(n)
    args = in_seq_args("split", n, ps, extend, prefix) + ["--mode", "owners", "--cp-rank", rank]
    plan, error = sglang_plan(sg["cp"], n, ps, extend, prefix, rank)
    if error is not None:
        stats["owners errors"] += 1
        return case.check_error(error, args)
    owners = []
    for q in range(plan["batch_size"]):
        first = prefix[q] // ps
        starts, ends = plan["request_segment_page_starts"][q], plan["request_segment_page_ends"][q]
        for page in range(first, first + plan["request_padded_pages"][q]):
            seg = [s for s in range(2 * n) if starts[s] <= page < ends[s]]
            owners.append(seg[0] if seg[0] < n else 2 * n - 1 - seg[0])
    next_page = [1] * n
    locs, k = [], 0
    for q in range(plan["batch_size"]):
        pages = []
        for _ in range(plan["request_padded_pages"][q]):
            pages.append(next_page[owners[k]] * n + owners[k])
            next_page[owners[k]] += 1
            k += 1
        locs += [0 if rng.random() < 0.05 else pages[t // ps] * ps + t % ps for t in range(extend[q])]
    local, offset = [], 0
    for q in range(plan["batch_size"]):
        split = plan["request_valid_split_lists"][q]
        bounds = [offset + sum(split[:s]) for s in range(2 * n + 1)]
        for s in plan["request_zigzag_indices"][q]:
            local += locs[bounds[s]:bounds[s + 1]]
        offset += extend[q]
    physical = [loc if loc < 0 else (loc // ps // n) * ps + loc % ps for loc in local]
    got = case.run_json(*args, "--out-cache-loc", ",".join(map(str, locs)))
    check_dict(case, "", got, dict(cp_size=n, cp_rank=rank, page_size=ps, page_owner_plan=owners,
                                   cp_local_out_cache_loc=local, cp_local_physical_out_cache_loc=physical))
    stats["owners direct writes"] += 1


# ---- driver --------------------------------------------------------------------------------------------------

RUNNERS = {"alloc": alloc_case, "gather_plan": gather_case, "split": split_case, "rerange": rerange_case,
           "owners": owners_case}


def run_kind(kind, count, seed, sg, kvshard, tmpdir, stats):
    """Runs up to `count` cases of one kind, stopping at the first mismatch; returns (cases, fields, failure).
    cp_helpers: `count` cases of each helper, replayed as traces in batches (props/sglang_parity_cp.py);
    divergences: the documented SGLang divergences searched for on random inputs (props/sglang_divergences.py)."""
    if kind == "cp_helpers":
        return sglang_parity_cp.run_cp_helpers(max(1, count // 2), seed, sg["ch"], kvshard, tmpdir, stats)
    if kind == "divergences":
        return sglang_divergences.run_divergences(count * 2, seed, sg["ch"], stats)
    rng = random.Random(f"{seed}/{kind}")
    fields = 0
    for i in range(count):
        case = Case(kvshard, tmpdir, kind, i)
        try:
            RUNNERS[kind](case, sg, rng, stats)
        except Mismatch as m:
            case.report(m, seed)
            return i + 1, fields + case.fields, f"case {i}: {m}"
        fields += case.fields
    return count, fields, None


def parse_args():
    p = argparse.ArgumentParser(description="Compares kvshard's CLI with SGLang's code on random cases.")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: time-based, printed)")
    p.add_argument("--cases", type=int, default=300, help="cases per kind")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS))
    return p.parse_args()


def main():
    args = parse_args()
    ref_dir, torch, kvshard = sglang_env.require_inputs(SUITE, CLASSNAME, "allocator.py")
    Alloc, shard_plan, cp, ch = load_sglang(ref_dir)
    sg = dict(torch=torch, Alloc=Alloc, shard_plan=shard_plan, cp=cp, ch=ch)
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1_000_000_007
    print(f"sglang_parity_test: seed {seed} (rerun: --seed {seed} --cases {args.cases}), SGLang code from {ref_dir}")
    return run_all(args, seed, sg, kvshard)


def run_all(args, seed, sg, kvshard):
    stats, rows, start = collections.Counter(), [], time.time()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmpdir:
        for kind in args.kinds.split(","):
            rows.append((kind, *run_kind(kind, args.cases, seed, sg, kvshard, tmpdir, stats)))
            if rows[-1][3]:
                break
    for kind, cases, fields, failure in rows:
        print(f"  {kind:12s} {cases:5d} cases {fields:7d} fields {'FAILED: ' + failure if failure else 'ok'}")
    print("  coverage: " + ", ".join(f"{key} {stats[key]}" for key in sorted(stats)))
    ok = not any(failure for *_, failure in rows)
    print(f"sglang_parity_test: {'PASS' if ok else 'FAIL'}: {sum(r[1] for r in rows)} cases, "
          f"{sum(r[2] for r in rows)} fields compared in {time.time() - start:.1f} s (seed {seed})")
    write_xml([(kind, "failed" if failure else "passed", failure or "") for kind, _, _, failure in rows])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

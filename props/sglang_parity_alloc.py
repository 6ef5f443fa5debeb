# The "alloc" kind of the SGLang parity test (props/sglang_parity_test.py): SGLang's allocator (../shared/sglang_ref,
# loaded at run time, never copied) driven op by op by a seeded model that keeps every free and extension consistent,
# the script replayed through `kvshard alloc --script --json` and every result field compared. AllocModel also drives
# the allocator under the attached recorder (props/sglang_attach_test.py).
import json
import sys

from sglang_parity_case import check_dict

def op_of(reqs):
    return dict(op="alloc", prefix_lens=[r["prefix"] for r in reqs], seq_lens=[r["seq"] for r in reqs],
                rotation_bases=[r["base"] for r in reqs], last_locs=[r["last_loc"] for r in reqs])


class AllocModel:
    """Drives SGLang's allocator op by op, tracking live chains so every free and extension is consistent."""

    def __init__(self, Alloc, torch, rng):
        self.torch, self.rng = torch, rng
        self.n, self.ps = rng.randint(2, 8), rng.choice([1, 2, 3, 16])
        self.ppr, self.need_sort = rng.randint(1, 8), rng.random() < 0.5
        self.a = Alloc(size=self.ppr * self.ps, physical_page_size=self.ps, shard_size=self.n,
                       dtype=torch.int64, device="cpu", kvcache=None, need_sort=self.need_sort)
        self.chains = []  # dicts: base, length (tokens), pages (position order)
        self.merges = self.wide_merges = 0
        self._count_merges()

    def _count_merges(self):
        """Coverage: need_sort merges, and those that also merge a class that is not short (the path where
        merging only the short classes would differ). `needs` is read from alloc_extend's frame."""
        a, merge = self.a, self.a.merge_and_sort_free

        def counted():
            needs = sys._getframe(1).f_locals.get("needs", [])
            self.merges += any(len(r) for r in a.class_release_pages)
            self.wide_merges += any(len(a.class_release_pages[c]) and need <= len(a.class_free_pages[c])
                                    for c, need in enumerate(needs))
            merge()
        a.merge_and_sort_free = counted

    def snapshot(self, op):
        a = self.a
        return dict(op=op, class_free_page_counts=list(a.class_free_page_counts()),
                    available_size=a.available_size(), aggregate_free_size=a.aggregate_free_size())

    def slots(self, chain, start):
        ps = self.ps
        return [chain["pages"][t // ps] * ps + t % ps for t in range(start, chain["length"])]

    def new_request(self):
        max_len = max(1, self.n * self.ps * self.ppr // 4)
        base = None if self.rng.random() < 0.7 else self.rng.randrange(self.n)
        return dict(chain=None, prefix=0, seq=self.rng.randint(1, max_len), base=base, last_loc=0)

    def extend_request(self, chain):
        ps = self.ps
        seq = chain["length"] + self.rng.randint(1, self.n * ps)
        return dict(chain=chain, prefix=chain["length"], seq=seq, base=chain["base"],
                    last_loc=chain["pages"][-1] * ps + ps - 1)

    def aligned_chains(self):
        return [c for c in self.chains if c["length"] % self.ps == 0]

    def alloc_op(self):
        rng, aligned = self.rng, self.aligned_chains()
        rng.shuffle(aligned)
        reqs = []
        for _ in range(rng.choice([1, 1, 2, 3, 4])):
            reqs.append(self.extend_request(aligned.pop()) if aligned and rng.random() < 0.5 else self.new_request())
        return self.run_alloc(reqs)

    def run_alloc(self, reqs):
        """Runs one alloc_extend batch through SGLang; returns the script op and the expected result."""
        op = op_of(reqs)
        prefix, seq, last = (self.torch.tensor(op[k], dtype=self.torch.int64)
                             for k in ("prefix_lens", "seq_lens", "last_locs"))
        bases = list(op["rotation_bases"])  # SGLang resolves the None entries in place
        out = self.a.alloc_extend(prefix, prefix, seq, seq, last, int((seq - prefix).sum()), rotation_bases=bases)
        result = self.snapshot("alloc")
        result["ok"] = out is not None
        if out is not None:
            result["rotation_bases"] = bases
            result["pages"] = self.commit(reqs, bases, out.tolist())
        return op, result

    def commit(self, reqs, bases, slots):
        """Splits the returned slots per request (seq - prefix each) into pages and updates the chains."""
        pages, cursor = [], 0
        for r, base in zip(reqs, bases):
            n_slots = r["seq"] - r["prefix"]
            mine = [s // self.ps for s in slots[cursor:cursor + n_slots:self.ps]]
            cursor += n_slots
            pages.append(mine)
            if r["chain"] is None:
                self.chains.append(dict(base=base, length=r["seq"], pages=mine))
            else:
                r["chain"]["pages"] = r["chain"]["pages"] + mine
                r["chain"]["length"] = r["seq"]
        return pages

    def pick_free(self, chain):
        """Frees the whole chain or its tail pages; returns the slots (shuffled, or one slot per page)."""
        n_pages = len(chain["pages"])
        keep = 0 if n_pages == 1 or self.rng.random() < 0.5 else self.rng.randint(1, n_pages - 1)
        locs = self.slots(chain, keep * self.ps)
        if self.rng.random() < 0.3:
            locs = locs[::self.ps]
        self.rng.shuffle(locs)
        if keep == 0:
            self.chains.remove(chain)
        else:
            chain["pages"], chain["length"] = chain["pages"][:keep], keep * self.ps
        return locs

    def free_op(self):
        locs = [] if self.rng.random() < 0.03 else self.pick_free(self.rng.choice(self.chains))
        self.a.free(self.torch.tensor(locs, dtype=self.torch.int64))
        return dict(op="free", locs=locs), self.snapshot("free")

    def free_group_op(self):
        chosen = self.rng.sample(self.chains, self.rng.randint(1, min(4, len(self.chains))))
        frees = [self.pick_free(c) for c in chosen]
        if self.rng.random() < 0.1:
            frees.insert(self.rng.randint(0, len(frees)), [])
        self.a.free_group_begin()
        for locs in frees:
            self.a.free(self.torch.tensor(locs, dtype=self.torch.int64))
        self.a.free_group_end()
        return dict(op="free_group", frees=frees), self.snapshot("free_group")

    def fault_op(self):
        """An alloc op SGLang asserts on (stale rotation base, misaligned prefix or no new page) and the
        field kvshard's error must name, e.g. "ops[7].last_locs[1]"."""
        rng, ps, aligned = self.rng, self.ps, self.aligned_chains()
        kinds = ["seq_lens"] + (["prefix_lens"] if ps > 1 else []) + (["last_locs"] if aligned else [])
        field = rng.choice(kinds)
        if field == "last_locs":
            bad = self.extend_request(rng.choice(aligned))
            bad["base"] = (bad["base"] + rng.randint(1, self.n - 1)) % self.n
        elif field == "prefix_lens":
            bad = self.new_request()
            bad["prefix"] = rng.randint(1, ps - 1)
            bad["seq"] += bad["prefix"]
        else:
            bad = dict(chain=None, prefix=0, seq=0, base=None, last_loc=0)
        reqs = [self.new_request() for _ in range(rng.randint(0, 2))]
        at = rng.randint(0, len(reqs))
        reqs.insert(at, bad)
        try:
            op, _ = self.run_alloc(reqs)
        except AssertionError:
            return op_of(reqs), f"{field}[{at}]"
        raise RuntimeError(f"harness: SGLang accepted the faulty batch {op_of(reqs)}")

    def next_op(self):
        """Allocates more while the pool is emptier, so batches commit, defer and hit the merge path."""
        free_share = self.a.aggregate_free_size() / (self.n * self.ppr * self.ps)
        roll = self.rng.random()
        if not self.chains or roll < 0.2 + 0.6 * free_share:
            return self.alloc_op()
        return self.free_op() if self.rng.random() < 0.5 else self.free_group_op()


def alloc_results(case, script, k):
    """Runs the script's first k ops; returns (exit status, results or None, stderr)."""
    prefix = dict(script, ops=script["ops"][:k])
    rc, out, err = case.run("alloc", "--script", case.write_input(prefix), "--json")
    return rc, (json.loads(out)["results"] if rc == 0 else None), err


def compare_alloc_script(case, script, want):
    """Compares every op's result. If kvshard rejects the script, its shortest prefix that differs or is
    rejected is reported instead, so the reproducer ends at the first op that goes wrong."""
    k = len(script["ops"])
    rc, got, err = alloc_results(case, script, k)
    if rc != 0:
        for k in range(1, len(script["ops"]) + 1):
            rc, got, err = alloc_results(case, script, k)
            if rc != 0 or any(g.get(key) != v for g, w in zip(got, want) for key, v in w.items()):
                break
    case.check("exit status", rc, 0, detail=err.strip())
    case.check("len(results)", len(got), k)
    for i, (g, w) in enumerate(zip(got, want)):
        check_dict(case, f"results[{i}].", g, w)


def alloc_case(case, sg, rng, stats):
    Alloc, torch = sg["Alloc"], sg["torch"]
    m = AllocModel(Alloc, torch, rng)
    ops, want = [], []
    for _ in range(rng.randint(4, 30)):
        op, result = m.next_op()
        ops.append(op)
        want.append(result)
    script = dict(shard_size=m.n, page_size=m.ps, pages_per_rank=m.ppr, need_sort=m.need_sort,
                  check_last_loc=True, ops=ops)
    compare_alloc_script(case, script, want)
    if rng.random() < 0.1:  # the same script plus a batch SGLang asserts on: kvshard must reject that op
        op, field = m.fault_op()
        ops.append(op)  # ops is script["ops"]
        case.check_error([f"ops[{len(ops) - 1}].{field}"], ["alloc", "--script", case.write_input(script), "--json"])
        stats["alloc rejected ops"] += 1
    stats["need_sort merges"] += m.merges
    stats["need_sort merges of a non-short class"] += m.wide_merges
    stats["alloc batches"] += sum(1 for o in ops if o["op"] == "alloc")
    stats["deferred batches"] += sum(1 for w in want if w.get("ok") is False)
    stats["free_group ops"] += sum(1 for o in ops if o["op"] == "free_group")

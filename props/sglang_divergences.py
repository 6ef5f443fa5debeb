# The "divergences" kind of the SGLang parity test: properties that SGLang's own seed 003 code breaks, run against
# the documented list in docs/model.md ("SGLang's own inconsistencies"). Random inputs search for counterexamples;
# each one found is classified, counted and its first instance printed. The kind passes when every documented entry
# is found (its worked example reproduces exactly) and nothing else is: it fails if a documented divergence
# disappears (SGLang fixed it: update docs/model.md and this list) or a new kind of disagreement appears.
import random

FAIL_FAST = "[CP_SHARED_KV_FAIL_FAST]"

# Documented entries (docs/model.md), each with its worked example: (extend, prefix, page size, N, rank).
DOCUMENTED = {
    "q_lens_vs_split_rows": dict(
        what="compute padding off: the plan's per-request q lengths (request_actual_seq_q_prev/next, their cu "
             "tensors) count more rows than split_tensor_by_cp_batch_plan gives the rank",
        example=([37, 10], [0, 0], 4, 2, 1), example_says=(28, 26)),
    "can_cp_split_admits_empty_extend": dict(
        what="can_cp_split is True for a shared-KV batch with an extend of 0 beside a positive one; the planner "
             "then fails fast with batch_gt1_empty_extend",
        example=([5, 0], [0, 0], 4, 2, 0), example_says="batch_gt1_empty_extend"),
    "can_cp_split_admits_page_size_1": dict(
        what="can_cp_split is True for a shared-KV batch with page size 1; the planner then fails fast with "
             "batch_gt1_page_split_fallback",
        example=([5], [0], 1, 2, 0), example_says="batch_gt1_page_split_fallback"),
}


class Pool:
    def __init__(self, page_size):
        self.page_size = page_size


def fail_fast_tag(e):
    text = str(e)
    return text[len(FAIL_FAST) + 1:text.index("]", len(FAIL_FAST))] if text.startswith(FAIL_FAST) else text


def plan_of(ch, extend, prefix, ps, n, rank):
    return ch.batch_plan_from_dict(ch.build_batch_page_aligned_in_seq_split_plan(
        extend_lens=extend, prefix_lens=prefix, page_size=ps, cp_size=n, cp_rank=rank))


def q_lens_vs_rows(ch, torch, extend, prefix, ps, n, rank):
    """(kind, detail, (q rows, split rows)) when the metadata's q lengths and the rank's split rows disagree."""
    try:
        plan = plan_of(ch, extend, prefix, ps, n, rank)
    except RuntimeError:
        return None  # the planner rejects the batch: nothing to compare
    md = ch._build_batch_metadata_from_plan(plan, device="cpu")
    q_rows = int(md.request_actual_seq_q_prev_cu_tensor[-1]) + int(md.request_actual_seq_q_next_cu_tensor[-1])
    split = ch.split_tensor_by_cp_batch_plan(torch.arange(sum(extend)), plan, mode="1d")
    if q_rows == split.numel():
        return None
    kind = "NEW: q lengths vs split rows with compute padding on" if plan.compute_padding_enabled else \
        "q_lens_vs_split_rows"
    return kind, f"q lengths say {q_rows} rows, the split gives {split.numel()}", (q_rows, split.numel())


def admitted_then_rejected(ch, extend, prefix, ps, n, rank):
    """(kind, detail, planner tag) when can_cp_split admits a shared-KV batch the planner then fails fast on."""
    fb = ch.ForwardBatchStub(uses_cp_shared_kv=True, extend_seq_lens_cpu=extend, extend_prefix_lens_cpu=prefix,
                             token_to_kv_pool=Pool(ps))
    g = ch.CPGlobals(enable_nsa_prefill_context_parallel=True, attn_cp_size=n, attn_cp_rank=rank)
    try:
        if not ch.can_cp_split(sum(extend), n, True, fb, g=g):
            return None
    except RuntimeError:
        return None  # rejected up front, consistently
    try:
        plan_of(ch, extend, prefix, ps, n, rank)
        return None
    except RuntimeError as e:
        tag = fail_fast_tag(e)
    if tag == "batch_gt1_empty_extend" and 0 in extend:
        kind = "can_cp_split_admits_empty_extend"
    elif tag == "batch_gt1_page_split_fallback" and ps == 1:
        kind = "can_cp_split_admits_page_size_1"
    else:
        kind = f"NEW: can_cp_split admits, the planner fails with {tag}"
    return kind, f"can_cp_split True, planner: {tag}", tag


CHECKS = {"q_lens_vs_split_rows": q_lens_vs_rows, "can_cp_split_admits_empty_extend": admitted_then_rejected,
          "can_cp_split_admits_page_size_1": admitted_then_rejected}


def random_batch(rng):
    n, ps, bs = rng.randint(1, 8), rng.choice([1, 2, 3, 4, 4, 16]), rng.choice([1, 2, 2, 3, 4])
    extend = [rng.choice([0, rng.randint(1, 3 * ps), rng.randint(1, 4 * n * ps)]) for _ in range(bs)]
    prefix = [0 if rng.random() < 0.4 else ps * rng.randint(1, 6) for _ in range(bs)]
    return extend, prefix, ps, n, rng.randrange(n)


def check_examples(ch, torch):
    """Each documented worked example must still give what docs/model.md says; returns the failures."""
    failures = []
    for name, d in DOCUMENTED.items():
        extend, prefix, ps, n, rank = d["example"]
        args = (ch, torch) if CHECKS[name] is q_lens_vs_rows else (ch,)
        got = CHECKS[name](*args, extend, prefix, ps, n, rank)
        if got is None or got[0] != name or got[2] != d["example_says"]:
            failures.append(f"{name}: example {d['example']} no longer gives {d['example_says']} (got {got}); "
                            "if SGLang fixed it, update docs/model.md and props/sglang_divergences.py")
    return failures


def run_divergences(count, seed, ch, stats):
    """`count` random batches through both properties; returns (cases, checks, failure or None)."""
    import torch
    rng = random.Random(f"{seed}/divergences")
    found, first = {}, {}
    for _ in range(count):
        batch = random_batch(rng)
        for got in (q_lens_vs_rows(ch, torch, *batch), admitted_then_rejected(ch, *batch)):
            if got is not None:
                found[got[0]] = found.get(got[0], 0) + 1
                first.setdefault(got[0], (batch, got[1]))
    for kind in sorted(found):
        (extend, prefix, ps, n, rank), detail = first[kind]
        print(f"  SGLang divergence {kind}: {found[kind]} counterexamples of {count} batches; first: extend "
              f"{extend} prefix {prefix} ps {ps} N {n} rank {rank}: {detail}")
        stats[f"divergence {kind}"] = found[kind]
    failures = check_examples(ch, torch)
    failures += [f"documented divergence {k} not found in {count} random batches" for k in DOCUMENTED if k not in found]
    failures += [f"undocumented disagreement {k}: {first[k]}" for k in found if k not in DOCUMENTED]
    return count, 2 * count + len(DOCUMENTED), ("; ".join(failures) if failures else None)

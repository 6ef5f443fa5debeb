// cpu_fast/'s allocator against the reference's (cpu_ref/): driven by the same random op sequences (allocations,
// extensions, owner-plan allocations, frees and free groups, errors), it answers every call as the reference does and
// keeps the same class lists, counts and sizes; Create refuses what the reference refuses, with its message.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/spec.h"
#include "cpu_fast/allocator.h"
#include "cpu_ref/allocator.h"
#include "props/fast_vs_ref_testing.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// A live chain of the op sequence: its pages in position order, tokens and rotation base (-1: allocated by
// classes, never extended).
struct LiveChain {
  V pages;
  int64_t len = 0;
  int64_t base = -1;
};

// The two allocators driven by the same ops, the chains the reference handed out, and what the ops reached.
struct AllocPair {
  ref::PageInterleaveAllocator ref;
  fast::PageInterleaveAllocator fast;
  std::vector<LiveChain> chains;
  bool deferred = false, error = false;
};

// Every observable of the two allocators is equal: class lists, counts, sizes, least-full class, allocated pages.
void AssertSameAllocatorState(const AllocPair& a) {
  RC_ASSERT(a.fast.class_free_page_counts() == a.ref.class_free_page_counts());
  for (int64_t c = 0; c < a.ref.config().shard_size; ++c) {
    RC_ASSERT(a.fast.free_list(c) == a.ref.free_list(c));
    RC_ASSERT(a.fast.release_list(c) == a.ref.release_list(c));
  }
  RC_ASSERT(a.fast.available_size() == a.ref.available_size());
  RC_ASSERT(a.fast.aggregate_free_size() == a.ref.aggregate_free_size());
  RC_ASSERT(a.fast.least_full_class() == a.ref.least_full_class());
  RC_ASSERT(a.fast.in_free_group() == a.ref.in_free_group());
  RC_ASSERT(a.fast.num_logical_pages() == a.ref.num_logical_pages());
  for (int64_t p = -1; p <= a.ref.num_logical_pages(); ++p) RC_ASSERT(a.fast.is_allocated(p) == a.ref.is_allocated(p));
}

// Both answered the same: the same error, or the same commit/defer and, on a commit, the same pages and bases.
void AssertSameAlloc(const StatusOr<bool>& fast, const ExtendPages& fast_out, const StatusOr<bool>& ref,
                     const ExtendPages& ref_out) {
  AssertSameStatus(fast.status(), ref.status());
  if (!ref.ok()) return;
  RC_ASSERT(*fast == *ref);
  if (!*ref) return;
  RC_ASSERT(fast_out.pages == ref_out.pages);
  RC_ASSERT(fast_out.offsets == ref_out.offsets);
  RC_ASSERT(fast_out.rotation_bases == ref_out.rotation_bases);
}

// Slots [from, to) of a chain.
V LiveChainSlots(const LiveChain& c, int64_t from, int64_t to, int64_t ps) {
  V s;
  for (int64_t pos = from; pos < to; ++pos) s.push_back(c.pages[pos / ps] * ps + pos % ps);
  return s;
}

// Records a committed batch's new chains and extensions (`extends[i]`: the chain request i extends, or -1).
void RecordCommit(AllocPair* a, const AllocBatch& b, const V& extends, const ExtendPages& out, bool by_classes) {
  const int64_t ps = a->ref.config().page_size;
  for (size_t i = 0; i + 1 < out.offsets.size(); ++i) {
    const V pages(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
    // A faulted prefix (a page past the chain's end) still commits: the chain then holds fewer pages than its
    // seq_len spans, so its length is kept to the positions its pages cover.
    const auto covered = [&](const V& p) { return std::min(b.seq_lens[i], static_cast<int64_t>(p.size()) * ps); };
    if (extends[i] < 0) {
      a->chains.push_back({pages, covered(pages), by_classes ? -1 : out.rotation_bases[i]});
    } else {
      LiveChain& c = a->chains[extends[i]];
      c.pages.insert(c.pages.end(), pages.begin(), pages.end());
      c.len = covered(c.pages);
    }
  }
}

// A batch of 0-4 requests: new chains (null or given base; partial pages; sometimes more than a class holds) and
// extensions of distinct live page-aligned chains, with one fault a fifth of the time.
AllocBatch DrawAllocBatch(const AllocPair& a, V* extends) {
  const AllocatorConfig& cfg = a.ref.config();
  const int64_t n = cfg.shard_size, ps = cfg.page_size, big = n * ps * (cfg.pages_per_rank + 2);
  AllocBatch b;
  V aligned;
  for (size_t i = 0; i < a.chains.size(); ++i) {
    if (a.chains[i].base >= 0 && a.chains[i].len % ps == 0) aligned.push_back(static_cast<int64_t>(i));
  }
  const int64_t reqs = *rc::gen::resize(100, rc::gen::inRange<int64_t>(0, 5));
  for (int64_t i = 0; i < reqs; ++i) {
    const int64_t extra =
        DrawKind(6) == 0 ? *rc::gen::inRange<int64_t>(1, big + 2) : *rc::gen::inRange<int64_t>(1, 2 * ps * n + 2);
    if (!aligned.empty() && DrawKind(3) == 0) {
      const size_t pick = *rc::gen::inRange<size_t>(0, aligned.size());
      const LiveChain& c = a.chains[aligned[pick]];
      extends->push_back(aligned[pick]);
      aligned.erase(aligned.begin() + pick);
      b.prefix_lens.push_back(c.len);
      b.seq_lens.push_back(c.len + extra);
      b.rotation_bases.push_back(c.base);
      b.last_locs.push_back(c.len ? c.pages.back() * ps + ps - 1 : 0);
    } else {
      extends->push_back(-1);
      b.prefix_lens.push_back(0);
      b.seq_lens.push_back(extra);
      b.rotation_bases.push_back(DrawKind(3) == 0 ? *rc::gen::inRange<int64_t>(0, n) : kNewChain);
      b.last_locs.push_back(0);
    }
  }
  if (reqs == 0 || DrawKind(5) != 0) return b;
  const size_t i = *rc::gen::inRange<size_t>(0, static_cast<size_t>(reqs));
  switch (DrawKind(8)) {
    case 0: b.prefix_lens[i] += Pick({1, ps, -ps}); break;           // misaligned, a page past, or negative
    case 1: b.seq_lens[i] = b.prefix_lens[i] - Pick({0, 1}); break;  // no new page
    case 2: b.rotation_bases[i] = Pick({-2, n, n + 5}); break;
    case 3: b.last_locs[i] += Pick({ps, -b.last_locs[i] - 1}); break;   // wrong owner (N > 1) or negative
    case 4: b.last_locs.pop_back(); break;                              // mismatched lengths
    case 5: b.seq_lens[i] = Pick({kMaxSlot - 1, kMaxSlot, -1}); break;  // huge (defers), or out of range
    case 6: b.prefix_lens[i] = kMaxSlot; break;
    default: b.seq_lens.push_back(1); break;
  }
  return b;
}

void StepAllocExtend(AllocPair* a) {
  V extends;
  const AllocBatch b = DrawAllocBatch(*a, &extends);
  RC_LOG() << "alloc_extend prefix_lens=" << rc::toString(b.prefix_lens) << " seq_lens=" << rc::toString(b.seq_lens)
           << " bases=" << rc::toString(b.rotation_bases) << " last_locs=" << rc::toString(b.last_locs) << "\n";
  ExtendPages fast_out, ref_out;
  const StatusOr<bool> ref = a->ref.AllocExtend(b, &ref_out), fast = a->fast.AllocExtend(b, &fast_out);
  a->deferred |= ref.ok() && !*ref;
  a->error |= !ref.ok();
  AssertSameAlloc(fast, fast_out, ref, ref_out);
  if (ref.ok() && *ref) RecordCommit(a, b, extends, ref_out, false);
}

// Owner-plan mode: new chains whose pages name their classes (sometimes a bad class or a wrong count).
void StepAllocByClasses(AllocPair* a) {
  V extends;
  AllocBatch b = DrawAllocBatch(*a, &extends);
  const int64_t n = a->ref.config().shard_size, ps = a->ref.config().page_size;
  std::vector<V> classes;
  for (size_t i = 0; i < b.seq_lens.size(); ++i) {
    const int64_t prefix = i < b.prefix_lens.size() ? b.prefix_lens[i] : 0;  // a corrupted batch may be shorter
    const int64_t pages = std::clamp<int64_t>(PositionPages(b.seq_lens[i], ps) - prefix / ps, 0, 1024);
    classes.push_back(*rc::gen::container<V>(static_cast<size_t>(pages), rc::gen::inRange<int64_t>(0, n)));
  }
  if (!classes.empty() && DrawKind(5) == 0) {
    V& bad = classes[*rc::gen::inRange<size_t>(0, classes.size())];
    if (bad.empty() || DrawKind(2) == 0) {
      bad.push_back(0);  // one class too many
    } else {
      bad[0] = Pick({-1, n});
    }
  }
  RC_LOG() << "alloc_extend_by_classes seq_lens=" << rc::toString(b.seq_lens) << " classes=" << rc::toString(classes)
           << "\n";
  ExtendPages fast_out, ref_out;
  const StatusOr<bool> ref = a->ref.AllocExtendByClasses(b, classes, &ref_out);
  const StatusOr<bool> fast = a->fast.AllocExtendByClasses(b, classes, &fast_out);
  a->deferred |= ref.ok() && !*ref;
  a->error |= !ref.ok();
  AssertSameAlloc(fast, fast_out, ref, ref_out);
  if (ref.ok() && *ref) RecordCommit(a, b, extends, ref_out, true);
}

// The locs of a free: a live chain (whole, shuffled with a repeat; or its last page, whose tail may be partial),
// which leaves the chains; or a bad slot (outside the pool, a reserved page, a page not allocated).
V DrawFreeLocs(AllocPair* a) {
  const int64_t ps = a->ref.config().page_size, slots = a->ref.num_logical_pages() * ps;
  if (a->chains.empty() || DrawKind(6) == 0) {
    return {Pick({-1, slots, 0, ps * a->ref.config().shard_size, slots - 1})};
  }
  const size_t k = *rc::gen::inRange<size_t>(0, a->chains.size());
  LiveChain& c = a->chains[k];
  const bool tail = *rc::gen::arbitrary<bool>();
  V locs = LiveChainSlots(c, tail ? ((c.len - 1) / ps) * ps : 0, c.len, ps);
  if (!locs.empty()) locs.push_back(locs[*rc::gen::inRange<size_t>(0, locs.size())]);
  std::reverse(locs.begin(), locs.end());
  if (tail && c.pages.size() > 1) {
    c.pages.pop_back();
    c.len = static_cast<int64_t>(c.pages.size()) * ps;
  } else {
    a->chains.erase(a->chains.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return locs;
}

void StepFree(AllocPair* a) {
  const V locs = DrawFreeLocs(a);
  RC_LOG() << "free " << rc::toString(locs) << "\n";
  const Status ref = a->ref.Free(locs);
  a->error |= !ref.ok();
  AssertSameStatus(a->fast.Free(locs), ref);
}

// A whole free group of 0-3 frees, or an open/close of a group (errors when already open / none open).
void StepFreeGroup(AllocPair* a) {
  if (DrawKind(3) == 0) {
    const bool begin = *rc::gen::arbitrary<bool>();
    RC_LOG() << (begin ? "free_group_begin" : "free_group_end") << "\n";
    const Status ref = begin ? a->ref.FreeGroupBegin() : a->ref.FreeGroupEnd();
    a->error |= !ref.ok();
    AssertSameStatus(begin ? a->fast.FreeGroupBegin() : a->fast.FreeGroupEnd(), ref);
    return;
  }
  std::vector<V> frees;
  const int64_t k = *rc::gen::inRange<int64_t>(0, 4);
  for (int64_t f = 0; f < k; ++f) frees.push_back(DrawFreeLocs(a));
  RC_LOG() << "free_group " << rc::toString(frees) << "\n";
  const Status ref = a->ref.FreeGroup(frees);
  a->error |= !ref.ok();
  AssertSameStatus(a->fast.FreeGroup(frees), ref);
}

KVSHARD_PROP(FastVsRefProps, AllocatorEqualsReferenceOnEveryStep, ()) {
  AllocatorConfig cfg;
  cfg.shard_size = Pick({1, 1, 2, 3, 4, 8});
  cfg.page_size = Pick({1, 1, 2, 3, 16});
  cfg.pages_per_rank = *rc::gen::resize(100, rc::gen::inRange<int64_t>(0, 17));
  cfg.need_sort = *rc::gen::arbitrary<bool>();
  cfg.check_last_loc = *rc::gen::arbitrary<bool>();
  RC_LOG() << "N=" << cfg.shard_size << " ps=" << cfg.page_size << " pages_per_rank=" << cfg.pages_per_rank
           << " need_sort=" << cfg.need_sort << " check_last_loc=" << cfg.check_last_loc << "\n";
  AllocPair a{
      RC_VALUE(ref::PageInterleaveAllocator::Create(cfg)), RC_VALUE(fast::PageInterleaveAllocator::Create(cfg)), {}};
  AssertSameAllocatorState(a);
  const int64_t steps = *rc::gen::inRange<int64_t>(1, 40);
  for (int64_t s = 0; s < steps; ++s) {
    switch (DrawKind(6)) {
      case 0:
      case 1: StepAllocExtend(&a); break;
      case 2: StepAllocByClasses(&a); break;
      case 3:
      case 4: StepFree(&a); break;
      default: StepFreeGroup(&a); break;
    }
    AssertSameAllocatorState(a);
  }
  RC_TAG(cfg.shard_size == 1 ? "N = 1" : "N > 1", cfg.need_sort ? "need_sort" : "no sort",
         a.deferred ? "a batch deferred" : "no deferral", a.error ? "an error" : "no error");
}

KVSHARD_PROP(FastVsRefProps, AllocatorCreateErrorsEqualReference, ()) {
  // pages_per_rank at the bound N * (pages_per_rank + 1) <= 2^24 only where it is refused: a pool at the bound
  // holds 2^24 pages (bounds_props_test.cc builds one).
  const int64_t n = Pick({-1, 0, 1, 8, kMaxShardSize + 1});
  const AllocatorConfig cfg{n, Pick({-1, 0, 1, 64}),
                            Pick({-1, 0, 5, n > 0 ? kMaxPoolLogicalPages / n : kMaxPoolLogicalPages}), false, false};
  AssertSameStatus(fast::PageInterleaveAllocator::Create(cfg).status(),
                   ref::PageInterleaveAllocator::Create(cfg).status());
}

}  // namespace
}  // namespace kvshard::props

// The model shared by the allocator state properties (allocator_state_test.cc, allocator_state_script_test.cc):
// the mirrored reference allocator, alloc_extend's effect on the class lists, the invariant check, the Alloc command.
#ifndef KVSHARD_PROPS_ALLOCATOR_STATE_MODEL_H_
#define KVSHARD_PROPS_ALLOCATOR_STATE_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <vector>

#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include "cpu_ref/allocator.h"
#include "props/rc_status.h"

namespace kvshard::props::allocator_state {

using ref::ExtendPages;
using ref::PageInterleaveAllocator;
using V = std::vector<int64_t>;

// A live chain (one request's KV): pages in position order, tokens, rotation base.
struct Chain {
  V pages;
  int64_t len = 0;
  int64_t base = 0;
};

// What the need_sort merges did, for the test log (how often the generators reach them).
struct MergeStats {
  int64_t merges = 0;              // alloc_extend calls that merged
  int64_t merges_of_unshort = 0;   // ... where a class that was not short had a release list to merge
  int64_t merges_after_group = 0;  // ... where pages freed by a free group were still in a release list
};

// An allocator's class lists.
struct Lists {
  std::vector<V> free, release;
  V counts;
  bool operator==(const Lists&) const = default;
};

inline Lists ListsOf(const PageInterleaveAllocator& a) {
  Lists l;
  for (int64_t c = 0; c < a.config().shard_size; ++c) {
    l.free.push_back(a.free_list(c));
    l.release.push_back(a.release_list(c));
  }
  l.counts = a.class_free_page_counts();
  return l;
}

// "least_full_class = argmax_c (counts[c], -c)".
inline int64_t LeastFull(const V& counts) {
  int64_t best = 0;
  for (int64_t c = 1; c < static_cast<int64_t>(counts.size()); ++c) best = counts[c] > counts[best] ? c : best;
  return best;
}

// Request i's new pages: ceil(seq_len / ps) - prefix_len / ps.
inline int64_t NewPages(const AllocBatch& b, size_t i, int64_t ps) {
  return (b.seq_lens[i] + ps - 1) / ps - b.prefix_lens[i] / ps;
}

// Spec §2's pass 1 on the counts: "class c gives new_pages//N + ((c-start) % N < new_pages % N) pages"; true
// iff no class goes negative (the batch commits).
inline bool SpecCommits(V sim, const AllocBatch& b, int64_t n, int64_t ps) {
  for (size_t i = 0; i < b.seq_lens.size(); ++i) {
    const int64_t base = b.rotation_bases[i] == kNewChain ? LeastFull(sim) : b.rotation_bases[i];
    const int64_t start = (base + b.prefix_lens[i] / ps) % n, new_pages = NewPages(b, i, ps);
    for (int64_t c = 0; c < n; ++c) sim[c] -= new_pages / n + ((c - start + n) % n < new_pages % n ? 1 : 0);
  }
  return *std::min_element(sim.begin(), sim.end()) >= 0;
}

// The lists a committed batch must leave (SGLang's alloc_extend), given its answer: bases as spec'd (null: the
// least-full class of the counts less the earlier requests' pages), each request's owners cyclic from
// (base + prefix_pages) % N, and class c's pages (in batch and position order) the head of its list, after the
// need_sort merge of every class iff some class's free list is shorter than its need. Sets *merged.
inline Lists CommitLists(const Lists& before, const AllocBatch& b, const std::vector<V>& pages, const V& bases,
                         int64_t n, int64_t ps, bool need_sort, bool* merged) {
  V sim = before.counts;
  std::vector<V> drawn(n);
  RC_ASSERT(pages.size() == b.seq_lens.size());
  for (size_t i = 0; i < pages.size(); ++i) {
    RC_ASSERT(bases[i] == (b.rotation_bases[i] == kNewChain ? LeastFull(sim) : b.rotation_bases[i]));
    RC_ASSERT(static_cast<int64_t>(pages[i].size()) == NewPages(b, i, ps));
    for (size_t j = 0; j < pages[i].size(); ++j) {
      const int64_t owner = pages[i][j] % n;
      RC_ASSERT(owner == (bases[i] + b.prefix_lens[i] / ps + static_cast<int64_t>(j)) % n);
      drawn[owner].push_back(pages[i][j]);
      --sim[owner];
    }
  }
  *merged = false;
  for (int64_t c = 0; c < n; ++c) *merged |= need_sort && drawn[c].size() > before.free[c].size();
  Lists after = before;
  for (int64_t c = 0; c < n; ++c) {
    V& list = after.free[c];
    if (*merged) {
      list.insert(list.end(), before.release[c].begin(), before.release[c].end());
      std::sort(list.begin(), list.end());
      after.release[c].clear();
    }
    RC_ASSERT(drawn[c].size() <= list.size());
    RC_ASSERT(V(list.begin(), list.begin() + drawn[c].size()) == drawn[c]);  // the head pages, in order
    list.erase(list.begin(), list.begin() + drawn[c].size());
  }
  after.counts = sim;
  return after;
}

// The reference allocator fed every command (the mirrored twin of the one under test), the live chains, and
// how often its need_sort merges ran.
struct Model {
  int64_t n = 1, ps = 1, ppr = 0;
  bool need_sort = false;
  PageInterleaveAllocator alloc;
  bool group_pages_released = false;  // a free group put pages on a release list since the last merge
  MergeStats stats;
  std::vector<Chain> chains;

  Model(int64_t shard_size, int64_t page_size, int64_t pages_per_rank, bool sort)
      : n(shard_size),
        ps(page_size),
        ppr(pages_per_rank),
        need_sort(sort),
        alloc(RC_VALUE(PageInterleaveAllocator::Create({n, ps, ppr, sort, true}))) {}
  V Counts() const { return alloc.class_free_page_counts(); }
  // alloc_extend on the model: false = deferred; else each request's pages in position order and the bases.
  bool Alloc(const AllocBatch& b, std::vector<V>* pages, V* bases) {
    const Lists before = ListsOf(alloc);
    ExtendPages out;
    if (!RC_VALUE(alloc.AllocExtend(b, &out))) return false;
    pages->clear();
    for (size_t i = 0; i + 1 < out.offsets.size(); ++i) {
      pages->emplace_back(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
    }
    *bases = out.rotation_bases;
    CountMerge(before, *pages);
    return true;
  }
  // The merge statistics of a commit of `pages` on `before` (merged iff need_sort and some class is short).
  void CountMerge(const Lists& before, const std::vector<V>& pages) {
    V need(n, 0);
    for (const V& p : pages) {
      for (int64_t page : p) ++need[page % n];
    }
    bool any_short = false, unshort_release = false, releases = false;
    for (int64_t c = 0; c < n; ++c) {
      const bool short_c = need[c] > static_cast<int64_t>(before.free[c].size());
      any_short |= short_c;
      unshort_release |= !short_c && !before.release[c].empty();
      releases |= !before.release[c].empty();
    }
    if (!need_sort || !any_short) return;
    ++stats.merges;
    stats.merges_of_unshort += unshort_release;
    stats.merges_after_group += group_pages_released && releases;
    group_pages_released = false;
  }
  void Free(const V& locs) { RC_ASSERT_OK(alloc.Free(locs)); }
  void FreeGroup(const std::vector<V>& frees) {
    RC_ASSERT_OK(alloc.FreeGroup(frees));
    for (const V& f : frees) group_pages_released |= need_sort && !f.empty();
  }
};

// How often the generated sequences reached the need_sort merge (printed in the test log).
inline MergeStats g_merge_stats;
inline int64_t g_sequences_with_group_merge = 0;
inline bool g_group_merge_in_sequence = false;

inline V ChainSlots(const Chain& c, int64_t from, int64_t to, int64_t ps) {
  V s;
  for (int64_t pos = from; pos < to; ++pos) s.push_back(c.pages[pos / ps] * ps + pos % ps);
  return s;
}

// The allocator holds its mirrored twin's lists, and the invariants hold.
inline void CheckState(const Model& m, const PageInterleaveAllocator& a) {
  RC_ASSERT(ListsOf(a) == ListsOf(m.alloc));  // same command stream, same state (SGLang's SPMD mirroring)
  std::vector<int> seen(m.n * (m.ppr + 1), 0);
  for (int64_t c = 0; c < m.n; ++c) {
    const V f = a.free_list(c), r = a.release_list(c);
    for (const V* list : {&f, &r}) {
      for (int64_t p : *list) {
        RC_ASSERT(p % m.n == c);  // a class holds only its rank's pages
        RC_ASSERT(p >= m.n && p < m.n * (m.ppr + 1));
        RC_ASSERT(seen[p]++ == 0);  // no page twice within or across classes
        RC_ASSERT(!a.is_allocated(p));
      }
    }
  }
  for (const Chain& ch : m.chains) {
    V per_rank(m.n, 0);
    for (size_t k = 0; k < ch.pages.size(); ++k) {
      RC_ASSERT(ch.pages[k] % m.n == (ch.base + static_cast<int64_t>(k)) % m.n);  // cyclic owners
      RC_ASSERT(seen[ch.pages[k]]++ == 0);
      RC_ASSERT(a.is_allocated(ch.pages[k]));
      ++per_rank[ch.pages[k] % m.n];
    }
    RC_ASSERT(
        *std::max_element(per_rank.begin(), per_rank.end()) - *std::min_element(per_rank.begin(), per_rank.end()) <= 1);
  }
  for (int64_t p = m.n; p < m.n * (m.ppr + 1); ++p) RC_ASSERT(seen[p] == 1);  // page count conserved
  const V counts = m.Counts();
  RC_ASSERT(a.class_free_page_counts() == counts);
  RC_ASSERT(a.available_size() == m.n * m.ps * *std::min_element(counts.begin(), counts.end()));
  RC_ASSERT(a.available_size() <= a.aggregate_free_size());
  RC_ASSERT(a.aggregate_free_size() == m.ps * std::accumulate(counts.begin(), counts.end(), int64_t{0}));
}

using Command = rc::state::Command<Model, PageInterleaveAllocator>;

// A batch of new chains and extensions of distinct live page-aligned chains.
struct Alloc : Command {
  AllocBatch batch;
  std::vector<int64_t> chain_of;  // -1 = new chain
  // Shrinking replays commands on other states: an extension needs its chain unchanged.
  void checkPreconditions(const Model& m) const override {
    for (size_t i = 0; i < chain_of.size(); ++i) {
      if (chain_of[i] < 0) continue;
      RC_PRE(chain_of[i] < static_cast<int64_t>(m.chains.size()));
      const Chain& c = m.chains[chain_of[i]];
      RC_PRE(c.len == batch.prefix_lens[i] && c.base == batch.rotation_bases[i]);
      RC_PRE(batch.last_locs[i] == (c.len ? c.pages.back() * m.ps + m.ps - 1 : 0));
    }
  }
  explicit Alloc(const Model& m) {
    const int64_t reqs = *rc::gen::inRange<int64_t>(1, 5);
    std::vector<int64_t> aligned;
    for (size_t i = 0; i < m.chains.size(); ++i) {
      if (m.chains[i].len % m.ps == 0) aligned.push_back(i);
    }
    for (int64_t i = 0; i < reqs; ++i) {
      const bool extend = !aligned.empty() && *rc::gen::inRange(0, 3) == 0;
      const int64_t seq_extra = *rc::gen::inRange<int64_t>(1, 3 * m.ps * m.n + 2);
      if (extend) {
        const size_t pick = *rc::gen::inRange<size_t>(0, aligned.size());
        const Chain& c = m.chains[aligned[pick]];
        chain_of.push_back(aligned[pick]);
        aligned.erase(aligned.begin() + pick);
        batch.prefix_lens.push_back(c.len);
        batch.seq_lens.push_back(c.len + seq_extra);
        batch.rotation_bases.push_back(c.base);
        batch.last_locs.push_back(c.len ? c.pages.back() * m.ps + m.ps - 1 : 0);
      } else {
        chain_of.push_back(-1);
        batch.prefix_lens.push_back(0);
        batch.seq_lens.push_back(seq_extra);
        batch.rotation_bases.push_back(
            *rc::gen::weightedOneOf<int64_t>({{3, rc::gen::just(kNewChain)}, {1, rc::gen::inRange<int64_t>(0, m.n)}}));
        batch.last_locs.push_back(0);
      }
    }
  }
  void apply(Model& m) const override {
    std::vector<V> pages;
    V bases;
    if (!m.Alloc(batch, &pages, &bases)) return;
    for (size_t i = 0; i < pages.size(); ++i) {
      if (chain_of[i] < 0) {
        m.chains.push_back({pages[i], batch.seq_lens[i], bases[i]});
      } else {
        Chain& c = m.chains[chain_of[i]];
        c.pages.insert(c.pages.end(), pages[i].begin(), pages[i].end());
        c.len = batch.seq_lens[i];
      }
    }
  }
  void run(const Model& m, PageInterleaveAllocator& a) const override {
    Model next = m;
    std::vector<V> twin;
    V twin_bases;
    next.Alloc(batch, &twin, &twin_bases);
    g_merge_stats.merges += next.stats.merges - m.stats.merges;
    g_merge_stats.merges_of_unshort += next.stats.merges_of_unshort - m.stats.merges_of_unshort;
    g_merge_stats.merges_after_group += next.stats.merges_after_group - m.stats.merges_after_group;
    g_group_merge_in_sequence |= next.stats.merges_after_group > m.stats.merges_after_group;
    // Admission on the min-class floor: a batch needing <= N*ps*ceil(new/N) tokens per request in total
    // within available_size can never be deferred.
    int64_t floor_tokens = 0;
    for (size_t i = 0; i < batch.seq_lens.size(); ++i) {
      const int64_t new_pages = (batch.seq_lens[i] + m.ps - 1) / m.ps - batch.prefix_lens[i] / m.ps;
      floor_tokens += m.n * m.ps * ((new_pages + m.n - 1) / m.n);
    }
    const bool admitted = floor_tokens <= a.available_size();
    const Lists before = ListsOf(a);
    ExtendPages out;
    const bool ok = RC_VALUE(a.AllocExtend(batch, &out));
    RC_ASSERT(ok == SpecCommits(before.counts, batch, m.n, m.ps));  // commit whole or defer whole, as spec'd
    if (admitted) RC_ASSERT(ok);
    if (ok) {
      std::vector<V> pages;
      for (size_t i = 0; i + 1 < out.offsets.size(); ++i) {
        pages.emplace_back(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
      }
      bool merged = false;
      RC_ASSERT(ListsOf(a) == CommitLists(before, batch, pages, out.rotation_bases, m.n, m.ps, m.need_sort, &merged));
    } else {
      RC_ASSERT(ListsOf(a) == before);  // a deferred batch changes nothing
    }
    CheckState(nextState(m), a);
  }
  void show(std::ostream& os) const override {
    os << "Alloc(prefix_lens=" << rc::toString(batch.prefix_lens) << ", seq_lens=" << rc::toString(batch.seq_lens)
       << ", rotation_bases=" << rc::toString(batch.rotation_bases) << ")";
  }
};

}  // namespace kvshard::props::allocator_state

#endif  // KVSHARD_PROPS_ALLOCATOR_STATE_MODEL_H_

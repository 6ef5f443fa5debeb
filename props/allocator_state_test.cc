// Stateful property of the reference rotated owner-classed allocator (spec §2, §6) against SGLang's semantics:
// random alloc / extend / free / free-group / defer command sequences. Each command's effect on the class lists
// is checked against what page_interleave_allocator.py does, stated per command as a relation between the lists
// before and after (a commit pops each class's head pages, after the need_sort merge of every class exactly when
// some free list is short; a null base is the least-full class of the counts left by the batch's earlier
// requests; a batch defers exactly when the spec's class counts run some class negative, and then changes
// nothing; a free prepends each class's freed pages ascending). After every command no page is duplicated within
// or across classes, the page count is conserved, every live chain's owners are cyclic (per-rank counts differ
// by <= 1), available_size is the min-class floor <= aggregate, an admitted batch never defers, and a second
// reference allocator fed the same commands (the model) holds the same lists: SGLang's mirrored ranks.
#include <algorithm>
#include <iostream>
#include <set>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include "props/allocator_state_model.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/rounds.h"

namespace kvshard::props::allocator_state {
namespace {

// The lists a free of `locs` must leave: "pages = sorted unique locs // ps; each class's freed pages are
// prepended (ascending) to its free list (release list when need_sort)".
Lists FreeLists(const Lists& before, const V& locs, int64_t n, int64_t ps, bool need_sort) {
  std::set<int64_t> pages;
  for (int64_t loc : locs) pages.insert(loc / ps);
  Lists after = before;
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    V& list = (need_sort ? after.release : after.free)[*it % n];
    list.insert(list.begin(), *it);
    ++after.counts[*it % n];
  }
  return after;
}

// Frees a whole live chain (slots shuffled, some twice) or just its last page.
struct Free : Command {
  size_t chain = 0;
  bool tail = false;
  V locs;
  V pages;  // the chain's pages when generated
  void checkPreconditions(const Model& m) const override {
    RC_PRE(chain < m.chains.size());  // separate: RC_PRE's expression capture does not short-circuit &&
    RC_PRE(m.chains[chain].pages == pages);
  }
  explicit Free(const Model& m) {
    RC_PRE(!m.chains.empty());
    chain = *rc::gen::inRange<size_t>(0, m.chains.size());
    tail = *rc::gen::arbitrary<bool>();
    const Chain& c = m.chains[chain];
    pages = c.pages;
    const int64_t from = tail ? ((c.len - 1) / m.ps) * m.ps : 0;
    locs = ChainSlots(c, from, c.len, m.ps);
    if (!locs.empty()) locs.push_back(locs[*rc::gen::inRange<size_t>(0, locs.size())]);
    std::reverse(locs.begin(), locs.end());
  }
  void apply(Model& m) const override {
    m.Free(locs);
    Chain& c = m.chains[chain];
    if (tail) {
      c.pages.pop_back();
      c.len = static_cast<int64_t>(c.pages.size()) * m.ps;
    }
    if (!tail || c.pages.empty()) m.chains.erase(m.chains.begin() + chain);
  }
  void run(const Model& m, PageInterleaveAllocator& a) const override {
    const Lists before = ListsOf(a);
    RC_ASSERT_OK(a.Free(locs));
    RC_ASSERT(ListsOf(a) == FreeLists(before, locs, m.n, m.ps, m.need_sort));
    CheckState(nextState(m), a);
  }
  void show(std::ostream& os) const override {
    os << "Free(chain=" << chain << (tail ? ", tail" : "") << ", locs=" << rc::toString(locs) << ")";
  }
};

// Frees up to three chains inside one free group (queued, applied at the end).
struct FreeGroup : Command {
  std::vector<size_t> chains;
  std::vector<V> frees;
  std::vector<V> pages;  // the chains' pages when generated
  void checkPreconditions(const Model& m) const override {
    for (size_t i = 0; i < chains.size(); ++i) {
      RC_PRE(chains[i] < m.chains.size());
      RC_PRE(m.chains[chains[i]].pages == pages[i]);
    }
  }
  explicit FreeGroup(const Model& m) {
    RC_PRE(!m.chains.empty());
    const size_t k = *rc::gen::inRange<size_t>(1, std::min<size_t>(3, m.chains.size()) + 1);
    for (size_t i = 0; i < k; ++i) chains.push_back(m.chains.size() - 1 - i);
    for (size_t c : chains) {
      frees.push_back(ChainSlots(m.chains[c], 0, m.chains[c].len, m.ps));
      pages.push_back(m.chains[c].pages);
    }
  }
  void apply(Model& m) const override {
    m.FreeGroup(frees);
    for (size_t c : chains) m.chains.erase(m.chains.begin() + c);  // descending indices
  }
  void run(const Model& m, PageInterleaveAllocator& a) const override {
    const Lists before = ListsOf(a);
    RC_ASSERT_OK(a.FreeGroupBegin());
    for (const V& f : frees) RC_ASSERT_OK(a.Free(f));
    RC_ASSERT(ListsOf(a) == before);  // nothing applied before the group ends
    RC_ASSERT_OK(a.FreeGroupEnd());
    V all;  // the queued frees, concatenated, freed as one
    for (const V& f : frees) all.insert(all.end(), f.begin(), f.end());
    RC_ASSERT(ListsOf(a) == FreeLists(before, all, m.n, m.ps, m.need_sort));
    CheckState(nextState(m), a);
  }
  void show(std::ostream& os) const override { os << "FreeGroup(chains=" << rc::toString(chains) << ")"; }
};

// A batch whose last request cannot fit: the whole batch defers and nothing changes.
struct Defer : Command {
  AllocBatch batch;
  // The last request must still exceed the fullest class (every class needs most + 1 pages).
  void checkPreconditions(const Model& m) const override {
    const V counts = m.Counts();
    const int64_t most = *std::max_element(counts.begin(), counts.end());
    RC_PRE((batch.seq_lens.back() + m.ps - 1) / m.ps >= m.n * (most + 1));
  }
  explicit Defer(const Model& m) {
    const V counts = m.Counts();
    const int64_t most = *std::max_element(counts.begin(), counts.end());
    const int64_t small = *rc::gen::inRange<int64_t>(0, 3);
    for (int64_t i = 0; i < small; ++i) {
      batch.prefix_lens.push_back(0);
      batch.seq_lens.push_back(*rc::gen::inRange<int64_t>(1, m.ps + 1));
      batch.rotation_bases.push_back(kNewChain);
      batch.last_locs.push_back(0);
    }
    batch.prefix_lens.push_back(0);
    batch.seq_lens.push_back(m.n * m.ps * (most + 1) - *rc::gen::inRange<int64_t>(0, m.ps));
    batch.rotation_bases.push_back(*rc::gen::inRange<int64_t>(0, m.n));
    batch.last_locs.push_back(0);
  }
  void run(const Model& m, PageInterleaveAllocator& a) const override {
    RC_ASSERT(!SpecCommits(a.class_free_page_counts(), batch, m.n, m.ps));
    ExtendPages out;
    RC_ASSERT(!RC_VALUE(a.AllocExtend(batch, &out)));
    CheckState(m, a);  // state unchanged
  }
  void show(std::ostream& os) const override { os << "Defer(seq_lens=" << rc::toString(batch.seq_lens) << ")"; }
};

void CheckAllocatorAgainstModel() {
  const int64_t n =
      *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::element<int64_t>(1, 2, 8)}, {3, rc::gen::inRange<int64_t>(1, 9)}});
  const int64_t ps = *rc::gen::element<int64_t>(1, 1, 2, 3, 16);
  const int64_t ppr = *rc::gen::inRange<int64_t>(0, 17);
  const bool need_sort = *rc::gen::arbitrary<bool>();
  Model m(n, ps, ppr, need_sort);
  PageInterleaveAllocator a = RC_VALUE(PageInterleaveAllocator::Create({n, ps, ppr, need_sort, true}));
  CheckState(m, a);  // fresh: class c holds [i*N + c for i in 1..pages_per_rank], ascending
  for (int64_t c = 0; c < n; ++c) {
    V fresh;
    for (int64_t i = 1; i <= ppr; ++i) fresh.push_back(i * n + c);
    RC_ASSERT(a.free_list(c) == fresh);
  }
  g_group_merge_in_sequence = false;
  rc::state::check(m, a, rc::state::gen::execOneOfWithArgs<Alloc, Alloc, Free, FreeGroup, Defer>());
  g_sequences_with_group_merge += g_group_merge_in_sequence;
  RC_CLASSIFY(need_sort, "need_sort");
  RC_CLASSIFY(g_group_merge_in_sequence, "need_sort merge after a grouped free");
}

// 4 rounds x RC_PARAMS max_success command sequences.
TEST(AllocatorStateProps, FollowsSglangSemanticsAndKeepsInvariants) {
  g_merge_stats = {};
  g_sequences_with_group_merge = 0;
  CheckRounds("AllocatorStateProps.FollowsSglangSemanticsAndKeepsInvariants", 4, CheckAllocatorAgainstModel);
  // Shrinking replays count too; the figures say how often the generators reach the merge paths.
  std::cout << "need_sort merges: " << g_merge_stats.merges << " (" << g_merge_stats.merges_of_unshort
            << " merged a class that was not short, " << g_merge_stats.merges_after_group
            << " after a grouped free); sequences with a merge after a grouped free: " << g_sequences_with_group_merge
            << "\n";
  EXPECT_GT(g_merge_stats.merges_of_unshort, 0) << "the generators never reached a multi-class need_sort merge";
  EXPECT_GT(g_sequences_with_group_merge, 0) << "the generators never reached a merge after a grouped free";
}

}  // namespace
}  // namespace kvshard::props::allocator_state

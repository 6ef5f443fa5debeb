// A naive model of SGLang's rotated owner-classed allocator, written from spec §2 sentence by sentence
// (deques, no storage tricks) for the stateful property and the script property to compare against.
#ifndef KVSHARD_PROPS_NAIVE_ALLOCATOR_H_
#define KVSHARD_PROPS_NAIVE_ALLOCATOR_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <set>
#include <vector>

#include "core/alloc_script.h"

namespace kvshard::props {

// What the model's need_sort merges did, for the test log (how often the generators reach them).
struct NaiveMergeStats {
  int64_t merges = 0;               // alloc_extend calls that merged
  int64_t merges_of_unshort = 0;    // ... where a class that was not short had a release list to merge
  int64_t merges_after_group = 0;   // ... where pages freed by a free group were still in a release list
};

// Spec §2, literally. Lists are head-first deques; class c = pages with l % N == c.
struct NaiveAllocator {
  using V = std::vector<int64_t>;
  int64_t n = 1, ps = 1, ppr = 0;
  bool need_sort = false;
  std::vector<std::deque<int64_t>> free, release;
  bool group_pages_released = false;  // a free group put pages on a release list since the last merge
  NaiveMergeStats stats;

  // "Fresh: class c holds [i*N + c for i in 1..pages_per_rank], ascending."
  NaiveAllocator(int64_t shard_size, int64_t page_size, int64_t pages_per_rank, bool sort)
      : n(shard_size), ps(page_size), ppr(pages_per_rank), need_sort(sort), free(n), release(n) {
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t i = 1; i <= ppr; ++i) free[c].push_back(i * n + c);
    }
  }
  // "Counts = free + release list lengths."
  int64_t Count(int64_t c) const { return static_cast<int64_t>(free[c].size() + release[c].size()); }
  V Counts() const {
    V v;
    for (int64_t c = 0; c < n; ++c) v.push_back(Count(c));
    return v;
  }
  // "least_full_class = argmax_c (counts[c], -c)".
  static int64_t LeastFull(const V& counts) {
    int64_t best = 0;
    for (int64_t c = 1; c < static_cast<int64_t>(counts.size()); ++c) best = counts[c] > counts[best] ? c : best;
    return best;
  }
  // "class c gives new_pages//N + ((c-start) % N < new_pages % N) pages."
  int64_t ClassNeed(int64_t c, int64_t start, int64_t new_pages) const {
    return new_pages / n + (((c - start) % n + n) % n < new_pages % n ? 1 : 0);
  }
  // alloc_extend: false = the whole batch deferred (state unchanged); else each request's pages in position
  // order and the bases with null resolved.
  bool Alloc(const AllocBatch& b, std::vector<V>* pages, V* bases) {
    // Pass 1 simulates all requests on the counts; a null base resolves on the simulated counts.
    V sim = Counts(), starts, news;
    *bases = b.rotation_bases;
    for (size_t i = 0; i < b.seq_lens.size(); ++i) {
      const int64_t new_pages = (b.seq_lens[i] + ps - 1) / ps - b.prefix_lens[i] / ps;
      if ((*bases)[i] == kNewChain) (*bases)[i] = LeastFull(sim);
      const int64_t start = ((*bases)[i] + b.prefix_lens[i] / ps) % n;
      for (int64_t c = 0; c < n; ++c) sim[c] -= ClassNeed(c, start, new_pages);
      starts.push_back(start);
      news.push_back(new_pages);
    }
    // "if any class would go negative the whole batch is deferred".
    for (int64_t c = 0; c < n; ++c) {
      if (sim[c] < 0) return false;
    }
    // "if any class's free list alone is shorter than that class's total need for the whole batch, every
    // class's release list is merged into its free list and sorted (all classes at once)".
    bool any_short = false;
    for (int64_t c = 0; c < n; ++c) any_short |= static_cast<int64_t>(free[c].size()) < Count(c) - sim[c];
    if (need_sort && any_short) {
      bool unshort_release = false, releases = false;
      for (int64_t c = 0; c < n; ++c) {
        const bool short_c = static_cast<int64_t>(free[c].size()) < Count(c) - sim[c];
        unshort_release |= !short_c && !release[c].empty();
        releases |= !release[c].empty();
      }
      ++stats.merges;
      stats.merges_of_unshort += unshort_release;
      stats.merges_after_group += group_pages_released && releases;
      group_pages_released = false;
      for (int64_t c = 0; c < n; ++c) {
        free[c].insert(free[c].end(), release[c].begin(), release[c].end());
        std::sort(free[c].begin(), free[c].end());
        release[c].clear();
      }
    }
    // "Pass 2 pops each class's head pages": position-page j draws class (start + j) % N.
    pages->clear();
    for (size_t i = 0; i < news.size(); ++i) {
      V p(news[i]);
      for (int64_t j = 0; j < news[i]; ++j) {
        std::deque<int64_t>& list = free[(starts[i] + j) % n];
        p[j] = list.front();
        list.pop_front();
      }
      pages->push_back(p);
    }
    return true;
  }
  // "free(locs): pages = sorted unique locs // ps; each class's freed pages are prepended (ascending) to its
  // free list (release list when need_sort)".
  void Free(const V& locs, bool in_group = false) {
    std::set<int64_t> pages;
    for (int64_t loc : locs) pages.insert(loc / ps);
    for (auto it = pages.rbegin(); it != pages.rend(); ++it) (need_sort ? release : free)[*it % n].push_front(*it);
    group_pages_released |= in_group && need_sort && !pages.empty();
  }
  // "Inside a free group, frees are queued (snapshot the values) and applied at group end."
  void FreeGroup(const std::vector<V>& frees) {
    V all;
    for (const V& f : frees) all.insert(all.end(), f.begin(), f.end());
    Free(all, /*in_group=*/true);
  }
};

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_NAIVE_ALLOCATOR_H_

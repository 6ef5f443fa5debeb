// What the simulator tells an optional observer as it runs: every prefix cache call, every allocator call and
// every committed extend batch, in simulation order (kvshard simulate --emit-trace writes them as a trace).
#ifndef KVSHARD_SIM_OBSERVER_H_
#define KVSHARD_SIM_OBSERVER_H_

#include <cstdint>
#include <vector>

#include "core/alloc_script.h"
#include "core/gather_plan.h"
#include "cpu_fast/allocator.h"
#include "sim/prefix_cache.h"

namespace kvshard::sim {

// Callbacks of one simulation; every default does nothing. Requests are named by their workload index.
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  // The pool was built (before any other call).
  virtual void OnStart(const AllocatorConfig& allocator) { (void)allocator; }
  // `request` matched the first `tokens` tokens of its prompt (`fingerprints`: one per full page) and, with
  // `lock`, locked `match` (an admission); without, the match only refreshed the tree's access times.
  virtual void OnMatch(int64_t request, const std::vector<uint64_t>& fingerprints, int64_t tokens,
                       const PrefixCache::Match& match, bool lock) {
    (void)request, (void)fingerprints, (void)tokens, (void)match, (void)lock;
  }
  // cache_unfinished_req after an insert: `request` re-matched its first `tokens` tokens, locked `match` and
  // released the lock it held.
  virtual void OnRelock(int64_t request, const std::vector<uint64_t>& fingerprints, int64_t tokens,
                        const PrefixCache::Match& match) {
    (void)request, (void)fingerprints, (void)tokens, (void)match;
  }
  // One alloc_extend try of `requests` (committed when `ok`; `out` is then its answer); `allocator` after it.
  virtual void OnAlloc(const std::vector<int64_t>& requests, const AllocBatch& batch, bool ok, const ExtendPages& out,
                       const fast::PageInterleaveAllocator& allocator) {
    (void)requests, (void)batch, (void)ok, (void)out, (void)allocator;
  }
  // The cache evicted for a deferred batch: asked `num_pages`, freed `freed` (in order) to the allocator.
  virtual void OnEvict(int64_t num_pages, const std::vector<int64_t>& freed, int64_t cached_pages) {
    (void)num_pages, (void)freed, (void)cached_pages;
  }
  // A committed extend batch of `requests` (its prefix_len, seq_len and pages as begin_shard_extend takes them).
  virtual void OnBatch(const std::vector<int64_t>& requests, const std::vector<ExtendRequest>& batch) {
    (void)requests, (void)batch;
  }
  // The simulator freed `pages` (one Free call; a finished request's partial tail page), `allocator` after it.
  virtual void OnFree(const std::vector<int64_t>& pages, const fast::PageInterleaveAllocator& allocator) {
    (void)pages, (void)allocator;
  }
  // A request inserted full pages (pages[k] under fingerprints[k]): after a prefill chunk (not declined) or when
  // its transfer is done; the cache freed result.freed (the request's duplicates, or all of them when declined).
  virtual void OnInsert(int64_t request, const std::vector<uint64_t>& fingerprints, const std::vector<int64_t>& pages,
                        int64_t rotation_base, const PrefixCache::InsertResult& result, int64_t cached_pages) {
    (void)request, (void)fingerprints, (void)pages, (void)rotation_base, (void)result, (void)cached_pages;
  }
  // A request released its lock: its transfer is done, or its admission was undone.
  virtual void OnUnlock(int64_t request) { (void)request; }
  // Polled once a step: true ends the simulation early (the result then covers the steps run).
  virtual bool Done() const { return false; }
};

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_OBSERVER_H_

// Fast rotated owner-classed page allocator: cpu_ref/allocator.h's API, results and error messages (spec §2,
// SGLang PageInterleavePoolAllocator), with storage for speed: class lists kept reversed (head at back()) so
// popping a head and prepending freed pages are O(1) amortized, and alloc_extend's pass-1 scratch reused across
// calls. The simulator drives it; props/fast_vs_ref_props_test.cc keeps it equal to the reference.
#ifndef KVSHARD_CPU_FAST_ALLOCATOR_H_
#define KVSHARD_CPU_FAST_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "core/alloc_script.h"
#include "core/page_allocator.h"
#include "core/status.h"

namespace kvshard::fast {

using ::kvshard::AllocatorConfig;
using ::kvshard::ExtendPages;

// SGLang's PageInterleavePoolAllocator over logical pages [N, N*(pages_per_rank+1)).
class PageInterleaveAllocator {
 public:
  // Validates the config (N, ps in range; N*(pages_per_rank+1) <= 2^24) and builds fresh classes.
  static StatusOr<PageInterleaveAllocator> Create(const AllocatorConfig& config);

  // Allocates every request's new pages, or defers the whole batch (returns false, state unchanged) when a
  // class would run out. Errors (state unchanged) name the field: misaligned prefix, no new pages, bad
  // base, mismatched list lengths, or (check_last_loc) a last_loc whose owner breaks the cyclic rotation.
  StatusOr<bool> AllocExtend(const AllocBatch& batch, ExtendPages* out);
  // Owner-plan mode (a kvshard model, not SGLang): request i's new page j is
  // drawn from class page_classes[i][j] (e.g. its CP compute owner, so CP shared-KV direct writes never fail the
  // owner check) instead of the rotation. Same validation, whole-batch defer and need_sort merge as AllocExtend;
  // rotation bases are copied, not used. Errors name page_classes[i][j] for a bad class or list length.
  StatusOr<bool> AllocExtendByClasses(const AllocBatch& batch, const std::vector<std::vector<int64_t>>& page_classes,
                                      ExtendPages* out);
  // Frees the pages of `locs` (sorted unique locs // ps, prepended per class), or queues a snapshot
  // inside a free group. Errors (state unchanged) for slots outside the pool or pages not allocated.
  Status Free(const std::vector<int64_t>& locs);
  // Opens a free group: frees are queued until FreeGroupEnd. Error if one is already open.
  Status FreeGroupBegin();
  // Closes the free group and frees the concatenation of the queued frees. Error if none is open.
  Status FreeGroupEnd();
  // A whole free group (begin, each free, end), or an error naming "frees[f][i]" with the state unchanged.
  Status FreeGroup(const std::vector<std::vector<int64_t>>& frees);

  // N * ps * min(class counts): tokens any batch of new chains can always get (the admission floor).
  int64_t available_size() const;
  // ps * sum(class counts).
  int64_t aggregate_free_size() const;
  // argmax_c (counts[c], -c): the class with most free pages, ties to the lowest id.
  int64_t least_full_class() const;
  // Per class: free list + release list lengths.
  std::vector<int64_t> class_free_page_counts() const;
  // Class c's free list, head (next page handed out) first.
  std::vector<int64_t> free_list(int64_t c) const;
  // Class c's release list (need_sort), head first.
  std::vector<int64_t> release_list(int64_t c) const;
  // True iff logical page `page` is currently handed out.
  bool is_allocated(int64_t page) const;
  // True while a free group is open.
  bool in_free_group() const { return in_group_; }
  // The configuration.
  const AllocatorConfig& config() const { return config_; }
  // Logical pages covered, N * (pages_per_rank + 1) (pages < N are the reserved trash pages).
  int64_t num_logical_pages() const { return static_cast<int64_t>(allocated_.size()); }

 private:
  explicit PageInterleaveAllocator(const AllocatorConfig& config);
  int64_t ClassCount(int64_t c) const { return static_cast<int64_t>(free_[c].size() + release_[c].size()); }
  void ApplyFree(const std::vector<int64_t>& locs);
  void MergeAndSortAll();

  AllocatorConfig config_;
  std::vector<std::vector<int64_t>> free_;     // per class, stored reversed: head at back()
  std::vector<std::vector<int64_t>> release_;  // per class, stored reversed: head at back()
  std::vector<uint8_t> allocated_;             // per logical page
  bool in_group_ = false;
  std::vector<int64_t> group_locs_;    // queued frees of the open group, concatenated
  std::vector<int64_t> sim_, starts_;  // alloc_extend scratch (pass 1)
};

}  // namespace kvshard::fast

#endif  // KVSHARD_CPU_FAST_ALLOCATOR_H_

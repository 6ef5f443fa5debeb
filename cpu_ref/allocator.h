// Reference rotated owner-classed page allocator (spec §2, SGLang PageInterleavePoolAllocator): one free
// class per rank, rotation bases that keep every chain's owners cyclic, whole-batch defer, prepend-on-free.
// Written to be read against spec §2 and page_interleave_allocator.py: head-first lists, no storage tricks
// (cpu_fast/allocator.h is the optimized twin the simulator drives).
#ifndef KVSHARD_CPU_REF_ALLOCATOR_H_
#define KVSHARD_CPU_REF_ALLOCATOR_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "core/alloc_script.h"
#include "core/page_allocator.h"
#include "core/status.h"

namespace kvshard::ref {

using ::kvshard::AllocatorConfig;  // core/page_allocator.h, shared with cpu_fast/allocator.h
using ::kvshard::ExtendPages;
using ::kvshard::ExtendSlots;

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
  bool in_free_group() const { return in_free_group_; }
  // The configuration.
  const AllocatorConfig& config() const { return config_; }
  // Logical pages covered, N * (pages_per_rank + 1) (pages < N are the reserved trash pages).
  int64_t num_logical_pages() const { return static_cast<int64_t>(allocated_.size()); }

 private:
  // One request's cyclic run: position-page j draws class (start_class + j) % N.
  struct Run {
    int64_t start_class = 0;
    int64_t new_pages = 0;
  };
  explicit PageInterleaveAllocator(const AllocatorConfig& config);
  // Pass 1 of alloc_extend: validates request by request, resolves null bases in place on the simulated counts
  // and subtracts each run's class counts from them. Returns each request's run.
  StatusOr<std::vector<Run>> SimulateDraws(const AllocBatch& batch, std::vector<int64_t>* rotation_bases,
                                           std::vector<int64_t>* sim_counts) const;
  // need_sort: merges every class's release list when any class's free list is shorter than its need.
  void MergeIfAnyFreeListShort(const std::vector<int64_t>& needs);
  // SGLang's merge_and_sort_free: every class with a release list merges it into its free list, sorted.
  void MergeAndSortFree();
  // Pops the head of class c's free list.
  int64_t PopHead(int64_t c);
  // free() outside a free group: prepends each class's freed pages, ascending.
  void ApplyFree(const std::vector<int64_t>& locs);
  // Free pages of class r (free + release list lengths): class_free_page_counts()[r].
  int64_t ClassFreePageCount(int64_t r) const;

  AllocatorConfig config_;
  std::vector<std::deque<int64_t>> class_free_pages_;     // per class, head (next page handed out) first
  std::vector<std::deque<int64_t>> class_release_pages_;  // per class (need_sort), head first
  std::vector<uint8_t> allocated_;                        // per logical page: handed out (or reserved)
  bool in_free_group_ = false;
  std::vector<int64_t> free_group_;  // the open group's queued frees, concatenated
};

// Runs a script on a fresh allocator; one result per op. Errors are prefixed with "ops[k].".
StatusOr<std::vector<AllocOpResult>> RunAllocScript(const AllocScript& script);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_ALLOCATOR_H_

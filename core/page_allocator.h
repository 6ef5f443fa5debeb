// What the reference allocator (cpu_ref/allocator.h) and its fast twin (cpu_fast/allocator.h) share: the
// configuration, the result of one alloc_extend, the output-slot formula and every input check with its error
// message (spec §2, SGLang PageInterleavePoolAllocator), so the two agree byte for byte by construction.
#ifndef KVSHARD_CORE_PAGE_ALLOCATOR_H_
#define KVSHARD_CORE_PAGE_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "core/alloc_script.h"
#include "core/gather_plan.h"
#include "core/spec.h"
#include "core/status.h"

namespace kvshard {

// Allocator geometry and options.
struct AllocatorConfig {
  int64_t shard_size = 1;       // N: number of classes (ranks)
  int64_t page_size = 1;        // ps
  int64_t pages_per_rank = 0;   // allocatable local pages per rank: class c starts as [i*N + c, i = 1..]
  bool need_sort = false;       // frees go to release lists; all merged, sorted, when any free list runs short
  bool check_last_loc = false;  // alloc_extend verifies owner(last_loc) against the rotation base
};

// The new pages of one alloc_extend batch.
struct ExtendPages {
  std::vector<int64_t> pages;           // every request's new pages in position order, requests concatenated
  std::vector<int64_t> offsets;         // request i's pages are pages[offsets[i] .. offsets[i+1])
  std::vector<int64_t> rotation_bases;  // the batch's bases with kNewChain resolved
};

// N, ps in range and N*(pages_per_rank+1) <= 2^24.
Status ValidateAllocatorConfig(const AllocatorConfig& config);

// alloc_extend's parallel lists (prefix_lens, seq_lens, rotation_bases, last_locs) have equal lengths.
Status ValidateAllocBatchLengths(const AllocBatch& batch);
// alloc_extend_by_classes' lists (prefix_lens, seq_lens, rotation_bases, page_classes) have equal lengths.
Status ValidateByClassesLengths(const AllocBatch& batch, size_t page_classes);

// The error of request i whose prefix is misaligned, whose seq_len is out of range or that needs no new page.
Status ExtendRequestError(const AllocBatch& batch, size_t i, int64_t page_size);

// Request i's new pages, ceil(seq_len/ps) - prefix_len/ps > 0, or the error naming its field. Inline: the
// fast allocator calls it once per request.
inline StatusOr<int64_t> ExtendRequestNewPages(const AllocBatch& batch, size_t i, int64_t page_size) {
  const int64_t prefix_len = batch.prefix_lens[i], seq_len = batch.seq_lens[i];
  if (prefix_len < 0 || prefix_len >= kMaxSlot || prefix_len % page_size != 0 || seq_len < 0 || seq_len >= kMaxSlot ||
      PositionPages(seq_len, page_size) - prefix_len / page_size <= 0) {
    return ExtendRequestError(batch, i, page_size);
  }
  return PositionPages(seq_len, page_size) - prefix_len / page_size;
}

// A rotation base is kNewChain (SGLang's None) or a class in [0, N). Inline and Status-free: the fast allocator
// checks every request's base.
inline bool IsValidRotationBase(int64_t base, int64_t shard_size) {
  return base == kNewChain || (base >= 0 && base < shard_size);
}
// The error for request i's out-of-range rotation base.
Status RotationBaseError(const AllocBatch& batch, size_t i, int64_t shard_size);

// check_last_loc: the owner of request i's last prefix slot continues the chain's cyclic rotation,
// owner(last_loc) == (base + prefix_pages - 1) % N. Call only for prefix_pages > 0.
Status CheckLastLoc(const AllocBatch& batch, size_t i, int64_t base, int64_t prefix_pages,
                    const AllocatorConfig& config);

// page_classes[i] names one class in [0, N) per new page of request i.
Status ValidatePageClasses(const std::vector<int64_t>& page_classes, size_t i, int64_t new_pages, int64_t shard_size);

// free(locs): every loc is a slot of the pool whose page is handed out (`allocated`, one entry per logical page).
Status ValidateFreeLocs(const std::vector<int64_t>& locs, const AllocatorConfig& config,
                        const std::vector<uint8_t>& allocated);
// ValidateFreeLocs' error for free f of a free group: "locs[i]: ..." becomes "frees[f][i]: ...".
Status InFreeGroup(size_t f, const Status& s);
// The free-group state errors.
Status FreeGroupAlreadyOpen();
Status NoFreeGroupOpen();

// The batch's out_cache_loc: pages[off / ps] * ps + off % ps for off in [0, seq_len - prefix_len),
// requests concatenated.
std::vector<int64_t> ExtendSlots(const AllocBatch& batch, const ExtendPages& pages, int64_t page_size);

}  // namespace kvshard

#endif  // KVSHARD_CORE_PAGE_ALLOCATOR_H_

// Value types of the rotated owner-classed allocator's inputs and outputs (spec §2, SGLang
// PageInterleavePoolAllocator): a batch request, a scripted op stream and per-op results.
#ifndef KVSHARD_CORE_ALLOC_SCRIPT_H_
#define KVSHARD_CORE_ALLOC_SCRIPT_H_

#include <cstdint>
#include <vector>

namespace kvshard {

// rotation_bases entry meaning SGLang's `None`: a new chain, resolved to the least-full class.
inline constexpr int64_t kNewChain = -1;

// One alloc_extend call: parallel per-request lists.
struct AllocBatch {
  std::vector<int64_t> prefix_lens;     // cached tokens per request, multiples of page_size
  std::vector<int64_t> seq_lens;        // tokens after the extend
  std::vector<int64_t> rotation_bases;  // chain rotation base per request, or kNewChain
  std::vector<int64_t> last_locs;       // slot of the last prefix token (owner-congruence check)
  bool operator==(const AllocBatch&) const = default;
};

// Kind of a scripted allocator op.
enum class AllocOpKind { kAlloc, kFree, kFreeGroup };

// One op of an allocator script.
struct AllocOp {
  AllocOpKind kind = AllocOpKind::kAlloc;
  AllocBatch alloc;                         // kAlloc
  std::vector<int64_t> locs;                // kFree: token slots to free
  std::vector<std::vector<int64_t>> frees;  // kFreeGroup: frees queued inside one free group
  bool operator==(const AllocOp&) const = default;
};

// An allocator configuration plus an op stream (`kvshard alloc --script`).
struct AllocScript {
  int64_t shard_size = 1;       // N
  int64_t page_size = 1;        // ps
  int64_t pages_per_rank = 0;   // allocatable local pages per rank (local page 0 is the trash page)
  bool need_sort = false;       // frees go to release lists, merged and sorted on demand
  bool check_last_loc = false;  // verify owner(last_loc) continues the rotation base
  std::vector<AllocOp> ops;
  bool operator==(const AllocScript&) const = default;
};

// The allocator's observable state after one op, plus what an alloc returned.
struct AllocOpResult {
  AllocOpKind kind = AllocOpKind::kAlloc;
  bool ok = true;                               // kAlloc: false = the whole batch was deferred
  std::vector<int64_t> rotation_bases;          // kAlloc and ok: bases with kNewChain resolved
  std::vector<std::vector<int64_t>> pages;      // kAlloc and ok: per request, new pages in position order
  std::vector<int64_t> class_free_page_counts;  // per class: free + release list lengths
  int64_t available_size = 0;                   // N * ps * min(counts): the admission floor
  int64_t aggregate_free_size = 0;              // ps * sum(counts)
  bool operator==(const AllocOpResult&) const = default;
};

// "alloc", "free" or "free_group".
inline const char* AllocOpName(AllocOpKind kind) {
  switch (kind) {
    case AllocOpKind::kAlloc: return "alloc";
    case AllocOpKind::kFree: return "free";
    case AllocOpKind::kFreeGroup: return "free_group";
  }
  return "?";
}

}  // namespace kvshard

#endif  // KVSHARD_CORE_ALLOC_SCRIPT_H_

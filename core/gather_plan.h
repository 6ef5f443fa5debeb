// Value types of one sharded extend batch and its gather plan (spec §3, SGLang begin_shard_extend).
// Plain structs without CUDA: the reference (cpu_ref/) and the GPU backend (gpu/) both produce them,
// so a bit-exact diff of the two is a field-by-field comparison.
#ifndef KVSHARD_CORE_GATHER_PLAN_H_
#define KVSHARD_CORE_GATHER_PLAN_H_

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace kvshard {

// Bound on a pool's dense per-page tables: its N * (pages_per_rank + 1) logical pages (allocator scripts)
// and a gather plan's N * (pages_per_rank + 2) page_pos entries (extend batches).
inline constexpr int64_t kMaxPoolLogicalPages = int64_t{1} << 24;

// One request of an extend batch (its req_to_token row, sampled once per position-page).
struct ExtendRequest {
  int64_t prefix_len = 0;      // cached tokens; must be a multiple of page_size
  int64_t seq_len = 0;         // tokens after this extend, >= prefix_len
  std::vector<int64_t> pages;  // logical page of each position-page: ceil(seq_len / page_size) entries
  bool operator==(const ExtendRequest&) const = default;
};

// An extend batch plus the pool and scratch geometry its plan depends on.
struct ExtendBatch {
  int64_t shard_size = 1;         // N
  int64_t page_size = 1;          // ps
  int64_t pages_per_rank = 0;     // allocatable local pages per rank, excluding the trash page (local page 0)
  int64_t max_prefix_tokens = 0;  // scratch prefix region rows, a multiple of N*ps
  int64_t chunk_tokens = 0;       // scratch chunk region rows, a multiple of ps
  std::vector<ExtendRequest> requests;
  bool operator==(const ExtendBatch&) const = default;
};

// What one rank contributes to each layer's in-place all-gather.
struct RankSend {
  int64_t rank = 0;
  std::vector<int64_t> send_local_pages;  // block_pages local pages: owned prefix pages in slot order, then 0s
  std::vector<int64_t> send_rows;         // send_local_pages expanded to rows p*ps + [0, ps)
  bool operator==(const RankSend&) const = default;
};

// A batch's gather plan; identical on every rank (mirrored), so it is computed once for all ranks.
struct GatherPlan {
  int64_t shard_size = 1;             // N of the batch (echoed for translate)
  int64_t page_size = 1;              // ps of the batch (echoed for translate)
  int64_t block_pages = 0;            // sum_i ceil(K_i / N): pages every rank sends per layer
  int64_t n_prefix_slots = 0;         // N * block_pages: the prefix region pages the all-gather fills
  int64_t chunk_base_page = 0;        // absolute scratch page of chunk page 0: max_prefix_tokens / ps
  int64_t trash_page = 0;             // absolute scratch page of the trash page: (max_prefix + chunk_tokens) / ps
  int64_t page_pos_size = 0;          // logical pages page_pos covers: N * (pages_per_rank + 2), as SGLang's _page_pos
  std::vector<int64_t> mapped_pages;  // logical pages not mapped to the trash page, ascending
  std::vector<int64_t> mapped_scratch_pages;  // page_pos of mapped_pages[i]: absolute scratch page
  std::vector<RankSend> ranks;                // one per rank, in rank order
  bool operator==(const GatherPlan&) const = default;
};

// Number of position-pages of a request: ceil(seq_len / page_size).
inline int64_t PositionPages(int64_t seq_len, int64_t page_size) { return (seq_len + page_size - 1) / page_size; }

// Structural validation (geometry, lengths, page ranges); names the field, e.g. "requests[2].seq_len".
// Semantic checks (page alignment, cyclic owners, capacity) belong to the plan builder.
// Equivalent to ValidateExtendBatchGeometry followed by ValidateExtendRequest for each request in order (the
// first fault wins).
Status ValidateExtendBatch(const ExtendBatch& batch);
// The batch-level part: placement spec, pages_per_rank, max_prefix_tokens, chunk_tokens.
Status ValidateExtendBatchGeometry(const ExtendBatch& batch);
// The part for requests[i] (prefix_len, seq_len, page count, page range); assumes the geometry is valid.
Status ValidateExtendRequest(const ExtendBatch& batch, size_t i);

// The plan builders' semantic errors (spec §3's fail-fast checks), worded once for cpu_ref/ and cpu_fast/:
// requests[i]'s prefix is not page-aligned;
[[gnu::cold]] Status MisalignedPrefixError(size_t i, int64_t prefix_len, int64_t page_size);
// requests[i]'s prefix pages (its first prefix_len / ps pages) have non-cyclic owners (message: owners[:16]);
[[gnu::cold]] Status NonCyclicPrefixError(size_t i, std::span<const int64_t> prefix_pages, int64_t shard_size);
// the padded gather span (N * block_pages * ps tokens) exceeds max_prefix_tokens;
[[gnu::cold]] Status PrefixCapacityError(int64_t prefix_pages, int64_t prefix_tokens, int64_t max_prefix_tokens);
// the chunk pages' tokens exceed chunk_tokens;
[[gnu::cold]] Status ChunkCapacityError(int64_t chunk_page_tokens, int64_t chunk_tokens);
// requests[i].pages[j], a chunk page, is already in the plan.
[[gnu::cold]] Status StaleChunkPageError(size_t i, size_t j, int64_t page);

// Dense page_pos: the absolute scratch page of every logical page [0, page_pos_size); trash_page if unmapped.
// (cpu_ref/ and cpu_fast/ re-export it as ref::DensePagePos and fast::DensePagePos.)
std::vector<int64_t> DensePagePos(const GatherPlan& plan);

// DensePagePos kept from plan to plan: Update makes pos() DensePagePos(plan) by rewriting only the pages the last
// plan mapped (every entry when the size or the trash page changed), so a batch of a large pool costs its own pages,
// not the pool's.
class DensePagePosCache {
 public:
  const std::vector<int64_t>& Update(const GatherPlan& plan);
  const std::vector<int64_t>& pos() const { return pos_; }

 private:
  std::vector<int64_t> pos_;
  std::vector<int64_t> mapped_;  // the pages the last plan mapped
  int64_t trash_ = 0;
};

// translate(loc) = page_pos[loc // ps] * ps + loc % ps; `field[i]` errors for locs outside [0, page_pos_size * ps).
// (Re-exported as ref::Translate and fast::Translate.)
StatusOr<std::vector<int64_t>> Translate(const GatherPlan& plan, const std::vector<int64_t>& locs,
                                         const char* field = "locs");

}  // namespace kvshard

#endif  // KVSHARD_CORE_GATHER_PLAN_H_

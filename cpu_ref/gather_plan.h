// Reference gather plan of a sharded extend batch (spec §3, SGLang begin_shard_extend) and the
// loc -> scratch-row translation. Builds the plan of every rank at once (it is mirrored).
#ifndef KVSHARD_CPU_REF_GATHER_PLAN_H_
#define KVSHARD_CPU_REF_GATHER_PLAN_H_

#include <cstdint>
#include <vector>

#include "core/gather_plan.h"
#include "core/status.h"

namespace kvshard::ref {

// Builds gather plans; keeps its dedup bitmaps between batches so a build costs O(batch pages + pool/64).
class GatherPlanner {
 public:
  // Builds `batch`'s plan into *plan, reusing its vectors. Errors, in SGLang's order: malformed batch
  // (names the field), then per request a misaligned prefix ("page-aligned") or non-cyclic prefix owners
  // ("cyclic"), then scratch overflow ("capacity"), then chunk pages that are not fresh. With
  // with_send_rows = false the RankSend::send_rows stay empty (they are send_local_pages expanded).
  Status Build(const ExtendBatch& batch, GatherPlan* plan, bool with_send_rows = true);

 private:
  void ClearBits();
  std::vector<uint64_t> prefix_bits_;  // per logical page: in the batch's prefix set; all zero between builds
  std::vector<uint64_t> chunk_bits_;   // per logical page: a chunk page; all zero between builds
  std::vector<int64_t> slot_;          // per logical page: its absolute scratch page (valid where a bit is set)
  std::vector<uint32_t> within_;       // per owner: prefix pages placed so far (< 2^24 pages)
  std::vector<int64_t*> send_;         // per owner: its send_local_pages
};

// One-shot GatherPlanner::Build with send rows.
StatusOr<GatherPlan> BuildGatherPlan(const ExtendBatch& batch);

// Dense page_pos: the absolute scratch page of every logical page [0, page_pos_size); trash_page if unmapped.
std::vector<int64_t> DensePagePos(const GatherPlan& plan);

// translate(loc) = page_pos[loc // ps] * ps + loc % ps; `field[i]` errors for locs outside
// [0, page_pos_size * ps).
StatusOr<std::vector<int64_t>> Translate(const GatherPlan& plan, const std::vector<int64_t>& locs,
                                         const char* field = "locs");

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_GATHER_PLAN_H_

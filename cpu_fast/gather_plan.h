// Fast gather plan of a sharded extend batch: the same API, plans and errors as cpu_ref/gather_plan.h
// (differential-tested in props/fast_vs_ref_props_test.cc), built from bitmaps without a sort.
#ifndef KVSHARD_CPU_FAST_GATHER_PLAN_H_
#define KVSHARD_CPU_FAST_GATHER_PLAN_H_

#include <cstdint>
#include <vector>

#include "core/gather_plan.h"
#include "core/status.h"

namespace kvshard::fast {

// Builds gather plans; keeps its dedup bitmaps between batches so a build costs O(batch pages + span/64) (the
// span: the logical pages between the batch's lowest and highest), or O(batch pages log) when the span is sparse.
class GatherPlanner {
 public:
  // Builds `batch`'s plan into *plan, reusing its vectors: ref::GatherPlanner::Build's plan and error (code
  // and message) for every batch; the structural checks are fused into the first pass over the pages. With
  // with_send_rows = false the RankSend::send_rows stay empty (they are send_local_pages expanded).
  Status Build(const ExtendBatch& batch, GatherPlan* plan, bool with_send_rows = true);

 private:
  void ClearBits();
  std::vector<uint64_t> prefix_bits_;  // per logical page: in the batch's prefix set; all zero between builds
  std::vector<uint64_t> chunk_bits_;   // per logical page: a chunk page; all zero between builds
  std::vector<int64_t> written_;       // a sparse build's bitmap words, ascending
  std::vector<int64_t> slot_;          // per logical page: its absolute scratch page (valid where a bit is set)
  std::vector<uint32_t> within_;       // per owner: prefix pages placed so far (< 2^24 pages)
  std::vector<int64_t*> send_;         // per owner: its send_local_pages
};

// One-shot GatherPlanner::Build with send rows.
StatusOr<GatherPlan> BuildGatherPlan(const ExtendBatch& batch);

// DensePagePos and Translate: core/gather_plan.h's, under this namespace too (callers switch by namespace).
using ::kvshard::DensePagePos;
using ::kvshard::Translate;

}  // namespace kvshard::fast

#endif  // KVSHARD_CPU_FAST_GATHER_PLAN_H_

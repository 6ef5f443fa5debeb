// Fast CP batch split plan: ref::BuildBatchPageAlignedInSeqSplitPlan's API, fields and errors (differential-
// tested in props/fast_vs_ref_props_test.cc), written straight into flat tables with closed-form segment
// tables and reciprocal divisions, and able to reuse the plan's storage.
#ifndef KVSHARD_CPU_FAST_CP_SPLIT_H_
#define KVSHARD_CPU_FAST_CP_SPLIT_H_

#include <cstdint>

#include "core/cp_plan.h"
#include "core/status.h"

namespace kvshard::fast {

// SGLang build_batch_page_aligned_in_seq_split_plan: every CPSharedKVBatchPlan field for rank cp_rank.
// Errors: InvalidArgument naming the field (SGLang ValueErrors), or the fail-fast tags
// batch_gt1_empty_extend, batch_gt1_non_page_aligned_prefix, batch_gt1_page_split_fallback.
StatusOr<CPSharedKVBatchPlan> BuildBatchPageAlignedInSeqSplitPlan(const Int64List& extend_lens,
                                                                  const Int64List& prefix_lens, int64_t page_size,
                                                                  int64_t cp_size, int64_t cp_rank);

// The same into *plan, reusing its storage (a scheduler rebuilding the plan every step allocates nothing
// once the batch stops growing). On error *plan is unspecified.
Status BuildBatchPageAlignedInSeqSplitPlanInto(const Int64List& extend_lens, const Int64List& prefix_lens,
                                               int64_t page_size, int64_t cp_size, int64_t cp_rank,
                                               CPSharedKVBatchPlan* plan);

}  // namespace kvshard::fast

#endif  // KVSHARD_CPU_FAST_CP_SPLIT_H_

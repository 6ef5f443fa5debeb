// Reference gather plan of a sharded extend batch (spec §3, SGLang begin_shard_extend) and the
// loc -> scratch-row translation. Builds the plan of every rank at once (it is mirrored).
#ifndef KVSHARD_CPU_REF_GATHER_PLAN_H_
#define KVSHARD_CPU_REF_GATHER_PLAN_H_

#include <cstdint>
#include <vector>

#include "core/gather_plan.h"
#include "core/status.h"

namespace kvshard::ref {

// Builds gather plans, straight from spec §3 (the optimized planner with the same API is fast::GatherPlanner in
// cpu_fast/, differential-tested against this one).
class GatherPlanner {
 public:
  // Builds `batch`'s plan into *plan. Errors, in SGLang's order: malformed batch (ValidateExtendBatch, naming
  // the field), then per request a misaligned prefix ("page-aligned") or non-cyclic prefix owners ("cyclic"),
  // then scratch overflow ("capacity"), then chunk pages that are not fresh. With with_send_rows = false the
  // RankSend::send_rows stay empty (they are send_local_pages expanded).
  Status Build(const ExtendBatch& batch, GatherPlan* plan, bool with_send_rows = true);
};

// One-shot GatherPlanner::Build with send rows.
StatusOr<GatherPlan> BuildGatherPlan(const ExtendBatch& batch);

// DensePagePos and Translate: core/gather_plan.h's, under this namespace too (callers switch by namespace).
using ::kvshard::DensePagePos;
using ::kvshard::Translate;

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_GATHER_PLAN_H_

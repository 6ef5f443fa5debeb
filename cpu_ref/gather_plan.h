// Reference gather plan of a sharded extend batch (spec §3, SGLang begin_shard_extend) and the
// loc -> scratch-row translation. Builds the plan of every rank at once (it is mirrored).
#ifndef KVSHARD_CPU_REF_GATHER_PLAN_H_
#define KVSHARD_CPU_REF_GATHER_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/gather_plan.h"
#include "core/recycling_resource.h"
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

  GatherPlanner() = default;
  // A copy plans alike and keeps nodes of its own.
  GatherPlanner(const GatherPlanner&) : GatherPlanner() {}
  GatherPlanner& operator=(const GatherPlanner&) { return *this; }

 private:
  // Where Build's page map and page set keep their nodes: freed into it when Build returns, and taken again by the
  // next Build (memory only, every Build starts from empty containers). A batch's prefix and chunk pages are a node
  // each, so a planner that builds one plan after another makes no allocation for them once warm.
  std::unique_ptr<RecyclingResource> nodes_ = std::make_unique<RecyclingResource>();
};

// GatherPlanner::Build with send rows, by a planner of the calling thread's.
StatusOr<GatherPlan> BuildGatherPlan(const ExtendBatch& batch);

// DensePagePos and Translate: core/gather_plan.h's, under this namespace too (callers switch by namespace).
using ::kvshard::DensePagePos;
using ::kvshard::Translate;

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_GATHER_PLAN_H_

// The gather-plan oracle shared by the batch-JSON and gather-planner fuzz targets: the reference and the fast
// planner agree (same error, or the same plan and translate), and an accepted plan is well formed.
#ifndef KVSHARD_FUZZ_GATHER_PLAN_CHECK_H_
#define KVSHARD_FUZZ_GATHER_PLAN_CHECK_H_

#include <cstdint>
#include <vector>

#include "core/gather_plan.h"

namespace kvshard::fuzz {

// Builds `batch`'s plan with ref:: and fast:: and translates `locs` with both; aborts on any disagreement or
// on a plan that breaks an invariant (every page of the batch mapped once, distinct scratch pages, each
// prefix page in its owner's all-gather block at its send slot, send_rows = send_local_pages expanded).
// Returns true when the batch was accepted.
bool CheckGatherPlan(const ExtendBatch& batch, const std::vector<int64_t>& locs);

}  // namespace kvshard::fuzz

#endif  // KVSHARD_FUZZ_GATHER_PLAN_CHECK_H_

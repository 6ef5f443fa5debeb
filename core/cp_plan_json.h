// JSON writers for the CP plan types under SGLang's field names (tuples as arrays, dataclass field order).
#ifndef KVSHARD_CORE_CP_PLAN_JSON_H_
#define KVSHARD_CORE_CP_PLAN_JSON_H_

#include <functional>

#include "core/cp_plan.h"
#include "core/json.h"

namespace kvshard {

// PageAlignedInSeqSplitInfo as an object with its dataclass field names.
Json ToJson(const PageAlignedInSeqSplitInfo& info);
// Every CPSharedKVBatchPlan field; request_split_infos as objects, row spans as [start, length].
Json ToJson(const CPSharedKVBatchPlan& plan);
// The fields named by the keys of the object `only` (every field when null), in the same order and form.
Json ToJson(const CPSharedKVBatchPlan& plan, const Json* only);
// Calls `field(key, value)` for each field ToJson(plan, only) writes, in its order, building one value at a
// time (so a large plan can be written field by field).
void ForEachJsonField(const CPSharedKVBatchPlan& plan, const Json* only,
                      const std::function<void(const char* key, Json value)>& field);
// The list/scalar NSAContextParallelMetadata fields (device tensors as lists; no batch_plan copy).
Json ToJson(const NSAContextParallelMetadata& metadata);

}  // namespace kvshard

#endif  // KVSHARD_CORE_CP_PLAN_JSON_H_

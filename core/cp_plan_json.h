// JSON writers for the CP plan types under SGLang's field names (tuples as arrays, dataclass field order).
#ifndef KVSHARD_CORE_CP_PLAN_JSON_H_
#define KVSHARD_CORE_CP_PLAN_JSON_H_

#include <cstdint>
#include <functional>
#include <string>

#include "core/cp_plan.h"
#include "core/json.h"

namespace kvshard {

// PageAlignedInSeqSplitInfo as an object with its dataclass field names.
Json ToJson(const PageAlignedInSeqSplitInfo& info);
// Every CPSharedKVBatchPlan field; request_split_infos as objects, row spans as [start, length].
Json ToJson(const CPSharedKVBatchPlan& plan);
// The fields named by the keys of the object `only` (every field when null), in the same order and form.
Json ToJson(const CPSharedKVBatchPlan& plan, const Json* only);
// Receives the CPSharedKVBatchPlan fields ForEachPlanField visits, each as its own type.
class PlanFieldVisitor {
 public:
  virtual ~PlanFieldVisitor() = default;
  virtual void Bool(const char* key, bool value) = 0;
  virtual void Int(const char* key, int64_t value) = 0;
  virtual void String(const char* key, const std::string& value) = 0;
  virtual void Ints(const char* key, const Int64List& value) = 0;
  virtual void Table(const char* key, const Int64Table& value) = 0;
  // request_split_infos and the row spans, as the JSON ToJson writes for them.
  virtual void Other(const char* key, Json value) = 0;
};
// Visits each field ToJson(plan, only) writes, in its order, with its value's own type (a replay answer checks
// them without building JSON).
void ForEachPlanField(const CPSharedKVBatchPlan& plan, const Json* only, PlanFieldVisitor& visitor);
// Calls `field(key, value)` for each field ToJson(plan, only) writes, in its order, building one value at a
// time (so a large plan can be written field by field).
void ForEachJsonField(const CPSharedKVBatchPlan& plan, const Json* only,
                      const std::function<void(const char* key, Json value)>& field);
// The list/scalar NSAContextParallelMetadata fields (device tensors as lists; no batch_plan copy).
Json ToJson(const NSAContextParallelMetadata& metadata);

}  // namespace kvshard

#endif  // KVSHARD_CORE_CP_PLAN_JSON_H_

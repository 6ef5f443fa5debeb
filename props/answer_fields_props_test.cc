// The typed answers of split and gather_plan records (replay/results.h) are the commands' --json: on random batches,
// InSeqSplitFields(split, only) and GatherPlanFields(plan, rows, with_rows, only) as JSON are byte for byte what
// core's writers print (ToJson(plan, only) plus nsa_cp_metadata; GatherPlanToJson plus scratch_rows), for a null
// `only`, every subset of the keys, and keys the answer lacks. A replay checks a record's expect against these fields
// without building JSON (field_answer_props_test pins that check to MatchExpect), so a field with another value,
// type, name or place here would change what a trace's expect is checked against.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/cp_plan_json.h"
#include "core/gather_plan.h"
#include "core/json.h"
#include "core/pool_json.h"
#include "cpu_ref/gather_plan.h"
#include "props/cp_generators.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "replay/results.h"

namespace kvshard::props {
namespace {

// Null (every field), or an object naming a random subset of `full`'s keys and, sometimes, a key it lacks.
std::optional<Json> DrawOnly(const Json& full) {
  if (*rc::gen::inRange(0, 4) == 0) return std::nullopt;
  Json only = Json::object();
  for (const auto& item : full.items()) {
    if (*rc::gen::inRange(0, 3) == 0) only[item.key()] = 0;
  }
  if (*rc::gen::inRange(0, 4) == 0) only["not_a_field"] = 0;
  return only;
}

KVSHARD_PROP(AnswerFieldsProps, InSeqSplitFieldsAreTheSplitJson, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const int64_t rank = *rc::gen::inRange<int64_t>(0, c.cp_size);
  const replay::InSeqSplit split =
      RC_VALUE(replay::BuildInSeqSplit(c.extend_lens, c.prefix_lens, c.page_size, c.cp_size, rank));
  Json full = ToJson(split.plan);
  full["nsa_cp_metadata"] = ToJson(split.metadata);
  const std::optional<Json> only = DrawOnly(full);
  const Json* o = only ? &*only : nullptr;
  Json want = ToJson(split.plan, o);
  if (o == nullptr || o->contains("nsa_cp_metadata")) want["nsa_cp_metadata"] = ToJson(split.metadata);
  RC_ASSERT(replay::InSeqSplitFields(split, o).ToJson().dump() == want.dump());
  RC_ASSERT(replay::InSeqSplitJson(split, o).dump() == want.dump());
  if (o == nullptr) RC_ASSERT(want.dump() == full.dump());
}

KVSHARD_PROP(AnswerFieldsProps, GatherPlanFieldsAreTheGatherPlanJson, ()) {
  const ExtendBatch b = DrawValidBatch();
  const GatherPlan plan = RC_VALUE(ref::BuildGatherPlan(b));
  const int64_t slots = b.shard_size * b.page_size * (b.pages_per_rank + 1);
  const std::vector<int64_t> locs =
      *rc::gen::container<std::vector<int64_t>>(rc::gen::inRange<int64_t>(0, slots));  // empty included
  const StatusOr<std::vector<int64_t>> rows = ref::Translate(plan, locs);
  const bool with_rows = rows.ok() && *rc::gen::arbitrary<bool>();
  Json full = GatherPlanToJson(plan);
  if (with_rows) full["scratch_rows"] = *rows;
  const std::optional<Json> only = DrawOnly(full);
  const Json* o = only ? &*only : nullptr;
  Json want = full;
  if (o != nullptr && !o->contains("ranks")) want.erase("ranks");  // the one field `only` leaves out
  const std::vector<int64_t> no_rows;
  const replay::FieldAnswer got = replay::GatherPlanFields(plan, with_rows ? *rows : no_rows, with_rows, o);
  RC_ASSERT(got.ToJson().dump() == want.dump());
  RC_ASSERT(replay::GatherPlanJson(plan, with_rows ? *rows : no_rows, with_rows).dump() == full.dump());
}

}  // namespace
}  // namespace kvshard::props

// The executors of the plan records: place, split (in-seq, round-robin, token-balanced), rerange and
// gather_plan, each through replay/results.h, so expect is checked against exactly what the command prints.
#include <vector>

#include "core/pool_json.h"
#include "core/spec.h"
#include "cpu_ref/placement.h"
#include "replay/records.h"
#include "replay/results.h"

namespace kvshard::replay {
namespace {

std::vector<int64_t> Ints(const Json& rec, const char* key) {
  return rec.contains(key) ? JsonInts(rec.at(key)) : std::vector<int64_t>{};
}

int64_t Int(const Json& rec, const char* key, int64_t fallback = 0) {
  return rec.contains(key) ? rec.at(key).get<int64_t>() : fallback;
}

}  // namespace

StatusOr<Json> RunPlace(const Json& rec) {
  const PlacementSpec spec{.shard_size = Int(rec, "shard_size"), .page_size = Int(rec, "page_size")};
  KVSHARD_ASSIGN_OR_RETURN(PlacementResult r, ref::PlaceLocs(spec, Int(rec, "rank"), Ints(rec, "locs")));
  return PlacementJson(r);
}

StatusOr<FieldAnswer> RunSplit(const Json& rec, const Json* only, Impl impl) {
  const std::string mode = rec.contains("mode") ? rec.at("mode").get<std::string>() : "in-seq";
  const std::vector<int64_t> extend = Ints(rec, "extend_lens");
  if (mode == "round-robin") return RoundRobinSplitFields(extend, Int(rec, "cp_size"), Int(rec, "cp_rank"));
  if (mode == "token-balanced") return TokenBalancedSplitFields(Int(rec, "total_len"), Int(rec, "cp_size"));
  const std::vector<int64_t> prefix =
      rec.contains("prefix_lens") ? Ints(rec, "prefix_lens") : std::vector<int64_t>(extend.size(), 0);
  KVSHARD_ASSIGN_OR_RETURN(InSeqSplit s, BuildInSeqSplit(extend, prefix, Int(rec, "page_size"), Int(rec, "cp_size"),
                                                         Int(rec, "cp_rank"), impl));
  return InSeqSplitFields(s, only);
}

StatusOr<FieldAnswer> RunRerange(const Json& rec, Impl impl) {
  const std::vector<int64_t> extend = Ints(rec, "extend_lens");
  const std::vector<int64_t> prefix =
      rec.contains("prefix_lens") ? Ints(rec, "prefix_lens") : std::vector<int64_t>(extend.size(), 0);
  KVSHARD_ASSIGN_OR_RETURN(Rerange r, BuildRerange(Int(rec, "cp_size"), Int(rec, "page_size"), extend, prefix, impl));
  return RerangeFields(r);
}

StatusOr<FieldAnswer> RunGatherPlan(const Json& rec, const Json* only, Impl impl) {
  StatusOr<ExtendBatch> batch = ExtendBatchFromJson(rec.at("batch"));
  if (!batch.ok()) return Annotate(batch.status(), "batch.");
  KVSHARD_ASSIGN_OR_RETURN(PlanAndRows r, BuildGatherPlanAndRows(*batch, Ints(rec, "translate"), "translate", impl));
  return GatherPlanFields(r.plan, r.rows, rec.contains("translate"), only);
}

}  // namespace kvshard::replay

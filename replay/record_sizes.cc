// The sizes of the records whose answer a few bytes can make large: a length that becomes a list (extend_lens of
// 10^11 tokens, a target_len, a pool of 10^11 pages), checked against --max-memory through the same MemoryBudget
// figures as the command each record mirrors, before the record runs. The lists are summed in place (no copy).
#include <algorithm>
#include <string>

#include "core/gather_plan.h"
#include "core/pool_json.h"
#include "replay/records.h"

namespace kvshard::replay {
namespace {

int64_t Int(const Json& rec, const char* key, int64_t fallback) {
  return rec.contains(key) ? rec.at(key).get<int64_t>() : fallback;
}

// A length list's request count, tokens and pages (TotalTokens / TotalPages over the record's array).
struct Lens {
  int64_t batch = 0, tokens = 0, pages = 0;
};

Lens LensOf(const Json& rec, const char* key, int64_t page_size) {
  Lens lens;
  if (!rec.contains(key)) return lens;
  page_size = std::max<int64_t>(page_size, 1);
  for (const Json& v : rec.at(key)) {
    const int64_t e = v.get<int64_t>();
    ++lens.batch;
    if (e <= 0) continue;
    lens.tokens = SatAdd(lens.tokens, e);
    lens.pages = SatAdd(lens.pages, e / page_size + (e % page_size != 0));
  }
  return lens;
}

}  // namespace

Status SizeSplit(const Json& rec, const MemoryBudget& budget) {
  const std::string mode = rec.contains("mode") ? rec.at("mode").get<std::string>() : "in-seq";
  const int64_t cp_size = Int(rec, "cp_size", 1);
  const Lens lens = LensOf(rec, "extend_lens", 1);
  if (mode == "round-robin") return budget.RoundRobinSplit("extend_lens", lens.tokens, cp_size);
  if (mode == "token-balanced") return budget.ValueList("cp_size", "token-balanced split", CpSegments(1, cp_size));
  return budget.SplitPlan("extend_lens", lens.batch, cp_size, /*json=*/true);
}

Status SizeRerange(const Json& rec, const MemoryBudget& budget) {
  const Lens lens = LensOf(rec, "extend_lens", 1);
  return budget.Rerange("extend_lens", lens.batch, lens.tokens, Int(rec, "page_size", 1), Int(rec, "cp_size", 1),
                        /*source_rows=*/true, /*device_rows=*/false);
}

Status SizeGatherPlan(const Json& rec, const MemoryBudget& budget) {
  StatusOr<ExtendBatch> batch = ExtendBatchFromJson(rec.at("batch"));
  if (!batch.ok()) return Status::Ok();  // the record's error, when it runs
  return budget.GatherPlan("batch", *batch, /*device=*/false, /*json=*/true);
}

Status SizePageOwners(const Json& rec, const MemoryBudget& budget) {
  const Lens lens = LensOf(rec, "extend_lens", Int(rec, "page_size", 1));
  return budget.PageOwners("extend_lens", lens.batch, lens.pages, Int(rec, "cp_size", 1));
}

Status SizeCpDirectWrite(const Json& rec, const MemoryBudget& budget) {
  KVSHARD_RETURN_IF_ERROR(SizePageOwners(rec, budget));
  return budget.DirectWriteLocs("out_cache_loc", static_cast<int64_t>(rec.at("out_cache_loc").size()));
}

Status SizeCpSplitPlan(const Json& rec, const MemoryBudget& budget) {
  return budget.SplitPlan("extend_lens", LensOf(rec, "extend_lens", 1).batch, Int(rec, "cp_size", 1),
                          /*json=*/false);
}

Status SizeLastTokens(const Json& rec, const MemoryBudget& budget) {
  const bool in_seq = !rec.contains("mode") || rec.at("mode") == "in-seq";  // the other modes build no plan
  return in_seq ? SizeCpSplitPlan(rec, budget) : Status::Ok();
}

Status SizePadRequest(const Json& rec, const MemoryBudget& budget) {
  return budget.ValueList("target_len", "padded rows",
                          SatMul(std::max<int64_t>(Int(rec, "target_len", 0), 0), Int(rec, "row_width", 1)));
}

}  // namespace kvshard::replay

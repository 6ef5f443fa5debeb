// The commands' --json results from typed inputs, computed by the reference model (or, with Impl::kFast, the
// plans by cpu_fast/).
#include "replay/results.h"

#include <utility>

#include "core/cp_plan_json.h"
#include "core/pool_json.h"
#include "cpu_fast/cp_split.h"
#include "cpu_fast/gather_plan.h"
#include "cpu_ref/cp_split.h"
#include "cpu_ref/gather_plan.h"

namespace kvshard::replay {

Json PlacementJson(const PlacementResult& r) {
  Json j;
  j["owner"] = r.owner;
  j["local_index"] = r.local_index;
  j["local_mask"] = r.local_mask;
  j["filter_local"] = r.filter_local;
  return j;
}

StatusOr<InSeqSplit> BuildInSeqSplit(const std::vector<int64_t>& extend_lens, const std::vector<int64_t>& prefix_lens,
                                     int64_t page_size, int64_t cp_size, int64_t cp_rank, Impl impl) {
  InSeqSplit s;
  if (impl == Impl::kFast) {
    KVSHARD_ASSIGN_OR_RETURN(
        s.plan, fast::BuildBatchPageAlignedInSeqSplitPlan(extend_lens, prefix_lens, page_size, cp_size, cp_rank));
  } else {
    KVSHARD_ASSIGN_OR_RETURN(
        s.plan, ref::BuildBatchPageAlignedInSeqSplitPlan(extend_lens, prefix_lens, page_size, cp_size, cp_rank));
  }
  KVSHARD_ASSIGN_OR_RETURN(s.metadata, ref::BuildBatchMetadataFromPlan(s.plan));
  return s;
}

Json InSeqSplitJson(const InSeqSplit& split, const Json* only) {
  Json j = ToJson(split.plan, only);
  if (only == nullptr || only->contains("nsa_cp_metadata")) j["nsa_cp_metadata"] = ToJson(split.metadata);
  return j;
}

StatusOr<Json> RoundRobinSplitJson(const std::vector<int64_t>& extend_lens, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_ASSIGN_OR_RETURN(ref::RoundRobinQSeqs r, ref::RoundRobinSplitQSeqs(extend_lens, cp_size, cp_rank));
  Json j;
  j["q_lens"] = r.q_lens;
  j["bs_idx"] = r.bs_idx;
  return j;
}

StatusOr<Json> TokenBalancedSplitJson(int64_t total_len, int64_t cp_size) {
  KVSHARD_ASSIGN_OR_RETURN(Int64List s, ref::BuildTokenBalancedInSeqSplitList(total_len, cp_size));
  Json j;
  j["split_list"] = s;
  return j;
}

StatusOr<Rerange> BuildRerange(int64_t cp_size, int64_t page_size, const std::vector<int64_t>& extend_lens,
                               const std::vector<int64_t>& prefix_lens, Impl impl, bool with_source_rows) {
  KVSHARD_ASSIGN_OR_RETURN(InSeqSplit s, BuildInSeqSplit(extend_lens, prefix_lens, page_size, cp_size, 0, impl));
  Rerange r;
  r.max_rank_token = s.metadata.max_rank_token();
  r.per_rank_actual_token = s.metadata.per_rank_actual_token;
  r.per_rank_tokens = BuildRerangeTables(s.plan.request_split_lists, cp_size).per_rank_tokens;
  if (with_source_rows) {
    KVSHARD_ASSIGN_OR_RETURN(r.source_rows,
                             ref::BatchRerangeSourceRows(s.plan.request_split_lists, cp_size, r.max_rank_token));
  }
  r.plan = std::move(s.plan);
  return r;
}

FieldAnswer RerangeFields(const Rerange& r) {
  FieldAnswer a;
  a.Add("max_rank_token", r.max_rank_token);
  a.Add("per_rank_tokens", r.per_rank_tokens);
  a.Add("source_rows", r.source_rows);
  a.Add("compute_padding_enabled", static_cast<bool>(r.plan.compute_padding_enabled));
  a.Add("per_rank_actual_token", r.per_rank_actual_token);
  return a;
}

Json RerangeJson(const Rerange& r) { return RerangeFields(r).ToJson(); }

StatusOr<PlanAndRows> BuildGatherPlanAndRows(const ExtendBatch& batch, const std::vector<int64_t>& locs,
                                             const char* field, Impl impl) {
  PlanAndRows r;
  if (impl == Impl::kFast) {
    KVSHARD_ASSIGN_OR_RETURN(r.plan, fast::BuildGatherPlan(batch));
    KVSHARD_ASSIGN_OR_RETURN(r.rows, fast::Translate(r.plan, locs, field));
  } else {
    KVSHARD_ASSIGN_OR_RETURN(r.plan, ref::BuildGatherPlan(batch));
    KVSHARD_ASSIGN_OR_RETURN(r.rows, ref::Translate(r.plan, locs, field));
  }
  return r;
}

Json GatherPlanJson(const GatherPlan& plan, const std::vector<int64_t>& rows, bool with_rows) {
  Json j = GatherPlanToJson(plan);
  if (with_rows) j["scratch_rows"] = rows;
  return j;
}

}  // namespace kvshard::replay

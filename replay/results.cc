// The commands' --json results from typed inputs, computed by the reference model (or, with Impl::kFast, the
// plans by cpu_fast/).
#include "replay/results.h"

#include <string>
#include <utility>
#include <vector>

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

namespace {

// Each visited plan field added to an answer with its own type.
class AnswerFieldVisitor final : public PlanFieldVisitor {
 public:
  explicit AnswerFieldVisitor(FieldAnswer* answer) : answer_(answer) {}
  void Bool(const char* key, bool value) override { answer_->Add(key, value); }
  void Int(const char* key, int64_t value) override { answer_->Add(key, value); }
  void String(const char* key, const std::string& value) override { answer_->Add(key, value); }
  void Ints(const char* key, const Int64List& value) override { answer_->Add(key, value); }
  void Table(const char* key, const Int64Table& value) override { answer_->Add(key, value.ToRows()); }
  void Other(const char* key, Json value) override { answer_->Add(key, std::move(value)); }

 private:
  FieldAnswer* answer_;
};

}  // namespace

FieldAnswer InSeqSplitFields(const InSeqSplit& split, const Json* only) {
  FieldAnswer a;
  AnswerFieldVisitor visitor(&a);
  ForEachPlanField(split.plan, only, visitor);
  if (only == nullptr || only->contains("nsa_cp_metadata")) a.Add("nsa_cp_metadata", ToJson(split.metadata));
  return a;
}

Json InSeqSplitJson(const InSeqSplit& split, const Json* only) { return InSeqSplitFields(split, only).ToJson(); }

StatusOr<FieldAnswer> RoundRobinSplitFields(const std::vector<int64_t>& extend_lens, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_ASSIGN_OR_RETURN(ref::RoundRobinQSeqs r, ref::RoundRobinSplitQSeqs(extend_lens, cp_size, cp_rank));
  FieldAnswer a;
  a.Add("q_lens", std::move(r.q_lens));
  a.Add("bs_idx", std::move(r.bs_idx));
  return a;
}

StatusOr<Json> RoundRobinSplitJson(const std::vector<int64_t>& extend_lens, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_ASSIGN_OR_RETURN(FieldAnswer a, RoundRobinSplitFields(extend_lens, cp_size, cp_rank));
  return a.ToJson();
}

StatusOr<FieldAnswer> TokenBalancedSplitFields(int64_t total_len, int64_t cp_size) {
  KVSHARD_ASSIGN_OR_RETURN(Int64List s, ref::BuildTokenBalancedInSeqSplitList(total_len, cp_size));
  FieldAnswer a;
  a.Add("split_list", std::move(s));
  return a;
}

StatusOr<Json> TokenBalancedSplitJson(int64_t total_len, int64_t cp_size) {
  KVSHARD_ASSIGN_OR_RETURN(FieldAnswer a, TokenBalancedSplitFields(total_len, cp_size));
  return a.ToJson();
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

FieldAnswer GatherPlanFields(const GatherPlan& plan, const Json* only) {
  FieldAnswer a;
  a.Add("block_pages", plan.block_pages);
  a.Add("n_prefix_slots", plan.n_prefix_slots);
  a.Add("trash_page", plan.trash_page);
  a.Add("chunk_base_page", plan.chunk_base_page);
  std::vector<int64_t> page_pos(2 * plan.mapped_pages.size());  // [page, scratch page] pairs, in one vector
  for (size_t i = 0; i < plan.mapped_pages.size(); ++i) {
    page_pos[2 * i] = plan.mapped_pages[i];
    page_pos[2 * i + 1] = plan.mapped_scratch_pages[i];
  }
  a.AddRows("page_pos", std::move(page_pos), 2);
  if (only == nullptr || only->contains("ranks")) {
    std::vector<FieldAnswer> ranks(plan.ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
      ranks[i].Add("rank", plan.ranks[i].rank);
      ranks[i].Add("send_local_pages", plan.ranks[i].send_local_pages);
      ranks[i].Add("send_rows", plan.ranks[i].send_rows);
    }
    a.Add("ranks", std::move(ranks));
  }
  return a;
}

FieldAnswer GatherPlanFields(const GatherPlan& plan, const std::vector<int64_t>& rows, bool with_rows,
                             const Json* only) {
  FieldAnswer a = GatherPlanFields(plan, only);
  if (with_rows) a.Add("scratch_rows", rows);
  return a;
}

Json GatherPlanJson(const GatherPlan& plan, const std::vector<int64_t>& rows, bool with_rows) {
  return GatherPlanFields(plan, rows, with_rows).ToJson();
}

}  // namespace kvshard::replay

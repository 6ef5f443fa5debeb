// The reference result of each command as the JSON its --json prints, from typed inputs. Shared by the
// commands and `kvshard replay`, so a trace's expect is checked against exactly what a command prints.
#ifndef KVSHARD_REPLAY_RESULTS_H_
#define KVSHARD_REPLAY_RESULTS_H_

#include <cstdint>
#include <vector>

#include "replay/backend.h"
#include "replay/field_answer.h"
#include "core/cp_plan.h"
#include "core/gather_plan.h"
#include "core/json.h"
#include "core/placement.h"
#include "core/spec.h"
#include "core/status.h"
#include "cpu_ref/cp_data.h"

namespace kvshard::replay {

// `place --json`: owner, local_index, local_mask, filter_local.
Json PlacementJson(const PlacementResult& result);

// The in-seq batch plan of one rank and its metadata; errors are the model's (SGLang's fail-fast tags).
struct InSeqSplit {
  CPSharedKVBatchPlan plan;
  NSAContextParallelMetadata metadata;
};
StatusOr<InSeqSplit> BuildInSeqSplit(const std::vector<int64_t>& extend_lens, const std::vector<int64_t>& prefix_lens,
                                     int64_t page_size, int64_t cp_size, int64_t cp_rank, Impl impl = Impl::kRef);
// `split --json` (in-seq): every CPSharedKVBatchPlan field plus nsa_cp_metadata; with `only` (an object), just
// the top-level keys it names (what a trace's expect checks). The fields typed (a split record's answer), and
// their JSON.
FieldAnswer InSeqSplitFields(const InSeqSplit& split, const Json* only = nullptr);
Json InSeqSplitJson(const InSeqSplit& split, const Json* only = nullptr);
// `split --mode round-robin --json`: q_lens and bs_idx.
StatusOr<FieldAnswer> RoundRobinSplitFields(const std::vector<int64_t>& extend_lens, int64_t cp_size, int64_t cp_rank);
StatusOr<Json> RoundRobinSplitJson(const std::vector<int64_t>& extend_lens, int64_t cp_size, int64_t cp_rank);
// `split --mode token-balanced --json`: split_list.
StatusOr<FieldAnswer> TokenBalancedSplitFields(int64_t total_len, int64_t cp_size);
StatusOr<Json> TokenBalancedSplitJson(int64_t total_len, int64_t cp_size);

// The batch rerange after the padded all-gather (rank 0's plan: the layout is the same on every rank).
struct Rerange {
  CPSharedKVBatchPlan plan;
  int64_t max_rank_token = 0;
  std::vector<int64_t> per_rank_tokens;        // valid rows per rank
  std::vector<int64_t> per_rank_actual_token;  // communication rows per rank
  std::vector<int64_t> source_rows;            // output row k <- gathered row source_rows[k]
};
// Without `with_source_rows`, source_rows stays empty (the streamed `rerange` output derives it per segment).
StatusOr<Rerange> BuildRerange(int64_t cp_size, int64_t page_size, const std::vector<int64_t>& extend_lens,
                               const std::vector<int64_t>& prefix_lens, Impl impl = Impl::kRef,
                               bool with_source_rows = true);
// `rerange --json`'s fields: max_rank_token, per_rank_tokens, source_rows, compute_padding_enabled,
// per_rank_actual_token (a rerange record's answer); RerangeJson is their JSON.
FieldAnswer RerangeFields(const Rerange& rerange);
Json RerangeJson(const Rerange& rerange);

// The extend batch's gather plan and the translate of `locs` (errors name `field`).
struct PlanAndRows {
  GatherPlan plan;
  std::vector<int64_t> rows;
};
StatusOr<PlanAndRows> BuildGatherPlanAndRows(const ExtendBatch& batch, const std::vector<int64_t>& locs,
                                             const char* field, Impl impl = Impl::kRef);

// GatherPlanToJson's fields typed (ranks only when `only` is null or names them): a gather_plan record's answer, and
// the start of a begin_shard_extend record's.
FieldAnswer GatherPlanFields(const GatherPlan& plan, const Json* only = nullptr);
// `gather-plan --json`: the plan and, when `with_rows`, scratch_rows (translate of `locs`); typed, and as JSON.
FieldAnswer GatherPlanFields(const GatherPlan& plan, const std::vector<int64_t>& rows, bool with_rows,
                             const Json* only = nullptr);
Json GatherPlanJson(const GatherPlan& plan, const std::vector<int64_t>& rows, bool with_rows);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_RESULTS_H_

// The --json results of seed 003's CP data helpers (split by plan, valid rows, round-robin split, last-token
// collection), its NSA seq-len helpers and prepare_input_dp_with_cp_dsa's metadata, computed by the reference.
// Tensors carry one int64 value per row (HostTensor::FromInt64s), so a row in the wrong place is visible.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/cp_limits.h"
#include "core/cp_plan_json.h"
#include "cpu_ref/cp_collect.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "replay/cp_results.h"

namespace kvshard::replay {
namespace {

// Rows [0, rows - trim) of t (all of them for trim <= 0, none when trim >= rows).
HostTensor TrimTail(const HostTensor& t, int64_t trim) {
  HostTensor out = t;
  out.rows = std::max<int64_t>(0, t.rows - std::max<int64_t>(0, trim));
  out.data.resize(static_cast<size_t>(out.rows * out.row_bytes));
  return out;
}

StatusOr<HostTensor> InSeqLastTokens(const CpRowsBatch& b, const HostTensor& rows, Impl impl) {
  std::vector<HostTensor> hidden;
  std::vector<CPSharedKVBatchPlan> plans;
  for (int64_t r = 0; r < b.cp_size; ++r) {
    KVSHARD_ASSIGN_OR_RETURN(InSeqSplit split,
                             BuildInSeqSplit(b.extend_lens, b.prefix_lens, b.page_size, b.cp_size, r, impl));
    KVSHARD_ASSIGN_OR_RETURN(
        HostTensor local, ref::SplitTensorByCPBatchPlan(rows, split.plan, ref::SplitMode::kData, SplitKind::kCompute));
    hidden.push_back(TrimTail(local, b.trim_tail));
    plans.push_back(std::move(split.plan));
  }
  return ref::InSeqCollectLastTokenBatch(hidden, plans);
}

StatusOr<HostTensor> RoundRobinLastTokens(const CpRowsBatch& b, const HostTensor& rows) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(b.cp_size));
  std::vector<HostTensor> hidden;
  for (int64_t r = 0; r < b.cp_size; ++r) {
    KVSHARD_ASSIGN_OR_RETURN(HostTensor local, ref::RoundRobinSplitData(rows, b.cp_size, r));
    hidden.push_back(TrimTail(local, b.trim_tail));
  }
  return ref::RoundRobinCollectLastToken(hidden, b.extend_lens);
}

// The bs = 1 path without a batch plan: each rank's hidden rows are its scalar zigzag split of the one request.
StatusOr<HostTensor> ScalarLastTokens(const CpRowsBatch& b, const HostTensor& rows) {
  if (b.extend_lens.size() != 1) return InvalidArgument("extend_lens: the scalar path collects exactly one request");
  std::vector<HostTensor> hidden;
  Int64List split_list;
  for (int64_t r = 0; r < b.cp_size; ++r) {
    KVSHARD_ASSIGN_OR_RETURN(
        const NSAContextParallelMetadata m,
        ref::PrepareInputDpWithCpDsa({.kv_len = b.extend_lens[0], .cp_rank = r, .cp_size = b.cp_size}));
    KVSHARD_ASSIGN_OR_RETURN(const HostTensor local, ref::CpSplitAndRebuildScalar(rows, m));
    hidden.push_back(TrimTail(local, b.trim_tail));
    split_list = m.split_list;
  }
  return ref::InSeqCollectLastTokenScalar(hidden, split_list, b.extend_lens[0]);
}

}  // namespace

Json NsaSeqlensJson(const Int64List& seq_lens, int64_t nsa_index_topk) {
  return Json{{"nsa_seqlens", ref::ComputeNsaSeqlens(seq_lens, nsa_index_topk)}};
}

StatusOr<Json> CalPaddedTokensJson(const ref::CpForwardState& batch, const ref::CpServerArgs& args, int64_t cp_size) {
  KVSHARD_ASSIGN_OR_RETURN(const int64_t tokens, ref::CalPaddedTokens(batch, args, cp_size));
  return Json{{"cal_padded_tokens", tokens}};
}

StatusOr<Json> PadNsaCacheSeqlensJson(const ref::CpForwardState& batch, const ref::CpServerArgs& args, int64_t cp_size,
                                      const Int64List& nsa_cache_seqlens) {
  KVSHARD_ASSIGN_OR_RETURN(Int64List out, ref::PadNsaCacheSeqlens(batch, args, cp_size, nsa_cache_seqlens));
  return Json{{"nsa_cache_seqlens", std::move(out)}};
}

StatusOr<Json> RoundRobinRowsJson(const Int64List& rows, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_ASSIGN_OR_RETURN(const HostTensor local,
                           ref::RoundRobinSplitData(HostTensor::FromInt64s(rows), cp_size, cp_rank));
  return Json{{"rows", local.Int64s()}};
}

StatusOr<Json> SplitRowsJson(const InSeqSplit& split, const Int64List& rows, const std::string& mode,
                             const std::string& split_kind, std::optional<int64_t> static_padded_tokens) {
  KVSHARD_ASSIGN_OR_RETURN(const ref::SplitMode m, ref::ParseSplitMode(mode));
  KVSHARD_ASSIGN_OR_RETURN(const SplitKind kind, ref::ParseSplitKind(split_kind));
  KVSHARD_ASSIGN_OR_RETURN(
      const HostTensor local,
      ref::SplitTensorByCPBatchPlan(HostTensor::FromInt64s(rows), split.plan, m, kind, static_padded_tokens));
  return Json{{"rows", local.Int64s()}};
}

StatusOr<Json> PadRequestJson(const Int64List& rows, int64_t row_width, int64_t target_len, const std::string& mode,
                              int64_t req_id) {
  if (row_width < 1 || row_width > 64 || rows.size() % static_cast<size_t>(row_width) != 0) {
    return InvalidArgument("row_width: must be in [1, 64] and divide the ", rows.size(), " values of rows");
  }
  KVSHARD_ASSIGN_OR_RETURN(const ref::SplitMode m, ref::ParseSplitMode(mode));
  HostTensor t = HostTensor::FromInt64s(rows);  // row_width values per row
  t.rows /= row_width;
  t.row_bytes *= row_width;
  KVSHARD_ASSIGN_OR_RETURN(HostTensor padded, ref::PadCPRequestTensorForSplit(t, target_len, m, req_id));
  padded.rows *= row_width;
  padded.row_bytes = 8;
  return Json{{"rows", padded.Int64s()}};
}

StatusOr<Json> ValidRowsJson(const InSeqSplit& split, const Int64List& rows) {
  KVSHARD_ASSIGN_OR_RETURN(const HostTensor valid,
                           ref::SelectCPLocalValidRowsForCacheWrite(HostTensor::FromInt64s(rows), split.plan));
  return Json{{"rows", valid.Int64s()}};
}

StatusOr<Json> LastTokensJson(const CpRowsBatch& batch, const Int64List& rows, const std::string& mode, Impl impl) {
  const HostTensor t = HostTensor::FromInt64s(rows);
  StatusOr<HostTensor> last = mode == "round-robin" ? RoundRobinLastTokens(batch, t)
                              : mode == "scalar"    ? ScalarLastTokens(batch, t)
                                                    : InSeqLastTokens(batch, t, impl);
  KVSHARD_RETURN_IF_ERROR(last.status());
  return Json{{"last_tokens", last->Int64s()}};
}

StatusOr<Json> PrepareMetadataJson(const ref::CPPrepareInput& in) {
  KVSHARD_ASSIGN_OR_RETURN(const NSAContextParallelMetadata m, ref::PrepareInputDpWithCpDsa(in));
  return Json{{"nsa_cp_metadata", ToJson(m)}};
}

}  // namespace kvshard::replay

// Reference CP communication metadata (SGLang _build_batch_metadata_from_plan, prepare_input_dp_with_cp_dsa)
// and the round-robin helpers.
#include <algorithm>

#include "cpu_ref/cp_split.h"
#include "cpu_ref/cp_split_internal.h"

namespace kvshard::ref {

using internal::Accumulate;
using internal::FloorDiv;
using internal::PrefixOffsets;

namespace {

// The scalar (bs = 1) fields, taken from the batch's first request as SGLang does: its split list, zigzag index,
// kv lengths and query lengths of this rank's two mirrored segments (cp_rank and 2N - cp_rank - 1), and the
// reverse split order.
void SetFirstRequestFields(const CPSharedKVBatchPlan& plan, const Int64Table& comm, NSAContextParallelMetadata* m) {
  const int64_t n = plan.cp_size;
  const std::span<const int64_t> first_split = comm[0];
  const Int64List first_valid_prefix = Accumulate(plan.request_valid_split_lists()[0]);
  const int64_t first_mirror = 2 * n - plan.cp_rank - 1;
  m->split_list.assign(first_split.begin(), first_split.end());
  m->zigzag_index.assign(plan.request_zigzag_indices[0].begin(), plan.request_zigzag_indices[0].end());
  m->kv_len_prev = first_valid_prefix[plan.cp_rank];
  m->kv_len_next = first_valid_prefix[first_mirror];
  m->actual_seq_q_prev = first_split[plan.cp_rank];
  m->actual_seq_q_next = first_split[first_mirror];
  m->actual_seq_q_prev_cu_tensor = {0, m->actual_seq_q_prev};
  m->actual_seq_q_next_cu_tensor = {0, m->actual_seq_q_next};
  for (int64_t i = 0; i < n; ++i) {
    m->reverse_split_len.push_back(first_split[i]);
    m->reverse_split_len.push_back(first_split[2 * n - i - 1]);
  }
  for (int64_t i = 0; i < 2 * n; i += 2) m->cp_reverse_index.push_back(i);
  for (int64_t i = 2 * n - 1; i > 0; i -= 2) m->cp_reverse_index.push_back(i);
}

}  // namespace

StatusOr<NSAContextParallelMetadata> BuildBatchMetadataFromPlan(CPSharedKVBatchPlan plan) {
  if (plan.batch_size <= 0 || plan.request_split_lists.empty()) {
    return InvalidArgument("extend_lens: the batch needs at least one request (SGLang's metadata indexes request 0)");
  }
  const Int64Table& comm = plan.compute_padding_enabled ? plan.request_compute_split_lists : plan.request_split_lists;
  const int64_t n = plan.cp_size;
  NSAContextParallelMetadata m;
  const RerangeTables tables = BuildRerangeTables(comm, n);
  m.per_rank_actual_token = tables.per_rank_tokens;
  const int64_t max_rank_token = *std::max_element(m.per_rank_actual_token.begin(), m.per_rank_actual_token.end());
  m.max_rank_len.assign(n, max_rank_token);
  SetFirstRequestFields(plan, comm, &m);
  m.split_list_tensor = comm.values;
  m.split_prefix_tensor = PrefixOffsets(m.split_list_tensor);
  m.total_seq_lens = max_rank_token * n;
  m.info = RequestSplitInfo(plan, 0);
  m.info.page_aligned = true;
  m.batch_size = plan.batch_size;
  m.request_actual_seq_q_prev_cu_tensor = {0};
  m.request_actual_seq_q_next_cu_tensor = {0};
  for (int64_t v : Accumulate(plan.request_actual_seq_q_prev)) m.request_actual_seq_q_prev_cu_tensor.push_back(v);
  for (int64_t v : Accumulate(plan.request_actual_seq_q_next)) m.request_actual_seq_q_next_cu_tensor.push_back(v);
  m.batch_plan = std::make_shared<const CPSharedKVBatchPlan>(std::move(plan));
  return m;
}

StatusOr<NSAContextParallelMetadata> BuildScalarCPMetadata(const InSeqSplit& split, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(cp_rank, cp_size));
  const Int64List& s = split.split_list;
  const int64_t segments = 2 * cp_size;
  if (static_cast<int64_t>(s.size()) != segments) {
    return InvalidArgument("split_list: must have 2 * cp_size entries, got ", s.size());
  }
  int64_t total = 0;
  for (int64_t len : s) {
    if (len < 0 || len > kMaxCpTokens) return InvalidArgument("split_list: lengths must be in [0, 2^48], got ", len);
    total += len;
  }
  if (total > kMaxCpTokens) return InvalidArgument("split_list: total must be at most 2^48");
  NSAContextParallelMetadata m;
  m.split_list = s;
  m.split_list_tensor = s;
  m.split_prefix_tensor = PrefixOffsets(s);
  m.zigzag_index = {cp_rank, segments - cp_rank - 1};
  for (int64_t i = 0; i < cp_size; ++i) m.per_rank_actual_token.push_back(s[i] + s[segments - i - 1]);
  const int64_t max_rank_token = *std::max_element(m.per_rank_actual_token.begin(), m.per_rank_actual_token.end());
  m.max_rank_len.assign(cp_size, max_rank_token);
  m.total_seq_lens = max_rank_token * cp_size;
  for (int64_t i = 0; i < cp_size; ++i) {
    m.reverse_split_len.push_back(s[i]);
    m.reverse_split_len.push_back(s[segments - i - 1]);
  }
  for (int64_t i = 0; i < segments; i += 2) m.cp_reverse_index.push_back(i);
  for (int64_t i = segments - 1; i > 0; i -= 2) m.cp_reverse_index.push_back(i);
  const Int64List prefix_sum = Accumulate(s);
  m.kv_len_prev = prefix_sum[cp_rank];
  m.kv_len_next = prefix_sum[segments - cp_rank - 1];
  m.actual_seq_q_prev = s[cp_rank];
  m.actual_seq_q_next = s[segments - cp_rank - 1];
  m.actual_seq_q_prev_cu_tensor = {0, m.actual_seq_q_prev};
  m.actual_seq_q_next_cu_tensor = {0, m.actual_seq_q_next};
  m.info = split.info;
  m.batch_size = 1;
  return m;
}

StatusOr<NSAContextParallelMetadata> PrepareInputDpWithCpDsa(const CPPrepareInput& in) {
  if (in.uses_cp_shared_kv) {
    if (!in.page_size.has_value()) {
      return FailFast("cp_shared_missing_page_size", "CP shared-KV batch planning requires token_to_kv_pool.page_size");
    }
    KVSHARD_ASSIGN_OR_RETURN(
        CPSharedKVBatchPlan plan,
        BuildBatchPageAlignedInSeqSplitPlan(in.extend_lens, in.prefix_lens, *in.page_size, in.cp_size, in.cp_rank));
    return BuildBatchMetadataFromPlan(std::move(plan));
  }
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(in.cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(in.cp_rank, in.cp_size));
  InSeqSplit split;
  KVSHARD_ASSIGN_OR_RETURN(split.split_list, BuildTokenBalancedInSeqSplitList(in.kv_len, in.cp_size));
  split.info.page_size = in.page_size.value_or(0) != 0 ? *in.page_size : 1;  // int(page_size or 1)
  split.info.extend_prefix_len = 0;
  return BuildScalarCPMetadata(split, in.cp_size, in.cp_rank);
}

StatusOr<RoundRobinQSeqs> RoundRobinSplitQSeqs(const Int64List& extend_lens, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(cp_rank, cp_size));
  RoundRobinQSeqs out;
  int64_t extra = 0;
  for (size_t q = 0; q < extend_lens.size(); ++q) {
    if (extend_lens[q] < 0 || extend_lens[q] > kMaxCpTokens) {
      return InvalidArgument("extend_lens[", q, "]: must be in [0, 2^48], got ", extend_lens[q]);
    }
    // |extra| < cp_size, and len may be negative after a zero-length request: Python floor semantics.
    const int64_t len = extend_lens[q] + extra;
    const int64_t floor_q = FloorDiv(len, cp_size);
    const int64_t q_len = floor_q + (len - floor_q * cp_size > cp_rank ? 1 : 0);
    if (q_len > 0) {
      out.q_lens.push_back(q_len);
      out.bs_idx.push_back(static_cast<int64_t>(q));
    }
    extra = len - q_len * cp_size;
  }
  return out;
}

StatusOr<std::vector<LastTokenLocation>> RoundRobinLastTokenLocations(const Int64List& extend_lens, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  std::vector<LastTokenLocation> out;
  int64_t offset = 0;
  for (size_t q = 0; q < extend_lens.size(); ++q) {
    const int64_t len = extend_lens[q];
    if (len <= 0) {
      return FailFast("batch_gt1_empty_extend", "round-robin last-token collect got non-positive req_len=", len);
    }
    if (len > kMaxCpTokens || offset + len > kMaxCpTokens) {
      return InvalidArgument("extend_lens[", q, "]: total must be at most 2^48");
    }
    const int64_t global_last = offset + len - 1;
    out.push_back({global_last % cp_size, global_last / cp_size});
    offset += len;
  }
  return out;
}

}  // namespace kvshard::ref

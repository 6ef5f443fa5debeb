// Reference CP data movement: row copies only, never interpreting payload bytes (positions excepted). The batch
// rerange reads every output row from its spec §5 source row (the segment-copy version is in cpu_fast/).
#include "cpu_ref/cp_data.h"

#include <algorithm>
#include <cstring>

#include "core/cp_limits.h"
#include "cpu_ref/cp_split.h"

namespace kvshard::ref {
namespace {

Status MissingSplitMetadata() {
  return FailFast("batch_gt1_missing_split_metadata", "CP shared-KV batch split requires per-request split metadata.");
}

int64_t Sum(std::span<const int64_t> v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// Appends rows [begin, begin+count) of `src` to `dst`.
void AppendRows(const HostTensor& src, int64_t begin, int64_t count, HostTensor* dst) {
  if (count <= 0) return;
  dst->data.insert(dst->data.end(), src.row(begin), src.row(begin) + count * src.row_bytes);
  dst->rows += count;
}

// Checks that the split metadata rows are shaped like a plan: 2N non-negative entries, zigzag in range.
Status ValidateSplitTables(const Int64Table& lists, const Int64Table& zigzag, int64_t cp_size) {
  if (cp_size <= 0 || cp_size > kMaxCpSize || lists.width != 2 * cp_size || zigzag.width != 2) {
    return MissingSplitMetadata();
  }
  for (int64_t x : lists.values) {
    if (x < 0 || x > kMaxCpTokens) return MissingSplitMetadata();
  }
  for (int64_t s : zigzag.values) {
    if (s < 0 || s >= 2 * cp_size) return MissingSplitMetadata();
  }
  return Status::Ok();
}

// The split lists and per-request target lengths a split of `kind` uses: the compute split and compute padded
// lengths only when kind is compute and compute padding is enabled, else the valid split and extend lens.
struct SplitTargets {
  const Int64Table* lists;
  const Int64List* targets;
};

SplitTargets SplitTargetsFor(const CPSharedKVBatchPlan& plan, SplitKind kind) {
  if (kind == SplitKind::kValid) return {&plan.request_valid_split_lists(), &plan.request_extend_lens};
  if (plan.compute_padding_enabled) return {&plan.request_compute_split_lists, &plan.request_compute_padded_tokens};
  return {&plan.request_split_lists, &plan.request_extend_lens};
}

// The split metadata describes `batch` requests with lengths in range (else batch_gt1_missing_split_metadata).
Status CheckSplitMetadata(const CPSharedKVBatchPlan& plan, const SplitTargets& t, int64_t batch) {
  const Int64List& extend_lens = plan.request_extend_lens;
  const auto n = [](const auto& v) { return static_cast<int64_t>(v.size()); };
  if (n(extend_lens) != batch || n(*t.targets) != batch || t.lists->rows() != batch ||
      plan.request_zigzag_indices.rows() != batch) {
    return MissingSplitMetadata();
  }
  KVSHARD_RETURN_IF_ERROR(ValidateSplitTables(*t.lists, plan.request_zigzag_indices, plan.cp_size));
  for (int64_t q = 0; q < batch; ++q) {
    const int64_t target = (*t.targets)[q];
    if (extend_lens[q] < 0 || target < 0 || extend_lens[q] > kMaxCpTokens || target > kMaxCpTokens) {
      return MissingSplitMetadata();
    }
  }
  return Status::Ok();
}

// The input holds exactly the batch's valid rows, or (compute kind) also trailing compute or static padding rows,
// which the split ignores; else batch_gt1_split_input_len_mismatch.
Status CheckSplitInputRows(int64_t input_rows, const CPSharedKVBatchPlan& plan, const SplitTargets& t, SplitKind kind,
                           std::optional<int64_t> static_padded_tokens) {
  const int64_t expected = Sum(plan.request_extend_lens);
  if (input_rows == expected) return Status::Ok();
  const bool compute_kind = kind == SplitKind::kCompute, compute_padding = plan.compute_padding_enabled;
  const int64_t max_compute = compute_kind && compute_padding ? Sum(*t.targets) : expected;
  const int64_t max_static = static_padded_tokens.has_value() ? *static_padded_tokens : expected;
  if (compute_kind && input_rows > expected && input_rows <= std::max(max_compute, max_static) &&
      (compute_padding || (static_padded_tokens.has_value() && *static_padded_tokens > expected))) {
    return Status::Ok();
  }
  std::string detail = StrCat("expected=", expected);
  if (compute_kind && compute_padding) detail += StrCat(" max_compute=", max_compute);
  if (compute_kind && static_padded_tokens.has_value()) detail += StrCat(" static_padded=", *static_padded_tokens);
  return FailFast("batch_gt1_split_input_len_mismatch", "input tokens=", input_rows, " ", detail);
}

// Request q (`current` valid rows of row_bytes) can be padded to `target` rows in `mode`.
Status CheckRequestPadding(int64_t q, int64_t current, int64_t target, SplitMode mode, int64_t row_bytes) {
  if (target < current) {
    return FailFast("batch_gt1_compute_padding_len_mismatch",
                    "target split length is shorter than request valid rows. req_id=", q, " target_len=", target,
                    " current_len=", current);
  }
  const int64_t pad = target - current;
  if (pad > 0 && current <= 0) {
    return FailFast("batch_gt1_compute_padding_empty_request", "cannot compute-pad an empty request. req_id=", q);
  }
  if (pad > 0 && mode == SplitMode::kPosition && row_bytes != 8) {
    return FailFast("batch_gt1_position_padding_rank",
                    "position compute padding expects a 1D position tensor. req_id=", q, " shape=(", current, ", ",
                    row_bytes, " bytes)");
  }
  return Status::Ok();
}

// Request q can be padded to `target` rows in `mode`, and its split covers exactly those.
Status CheckRequestSplit(int64_t q, int64_t current, int64_t target, std::span<const int64_t> split, SplitMode mode,
                         int64_t row_bytes) {
  KVSHARD_RETURN_IF_ERROR(CheckRequestPadding(q, current, target, mode, row_bytes));
  if (Sum(split) != target) {
    const char* mode_name = mode == SplitMode::kData ? "data" : mode == SplitMode::k1d ? "1d" : "position";
    return FailFast("batch_gt1_split_target_len_mismatch",
                    "request split rows must equal padded request rows. req_id=", q, " split_total=", Sum(split),
                    " request_rows=", target, " mode=", mode_name);
  }
  return Status::Ok();
}

// Rows [begin, begin + current) of `input` padded to `target` rows: zero rows, or (position mode) positions
// continuing the last one by +1 per row (wrapping like a torch int64 add).
HostTensor PaddedRequest(const HostTensor& input, int64_t begin, int64_t current, int64_t target, SplitMode mode) {
  HostTensor request;
  request.row_bytes = input.row_bytes;
  AppendRows(input, begin, current, &request);
  if (target == current) return request;
  request.data.resize(static_cast<size_t>(target * request.row_bytes), 0);
  request.rows = target;
  if (mode != SplitMode::kPosition) return request;
  uint64_t last;
  std::memcpy(&last, request.row(current - 1), 8);
  for (int64_t i = 0; i < target - current; ++i) {
    const uint64_t position = last + 1 + static_cast<uint64_t>(i);
    std::memcpy(request.row(current + i), &position, 8);
  }
  return request;
}

// Spec §5: the gathered row where segment s of request q starts, rank(s) * max_rank_token +
// rank_request_offset[rank(s)][q] + (s < N ? 0 : split[rank(s)]), with rank(s) = s < N ? s : 2N-1-s.
int64_t SegmentSourceRow(const RerangeTables& t, std::span<const int64_t> split, int64_t q, int64_t s,
                         int64_t max_rank_token) {
  const int64_t n = t.cp_size, rank = s < n ? s : 2 * n - 1 - s;
  return rank * max_rank_token + t.rank_request_offsets[rank * t.batch_size + q] + (s < n ? 0 : split[rank]);
}

}  // namespace

StatusOr<SplitMode> ParseSplitMode(const std::string& mode) {
  if (mode == "data") return SplitMode::kData;
  if (mode == "1d") return SplitMode::k1d;
  if (mode == "position") return SplitMode::kPosition;
  return InvalidArgument("mode: unsupported CP batch split mode=", QuoteInput(mode, '\''));
}

StatusOr<SplitKind> ParseSplitKind(const std::string& kind) {
  if (kind == "compute") return SplitKind::kCompute;
  if (kind == "valid") return SplitKind::kValid;
  return InvalidArgument("split_kind: unsupported CP batch split_kind=", QuoteInput(kind, '\''));
}

StatusOr<HostTensor> PadCPRequestTensorForSplit(const HostTensor& request, int64_t target_len, SplitMode mode,
                                                int64_t req_id) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(request, "request"));
  if (target_len > (int64_t{1} << 40) / request.row_bytes) {
    return InvalidArgument("target_len: ", target_len, " rows of ", request.row_bytes, " bytes exceed 2^40 bytes");
  }
  KVSHARD_RETURN_IF_ERROR(CheckRequestPadding(req_id, request.rows, target_len, mode, request.row_bytes));
  return PaddedRequest(request, 0, request.rows, target_len, mode);
}

StatusOr<HostTensor> SplitTensorByCPBatchPlan(const HostTensor& input, const CPSharedKVBatchPlan& plan, SplitMode mode,
                                              SplitKind kind, std::optional<int64_t> static_padded_tokens) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(input, "input"));
  const SplitTargets t = SplitTargetsFor(plan, kind);
  const int64_t batch = plan.batch_size != 0 ? plan.batch_size : 1;  // SGLang: int(batch_size or 1)
  KVSHARD_RETURN_IF_ERROR(CheckSplitMetadata(plan, t, batch));
  KVSHARD_RETURN_IF_ERROR(CheckSplitInputRows(input.rows, plan, t, kind, static_padded_tokens));
  HostTensor out;
  out.row_bytes = input.row_bytes;
  int64_t request_begin = 0;
  for (int64_t q = 0; q < batch; ++q) {
    const int64_t current = plan.request_extend_lens[q], target = (*t.targets)[q];
    const std::span<const int64_t> split = (*t.lists)[q];
    KVSHARD_RETURN_IF_ERROR(CheckRequestSplit(q, current, target, split, mode, input.row_bytes));
    const HostTensor request = PaddedRequest(input, request_begin, current, target, mode);
    for (int64_t segment : plan.request_zigzag_indices[q]) {  // segments r and 2N-1-r
      AppendRows(request, Sum(split.first(static_cast<size_t>(segment))), split[segment], &out);
    }
    request_begin += current;
  }
  return out;
}

StatusOr<ValidRowSelector> BuildCPLocalValidRowSelector(const CPSharedKVBatchPlan& plan) {
  const int64_t batch = plan.batch_size != 0 ? plan.batch_size : 1;
  const Int64Table& compute = plan.request_compute_split_lists;
  const Int64Table& valid = plan.request_valid_split_lists();
  if (compute.rows() != batch || valid.rows() != batch || plan.request_zigzag_indices.rows() != batch) {
    return FailFast("cache_write_valid_selector_metadata",
                    "CP shared-KV cache writes require valid and compute split metadata when compute padding is "
                    "enabled.");
  }
  ValidRowSelector sel;
  for (int64_t q = 0; q < batch; ++q) {
    if (compute.width != valid.width) {
      return FailFast("cache_write_valid_selector_metadata", "valid and compute split metadata disagree. req_id=", q,
                      " compute_segments=", compute.width, " valid_segments=", valid.width);
    }
    for (int64_t segment : plan.request_zigzag_indices[q]) {
      if (segment < 0 || segment >= compute.width) {
        return FailFast("cache_write_valid_selector_metadata", "zigzag segment out of range. req_id=", q,
                        " segment_id=", segment);
      }
      const int64_t compute_len = compute[q][segment], valid_len = valid[q][segment];
      if (valid_len > compute_len) {
        return FailFast("cache_write_valid_selector_metadata",
                        "valid segment is longer than compute segment. req_id=", q, " segment_id=", segment,
                        " valid_len=", valid_len, " compute_len=", compute_len);
      }
      if (valid_len < 0 || compute_len > kMaxCpTokens) {
        return FailFast("cache_write_valid_selector_metadata", "segment lengths out of range. req_id=", q);
      }
      for (int64_t i = 0; i < valid_len; ++i) sel.indices.push_back(sel.compute_rows + i);
      sel.compute_rows += compute_len;
    }
  }
  return sel;
}

StatusOr<HostTensor> SelectCPLocalValidRowsForCacheWrite(const HostTensor& local, const CPSharedKVBatchPlan& plan) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(local, "local"));
  if (!plan.compute_padding_enabled) return local;
  KVSHARD_ASSIGN_OR_RETURN(ValidRowSelector sel, BuildCPLocalValidRowSelector(plan));
  if (local.rows != sel.compute_rows) {
    return FailFast("cache_write_valid_selector_shape",
                    "CP shared-KV cache write tensor must contain local compute rows before valid-row selection. "
                    "local_rows=",
                    local.rows, " expected_compute_rows=", sel.compute_rows, " valid_rows=", sel.indices.size());
  }
  return IndexRows(local, sel.indices);
}

StatusOr<HostTensor> AllGatherPadded(const std::vector<HostTensor>& rank_inputs, int64_t total_len) {
  if (rank_inputs.empty()) return InvalidArgument("rank_inputs: need one tensor per rank, got none");
  const int64_t n = static_cast<int64_t>(rank_inputs.size());
  if (total_len < 0 || total_len > kMaxCpTokens)
    return InvalidArgument("total_len: must be in [0, 2^48], got ", total_len);
  const int64_t max_len = (total_len + n - 1) / n;
  HostTensor out;
  out.row_bytes = rank_inputs[0].row_bytes;
  for (int64_t r = 0; r < n; ++r) {
    const HostTensor& in = rank_inputs[r];
    KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(in, "rank_inputs"));
    if (in.row_bytes != out.row_bytes) return InvalidArgument("rank_inputs[", r, "]: row width differs from rank 0");
    if (in.rows > max_len) {
      return InvalidArgument("rank_inputs[", r, "]: ", in.rows, " rows exceed the all-gather block of ", max_len,
                             " rows");
    }
    AppendRows(in, 0, in.rows, &out);
    out.data.resize(static_cast<size_t>((out.rows + max_len - in.rows) * out.row_bytes), 0);
    out.rows += max_len - in.rows;
  }
  return out;
}

StatusOr<HostTensor> TrimCPRankPaddingAfterAllGather(const HostTensor& gathered, const Int64List& max_rank_len,
                                                     const Int64List& per_rank_actual_token) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(gathered, "gathered"));
  int64_t total = 0;
  for (int64_t len : max_rank_len) {
    if (len < 0 || len > kMaxCpTokens) return InvalidArgument("max_rank_len: entries must be in [0, 2^48], got ", len);
    total += len;
  }
  if (total != gathered.rows) {
    return InvalidArgument("max_rank_len: blocks sum to ", total, " rows but the gathered buffer has ", gathered.rows);
  }
  HostTensor out;
  out.row_bytes = gathered.row_bytes;
  int64_t block = 0;
  const size_t ranks = std::min(max_rank_len.size(), per_rank_actual_token.size());
  for (size_t r = 0; r < ranks; ++r) {
    // Python slicing [:per_rank_len] clamps to the block.
    const int64_t keep = std::clamp<int64_t>(per_rank_actual_token[r], 0, max_rank_len[r]);
    AppendRows(gathered, block, keep, &out);
    block += max_rank_len[r];
  }
  return out;
}

StatusOr<HostTensor> InSeqAllGatherRerange(const HostTensor& gathered, const NSAContextParallelMetadata& m) {
  KVSHARD_ASSIGN_OR_RETURN(HostTensor trimmed,
                           TrimCPRankPaddingAfterAllGather(gathered, m.max_rank_len, m.per_rank_actual_token));
  Int64List starts;
  int64_t cursor = 0;
  for (int64_t len : m.reverse_split_len) {
    if (len < 0) return InvalidArgument("reverse_split_len: negative length ", len);
    starts.push_back(cursor);
    cursor += len;
  }
  if (cursor != trimmed.rows) {
    return InvalidArgument("reverse_split_len: sums to ", cursor, " rows but the trimmed buffer has ", trimmed.rows);
  }
  HostTensor out;
  out.row_bytes = gathered.row_bytes;
  for (int64_t i : m.cp_reverse_index) {
    if (i < 0 || i >= static_cast<int64_t>(starts.size()))
      return InvalidArgument("cp_reverse_index: out of range: ", i);
    AppendRows(trimmed, starts[i], m.reverse_split_len[i], &out);
  }
  return out;
}

StatusOr<std::vector<RowCopy>> BatchRerangeCopies(const Int64Table& split_lists, int64_t cp_size,
                                                  int64_t max_rank_token) {
  KVSHARD_ASSIGN_OR_RETURN(const RerangeTables t, CheckedRerangeTables(split_lists, cp_size, max_rank_token));
  std::vector<RowCopy> copies;
  int64_t dst = 0;
  for (int64_t q = 0; q < t.batch_size; ++q) {
    for (int64_t s = 0; s < 2 * cp_size; ++s) {
      const int64_t rows = split_lists[q][s];
      if (rows > 0) copies.push_back({SegmentSourceRow(t, split_lists[q], q, s, max_rank_token), dst, rows});
      dst += rows;
    }
  }
  return copies;
}

StatusOr<Int64List> BatchRerangeSourceRows(const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token) {
  KVSHARD_ASSIGN_OR_RETURN(const RerangeTables t, CheckedRerangeTables(split_lists, cp_size, max_rank_token));
  Int64List rows;
  for (int64_t q = 0; q < t.batch_size; ++q) {
    for (int64_t s = 0; s < 2 * cp_size; ++s) {
      const int64_t source = SegmentSourceRow(t, split_lists[q], q, s, max_rank_token);
      for (int64_t o = 0; o < split_lists[q][s]; ++o) rows.push_back(source + o);
    }
  }
  return rows;
}

Status BatchInSeqAllGatherRerangeInto(const HostTensor& gathered, const NSAContextParallelMetadata& m, int64_t cp_size,
                                      HostTensor* out) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(gathered, "gathered"));
  KVSHARD_ASSIGN_OR_RETURN(const int64_t max_rank_token, CheckBatchRerangeInput(gathered.rows, m, cp_size));
  KVSHARD_ASSIGN_OR_RETURN(const Int64List rows,
                           BatchRerangeSourceRows(m.batch_plan->request_split_lists, cp_size, max_rank_token));
  KVSHARD_ASSIGN_OR_RETURN(*out, IndexRows(gathered, rows));
  return Status::Ok();
}

StatusOr<HostTensor> BatchInSeqAllGatherRerange(const HostTensor& gathered, const NSAContextParallelMetadata& m,
                                                int64_t cp_size) {
  HostTensor out;
  KVSHARD_RETURN_IF_ERROR(BatchInSeqAllGatherRerangeInto(gathered, m, cp_size, &out));
  return out;
}

StatusOr<HostTensor> CpSplitAndRebuildScalar(const HostTensor& input, const NSAContextParallelMetadata& metadata) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(input, "input"));
  const Int64List& split = metadata.split_list;
  if (std::any_of(split.begin(), split.end(), [](int64_t x) { return x < 0 || x > kMaxCpTokens; }) ||
      Sum(split) != input.rows) {
    return InvalidArgument("input: ", input.rows, " rows, the split list covers ", Sum(split));
  }
  HostTensor out;
  out.row_bytes = input.row_bytes;
  for (int64_t s : metadata.zigzag_index) {
    if (s < 0 || s >= static_cast<int64_t>(split.size())) return InvalidArgument("zigzag_index: segment ", s);
    AppendRows(input, Sum(std::span<const int64_t>(split.data(), static_cast<size_t>(s))), split[s], &out);
  }
  return out;
}

StatusOr<HostTensor> RoundRobinSplitData(const HostTensor& input, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(input, "input"));
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(cp_rank, cp_size));
  HostTensor out;
  out.row_bytes = input.row_bytes;
  for (int64_t t = cp_rank; t < input.rows; t += cp_size) AppendRows(input, t, 1, &out);
  return out;
}

StatusOr<HostTensor> RoundRobinRestore(const HostTensor& gathered, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(gathered, "gathered"));
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  if (gathered.rows % cp_size != 0) {
    return InvalidArgument("gathered: ", gathered.rows, " rows are not a multiple of cp_size ", cp_size);
  }
  const int64_t per_rank = gathered.rows / cp_size;
  Int64List rows;
  rows.reserve(gathered.rows);
  for (int64_t i = 0; i < per_rank; ++i) {
    for (int64_t r = 0; r < cp_size; ++r) rows.push_back(r * per_rank + i);
  }
  return IndexRows(gathered, rows);
}

StatusOr<HostTensor> IndexRows(const HostTensor& t, const Int64List& indices) {
  HostTensor out;
  out.row_bytes = t.row_bytes;
  out.rows = static_cast<int64_t>(indices.size());
  out.data.resize(static_cast<size_t>(out.rows * t.row_bytes));
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= t.rows) {
      return InvalidArgument("indices[", i, "]: row ", indices[i], " out of range [0, ", t.rows, ")");
    }
    std::memcpy(out.row(static_cast<int64_t>(i)), t.row(indices[i]), static_cast<size_t>(t.row_bytes));
  }
  return out;
}

StatusOr<HostTensor> ConcatRows(const std::vector<HostTensor>& parts) {
  HostTensor out;
  if (!parts.empty()) out.row_bytes = parts[0].row_bytes;
  for (size_t i = 0; i < parts.size(); ++i) {
    KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(parts[i], "parts"));
    if (parts[i].row_bytes != out.row_bytes) return InvalidArgument("parts[", i, "]: row width differs");
    AppendRows(parts[i], 0, parts[i].rows, &out);
  }
  return out;
}

}  // namespace kvshard::ref

// The CP argument checks and the batch rerange's split checks; their messages are compared byte for byte by goldens and
// the SGLang parity test.
#include "core/cp_limits.h"

namespace kvshard {

Status ValidateCpSize(int64_t cp_size) {
  if (cp_size <= 0) return InvalidArgument("cp_size: must be positive, got ", cp_size);
  if (cp_size > kMaxCpSize) return InvalidArgument("cp_size: must be at most ", kMaxCpSize, ", got ", cp_size);
  return Status::Ok();
}

Status ValidateCpRank(int64_t cp_rank, int64_t cp_size) {
  if (cp_rank < 0 || cp_rank >= cp_size) {
    return InvalidArgument("cp_rank: must be in [0, ", cp_size, "), got ", cp_rank);
  }
  return Status::Ok();
}

Status ValidatePageSize(int64_t page_size) {
  if (page_size <= 0) return InvalidArgument("page_size: must be positive, got ", page_size);
  if (page_size > kMaxCpPageSize) {
    return InvalidArgument("page_size: must be at most ", kMaxCpPageSize, ", got ", page_size);
  }
  return Status::Ok();
}

StatusOr<RerangeTables> CheckedRerangeTables(const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token) {
  if (cp_size <= 0 || cp_size > kMaxCpSize)
    return RerangeFailFast("bad_cp_size", "cp_size must be positive: ", cp_size);
  if (split_lists.rows() > 0 && split_lists.width != 2 * cp_size) {
    return RerangeFailFast("bad_request_split",
                           "request split must have 2 * cp_size entries. req_id=0 cp_size=", cp_size);
  }
  for (int64_t x : split_lists.values) {
    if (x < 0 || x > kMaxCpTokens)
      return RerangeFailFast("bad_request_split", "request split entries must be in [0, 2^48]");
  }
  if (max_rank_token < 0) {
    return RerangeFailFast("bad_max_rank_token", "max_rank_len[0] must be non-negative, got ", max_rank_token);
  }
  RerangeTables t = BuildRerangeTables(split_lists, cp_size);
  for (int64_t rank = 0; rank < cp_size; ++rank) {
    if (t.per_rank_tokens[rank] > max_rank_token) {
      return RerangeFailFast("rank_payload_exceeds_max", "rank local rows exceed max_rank_token. rank=", rank,
                             " rows=", t.per_rank_tokens[rank], " max_rank_token=", max_rank_token);
    }
  }
  return t;
}

StatusOr<int64_t> CheckBatchRerangeInput(int64_t gathered_rows, const NSAContextParallelMetadata& m, int64_t cp_size) {
  const int64_t batch = m.batch_size != 0 ? m.batch_size : 1;
  if (batch <= 1) return RerangeFailFast("not_batch", "batch-aware rerange requires batch_size > 1, got ", batch);
  if (m.batch_plan == nullptr || m.batch_plan->request_split_lists.rows() != batch) {
    return RerangeFailFast("missing_request_split_lists",
                           "request_split_lists is missing or incomplete. batch_size=", batch);
  }
  if (static_cast<int64_t>(m.max_rank_len.size()) < cp_size) {
    return RerangeFailFast("missing_max_rank_len",
                           "max_rank_len is missing or shorter than cp_size. cp_size=", cp_size);
  }
  if (cp_size <= 0) return RerangeFailFast("bad_cp_size", "cp_size must be positive: ", cp_size);
  if (m.batch_plan->request_split_lists.width != 2 * cp_size) {
    return RerangeFailFast("bad_request_split",
                           "request split must have 2 * cp_size entries. req_id=0 cp_size=", cp_size);
  }
  const int64_t max_rank_token = m.max_rank_len[0];
  if (max_rank_token < 0) {
    return RerangeFailFast("bad_max_rank_token", "max_rank_len[0] must be non-negative, got ", max_rank_token);
  }
  if (max_rank_token > kMaxCpTokens || gathered_rows < max_rank_token * cp_size) {
    return RerangeFailFast("input_rows_short", "input rows=", gathered_rows, " required=", max_rank_token * cp_size,
                           " max_rank_token=", max_rank_token, " cp_size=", cp_size);
  }
  return max_rank_token;
}

}  // namespace kvshard

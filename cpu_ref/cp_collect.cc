// Reference last-token collection (batch, bs=1 and round-robin).
#include "cpu_ref/cp_collect.h"

#include <cstring>

#include "core/cp_limits.h"
#include "cpu_ref/cp_split.h"

namespace kvshard::ref {
namespace {

void CopyRow(const HostTensor& src, int64_t from, HostTensor* dst, int64_t to) {
  std::memcpy(dst->row(to), src.row(from), static_cast<size_t>(src.row_bytes));
}

Status CheckRanks(const std::vector<HostTensor>& rank_hidden) {
  if (rank_hidden.empty()) return InvalidArgument("rank_hidden: need one tensor per rank, got none");
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(static_cast<int64_t>(rank_hidden.size())));
  for (const HostTensor& h : rank_hidden) {
    KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(h, "rank_hidden"));
    if (h.row_bytes != rank_hidden[0].row_bytes) return InvalidArgument("rank_hidden: row widths differ");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<HostTensor> InSeqLastTokenLocalRows(const HostTensor& hidden, const CPSharedKVBatchPlan& plan) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(hidden, "hidden"));
  const int64_t bs = plan.batch_size;
  const Int64List& owners = plan.request_last_token_owner;
  const Int64List& local_offsets = plan.request_last_token_local_offset;
  const Int64List& rank_offsets =
      plan.compute_padding_enabled ? plan.request_compute_rank_local_offsets : plan.request_rank_local_offsets;
  if (static_cast<int64_t>(owners.size()) != bs || static_cast<int64_t>(local_offsets.size()) != bs ||
      static_cast<int64_t>(rank_offsets.size()) != bs) {
    return FailFast("batch_gt1_missing_last_token_metadata",
                    "CP in-seq bs>1 narrow output requires per-request owner, local offset, and rank-local offset "
                    "metadata.");
  }
  HostTensor local = HostTensor::Zeros(bs, hidden.row_bytes);
  for (int64_t q = 0; q < bs; ++q) {
    const int64_t owner = owners[q];
    if (owner < 0 || owner >= plan.cp_size) {
      return FailFast("batch_gt1_invalid_last_token_owner", "req_id=", q, " owner=", owner, " cp_size=", plan.cp_size);
    }
    if (plan.cp_rank != owner) continue;
    const int64_t row = rank_offsets[q] + local_offsets[q];
    if (rank_offsets[q] < 0 || local_offsets[q] < 0 || row >= hidden.rows) {
      return FailFast("batch_gt1_last_token_oob", "in-seq last-token metadata points past local hidden. req_id=", q,
                      " owner=", owner, " rank_offset=", rank_offsets[q], " local_offset=", local_offsets[q],
                      " local_tokens=", hidden.rows);
    }
    CopyRow(hidden, row, &local, q);
  }
  return local;
}

StatusOr<HostTensor> GatherLastTokens(const std::vector<HostTensor>& rank_local_rows, const Int64List& owners) {
  KVSHARD_RETURN_IF_ERROR(CheckRanks(rank_local_rows));
  const int64_t bs = static_cast<int64_t>(owners.size());
  const int64_t n = static_cast<int64_t>(rank_local_rows.size());
  HostTensor out = HostTensor::Zeros(bs, rank_local_rows[0].row_bytes);
  for (int64_t q = 0; q < bs; ++q) {
    if (owners[q] < 0 || owners[q] >= n) return InvalidArgument("owners[", q, "]: must be in [0, ", n, ")");
    const HostTensor& src = rank_local_rows[owners[q]];
    if (src.rows != bs) return InvalidArgument("rank_local_rows[", owners[q], "]: must have ", bs, " rows");
    CopyRow(src, q, &out, q);
  }
  return out;
}

StatusOr<HostTensor> InSeqCollectLastTokenBatch(const std::vector<HostTensor>& rank_hidden,
                                                const std::vector<CPSharedKVBatchPlan>& rank_plans) {
  KVSHARD_RETURN_IF_ERROR(CheckRanks(rank_hidden));
  if (rank_plans.size() != rank_hidden.size()) return InvalidArgument("rank_plans: need one plan per rank");
  std::vector<HostTensor> local;
  for (size_t r = 0; r < rank_hidden.size(); ++r) {
    if (rank_plans[r].cp_rank != static_cast<int64_t>(r) ||
        rank_plans[r].cp_size != static_cast<int64_t>(rank_hidden.size())) {
      return InvalidArgument("rank_plans[", r, "]: built for rank ", rank_plans[r].cp_rank, " of ",
                             rank_plans[r].cp_size);
    }
    KVSHARD_ASSIGN_OR_RETURN(HostTensor rows, InSeqLastTokenLocalRows(rank_hidden[r], rank_plans[r]));
    local.push_back(std::move(rows));
  }
  return GatherLastTokens(local, rank_plans[0].request_last_token_owner);
}

StatusOr<HostTensor> InSeqCollectLastTokenScalar(const std::vector<HostTensor>& rank_hidden,
                                                 const Int64List& split_list, int64_t actual_token_count) {
  KVSHARD_RETURN_IF_ERROR(CheckRanks(rank_hidden));
  const int64_t n = static_cast<int64_t>(rank_hidden.size());
  KVSHARD_ASSIGN_OR_RETURN(LastTokenLocation loc, GetInSeqLastTokenOwnerAndOffset(split_list, n, actual_token_count));
  HostTensor out = HostTensor::Zeros(1, rank_hidden[0].row_bytes);
  const HostTensor& h = rank_hidden[loc.owner];
  if (h.rows >= loc.local_offset + 1) CopyRow(h, loc.local_offset, &out, 0);
  return out;
}

StatusOr<HostTensor> RoundRobinCollectLastToken(const std::vector<HostTensor>& rank_hidden,
                                                const Int64List& extend_lens) {
  KVSHARD_RETURN_IF_ERROR(CheckRanks(rank_hidden));
  const int64_t n = static_cast<int64_t>(rank_hidden.size());
  KVSHARD_ASSIGN_OR_RETURN(std::vector<LastTokenLocation> locs, RoundRobinLastTokenLocations(extend_lens, n));
  const int64_t bs = static_cast<int64_t>(locs.size());
  HostTensor out = HostTensor::Zeros(bs, rank_hidden[0].row_bytes);
  for (int64_t q = 0; q < bs; ++q) {
    const HostTensor& h = rank_hidden[locs[q].owner];
    if (locs[q].local_offset >= h.rows) {
      return FailFast("batch_gt1_last_token_oob",
                      "round-robin last-token owner metadata points past local hidden. req_id=", q,
                      " local_offset=", locs[q].local_offset, " local_tokens=", h.rows);
    }
    CopyRow(h, locs[q].local_offset, &out, q);
  }
  return out;
}

}  // namespace kvshard::ref

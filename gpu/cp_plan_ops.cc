// CP plan adapters and host-vector runners.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cp_limits.h"
#include "gpu/cp_plan_ops.h"
#include "gpu/device.h"
#include "gpu/nvtx.h"

namespace kvshard::gpu {
namespace {

Status CheckBadCounter(const DeviceBuffer& bad) {
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> v, Download<int64_t>(bad.data(), 1));
  if (v[0] != 0) return Mismatch("kernel skipped ", v[0], " rows with inconsistent metadata");
  return Status::Ok();
}

}  // namespace

StatusOr<SegmentTable> SplitSegments(const CPSharedKVBatchPlan& plan, SplitKind kind, int64_t input_rows) {
  const FlatSplitTables t = FlattenSplitTables(plan, kind);
  const int64_t n = plan.cp_size, s = 2 * n, r = plan.cp_rank;
  if (t.batch_size != static_cast<int64_t>(plan.request_extend_lens.size()) ||
      static_cast<int64_t>(t.split_lens.size()) != t.batch_size * s) {
    return FailFast("batch_gt1_missing_split_metadata",
                    "CP shared-KV batch split requires per-request split metadata.");
  }
  const int64_t expected = t.input_row_offsets.back();
  const bool compute_pad = kind == SplitKind::kCompute && plan.compute_padding_enabled;
  if (input_rows != expected && !(compute_pad && input_rows > expected && input_rows <= t.target_offsets.back())) {
    return FailFast("batch_gt1_split_input_len_mismatch", StrCat("input tokens=", input_rows, " expected=", expected));
  }
  SegmentTable out;
  out.out_start.push_back(0);
  for (int64_t q = 0; q < t.batch_size; ++q) {
    const int64_t extend = plan.request_extend_lens[q], target = t.target_lens[q];
    if (target < extend) {
      return FailFast("batch_gt1_compute_padding_len_mismatch",
                      StrCat("req_id=", q, " target_len=", target, " current_len=", extend));
    }
    if (target > extend && extend <= 0) {
      return FailFast("batch_gt1_compute_padding_empty_request", StrCat("req_id=", q));
    }
    int64_t split_total = 0;
    for (int64_t k = 0; k < s; ++k) split_total += t.split_lens[q * s + k];
    if (split_total != target) {
      return FailFast("batch_gt1_split_target_len_mismatch",
                      StrCat("req_id=", q, " split_total=", split_total, " request_rows=", target));
    }
    for (int64_t seg : {r, s - 1 - r}) {
      const int64_t start = t.segment_offsets[q * s + seg], len = t.split_lens[q * s + seg];
      const int64_t valid = std::max<int64_t>(0, std::min(len, extend - start));
      out.src_start.push_back(t.input_row_offsets[q] + start);
      out.valid_len.push_back(valid);
      out.last_row.push_back(t.input_row_offsets[q] + extend - 1);
      out.pad_offset.push_back(start + valid - extend);
      out.out_start.push_back(out.out_start.back() + len);
    }
  }
  out.out_rows = out.out_start.back();
  return out;
}

StatusOr<SegmentTable> ValidRowSegments(const CPSharedKVBatchPlan& plan, int64_t* compute_rows) {
  const int64_t n = plan.cp_size, s = 2 * n, r = plan.cp_rank;
  const bool pad = plan.compute_padding_enabled;
  const Int64Table& compute = pad ? plan.request_compute_split_lists : plan.request_split_lists;
  const Int64Table& valid = plan.request_split_lists;
  if (compute.rows() != plan.batch_size || valid.rows() != plan.batch_size || compute.width != s || valid.width != s) {
    return FailFast(
        "cache_write_valid_selector_metadata",
        "CP shared-KV cache writes require valid and compute split metadata when compute padding is enabled.");
  }
  SegmentTable out;
  out.out_start.push_back(0);
  int64_t cursor = 0;
  for (int64_t q = 0; q < plan.batch_size; ++q) {
    for (int64_t seg : {r, s - 1 - r}) {
      const int64_t c = compute[q][seg], v = valid[q][seg];
      if (v > c) {
        return FailFast("cache_write_valid_selector_metadata",
                        StrCat("valid segment is longer than compute segment. req_id=", q, " segment_id=", seg,
                               " valid_len=", v, " compute_len=", c));
      }
      out.src_start.push_back(cursor);
      out.valid_len.push_back(v);
      out.last_row.push_back(0);
      out.pad_offset.push_back(0);
      out.out_start.push_back(out.out_start.back() + v);
      cursor += c;
    }
  }
  out.out_rows = out.out_start.back();
  *compute_rows = cursor;
  return out;
}

StatusOr<std::vector<uint8_t>> RunSegmentGather(const std::vector<uint8_t>& input, int64_t row_bytes,
                                                const SegmentTable& table, PadMode pad) {
  KVSHARD_NVTX_RANGE("kvshard.cp.segment_gather");
  const int64_t in_rows = static_cast<int64_t>(input.size()) / row_bytes;
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_in, Upload(input.empty() ? std::vector<uint8_t>(row_bytes) : input));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_out,
                           DeviceBuffer::Allocate(std::max<int64_t>(1, table.out_rows) * row_bytes));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_os, Upload(table.out_start));
  auto up = [](const Int64List& v) { return Upload(v.empty() ? Int64List{0} : v); };
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_ss, up(table.src_start));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_vl, up(table.valid_len));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_lr, up(table.last_row));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_po, up(table.pad_offset));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_bad, Upload(std::vector<int64_t>{0}));
  KVSHARD_RETURN_IF_ERROR(LaunchSegmentGather(d_out.data(), d_in.data(), in_rows, d_os.as<int64_t>(),
                                              d_ss.as<int64_t>(), d_vl.as<int64_t>(), d_lr.as<int64_t>(),
                                              d_po.as<int64_t>(), table.segments(), table.out_rows, row_bytes, pad,
                                              d_bad.as<int64_t>(), nullptr));
  KVSHARD_RETURN_IF_ERROR(SyncStream(nullptr));
  KVSHARD_RETURN_IF_ERROR(CheckBadCounter(d_bad));
  return Download<uint8_t>(d_out.data(), table.out_rows * row_bytes);
}

StatusOr<std::vector<uint8_t>> RunBatchRerange(const std::vector<uint8_t>& gathered, int64_t row_bytes,
                                               const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token,
                                               RerangeRun how) {
  KVSHARD_NVTX_RANGE("kvshard.cp.batch_rerange");
  int64_t total = 0;
  for (int64_t v : split_lists.values) total += v;
  const int64_t batch = split_lists.rows();
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_in, Upload(gathered.empty() ? std::vector<uint8_t>(row_bytes) : gathered));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_out, DeviceBuffer::Allocate(std::max<int64_t>(1, total) * row_bytes));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_split,
                           Upload(split_lists.values.empty() ? Int64List{0} : split_lists.values));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_bad, Upload(std::vector<int64_t>{0}));
  if (static_cast<int64_t>(gathered.size()) < cp_size * max_rank_token * row_bytes) {
    return InvalidArgument("gathered: ", gathered.size() / row_bytes,
                           " rows, need cp_size*max_rank_token = ", cp_size * max_rank_token);
  }
  DeviceBuffer d_temp;  // the per-batch table (kTableThenGather), alive until the stream is synchronised
  if (how == RerangeRun::kAuto) {
    KVSHARD_RETURN_IF_ERROR(LaunchBatchRerange(d_out.data(), d_in.data(), d_split.as<int64_t>(), batch, cp_size,
                                               max_rank_token, total, row_bytes, d_bad.as<int64_t>(), nullptr));
  } else {
    const size_t bytes = BatchRerangeTempBytes(batch, cp_size, total);
    KVSHARD_ASSIGN_OR_RETURN(d_temp, DeviceBuffer::Allocate(bytes));
    KVSHARD_RETURN_IF_ERROR(LaunchBuildRerangeTable(d_split.as<int64_t>(), batch, cp_size, max_rank_token, total,
                                                    d_bad.as<int64_t>(), d_temp.data(), bytes, nullptr));
    KVSHARD_RETURN_IF_ERROR(LaunchRerangeFromTable(d_out.data(), d_in.data(), d_temp.data(), batch, cp_size,
                                                   max_rank_token, total, row_bytes, nullptr));
  }
  KVSHARD_RETURN_IF_ERROR(SyncStream(nullptr));
  KVSHARD_RETURN_IF_ERROR(CheckBadCounter(d_bad));
  return Download<uint8_t>(d_out.data(), total * row_bytes);
}

StatusOr<std::vector<uint8_t>> RunCollectLastToken(const std::vector<uint8_t>& hidden, int64_t row_bytes,
                                                   const CPSharedKVBatchPlan& plan) {
  KVSHARD_NVTX_RANGE("kvshard.cp.collect_last_token");
  const Int64List& offsets =
      plan.compute_padding_enabled ? plan.request_compute_rank_local_offsets : plan.request_rank_local_offsets;
  Int64List rows(plan.batch_size);
  for (int64_t q = 0; q < plan.batch_size; ++q) rows[q] = offsets[q] + plan.request_last_token_local_offset[q];
  const int64_t hidden_rows = static_cast<int64_t>(hidden.size()) / row_bytes;
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_h, Upload(hidden.empty() ? std::vector<uint8_t>(row_bytes) : hidden));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_owner, Upload(plan.request_last_token_owner));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_rows, Upload(rows));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_out, DeviceBuffer::Allocate(plan.batch_size * row_bytes));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_bad, Upload(std::vector<int64_t>{0}));
  KVSHARD_RETURN_IF_ERROR(LaunchCollectLastToken(d_out.data(), d_h.data(), hidden_rows, d_owner.as<int64_t>(),
                                                 d_rows.as<int64_t>(), plan.batch_size, plan.cp_rank, row_bytes,
                                                 d_bad.as<int64_t>(), nullptr));
  KVSHARD_RETURN_IF_ERROR(SyncStream(nullptr));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> bad, Download<int64_t>(d_bad.data(), 1));
  if (bad[0]) return FailFast("batch_gt1_last_token_oob", "in-seq last-token metadata points past local hidden.");
  return Download<uint8_t>(d_out.data(), plan.batch_size * row_bytes);
}

StatusOr<std::vector<uint8_t>> RunRoundRobinSplit(const std::vector<uint8_t>& input, int64_t row_bytes, int64_t cp,
                                                  int64_t rank) {
  KVSHARD_NVTX_RANGE("kvshard.cp.round_robin_split");
  const int64_t tokens = static_cast<int64_t>(input.size()) / row_bytes;
  const int64_t rows = tokens / cp + (tokens % cp > rank ? 1 : 0);
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_in, Upload(input.empty() ? std::vector<uint8_t>(row_bytes) : input));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_out, DeviceBuffer::Allocate(std::max<int64_t>(1, rows) * row_bytes));
  KVSHARD_RETURN_IF_ERROR(LaunchRoundRobinSplit(d_out.data(), d_in.data(), tokens, cp, rank, row_bytes, nullptr));
  KVSHARD_RETURN_IF_ERROR(SyncStream(nullptr));
  return Download<uint8_t>(d_out.data(), rows * row_bytes);
}

StatusOr<std::vector<uint8_t>> RunRoundRobinRestore(const std::vector<uint8_t>& gathered, int64_t row_bytes,
                                                    int64_t cp) {
  KVSHARD_NVTX_RANGE("kvshard.cp.round_robin_restore");
  const int64_t rows = static_cast<int64_t>(gathered.size()) / row_bytes;
  if (cp < 1 || rows % cp != 0) return InvalidArgument("gathered: ", rows, " rows is not a multiple of cp_size ", cp);
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_in, Upload(gathered.empty() ? std::vector<uint8_t>(row_bytes) : gathered));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_out, DeviceBuffer::Allocate(std::max<int64_t>(1, rows) * row_bytes));
  KVSHARD_RETURN_IF_ERROR(LaunchRoundRobinRestore(d_out.data(), d_in.data(), cp, rows / cp, row_bytes, nullptr));
  KVSHARD_RETURN_IF_ERROR(SyncStream(nullptr));
  return Download<uint8_t>(d_out.data(), rows * row_bytes);
}

}  // namespace kvshard::gpu

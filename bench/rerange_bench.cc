// CP batch rerange of c.opt.batch ragged requests (cp = 8, ps = 64) whose gathered rows total the payload: the
// device rerange per call (one launch while batch x 2cp <= 6,144 segments, else segment table and row index from
// the device split table, then the index gather; with a preallocated and a stream-ordered scratch), per batch
// (table once, a gather per layer), and one cudaMemcpyAsync per non-empty segment (SGLang's torch path), against
// gather_rows of the same run (else the copy), each checked against the original request-order rows.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include <cuda_runtime.h>

#include "bench/ops.h"
#include "core/cp_plan.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "gpu/cp_ops.h"
#include "gpu/device.h"
#include "gpu/timing.h"

namespace kvshard::bench {

Status BenchRerange(BenchContext& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, cp = 8, ps = 64, reqs = c.opt.batch;
  const int64_t rows = bytes / rb;
  std::mt19937_64 rng(3);
  Int64List extend(reqs), prefix(reqs, 0);
  std::vector<double> w(reqs);
  double wsum = 0;
  for (auto& v : w) wsum += (v = 0.25 + (rng() % 1000) / 1000.0);
  int64_t assigned = 0;
  for (int64_t q = 0; q < reqs; ++q) {
    extend[q] = std::max<int64_t>(1, static_cast<int64_t>(rows * w[q] / wsum));
    assigned += extend[q];
  }
  extend[reqs - 1] += std::max<int64_t>(0, rows - assigned);
  KVSHARD_ASSIGN_OR_RETURN(CPSharedKVBatchPlan plan0,
                           ref::BuildBatchPageAlignedInSeqSplitPlan(extend, prefix, ps, cp, 0));
  KVSHARD_ASSIGN_OR_RETURN(NSAContextParallelMetadata meta, ref::BuildBatchMetadataFromPlan(plan0));
  const int64_t m = meta.max_rank_token();
  int64_t total = 0;
  for (int64_t e : extend) total += e;
  // The gathered buffer, built from the rerange's own source-row map of the reference (row i -> src[i]).
  KVSHARD_ASSIGN_OR_RETURN(Int64List src, ref::BatchRerangeSourceRows(plan0.request_split_lists, cp, m));
  const auto x = PatternRows(total, rb, 9);
  std::vector<uint8_t> gathered(cp * m * rb, 0);
  for (int64_t i = 0; i < total; ++i) std::memcpy(gathered.data() + src[i] * rb, x.data() + i * rb, rb);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_in, gpu::Upload(gathered));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(total * rb));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_split, gpu::Upload(plan0.request_split_lists.values));
  const bool vs_gather = c.gather_rows_busbw.count(bytes) > 0;
  const std::string limit = vs_gather ? "gather_rows" : "copy";
  const double limit_bw = vs_gather ? c.gather_rows_busbw[bytes] : c.copy_busbw[bytes];
  auto pct_copy = [&](double us) {
    return c.copy_busbw[bytes] > 0 ? 100.0 * (2.0 * total * rb / us / 1e3) / c.copy_busbw[bytes] : 0.0;
  };
  const size_t temp_bytes = gpu::BatchRerangeTempBytes(reqs, cp, total);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_temp, gpu::DeviceBuffer::Allocate(temp_bytes));
  const int64_t layers = std::max<int64_t>(1, c.opt.layers);
  // 0: table + gather per call (preallocated scratch); 1: the same, scratch from cudaMallocAsync; 2: the table
  // built once per batch and `layers` gathers from it (per-layer time reported).
  for (const int variant : {0, 1, 2}) {
    KVSHARD_CUDA_CHECK(cudaMemset(d_out.data(), 0, total * rb));
    KVSHARD_ASSIGN_OR_RETURN(
        double us, gpu::TimeMeanUs(
                       [&]() -> Status {
                         if (variant == 1) {
                           return gpu::LaunchBatchRerange(d_out.data(), d_in.data(), d_split.as<int64_t>(), reqs, cp, m,
                                                          total, rb, nullptr, nullptr);
                         }
                         if (variant == 0) {
                           return gpu::LaunchBatchRerange(d_out.data(), d_in.data(), d_split.as<int64_t>(), reqs, cp, m,
                                                          total, rb, nullptr, d_temp.data(), temp_bytes, nullptr);
                         }
                         KVSHARD_RETURN_IF_ERROR(gpu::LaunchBuildRerangeTable(
                             d_split.as<int64_t>(), reqs, cp, m, total, nullptr, d_temp.data(), temp_bytes, nullptr));
                         for (int64_t l = 0; l < layers; ++l) {
                           KVSHARD_RETURN_IF_ERROR(gpu::LaunchRerangeFromTable(d_out.data(), d_in.data(), d_temp.data(),
                                                                               reqs, cp, m, total, rb, nullptr));
                         }
                         return Status::Ok();
                       },
                       {0}, c.opt.warmup, c.opt.iters));
    if (variant == 2) us /= static_cast<double>(layers);
    KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_out.data(), total * rb));
    static const char* const kOps[] = {"rerange", "rerange_pooled_temp", "rerange_table_per_batch"};
    BenchRow r = MakeRow(kOps[variant], total * rb, us, 2.0 * total * rb, limit, limit_bw, CountWrongRows(got, x, rb));
    char pc[32];
    std::snprintf(pc, sizeof(pc), "%.1f", pct_copy(us));
    static const char* const kNotes[] = {"per call, preallocated scratch (one launch up to 6,144 segments)",
                                         "per call, scratch from cudaMallocAsync (none up to 6,144 segments)",
                                         "table + index once per batch, one gather per layer, per layer"};
    r.note = std::to_string(reqs) + " requests, cp=8, ps=64; " + kNotes[variant] +
             (variant == 2 ? " (" + std::to_string(layers) + " layers)" : std::string()) + "; " + pc + " % of copy";
    c.rows->push_back(r);
  }
  KVSHARD_ASSIGN_OR_RETURN(std::vector<ref::RowCopy> copies, ref::BatchRerangeCopies(plan0.request_split_lists, cp, m));
  KVSHARD_CUDA_CHECK(cudaMemset(d_out.data(), 0, total * rb));
  KVSHARD_ASSIGN_OR_RETURN(
      double us_seg, gpu::TimeMeanUs(
                         [&]() -> Status {
                           for (const ref::RowCopy& rc : copies) {
                             KVSHARD_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(d_out.data()) + rc.dst_row * rb,
                                                                static_cast<const char*>(d_in.data()) + rc.src_row * rb,
                                                                rc.rows * rb, cudaMemcpyDeviceToDevice, nullptr));
                           }
                           return Status::Ok();
                         },
                         {0}, 2, std::max(2, c.opt.iters / 4)));
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_out.data(), total * rb));
  BenchRow s2 = MakeRow("rerange_per_segment", total * rb, us_seg, 2.0 * total * rb, "copy", c.copy_busbw[bytes],
                        CountWrongRows(got, x, rb));
  s2.note = std::to_string(copies.size()) + " cudaMemcpyAsync (SGLang torch path shape)";
  c.rows->push_back(s2);
  return Status::Ok();
}

}  // namespace kvshard::bench

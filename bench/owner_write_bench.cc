// Owner-filtered write of a chunk into rank 0's pool shard (N = 8, ps = 64): the scatter through the write
// plan cached per batch (SGLang's _get_write_plan) and the fused kernel recomputing the owner mask per row.
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include "bench/ops.h"
#include "core/spec.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "gpu/timing.h"

namespace kvshard::bench {

// The chunk has 8x the written bytes; moved = owned rows read + written (the loc reads are the kernel's
// overhead).
Status BenchOwnerWrite(BenchContext& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, owned = bytes / rb, ranks = 8, ps = 64;
  const PlacementSpec spec{ranks, ps};
  const int64_t n = owned * ranks;
  std::vector<int64_t> locs(n);
  // A fresh chunk of consecutive pages starting past the trash pages.
  for (int64_t i = 0; i < n; ++i) locs[i] = spec.logical_page_size() + i;
  const int64_t pool_rows = (n / spec.logical_page_size() + 2) * ps;
  const auto rows = PatternRows(n, rb, 3);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_rows, gpu::Upload(rows));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_locs, gpu::Upload(locs));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_pool, gpu::DeviceBuffer::Allocate(pool_rows * rb));
  KVSHARD_CUDA_CHECK(cudaMemset(d_pool.data(), 0, d_pool.bytes()));
  // The write plan is built once per batch (SGLang caches it per (loc tensor, epoch)); each layer's write is
  // then a scatter of the owned rows.
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_owned, gpu::DeviceBuffer::Allocate(n * sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_local, gpu::DeviceBuffer::Allocate(n * sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_count, gpu::DeviceBuffer::Allocate(sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(size_t temp_bytes, gpu::WritePlanTempBytes(n));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_temp, gpu::DeviceBuffer::Allocate(temp_bytes));
  KVSHARD_ASSIGN_OR_RETURN(double us_plan, gpu::TimeMeanUs(
                                               [&] {
                                                 return gpu::LaunchBuildWritePlan(
                                                     d_locs.as<int64_t>(), n, spec, 0, d_owned.as<int64_t>(),
                                                     d_local.as<int64_t>(), d_count.as<int64_t>(), d_temp.data(),
                                                     temp_bytes, nullptr);
                                               },
                                               {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs(
                                          [&] {
                                            return gpu::LaunchScatterRows(
                                                d_pool.data(), pool_rows, d_rows.data(), n, d_owned.as<int64_t>(),
                                                d_local.as<int64_t>(), d_count.as<int64_t>(), n, rb, nullptr, nullptr);
                                          },
                                          {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(double us_fused, gpu::TimeMeanUs(
                                                [&] {
                                                  return gpu::LaunchOwnerFilteredWrite(
                                                      d_pool.data(), pool_rows, d_rows.data(), d_locs.as<int64_t>(), n,
                                                      spec, 0, rb, nullptr, nullptr);
                                                },
                                                {0}, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(pool_rows * rb, 0);
  int64_t written = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t loc = locs[i];
    if ((loc % spec.logical_page_size()) / ps != 0) continue;
    const int64_t row = (loc / spec.logical_page_size()) * ps + loc % ps;
    std::memcpy(want.data() + row * rb, rows.data() + i * rb, rb);
    ++written;
  }
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_pool.data(), want.size()));
  const int64_t wrong = CountWrongRows(got, want, rb);
  BenchRow r = MakeRow("owner_write", written * rb, us, 2.0 * written * rb, "copy", c.copy_busbw[bytes], wrong);
  r.note = "N=8 ps=64 rank 0, cached write plan (scatter); plan build " + std::to_string(us_plan) + " us/batch";
  c.rows->push_back(r);
  BenchRow f =
      MakeRow("owner_write_fused", written * rb, us_fused, 2.0 * written * rb, "copy", c.copy_busbw[bytes], wrong);
  f.note = "same write, owner mask recomputed per row (no plan)";
  c.rows->push_back(f);
  return Status::Ok();
}

}  // namespace kvshard::bench

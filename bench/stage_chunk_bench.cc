// Chunk staging: every chunk row lands at translate(loc) of the scratch slot's chunk region (page_pos maps the
// chunk's pages in batch order, shuffled across requests), against the device copy of the same bytes.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include <cuda_runtime.h>

#include "bench/ops.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "gpu/timing.h"

namespace kvshard::bench {

Status BenchStageChunk(BenchContext& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, ps = 64, n = bytes / rb;
  const int64_t pages = (n + ps - 1) / ps;
  std::vector<int64_t> page_ids(pages);
  std::iota(page_ids.begin(), page_ids.end(), 8);
  std::shuffle(page_ids.begin(), page_ids.end(), std::mt19937_64(11));
  const int64_t n_page_pos = pages + 8;
  const int64_t trash = pages;  // scratch page of the trash page: chunk region is [0, pages)
  std::vector<int32_t> page_pos(n_page_pos, static_cast<int32_t>(trash));
  for (int64_t j = 0; j < pages; ++j) page_pos[page_ids[j]] = static_cast<int32_t>(j);
  std::vector<int64_t> locs(n);
  for (int64_t i = 0; i < n; ++i) locs[i] = page_ids[i / ps] * ps + i % ps;
  const int64_t scratch_rows = (pages + 1) * ps;
  const auto rows = PatternRows(n, rb, 4);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_rows, gpu::Upload(rows));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_locs, gpu::Upload(locs));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_pp, gpu::Upload(page_pos));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_scratch, gpu::DeviceBuffer::Allocate(scratch_rows * rb));
  KVSHARD_CUDA_CHECK(cudaMemset(d_scratch.data(), 0, d_scratch.bytes()));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs(
                                          [&] {
                                            return gpu::LaunchStageChunk(d_scratch.data(), scratch_rows, d_rows.data(),
                                                                         d_locs.as<int64_t>(), n, d_pp.as<int32_t>(),
                                                                         n_page_pos, ps, rb, nullptr, nullptr);
                                          },
                                          {0}, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(scratch_rows * rb, 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = int64_t{page_pos[locs[i] / ps]} * ps + locs[i] % ps;
    std::memcpy(want.data() + row * rb, rows.data() + i * rb, rb);
  }
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_scratch.data(), want.size()));
  c.rows->push_back(
      MakeRow("stage_chunk", n * rb, us, 2.0 * n * rb, "copy", c.copy_busbw[bytes], CountWrongRows(got, want, rb)));
  return Status::Ok();
}

}  // namespace kvshard::bench

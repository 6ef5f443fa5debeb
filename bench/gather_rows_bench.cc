// index_select gather (the send-row packing of the layer-ahead gather) of the payload in shuffled row order,
// against the device copy of the same bytes.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "bench/ops.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "gpu/timing.h"

namespace kvshard::bench {

Status BenchGatherRows(BenchContext& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, n = bytes / rb;
  std::vector<int64_t> index(n);
  std::iota(index.begin(), index.end(), 0);
  std::shuffle(index.begin(), index.end(), std::mt19937_64(7));
  const auto in = PatternRows(n, rb, 2);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_in, gpu::Upload(in));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(n * rb));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_idx, gpu::Upload(index));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs(
                                          [&] {
                                            return gpu::LaunchGatherRows(d_out.data(), d_in.data(), n,
                                                                         d_idx.as<int64_t>(), n, rb, nullptr, nullptr);
                                          },
                                          {0}, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(n * rb);
  for (int64_t i = 0; i < n; ++i) std::memcpy(want.data() + i * rb, in.data() + index[i] * rb, rb);
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_out.data(), n * rb));
  c.rows->push_back(
      MakeRow("gather_rows", n * rb, us, 2.0 * n * rb, "copy", c.copy_busbw[bytes], CountWrongRows(got, want, rb)));
  c.gather_rows_busbw[bytes] = c.rows->back().busbw_gbs;
  return Status::Ok();
}

}  // namespace kvshard::bench

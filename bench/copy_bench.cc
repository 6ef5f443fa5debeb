// The kernels' limit: a device-to-device copy of the payload on GPU 0 (bytes read + written per second).
#include <cuda_runtime.h>

#include "bench/ops.h"
#include "gpu/device.h"
#include "gpu/timing.h"

namespace kvshard::bench {

Status BenchCopy(BenchContext& c, int64_t bytes) {
  KVSHARD_CUDA_CHECK(cudaSetDevice(0));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer src,
                           gpu::Upload(PatternRows(bytes / c.opt.row_bytes, c.opt.row_bytes, 1)));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer dst, gpu::DeviceBuffer::Allocate(src.bytes()));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs(
                                          [&]() -> Status {
                                            KVSHARD_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(),
                                                                               cudaMemcpyDeviceToDevice, nullptr));
                                            return Status::Ok();
                                          },
                                          {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(dst.data(), src.bytes()));
  KVSHARD_ASSIGN_OR_RETURN(auto want, gpu::Download<uint8_t>(src.data(), src.bytes()));
  BenchRow row =
      MakeRow("copy", src.bytes(), us, 2.0 * src.bytes(), "copy", 0, CountWrongRows(got, want, c.opt.row_bytes));
  row.pct_limit = 100;
  c.copy_busbw[bytes] = row.busbw_gbs;
  c.rows->push_back(row);
  return Status::Ok();
}

}  // namespace kvshard::bench

// Benchmark timing helper.
#include <cuda_runtime.h>

#include <chrono>

#include "gpu/timing.h"

namespace kvshard::gpu {
namespace {
Status SyncAll(const std::vector<int>& devices) {
  for (int d : devices) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(d));
    KVSHARD_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return Status::Ok();
}
}  // namespace

StatusOr<double> TimeMeanUs(const std::function<Status()>& enqueue, const std::vector<int>& devices, int warmup,
                            int iters) {
  if (iters < 1) return InvalidArgument("iters: must be >= 1, got ", iters);
  for (int i = 0; i < warmup; ++i) KVSHARD_RETURN_IF_ERROR(enqueue());
  KVSHARD_RETURN_IF_ERROR(SyncAll(devices));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) KVSHARD_RETURN_IF_ERROR(enqueue());
  KVSHARD_RETURN_IF_ERROR(SyncAll(devices));
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

}  // namespace kvshard::gpu

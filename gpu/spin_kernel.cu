// SpinKernel: the compute stand-in's timed spin (see spin_kernel.h).
#include <cuda_runtime.h>

#include "gpu/spin_kernel.h"

namespace kvshard::gpu {
namespace {

__global__ void SpinKernel(int64_t ns, bool sleep) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    if (sleep) __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<int64_t>(now - start) < ns);
}

}  // namespace

Status LaunchSpin(int64_t ns, bool sleep, int blocks, int threads, cudaStream_t stream) {
  // An SM holding a block with a small carveout cannot take a collective's blocks (they need a large one) until
  // it drains; attention kernels configure the maximum, so the stand-in does too.
  static const cudaError_t carveout = cudaFuncSetAttribute(SpinKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                           static_cast<int>(cudaSharedmemCarveoutMaxShared));
  KVSHARD_CUDA_CHECK(carveout);
  SpinKernel<<<blocks, threads, 0, stream>>>(ns, sleep);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kvshard::gpu

// StallKernel: the contribution of an emulated rank that never arrives (see stall_kernel.h).
#include <cuda_runtime.h>

#include "gpu/stall_kernel.h"

namespace kvshard::gpu {
namespace {

// Spins until the host sets *flag (pinned, mapped memory).
__global__ void StallKernel(const volatile int* flag) {
  while (*flag == 0) __nanosleep(10000);
}

}  // namespace

Status LaunchStall(const volatile int* flag, cudaStream_t stream) {
  StallKernel<<<1, 1, 0, stream>>>(flag);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kvshard::gpu

// The benchmarks' per-layer compute stand-in (LaunchComputeStandIn in gpu/prefix_gather.h): blocks that hold
// the SMs for a given time. Host-safe header; the kernel is gpu/spin_kernel.cu.
#ifndef KVSHARD_GPU_SPIN_KERNEL_H_
#define KVSHARD_GPU_SPIN_KERNEL_H_

#include <cstdint>

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Enqueues SpinKernel on `stream`: `blocks` x `threads` threads read the global timer until `ns` nanoseconds
// have passed, napping (__nanosleep) between reads when `sleep`. The kernel prefers the maximum shared-memory
// carveout, as attention kernels do.
Status LaunchSpin(int64_t ns, bool sleep, int blocks, int threads, cudaStream_t stream);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_SPIN_KERNEL_H_

// The emulated group's stalled rank (gpu/collective.cc, CreateEmulatedGroupWithStalledRank): a one-thread kernel
// that spins until the host sets a flag. Host-safe header; the kernel is gpu/stall_kernel.cu.
#ifndef KVSHARD_GPU_STALL_KERNEL_H_
#define KVSHARD_GPU_STALL_KERNEL_H_

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Enqueues StallKernel on `stream`: it waits (10 us naps) until *flag != 0. `flag` is the device view of pinned,
// mapped host memory that the host sets to release the stream.
Status LaunchStall(const volatile int* flag, cudaStream_t stream);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_STALL_KERNEL_H_

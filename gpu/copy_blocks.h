// The emulated rank group's all-gathers as one launch (gpu/collective.cc): every (source, destination) block of
// the same size copied by one kernel instead of a cudaMemcpyAsync per pair. Host-safe header; the kernel is
// gpu/copy_blocks.cu.
#ifndef KVSHARD_GPU_COPY_BLOCKS_H_
#define KVSHARD_GPU_COPY_BLOCKS_H_

#include <cstddef>
#include <vector>

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// One block copy: `bytes` (the launch's) from src to dst, both device memory on the current device.
struct BlockCopy {
  const void* src = nullptr;
  void* dst = nullptr;
};

// Enqueues CopyBlocksKernel on `stream`: every copy of `copies`, `bytes` each (16-byte words where both ends are
// aligned), in launches of up to 64 copies. The blocks must not overlap one another.
Status LaunchCopyBlocks(const std::vector<BlockCopy>& copies, size_t bytes, cudaStream_t stream);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_COPY_BLOCKS_H_

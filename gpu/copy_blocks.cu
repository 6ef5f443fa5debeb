// CopyBlocksKernel: blockIdx.y picks the copy, the x blocks stride over its 16-byte words (see copy_blocks.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "gpu/copy_blocks.h"

namespace kvshard::gpu {
namespace {

constexpr int kMaxCopies = 64;  // per launch: the pointers travel as kernel parameters (about 1 KB)
constexpr int kThreads = 256;

struct CopyArgs {
  const char* src[kMaxCopies];
  char* dst[kMaxCopies];
  size_t bytes;
};

__global__ void CopyBlocksKernel(CopyArgs a) {
  const char* src = a.src[blockIdx.y];
  char* dst = a.dst[blockIdx.y];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
    const size_t words = a.bytes / 16;
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    for (size_t i = first; i < words; i += stride) d[i] = s[i];
    done = words * 16;
  }
  for (size_t i = done + first; i < a.bytes; i += stride) dst[i] = src[i];
}

}  // namespace

Status LaunchCopyBlocks(const std::vector<BlockCopy>& copies, size_t bytes, cudaStream_t stream) {
  if (bytes == 0 || copies.empty()) return Status::Ok();
  // Enough blocks per copy to cover it with a few 16-byte words per thread, at most 1,024.
  const size_t words = (bytes + 15) / 16;
  const unsigned x = static_cast<unsigned>(std::clamp<size_t>((words + 4 * kThreads - 1) / (4 * kThreads), 1, 1024));
  for (size_t at = 0; at < copies.size(); at += kMaxCopies) {
    const size_t count = std::min<size_t>(kMaxCopies, copies.size() - at);
    CopyArgs a{};
    a.bytes = bytes;
    for (size_t k = 0; k < count; ++k) {
      a.src[k] = static_cast<const char*>(copies[at + k].src);
      a.dst[k] = static_cast<char*>(copies[at + k].dst);
    }
    CopyBlocksKernel<<<dim3(x, static_cast<unsigned>(count)), kThreads, 0, stream>>>(a);
    KVSHARD_CUDA_CHECK(cudaGetLastError());
  }
  return Status::Ok();
}

}  // namespace kvshard::gpu

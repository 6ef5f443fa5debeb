// NVTX ranges for Nsight Systems: KVSHARD_NVTX_RANGE("kvshard.<area>.<op>") names the enclosing scope. Header-only
// (NVTX 3 from the CUDA toolkit, no link dependency; costs nothing unless a tool is attached); a no-op where the
// toolkit's nvtx3 headers are absent. Host-safe.
#ifndef KVSHARD_GPU_NVTX_H_
#define KVSHARD_GPU_NVTX_H_

#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define KVSHARD_HAVE_NVTX 1
#endif

namespace kvshard::gpu {

// Pushes an NVTX range named `name` (a string literal) for this object's lifetime.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#ifdef KVSHARD_HAVE_NVTX
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#ifdef KVSHARD_HAVE_NVTX
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace kvshard::gpu

#define KVSHARD_NVTX_CONCAT_(a, b) a##b
#define KVSHARD_NVTX_CONCAT(a, b) KVSHARD_NVTX_CONCAT_(a, b)
// Names the rest of the enclosing scope `name` in Nsight Systems' NVTX row.
#define KVSHARD_NVTX_RANGE(name) ::kvshard::gpu::NvtxRange KVSHARD_NVTX_CONCAT(kvshard_nvtx_, __LINE__)(name)

#endif  // KVSHARD_GPU_NVTX_H_

// Helpers shared by the CP kernels (cp_ops.cu, rerange.cu): the segment search and the row-size check.
#ifndef KVSHARD_GPU_CP_KERNELS_CUH_
#define KVSHARD_GPU_CP_KERNELS_CUH_

#include <cstdint>

#include <cuda_runtime.h>

#include "core/status.h"

namespace kvshard::gpu {

// Index of the last k in [0, n) with starts[k] <= i (starts ascending, starts[0] = 0 <= i).
__device__ __forceinline__ int64_t FindSegment(const int64_t* starts, int64_t n, int64_t i) {
  int64_t lo = 0, hi = n;  // invariant: starts[lo] <= i, answer in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (starts[mid] <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Rows >= 0 and row sizes in [1, 2^20] bytes, as every CP row op takes them.
inline Status CpRowSizeCheck(int64_t rows, int64_t row_bytes) {
  if (rows < 0) return InvalidArgument("rows: must be >= 0, got ", rows);
  if (row_bytes <= 0 || row_bytes > (int64_t{1} << 20)) {
    return InvalidArgument("row_bytes: must be in [1, 2^20], got ", row_bytes);
  }
  return Status::Ok();
}

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_CP_KERNELS_CUH_

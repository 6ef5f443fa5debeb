// The block-wide build of one rank's write plan (SGLang's _get_write_plan: the positions a rank owns, ascending, and
// their local rows), shared by kv_ops.cu's one-launch write plans and kv_rank_ops.cu's batch start.
#ifndef KVSHARD_GPU_WRITE_PLANS_CUH_
#define KVSHARD_GPU_WRITE_PLANS_CUH_

#include <cstdint>

#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

namespace kvshard::gpu {

// Whether position i's loc is owned by `rank` (negative locs are padding, owned by none).
struct OwnedBy {
  const int64_t* locs;
  int64_t lps, ps, rank;
  __host__ __device__ bool operator()(int64_t i) const {
    const int64_t loc = locs[i];
    return loc >= 0 && (loc % lps) / ps == rank;
  }
};

inline constexpr int kMaxPlansPerLaunch = 32;  // the plans' pointers travel as kernel parameters (about 1 KB)

// Up to kMaxPlansPerLaunch ranks' write plans over the same locs.
struct WritePlansArgs {
  const int64_t* locs;
  int64_t n, lps, ps;
  int64_t rank[kMaxPlansPerLaunch];
  int64_t* owned_idx[kMaxPlansPerLaunch];
  int64_t* local_rows[kMaxPlansPerLaunch];
  int64_t* count[kMaxPlansPerLaunch];
};

// The calling block (kBlock threads) builds plan p: tiles of kBlock locs, a block scan of the owned flags places each
// owned position. Every thread of the block must call it.
template <int kBlock>
__device__ __forceinline__ void BuildWritePlanBlock(const WritePlansArgs& a, int p) {
  using Scan = cub::BlockScan<int, kBlock>;
  __shared__ typename Scan::TempStorage temp;
  const OwnedBy owned_by{a.locs, a.lps, a.ps, a.rank[p]};
  int64_t base = 0;
  for (int64_t start = 0; start < a.n; start += kBlock) {
    const int64_t i = start + threadIdx.x;
    const int owned = i < a.n && owned_by(i) ? 1 : 0;
    int at = 0, total = 0;
    Scan(temp).ExclusiveSum(owned, at, total);
    if (owned) {
      const int64_t loc = a.locs[i];
      a.owned_idx[p][base + at] = i;
      a.local_rows[p][base + at] = (loc / a.lps) * a.ps + loc % a.ps;
    }
    base += total;
    __syncthreads();  // the scan's storage is reused by the next tile
  }
  if (threadIdx.x == 0) *a.count[p] = base;
}

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_WRITE_PLANS_CUH_

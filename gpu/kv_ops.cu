// Row-mover kernels of the sharded KV pool: one thread group per row, vectorized by the widest aligned access.
#include <cuda_runtime.h>

#include "gpu/kv_ops.h"
#include "gpu/row_copy.cuh"

namespace kvshard::gpu {

int PersistentBlocks(int64_t work, int group, int threads) {
  static int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 1;
  }();
  const int64_t groups_per_block = threads / group;
  int64_t blocks = (work + groups_per_block - 1) / groups_per_block;
  const int64_t cap = int64_t{sms} * 8;
  if (blocks > cap) blocks = cap;
  return static_cast<int>(blocks > 0 ? blocks : 1);
}

namespace {

constexpr int kThreads = 256;

// Group id, lane and group count of the calling thread in a persistent grid of row groups.
struct GroupPos {
  int64_t id, count;
  int lane;
};
__device__ __forceinline__ GroupPos MyGroup(int group) {
  const int64_t per_block = blockDim.x / group;
  return {blockIdx.x * per_block + threadIdx.x / group, gridDim.x * per_block, static_cast<int>(threadIdx.x % group)};
}

template <typename V>
__global__ void GatherRowsKernel(V* __restrict__ out, const V* __restrict__ in, int64_t in_rows,
                                 const int64_t* __restrict__ index, int64_t n, int64_t vecs, int group,
                                 int64_t* bad) {
  const GroupPos g = MyGroup(group);
  for (int64_t i = g.id; i < n; i += g.count) {
    const int64_t src = index[i];
    if (src < 0 || src >= in_rows) {
      if (bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      continue;
    }
    CopyRow(out + i * vecs, in + src * vecs, vecs, g.lane, group);
  }
}

template <typename V>
__global__ void OwnerWriteKernel(V* __restrict__ pool, int64_t pool_rows, const V* __restrict__ rows,
                                 const int64_t* __restrict__ locs, int64_t n, int64_t lps, int64_t ps, int64_t rank,
                                 int64_t vecs, int group, int64_t* bad) {
  const GroupPos g = MyGroup(group);
  for (int64_t i = g.id; i < n; i += g.count) {
    const int64_t loc = locs[i];
    if (loc < 0) {
      if (bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      continue;
    }
    if ((loc % lps) / ps != rank) continue;
    const int64_t row = (loc / lps) * ps + loc % ps;
    if (row >= pool_rows) {
      if (bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      continue;
    }
    CopyRow(pool + row * vecs, rows + i * vecs, vecs, g.lane, group);
  }
}

__device__ __forceinline__ int64_t TranslateOne(int64_t loc, const int32_t* page_pos, int64_t n_page_pos, int64_t ps) {
  if (loc < 0) return -1;
  const int64_t page = loc / ps;
  if (page >= n_page_pos) return -1;
  return int64_t{page_pos[page]} * ps + loc % ps;
}

template <typename V>
__global__ void StageChunkKernel(V* __restrict__ scratch, int64_t scratch_rows, const V* __restrict__ rows,
                                 const int64_t* __restrict__ locs, int64_t n, const int32_t* __restrict__ page_pos,
                                 int64_t n_page_pos, int64_t ps, int64_t vecs, int group, int64_t* bad) {
  const GroupPos g = MyGroup(group);
  for (int64_t i = g.id; i < n; i += g.count) {
    const int64_t row = TranslateOne(locs[i], page_pos, n_page_pos, ps);
    if (row < 0 || row >= scratch_rows) {
      if (bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      continue;
    }
    CopyRow(scratch + row * vecs, rows + i * vecs, vecs, g.lane, group);
  }
}

__global__ void TranslateKernel(int64_t* __restrict__ out, const int64_t* __restrict__ locs, int64_t n,
                                const int32_t* __restrict__ page_pos, int64_t n_page_pos, int64_t ps) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = TranslateOne(locs[i], page_pos, n_page_pos, ps);
  }
}

}  // namespace

Status RowOpCanImplement(int64_t n, int64_t row_bytes, int64_t in_rows, int64_t out_rows) {
  if (n < 0) return InvalidArgument("n: must be >= 0, got ", n);
  if (row_bytes <= 0 || row_bytes > (int64_t{1} << 20)) {
    return InvalidArgument("row_bytes: must be in [1, 2^20], got ", row_bytes);
  }
  if (in_rows < 0 || out_rows < 0) return InvalidArgument("rows: must be >= 0");
  return Status::Ok();
}

Status LaunchGatherRows(void* out, const void* in, int64_t in_rows, const int64_t* index, int64_t n,
                        int64_t row_bytes, int64_t* bad, cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, in_rows, n));
  if (n == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, out, in), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    GatherRowsKernel<V><<<PersistentBlocks(n, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(out), static_cast<const V*>(in), in_rows, index, n, vecs, group, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchOwnerFilteredWrite(void* pool, int64_t pool_rows, const void* rows, const int64_t* locs, int64_t n,
                                const PlacementSpec& spec, int64_t rank, int64_t row_bytes, int64_t* bad,
                                cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, n, pool_rows));
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec(spec));
  KVSHARD_RETURN_IF_ERROR(ValidateRank(rank, spec.shard_size));
  if (n == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, pool, rows), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    OwnerWriteKernel<V><<<PersistentBlocks(n, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(pool), pool_rows, static_cast<const V*>(rows), locs, n, spec.logical_page_size(),
        spec.page_size, rank, vecs, group, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchStageChunk(void* scratch, int64_t scratch_rows, const void* rows, const int64_t* locs, int64_t n,
                        const int32_t* page_pos, int64_t n_page_pos, int64_t page_size, int64_t row_bytes,
                        int64_t* bad, cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, n, scratch_rows));
  if (page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", page_size);
  if (n == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, scratch, rows), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    StageChunkKernel<V><<<PersistentBlocks(n, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(scratch), scratch_rows, static_cast<const V*>(rows), locs, n, page_pos, n_page_pos,
        page_size, vecs, group, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchTranslate(int64_t* out, const int64_t* locs, int64_t n, const int32_t* page_pos, int64_t n_page_pos,
                       int64_t page_size, cudaStream_t stream) {
  if (n < 0) return InvalidArgument("n: must be >= 0, got ", n);
  if (page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", page_size);
  if (n == 0) return Status::Ok();
  TranslateKernel<<<PersistentBlocks(n, 1, kThreads), kThreads, 0, stream>>>(out, locs, n, page_pos, n_page_pos,
                                                                              page_size);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kvshard::gpu

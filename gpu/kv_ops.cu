// Row-mover kernels of the sharded KV pool: one thread group per row, vectorized by the widest aligned access.
#include <cuda_runtime.h>

#include <algorithm>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "gpu/kv_ops.h"
#include "gpu/row_copy.cuh"
#include "gpu/write_plans.cuh"
#include "gpu/nvtx.h"

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
  const int64_t cap = int64_t{sms} * 4;  // 1024 threads/SM: leaves room for concurrent kernels (NCCL)
  if (blocks > cap) blocks = cap;
  return static_cast<int>(blocks > 0 ? blocks : 1);
}

namespace {

constexpr int kThreads = 256;

template <typename V>
__global__ void GatherRowsKernel(V* __restrict__ out, const V* __restrict__ in, int64_t in_rows,
                                 const int64_t* __restrict__ index, int64_t n, int64_t vecs, int group, int64_t* bad) {
  const GroupPos g = MyGroup(group);
  WaitForPreviousGrid();  // the index may be the previous kernel's output (LaunchOverlap::kProgrammatic)
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

__global__ void LocalRowsKernel(int64_t* __restrict__ local_rows, const int64_t* __restrict__ owned_idx,
                                const int64_t* __restrict__ locs, const int64_t* __restrict__ count, int64_t lps,
                                int64_t ps) {
  const int64_t n = *count;
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x) {
    const int64_t loc = locs[owned_idx[j]];
    local_rows[j] = (loc / lps) * ps + loc % ps;
  }
}

constexpr int kPlanThreads = 512;

// Block p builds plan p.
__global__ void WritePlansKernel(WritePlansArgs a) { BuildWritePlanBlock<kPlanThreads>(a, blockIdx.x); }

template <typename V>
__global__ void ScatterRowsKernel(V* __restrict__ dst, int64_t dst_rows, const V* __restrict__ src, int64_t src_rows,
                                  const int64_t* __restrict__ src_idx, const int64_t* __restrict__ dst_idx,
                                  const int64_t* __restrict__ count, int64_t max_count, int64_t vecs, int group,
                                  int64_t* bad) {
  const GroupPos g = MyGroup(group);
  const int64_t c = *count;
  const int64_t n = c < max_count ? c : max_count;
  for (int64_t j = g.id; j < n; j += g.count) {
    const int64_t s = src_idx[j], d = dst_idx[j];
    if (s < 0 || s >= src_rows || d < 0 || d >= dst_rows) {
      if (bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      continue;
    }
    CopyRow(dst + d * vecs, src + s * vecs, vecs, g.lane, group);
  }
}

__global__ void TranslateKernel(int64_t* __restrict__ out, const int64_t* __restrict__ locs, int64_t n,
                                const int32_t* __restrict__ page_pos, int64_t n_page_pos, int64_t ps) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = TranslateOne(locs[i], page_pos, n_page_pos, ps);
  }
}

__global__ void FillPagePosKernel(int32_t* __restrict__ page_pos, int64_t n, int32_t trash_page) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    page_pos[i] = trash_page;
  }
}

__global__ void ScatterPagePosKernel(int32_t* __restrict__ page_pos, int64_t n_page_pos,
                                     const int32_t* __restrict__ mapped, int64_t n_mapped, int64_t* bad) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n_mapped; k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t page = mapped[2 * k];
    if (page < 0 || page >= n_page_pos) {
      if (bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      continue;
    }
    page_pos[page] = mapped[2 * k + 1];
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

Status LaunchGatherRows(void* out, const void* in, int64_t in_rows, const int64_t* index, int64_t n, int64_t row_bytes,
                        int64_t* bad, cudaStream_t stream, LaunchOverlap overlap) {
  KVSHARD_NVTX_RANGE("kvshard.kv.gather_rows");
  KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, in_rows, n));
  if (n == 0) return Status::Ok();
  cudaError_t launched = cudaSuccess;
  DispatchVector(RowVectorBytes(row_bytes, out, in), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    launched = LaunchWithOverlap(GatherRowsKernel<V>, PersistentBlocks(n, group, kThreads), kThreads, 0, stream,
                                 overlap == LaunchOverlap::kProgrammatic, static_cast<V*>(out),
                                 static_cast<const V*>(in), in_rows, index, n, vecs, group, bad);
  });
  KVSHARD_CUDA_CHECK(launched);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchOwnerFilteredWrite(void* pool, int64_t pool_rows, const void* rows, const int64_t* locs, int64_t n,
                                const PlacementSpec& spec, int64_t rank, int64_t row_bytes, int64_t* bad,
                                cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.owner_filtered_write");
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
                        const int32_t* page_pos, int64_t n_page_pos, int64_t page_size, int64_t row_bytes, int64_t* bad,
                        cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.stage_chunk");
  KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, n, scratch_rows));
  if (page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", page_size);
  if (n == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, scratch, rows), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    StageChunkKernel<V><<<PersistentBlocks(n, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(scratch), scratch_rows, static_cast<const V*>(rows), locs, n, page_pos, n_page_pos, page_size,
        vecs, group, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

StatusOr<size_t> WritePlanTempBytes(int64_t n) {
  size_t bytes = 0;
  KVSHARD_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, thrust::counting_iterator<int64_t>(0),
                                           static_cast<int64_t*>(nullptr), static_cast<int64_t*>(nullptr), n,
                                           OwnedBy{nullptr, 1, 1, 0}));
  return bytes;
}

Status LaunchBuildWritePlan(const int64_t* locs, int64_t n, const PlacementSpec& spec, int64_t rank, int64_t* owned_idx,
                            int64_t* local_rows, int64_t* count, void* temp, size_t temp_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.build_write_plan");
  if (n < 0) return InvalidArgument("n: must be >= 0, got ", n);
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec(spec));
  KVSHARD_RETURN_IF_ERROR(ValidateRank(rank, spec.shard_size));
  if (n == 0) {
    KVSHARD_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(int64_t), stream));
    return Status::Ok();
  }
  const OwnedBy pred{locs, spec.logical_page_size(), spec.page_size, rank};
  KVSHARD_CUDA_CHECK(cub::DeviceSelect::If(temp, temp_bytes, thrust::counting_iterator<int64_t>(0), owned_idx, count, n,
                                           pred, stream));
  LocalRowsKernel<<<PersistentBlocks(n, 1, kThreads), kThreads, 0, stream>>>(local_rows, owned_idx, locs, count,
                                                                             spec.logical_page_size(), spec.page_size);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchBuildWritePlans(const int64_t* locs, int64_t n, const PlacementSpec& spec,
                             const std::vector<WritePlanOut>& plans, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.build_write_plans");
  if (n < 0 || n > kMaxWritePlansLocs) return InvalidArgument("n: must be in [0, ", kMaxWritePlansLocs, "], got ", n);
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec(spec));
  for (const WritePlanOut& plan : plans) KVSHARD_RETURN_IF_ERROR(ValidateRank(plan.rank, spec.shard_size));
  for (size_t at = 0; at < plans.size(); at += kMaxPlansPerLaunch) {
    const size_t count = std::min<size_t>(kMaxPlansPerLaunch, plans.size() - at);
    WritePlansArgs a{};
    a.locs = locs;
    a.n = n;
    a.lps = spec.logical_page_size();
    a.ps = spec.page_size;
    for (size_t k = 0; k < count; ++k) {
      a.rank[k] = plans[at + k].rank;
      a.owned_idx[k] = plans[at + k].owned_idx;
      a.local_rows[k] = plans[at + k].local_rows;
      a.count[k] = plans[at + k].count;
    }
    WritePlansKernel<<<static_cast<unsigned>(count), kPlanThreads, 0, stream>>>(a);
    KVSHARD_CUDA_CHECK(cudaGetLastError());
  }
  return Status::Ok();
}

Status LaunchScatterRows(void* dst, int64_t dst_rows, const void* src, int64_t src_rows, const int64_t* src_idx,
                         const int64_t* dst_idx, const int64_t* count, int64_t max_count, int64_t row_bytes,
                         int64_t* bad, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.scatter_rows");
  KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(max_count, row_bytes, src_rows, dst_rows));
  if (max_count == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, dst, src), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    ScatterRowsKernel<V><<<PersistentBlocks(max_count, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(dst), dst_rows, static_cast<const V*>(src), src_rows, src_idx, dst_idx, count, max_count, vecs,
        group, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchTranslate(int64_t* out, const int64_t* locs, int64_t n, const int32_t* page_pos, int64_t n_page_pos,
                       int64_t page_size, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.translate");
  if (n < 0) return InvalidArgument("n: must be >= 0, got ", n);
  if (page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", page_size);
  if (n == 0) return Status::Ok();
  TranslateKernel<<<PersistentBlocks(n, 1, kThreads), kThreads, 0, stream>>>(out, locs, n, page_pos, n_page_pos,
                                                                             page_size);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchSetPagePos(int32_t* page_pos, int64_t n_page_pos, int32_t trash_page, const int32_t* mapped,
                        int64_t n_mapped, int64_t* bad, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.set_page_pos");
  if (n_page_pos < 0) return InvalidArgument("n_page_pos: must be >= 0, got ", n_page_pos);
  if (n_mapped < 0) return InvalidArgument("n_mapped: must be >= 0, got ", n_mapped);
  if (n_page_pos > 0) {
    FillPagePosKernel<<<PersistentBlocks(n_page_pos, 1, kThreads), kThreads, 0, stream>>>(page_pos, n_page_pos,
                                                                                          trash_page);
    KVSHARD_CUDA_CHECK(cudaGetLastError());
  }
  if (n_mapped > 0) {
    ScatterPagePosKernel<<<PersistentBlocks(n_mapped, 1, kThreads), kThreads, 0, stream>>>(page_pos, n_page_pos, mapped,
                                                                                           n_mapped, bad);
    KVSHARD_CUDA_CHECK(cudaGetLastError());
  }
  return Status::Ok();
}

}  // namespace kvshard::gpu

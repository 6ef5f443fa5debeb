// CP data-movement kernels other than the rerange (gpu/rerange.cu): row-group gathers driven by segment tables.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cp_limits.h"
#include "gpu/cp_kernels.cuh"
#include "gpu/cp_ops.h"
#include "gpu/kv_ops.h"
#include "gpu/row_copy.cuh"
#include "gpu/nvtx.h"

namespace kvshard::gpu {
namespace {

constexpr int kThreads = 256;

template <typename V>
__global__ void SegmentGatherKernel(V* __restrict__ out, const V* __restrict__ in, int64_t in_rows,
                                    const int64_t* __restrict__ out_start, const int64_t* __restrict__ src_start,
                                    const int64_t* __restrict__ valid_len, const int64_t* __restrict__ last_row,
                                    const int64_t* __restrict__ pad_offset, int64_t segments, int64_t out_rows,
                                    int64_t vecs, int group, bool position, int64_t* bad) {
  const int64_t per_block = blockDim.x / group;
  const int64_t gid = blockIdx.x * per_block + threadIdx.x / group;
  const int64_t gcount = gridDim.x * per_block;
  const int lane = threadIdx.x % group;
  for (int64_t i = gid; i < out_rows; i += gcount) {
    const int64_t k = FindSegment(out_start, segments, i);
    const int64_t o = i - out_start[k];
    if (o < valid_len[k]) {
      const int64_t src = src_start[k] + o;
      if (src < 0 || src >= in_rows) {
        if (bad && lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
        continue;
      }
      CopyRow(out + i * vecs, in + src * vecs, vecs, lane, group);
    } else if (position) {
      if (lane == 0) {
        const int64_t last = last_row[k];
        if (last < 0 || last >= in_rows) {
          if (bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
          continue;
        }
        const int64_t* in64 = reinterpret_cast<const int64_t*>(in);
        reinterpret_cast<int64_t*>(out)[i] = in64[last] + 1 + pad_offset[k] + (o - valid_len[k]);
      }
    } else {
      ZeroRow(out + i * vecs, vecs, lane, group);
    }
  }
}

template <typename V>
__global__ void RoundRobinSplitKernel(V* __restrict__ out, const V* __restrict__ in, int64_t rows, int64_t cp,
                                      int64_t rank, int64_t vecs, int group) {
  const int64_t per_block = blockDim.x / group;
  const int64_t gcount = gridDim.x * per_block;
  for (int64_t i = blockIdx.x * per_block + threadIdx.x / group; i < rows; i += gcount) {
    CopyRow(out + i * vecs, in + (rank + i * cp) * vecs, vecs, static_cast<int>(threadIdx.x % group), group);
  }
}

template <typename V>
__global__ void RoundRobinRestoreKernel(V* __restrict__ out, const V* __restrict__ in, int64_t cp,
                                        int64_t rows_per_rank, int64_t vecs, int group) {
  const int64_t per_block = blockDim.x / group;
  const int64_t gcount = gridDim.x * per_block;
  const int64_t rows = cp * rows_per_rank;
  for (int64_t t = blockIdx.x * per_block + threadIdx.x / group; t < rows; t += gcount) {
    CopyRow(out + t * vecs, in + ((t % cp) * rows_per_rank + t / cp) * vecs, vecs,
            static_cast<int>(threadIdx.x % group), group);
  }
}

template <typename V>
__global__ void LastTokenKernel(V* __restrict__ out, const V* __restrict__ hidden, int64_t hidden_rows,
                                const int64_t* __restrict__ owner, const int64_t* __restrict__ row, int64_t batch,
                                int64_t rank, int64_t vecs, int group, int64_t* bad) {
  const int64_t per_block = blockDim.x / group;
  const int64_t gcount = gridDim.x * per_block;
  const int lane = threadIdx.x % group;
  for (int64_t q = blockIdx.x * per_block + threadIdx.x / group; q < batch; q += gcount) {
    if (owner[q] != rank) {
      ZeroRow(out + q * vecs, vecs, lane, group);
      continue;
    }
    const int64_t src = row[q];
    if (src < 0 || src >= hidden_rows) {  // SGLang's batch_gt1_last_token_oob
      if (bad && lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      ZeroRow(out + q * vecs, vecs, lane, group);
      continue;
    }
    CopyRow(out + q * vecs, hidden + src * vecs, vecs, lane, group);
  }
}

}  // namespace

Status LaunchSegmentGather(void* out, const void* in, int64_t in_rows, const int64_t* out_start,
                           const int64_t* src_start, const int64_t* valid_len, const int64_t* last_row,
                           const int64_t* pad_offset, int64_t segments, int64_t out_rows, int64_t row_bytes,
                           PadMode pad, int64_t* bad, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.segment_gather_kernel");
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(out_rows, row_bytes));
  if (segments < 0) return InvalidArgument("segments: must be >= 0, got ", segments);
  if (pad == PadMode::kPosition && row_bytes != 8) {
    return InvalidArgument("row_bytes: position mode needs int64 rows (8 bytes), got ", row_bytes);
  }
  if (out_rows == 0) return Status::Ok();
  if (segments == 0) return InvalidArgument("segments: 0 segments cannot produce ", out_rows, " rows");
  DispatchVector(RowVectorBytes(row_bytes, out, in), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    SegmentGatherKernel<V><<<PersistentBlocks(out_rows, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(out), static_cast<const V*>(in), in_rows, out_start, src_start, valid_len, last_row, pad_offset,
        segments, out_rows, vecs, group, pad == PadMode::kPosition, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchRoundRobinSplit(void* out, const void* in, int64_t tokens, int64_t cp, int64_t rank, int64_t row_bytes,
                             cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.round_robin_split_kernel");
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(tokens, row_bytes));
  if (cp < 1) return InvalidArgument("cp_size: must be >= 1, got ", cp);
  if (rank < 0 || rank >= cp) return InvalidArgument("cp_rank: must be in [0, ", cp, "), got ", rank);
  const int64_t rows = tokens / cp + (tokens % cp > rank ? 1 : 0);
  if (rows == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, out, in), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    RoundRobinSplitKernel<V><<<PersistentBlocks(rows, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(out), static_cast<const V*>(in), rows, cp, rank, vecs, group);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchRoundRobinRestore(void* out, const void* in, int64_t cp, int64_t rows_per_rank, int64_t row_bytes,
                               cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.round_robin_restore_kernel");
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(rows_per_rank, row_bytes));
  if (cp < 1) return InvalidArgument("cp_size: must be >= 1, got ", cp);
  if (rows_per_rank == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, out, in), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    RoundRobinRestoreKernel<V><<<PersistentBlocks(cp * rows_per_rank, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(out), static_cast<const V*>(in), cp, rows_per_rank, vecs, group);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchCollectLastToken(void* out, const void* hidden, int64_t hidden_rows, const int64_t* owner,
                              const int64_t* row, int64_t batch, int64_t rank, int64_t row_bytes, int64_t* bad,
                              cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.collect_last_token_kernel");
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(batch, row_bytes));
  if (batch == 0) return Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, out, hidden), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    LastTokenKernel<V><<<PersistentBlocks(batch, group, kThreads), kThreads, 0, stream>>>(
        static_cast<V*>(out), static_cast<const V*>(hidden), hidden_rows, owner, row, batch, rank, vecs, group, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kvshard::gpu

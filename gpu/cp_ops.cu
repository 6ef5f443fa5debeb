// CP data-movement kernels. The fused rerange derives every segment's source offset in shared memory
// (block-wide scans over the split table), then each row group locates its segment by binary search.
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "gpu/cp_ops.h"
#include "gpu/row_copy.cuh"

namespace kvshard::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kRerangeThreads = 1024;
constexpr int64_t kRerangeTileRows = 8;  // consecutive output rows per group visit: one binary search, then a walk
constexpr int64_t kMaxRerangeSharedBytes = 110 * 1024;  // two blocks per SM

int64_t RerangeSharedBytes(int64_t batch, int64_t cp) {
  const int64_t k = batch * 2 * cp;
  return (2 * k + 1 + cp * batch) * static_cast<int64_t>(sizeof(int64_t));
}

using BlockScan = cub::BlockScan<int64_t, kRerangeThreads>;

// In-place exclusive scan of data[0..n) in shared memory by the whole block; returns the total to all threads.
__device__ int64_t BlockExclusiveScan(int64_t* data, int64_t n, BlockScan::TempStorage& temp) {
  const int64_t per = (n + kRerangeThreads - 1) / kRerangeThreads;
  const int64_t begin = threadIdx.x * per;
  const int64_t end = begin + per < n ? begin + per : n;
  int64_t sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += data[i];
  int64_t prefix, total;
  BlockScan(temp).ExclusiveSum(sum, prefix, total);
  for (int64_t i = begin; i < end; ++i) {
    const int64_t v = data[i];
    data[i] = prefix;
    prefix += v;
  }
  __syncthreads();
  return total;
}

// Index of the last k in [0, n) with starts[k] <= i (starts ascending, starts[0] = 0 <= i).
__device__ __forceinline__ int64_t FindSegment(const int64_t* starts, int64_t n, int64_t i) {
  int64_t lo = 0, hi = n;  // invariant: starts[lo] <= i, answer in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (starts[mid] <= i) lo = mid; else hi = mid;
  }
  return lo;
}

template <typename V>
__global__ void __launch_bounds__(kRerangeThreads, 2) BatchRerangeKernel(V* __restrict__ out, const V* __restrict__ gathered,
                                   const int64_t* __restrict__ splits, int64_t batch, int64_t cp, int64_t m,
                                   int64_t total_rows, int64_t vecs, int group, int64_t* bad) {
  extern __shared__ int64_t smem[];
  __shared__ BlockScan::TempStorage scan_temp;
  const int64_t segs = 2 * cp;
  const int64_t k_total = batch * segs;
  int64_t* out_start = smem;                 // k_total + 1
  int64_t* src_start = smem + k_total + 1;   // k_total
  int64_t* rank_req = src_start + k_total;   // cp * batch: per (rank, request) rows, then exclusive prefix
  for (int64_t t = threadIdx.x; t < k_total; t += blockDim.x) out_start[t] = splits[t];
  for (int64_t t = threadIdx.x; t < cp * batch; t += blockDim.x) {
    const int64_t r = t / batch, q = t % batch;
    rank_req[t] = splits[q * segs + r] + splits[q * segs + segs - 1 - r];
  }
  __syncthreads();
  const int64_t total = BlockExclusiveScan(out_start, k_total, scan_temp);
  if (threadIdx.x == 0) out_start[k_total] = total;
  BlockExclusiveScan(rank_req, cp * batch, scan_temp);
  for (int64_t t = threadIdx.x; t < k_total; t += blockDim.x) {
    const int64_t q = t / segs, s = t % segs;
    const int64_t r = s < cp ? s : segs - 1 - s;
    src_start[t] = r * m + (rank_req[r * batch + q] - rank_req[r * batch]) + (s < cp ? 0 : splits[q * segs + r]);
  }
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x < cp) {
    // SGLang's rank_payload_exceeds_max: a rank's valid rows must fit its max_rank_token block.
    const int64_t r = threadIdx.x;
    const int64_t last = batch - 1;
    const int64_t rows = rank_req[r * batch + last] - rank_req[r * batch] + splits[last * segs + r] +
                         splits[last * segs + segs - 1 - r];
    if (rows > m && bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
  }
  if (total != total_rows) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
    return;
  }
  const int64_t per_block = blockDim.x / group;
  const int64_t gid = blockIdx.x * per_block + threadIdx.x / group;
  const int64_t gcount = gridDim.x * per_block;
  const int lane = threadIdx.x % group;
  const int64_t limit = cp * m;
  const int64_t tiles = (total_rows + kRerangeTileRows - 1) / kRerangeTileRows;
  for (int64_t tile = gid; tile < tiles; tile += gcount) {
    const int64_t i0 = tile * kRerangeTileRows;
    const int64_t i1 = i0 + kRerangeTileRows < total_rows ? i0 + kRerangeTileRows : total_rows;
    int64_t k = FindSegment(out_start, k_total, i0);
    for (int64_t i = i0; i < i1; i += 2) {
      while (out_start[k + 1] <= i) ++k;  // out_start[k_total] == total_rows bounds the walk
      const int64_t src_a = src_start[k] + (i - out_start[k]);
      const bool has_b = i + 1 < i1;
      int64_t kb = k;
      if (has_b) {
        while (out_start[kb + 1] <= i + 1) ++kb;
      }
      const int64_t src_b = has_b ? src_start[kb] + (i + 1 - out_start[kb]) : src_a;
      if (src_a >= limit || src_b >= limit) {
        if (bad && lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
        continue;
      }
      CopyTwoRows(out + i * vecs, gathered + src_a * vecs, out + (i + 1) * vecs, gathered + src_b * vecs, has_b, vecs,
                  lane, group);
      k = kb;
    }
  }
}

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

Status SizeCheck(int64_t rows, int64_t row_bytes) {
  if (rows < 0) return InvalidArgument("rows: must be >= 0, got ", rows);
  if (row_bytes <= 0 || row_bytes > (int64_t{1} << 20)) {
    return InvalidArgument("row_bytes: must be in [1, 2^20], got ", row_bytes);
  }
  return Status::Ok();
}

}  // namespace

Status BatchRerangeCanImplement(int64_t batch, int64_t cp, int64_t max_rank_token, int64_t row_bytes) {
  if (batch < 1) return InvalidArgument("batch: must be >= 1, got ", batch);
  if (cp < 1 || cp > 1024) return InvalidArgument("cp_size: must be in [1, 1024], got ", cp);
  if (max_rank_token < 0) return InvalidArgument("max_rank_token: must be >= 0, got ", max_rank_token);
  KVSHARD_RETURN_IF_ERROR(SizeCheck(0, row_bytes));
  if (RerangeSharedBytes(batch, cp) > kMaxRerangeSharedBytes) {
    return OutOfRange("batch: ", batch, " requests x ", 2 * cp, " segments exceed the single-launch rerange's ",
                      kMaxRerangeSharedBytes, "-byte shared-memory split table");
  }
  return Status::Ok();
}

Status LaunchBatchRerange(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                          int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad,
                          cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, row_bytes));
  KVSHARD_RETURN_IF_ERROR(SizeCheck(total_rows, row_bytes));
  if (total_rows == 0) return Status::Ok();
  const int64_t smem = RerangeSharedBytes(batch, cp);
  Status status;
  DispatchVector(RowVectorBytes(row_bytes, out, gathered), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    auto kernel = BatchRerangeKernel<V>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) {
      status = Internal("cudaFuncSetAttribute(rerange smem=", smem, "): ", cudaGetErrorString(err));
      return;
    }
    // A persistent grid of two 1024-thread blocks per SM: each block pays the table prologue once.
    int dev = 0, sms = 1;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const int64_t tiles = (total_rows + kRerangeTileRows - 1) / kRerangeTileRows;
    const int64_t groups_per_block = kRerangeThreads / group;
    int64_t blocks = (tiles + groups_per_block - 1) / groups_per_block;
    if (blocks > 2 * sms) blocks = 2 * sms;
    kernel<<<static_cast<int>(blocks), kRerangeThreads, smem, stream>>>(
        static_cast<V*>(out), static_cast<const V*>(gathered), splits, batch, cp, max_rank_token, total_rows, vecs,
        group, bad);
  });
  KVSHARD_RETURN_IF_ERROR(status);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchSegmentGather(void* out, const void* in, int64_t in_rows, const int64_t* out_start,
                           const int64_t* src_start, const int64_t* valid_len, const int64_t* last_row,
                           const int64_t* pad_offset, int64_t segments, int64_t out_rows, int64_t row_bytes,
                           PadMode pad, int64_t* bad, cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(SizeCheck(out_rows, row_bytes));
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
        static_cast<V*>(out), static_cast<const V*>(in), in_rows, out_start, src_start, valid_len, last_row,
        pad_offset, segments, out_rows, vecs, group, pad == PadMode::kPosition, bad);
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchRoundRobinSplit(void* out, const void* in, int64_t tokens, int64_t cp, int64_t rank, int64_t row_bytes,
                             cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(SizeCheck(tokens, row_bytes));
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
  KVSHARD_RETURN_IF_ERROR(SizeCheck(rows_per_rank, row_bytes));
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
  KVSHARD_RETURN_IF_ERROR(SizeCheck(batch, row_bytes));
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

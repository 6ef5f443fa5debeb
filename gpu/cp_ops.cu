// CP data-movement kernels. The fused rerange derives every segment's source offset in shared memory
// (block-wide scans over the split table), then each row group locates its segment by binary search.
#include <cuda_runtime.h>

#include <algorithm>

#include "gpu/cp_ops.h"
#include "gpu/row_copy.cuh"

namespace kvshard::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kRerangeThreads = 256;
constexpr int64_t kMaxRerangeBatch = 1024;  // each block sums the split rows of the requests before it

int64_t RerangeSharedBytes(int64_t /*batch*/, int64_t cp) {
  return (cp + 1 + 2 * cp + 1 + 2 * cp) * static_cast<int64_t>(sizeof(int64_t));
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

// One block per (request q, chunk c of `chunks`). The block first sums the split table over requests q' < q
// (warp shuffles, then shared-memory atomics) to get q's output offset and, for every rank r, where q's rows
// start inside rank r's block; then every segment of q is a contiguous run in both buffers, so the block
// copies its chunk's part of each segment as flat spans (no per-row lookup).
template <typename V>
__global__ void __launch_bounds__(kRerangeThreads, 5) BatchRerangeKernel(V* __restrict__ out,
                                                                     const V* __restrict__ gathered,
                                                                     const int64_t* __restrict__ splits,
                                                                     int64_t batch, int64_t cp, int64_t m,
                                                                     int64_t total_rows, int64_t vecs, int chunks,
                                                                     int64_t* bad) {
  extern __shared__ int64_t sm[];
  const int64_t segs = 2 * cp;
  int64_t* acc = sm;                  // [cp]: rows of ranks r before request q; [cp]: output rows before q
  int64_t* seg_rel = sm + cp + 1;     // [segs + 1]: request-local segment starts
  int64_t* seg_src = seg_rel + segs + 1;  // [segs]: gathered row of each segment's first row
  const int64_t q = blockIdx.x / chunks;
  const int64_t c = blockIdx.x % chunks;
  for (int64_t t = threadIdx.x; t <= cp; t += blockDim.x) acc[t] = 0;
  __syncthreads();
  // One pass: work item t sums quantity r = t % (cp + 1) over requests t / (cp + 1), + groups, ... (quantity
  // r < cp: rows of rank r; r == cp: all rows).
  {
    const int64_t nr = cp + 1;
    const int64_t groups = blockDim.x / nr > 0 ? blockDim.x / nr : 1;
    for (int64_t t = threadIdx.x; t < groups * nr; t += blockDim.x) {
      const int64_t r = t % nr;
      int64_t v = 0;
      for (int64_t qq = t / nr; qq < q; qq += groups) {
        const int64_t* row = splits + qq * segs;
        if (r < cp) {
          v += row[r] + row[segs - 1 - r];
        } else {
          for (int64_t k = 0; k < segs; ++k) v += row[k];
        }
      }
      if (v != 0) atomicAdd(reinterpret_cast<unsigned long long*>(&acc[r]), static_cast<unsigned long long>(v));
    }
  }
  __syncthreads();
  const int64_t* mine = splits + q * segs;
  if (threadIdx.x == 0) {
    seg_rel[0] = 0;
    for (int64_t k = 0; k < segs; ++k) {
      seg_rel[k + 1] = seg_rel[k] + mine[k];
      const int64_t r = k < cp ? k : segs - 1 - k;
      seg_src[k] = r * m + acc[r] + (k < cp ? 0 : mine[r]);
    }
    if (c == 0 && q == batch - 1) {
      // SGLang's rank_payload_exceeds_max and the output size: checked once, by the last request's block.
      for (int64_t r = 0; r < cp; ++r) {
        if (acc[r] + mine[r] + mine[segs - 1 - r] > m && bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      }
      if (acc[cp] + seg_rel[segs] != total_rows && bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
    }
  }
  __syncthreads();
  const int64_t rows = seg_rel[segs];
  const int64_t lo = rows * c / chunks, hi = rows * (c + 1) / chunks;
  const int64_t out_base = acc[cp];
  if (out_base + rows > total_rows) return;  // inconsistent table (counted above); never write out of bounds
  for (int64_t k = 0; k < segs; ++k) {
    const int64_t a = seg_rel[k] > lo ? seg_rel[k] : lo;
    const int64_t b = seg_rel[k + 1] < hi ? seg_rel[k + 1] : hi;
    if (a >= b) continue;
    const int64_t src = seg_src[k] + (a - seg_rel[k]);
    if (src + (b - a) > cp * m) continue;  // rank payload past its block (counted above)
    // The whole block copies the span as one flat row (lane = thread, group = block).
    CopyRow<V, int64_t>(out + (out_base + a) * vecs, gathered + src * vecs, (b - a) * vecs, threadIdx.x, blockDim.x);
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
  if (batch > kMaxRerangeBatch) {
    return OutOfRange("batch: ", batch, " requests exceed the single-launch rerange's limit of ", kMaxRerangeBatch);
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
  int dev = 0, sms = 1;
  KVSHARD_CUDA_CHECK(cudaGetDevice(&dev));
  KVSHARD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // Enough blocks for several waves: each request is cut into `chunks` pieces of its rows.
  int64_t chunks = (8 * int64_t{sms} + batch - 1) / batch;
  chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, std::max<int64_t>(1, total_rows / (batch * 16))));
  DispatchVector(RowVectorBytes(row_bytes, out, gathered), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    BatchRerangeKernel<V><<<static_cast<int>(batch * chunks), kRerangeThreads, smem, stream>>>(
        static_cast<V*>(out), static_cast<const V*>(gathered), splits, batch, cp, max_rank_token, total_rows,
        row_bytes / kB, static_cast<int>(chunks), bad);
  });
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

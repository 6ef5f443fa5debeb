// The CP batch rerange (spec §5): a segment table built on the device from the split lists (block scans, any
// batch), a per-row source index, and an index gather (LaunchGatherRows).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include <cub/block/block_scan.cuh>

#include "core/cp_limits.h"
#include "gpu/cp_kernels.cuh"
#include "gpu/cp_ops.h"
#include "gpu/kv_ops.h"
#include "gpu/nvtx.h"
#include "gpu/row_copy.cuh"

namespace kvshard::gpu {
namespace {

constexpr int kThreads = 256;
// 256 x 16 per pass, no register spills at one block per SM (a single 1,024 x 8 block spilled 1.6 KB per thread
// and took 25 us for 4,096 entries on an H200).
constexpr int kTableThreads = 256;
constexpr int kTableItems = 16;  // entries per thread per pass of the table kernel: 4,096 (256 x 2cp at cp 8) in one
constexpr int kTile = kTableThreads * kTableItems;
// The one-launch per-call rerange: a block of 768 threads per SM (80 registers), each with the batch's whole
// segment table (2S + 1 int64 words and their spacing, Slot below: 103 KiB at the limit) in shared memory.
constexpr int kDirectThreads = 768;
constexpr int kDirectItems = 8;  // 6,144 entries per thread block: each scan in one pass
constexpr int64_t kDirectMaxSegments = int64_t{kDirectThreads} * kDirectItems;

// Where table entry s sits in shared memory: one spare word after every 16 and every 128 entries, so that a warp's
// blocked accesses (8 consecutive entries a thread) and its rank-major ones (a thread's entries 2cp apart; 16 at
// cp 8) fall in distinct banks (a 16-way conflict without).
__host__ __device__ constexpr int Slot(int s) { return s + (s >> 4) + (s >> 7); }
constexpr size_t kDirectMaxShared = (Slot(kDirectMaxSegments) + 1 + Slot(kDirectMaxSegments - 1) + 1) * sizeof(int64_t);

using TableScan = cub::BlockScan<int64_t, kTableThreads>;

// One pass of a block-wide exclusive scan over n entries in tiles of kTile with a running carry: value(e) gives
// entry e, emit(e, prefix, value) receives its exclusive prefix. Returns the total (to every thread).
template <typename Value, typename Emit>
__device__ int64_t BlockScanAll(int64_t n, Value value, Emit emit) {
  __shared__ typename TableScan::TempStorage temp;
  __shared__ int64_t carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int64_t base = 0; base < n; base += kTile) {
    int64_t v[kTableItems], x[kTableItems];
#pragma unroll
    for (int j = 0; j < kTableItems; ++j) {
      const int64_t e = base + threadIdx.x * kTableItems + j;
      v[j] = e < n ? value(e) : 0;
    }
    int64_t agg = 0;
    TableScan(temp).ExclusiveSum(v, x, agg);
    const int64_t c = carry;
#pragma unroll
    for (int j = 0; j < kTableItems; ++j) {
      const int64_t e = base + threadIdx.x * kTableItems + j;
      if (e < n) emit(e, c + x[j], v[j]);
    }
    __syncthreads();  // everyone has read carry and temp
    if (threadIdx.x == 0) carry = c + agg;
    __syncthreads();
  }
  return carry;
}

// The segment table of the whole batch (any batch and cp), grid = cp + 1 blocks. Block 0: seg_out[s] = output
// row of segment s = q*2cp+k, the exclusive prefix of the request-major split table (seg_out[S] = total).
// Block 1 + r: rank r's column, seg_src[q*2cp+r] = r*m + (rank r's rows of the requests before q) and
// seg_src[q*2cp+2cp-1-r] = that + splits[q][r], the first rows of its two segments in the rank-major gathered
// buffer. Counts (bad) a total other than total_rows and, as SGLang's rank_payload_exceeds_max, a rank whose
// rows pass its block of m.
__global__ void __launch_bounds__(kTableThreads, 1)
    RerangeTableKernel(const int64_t* __restrict__ splits, int64_t batch, int64_t cp, int64_t m, int64_t total_rows,
                       int64_t* seg_out, int64_t* seg_src, int64_t* bad) {
  AllowNextGrid();  // the index kernel may become resident now; it waits for this grid before reading the table
  const int64_t segs = 2 * cp;
  if (blockIdx.x == 0) {
    const int64_t total = BlockScanAll(
        batch * segs, [&](int64_t s) { return splits[s]; },
        [&](int64_t s, int64_t prefix, int64_t) { seg_out[s] = prefix; });
    if (threadIdx.x == 0) {
      seg_out[batch * segs] = total;
      if (total != total_rows && bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
    }
    return;
  }
  const int64_t r = blockIdx.x - 1;
  const int64_t rows = BlockScanAll(
      batch, [&](int64_t q) { return splits[q * segs + r] + splits[q * segs + segs - 1 - r]; },
      [&](int64_t q, int64_t before, int64_t) {
        seg_src[q * segs + r] = r * m + before;
        seg_src[q * segs + segs - 1 - r] = r * m + before + splits[q * segs + r];
      });
  if (threadIdx.x == 0 && rows > m && bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
}

// The per-row source index of the rerange: index[i] = seg_src[k] + (i - seg_out[k]) for the segment k holding
// output row i, or -1 (never copied) where the table is inconsistent: a row outside its segment's range, or a
// source outside the gathered buffer. A thread per row, so every entry has one writer even for a corrupt table.
// A warp's 32 consecutive rows share the search: a 32-ary search (one ballot per round) for the warp's first
// row, then each lane picks its segment from the next 32 boundaries by shuffles; a row past them (more than 31
// empty segments in the warp's span) falls back to its own binary search.
__global__ void RerangeIndexKernel(const int64_t* __restrict__ seg_out, const int64_t* __restrict__ seg_src,
                                   int64_t segments, int64_t total_rows, int64_t in_rows, int64_t* __restrict__ index) {
  constexpr unsigned kFull = 0xffffffffu;
  AllowNextGrid();        // the gather may become resident now; it waits for this grid before reading the index
  WaitForPreviousGrid();  // the table kernel's output
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t w0 = blockIdx.x * int64_t{blockDim.x} + threadIdx.x - lane; w0 < total_rows; w0 += stride) {
    int64_t lo = 0, n = segments;  // the last k in [lo, lo + n) with seg_out[k] <= w0
    while (n > 32) {
      const int64_t step = (n + 31) / 32;
      const unsigned m = __ballot_sync(kFull, lane * step < n && seg_out[lo + lane * step] <= w0);
      const int j = m ? 31 - __clz(m) : 0;
      lo += j * step;
      n = min(step, n - j * step);
    }
    const int64_t i = w0 + lane;
    const int64_t b = lo + lane < segments ? seg_out[lo + lane] : INT64_MAX;
    int pick = -1;
    for (int j = 0; j < 32; ++j) {
      if (__shfl_sync(kFull, b, j) <= i) pick = j;
    }
    if (i >= total_rows) continue;
    int64_t k = lo + pick;
    if (pick == 31 && k + 1 < segments) k += FindSegment(seg_out + k, segments - k, i);
    int64_t src = -1;
    if (pick >= 0 && seg_out[k] <= i && i < seg_out[k + 1]) {
      src = seg_src[k] + (i - seg_out[k]);
      if (src < 0 || src >= in_rows) src = -1;  // rank payload past its block (counted by the table kernel)
    }
    index[i] = src;
  }
}

// The per-call rerange in one launch, for batches whose segment table fits in shared memory (S = batch * 2cp <=
// kDirectMaxSegments): every block builds the whole table itself (the same two scans as RerangeTableKernel, each
// one block-wide pass from the split lists into shared memory: no table kernel, no per-row index, no grid-wide
// synchronisation), then copies its rows as GatherRowsKernel does, finding each row's segment by a binary search
// in shared memory (from the last row's segment) while the previous row's loads are in flight. Rows the table does not
// cover, or whose source falls outside the gathered buffer, are never copied (as the index kernel's -1); block 0 counts
// bad as RerangeTableKernel does. Indices below S fit in int (S <= 6,144).
template <typename V>
__global__ void __launch_bounds__(kDirectThreads, 1)
    RerangeDirectKernel(V* __restrict__ out, const V* __restrict__ in, const int64_t* __restrict__ splits, int batch,
                        int cp, int64_t m, int64_t total_rows, int64_t vecs, int group, int64_t* bad) {
  using Scan = cub::BlockScan<int64_t, kDirectThreads>;
  __shared__ typename Scan::TempStorage scan_temp;
  extern __shared__ int64_t table[];  // seg_out [S + 1], then seg_src [S], both at Slot(s)
  const int segs = 2 * cp, segments = batch * segs, entries = cp * batch;
  int64_t* seg_out = table;
  int64_t* seg_src = table + Slot(segments) + 1;
  const int first = static_cast<int>(threadIdx.x) * kDirectItems;
  int64_t v[kDirectItems], x[kDirectItems];
  WaitForPreviousGrid();  // the split lists may be the previous kernel's output
  // Request-major: seg_out[Slot(s)] = output row of segment s. A split is then the difference of two neighbours (exact,
  // also where the sums wrap), read from shared memory from here on.
  if (first + kDirectItems <= segments && reinterpret_cast<uintptr_t>(splits) % alignof(longlong2) == 0) {
#pragma unroll
    for (int j = 0; j < kDirectItems / 2; ++j) {  // 16-byte loads: a thread's entries are consecutive
      const longlong2 pair = reinterpret_cast<const longlong2*>(splits + first)[j];
      v[2 * j] = pair.x;
      v[2 * j + 1] = pair.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kDirectItems; ++j) v[j] = first + j < segments ? splits[first + j] : 0;
  }
  int64_t total = 0;
  Scan(scan_temp).ExclusiveSum(v, x, total);
#pragma unroll
  for (int j = 0; j < kDirectItems; ++j) {
    if (first + j < segments) seg_out[Slot(first + j)] = x[j];
  }
  if (threadIdx.x == 0) seg_out[Slot(segments)] = total;
  __syncthreads();
  auto split = [&](int s) { return seg_out[Slot(s + 1)] - seg_out[Slot(s)]; };
  // Rank-major: entry e = r * batch + q is rank r's rows of request q, the two segments q * segs + r and
  // q * segs + segs - 1 - r; x[j] becomes its exclusive prefix, and each rank's first entry (its base) goes to
  // seg_src at segs - 1 - r, request 0's second-segment slot of rank r, until the end.
  const int r0 = first / batch, q0 = first - r0 * batch;
  {
    int r = r0, q = q0;
#pragma unroll
    for (int j = 0; j < kDirectItems; ++j) {
      v[j] = first + j < entries ? split(q * segs + r) + split(q * segs + segs - 1 - r) : 0;
      if (++q == batch) q = 0, ++r;
    }
  }
  int64_t rank_rows_total = 0;
  Scan(scan_temp).ExclusiveSum(v, x, rank_rows_total);
  {
    int r = r0, q = q0;
#pragma unroll
    for (int j = 0; j < kDirectItems; ++j) {
      if (first + j < entries) {
        seg_src[Slot(q * segs + r)] = x[j];
        if (q == 0) seg_src[Slot(segs - 1 - r)] = x[j];
      }
      if (++q == batch) q = 0, ++r;
    }
  }
  __syncthreads();
  if (blockIdx.x == 0 && bad) {
    if (threadIdx.x == 0 && total != total_rows) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
    for (int r = threadIdx.x; r < cp; r += blockDim.x) {
      const int64_t next = r + 1 < cp ? seg_src[Slot(segs - 2 - r)] : rank_rows_total;
      if (next - seg_src[Slot(segs - 1 - r)] > m) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
    }
  }
  // Requests 1.. first (they read the bases), then request 0 (whose slots hold them).
  {
    int r = r0, q = q0;
#pragma unroll
    for (int j = 0; j < kDirectItems; ++j) {
      if (first + j < entries && q > 0) {
        const int64_t from = r * m + (seg_src[Slot(q * segs + r)] - seg_src[Slot(segs - 1 - r)]);
        seg_src[Slot(q * segs + r)] = from;
        seg_src[Slot(q * segs + segs - 1 - r)] = from + split(q * segs + r);
      }
      if (++q == batch) q = 0, ++r;
    }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < cp; r += blockDim.x) {
    seg_src[Slot(r)] = r * m;
    seg_src[Slot(segs - 1 - r)] = r * m + split(r);
  }
  __syncthreads();
  // Copy, rows dealt round robin to the row groups (as GatherRowsKernel: the rows in flight at any time are
  // neighbours). A row's source is looked up while the loads of the group's previous row are in flight.
  const int64_t in_rows = cp * m;
  const int64_t per_block = blockDim.x / group, stride = gridDim.x * per_block;
  const int lane = static_cast<int>(threadIdx.x % group);
  int k = 0;  // rows only grow, so each search starts at the last row's segment
  auto source = [&](int64_t i) -> int64_t {
    if (i >= total_rows) return -1;
    for (int n = segments - k; n > 1;) {  // the last k' >= k whose segment starts at or before row i
      const int half = n / 2;
      if (seg_out[Slot(k + half)] <= i)
        k += half, n -= half;
      else
        n = half;
    }
    if (seg_out[Slot(k)] > i || i >= seg_out[Slot(k + 1)]) return -1;
    const int64_t src = seg_src[Slot(k)] + (i - seg_out[Slot(k)]);
    return src >= 0 && src < in_rows ? src : -1;
  };
  int64_t i = blockIdx.x * per_block + threadIdx.x / group;
  int64_t src = source(i);
  for (; i < total_rows; i += stride) {
    if (src < 0) {
      src = source(i + stride);
      continue;
    }
    V* dst = out + i * vecs;
    const V* from = in + src * vecs;
    V r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (lane + j * group < vecs) r[j] = from[lane + j * group];
    }
    src = source(i + stride);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (lane + j * group < vecs) dst[lane + j * group] = r[j];
    }
    if (vecs > 4 * group) CopyRow(dst + 4 * group, from + 4 * group, vecs - 4 * group, lane, group);
  }
}

}  // namespace

Status BatchRerangeCanImplement(int64_t batch, int64_t cp, int64_t max_rank_token, int64_t row_bytes) {
  if (batch < 1) return InvalidArgument("batch: must be >= 1, got ", batch);
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp));
  if (batch > kMaxCpSegments / (2 * cp)) {
    return InvalidArgument("batch: ", batch, " requests x 2*cp_size segments exceed ", kMaxCpSegments);
  }
  if (max_rank_token < 0) return InvalidArgument("max_rank_token: must be >= 0, got ", max_rank_token);
  return CpRowSizeCheck(0, row_bytes);
}

namespace {

// The table's layout in temp: seg_out [S + 1], seg_src [S], index [total_rows]; S = batch * 2cp.
struct RerangeTable {
  int64_t* seg_out;
  int64_t* seg_src;
  int64_t* index;
};

RerangeTable TableIn(void* temp, int64_t batch, int64_t cp) {
  const int64_t segments = batch * 2 * cp;
  int64_t* w = static_cast<int64_t*>(temp);
  return {w, w + segments + 1, w + 2 * segments + 1};
}

}  // namespace

size_t BatchRerangeTempBytes(int64_t batch, int64_t cp, int64_t total_rows) {
  return static_cast<size_t>(2 * batch * 2 * cp + 1 + std::max<int64_t>(total_rows, 0)) * sizeof(int64_t);
}

Status LaunchBuildRerangeTable(const int64_t* splits, int64_t batch, int64_t cp, int64_t max_rank_token,
                               int64_t total_rows, int64_t* bad, void* temp, size_t temp_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.rerange_table");
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, 1));
  if (total_rows < 0) return InvalidArgument("total_rows: must be >= 0, got ", total_rows);
  if (temp_bytes < BatchRerangeTempBytes(batch, cp, total_rows)) {
    return InvalidArgument("temp_bytes: need ", BatchRerangeTempBytes(batch, cp, total_rows), ", got ", temp_bytes);
  }
  const int64_t segments = batch * 2 * cp;
  const RerangeTable t = TableIn(temp, batch, cp);
  RerangeTableKernel<<<static_cast<unsigned>(cp + 1), kTableThreads, 0, stream>>>(
      splits, batch, cp, max_rank_token, total_rows, t.seg_out, t.seg_src, bad);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  if (total_rows == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((total_rows + kThreads - 1) / kThreads, int64_t{1} << 20);
  // Resident while the table kernel runs (programmatic dependent launch on sm_90+), waiting in the kernel for it.
  KVSHARD_CUDA_CHECK(LaunchWithOverlap(RerangeIndexKernel, static_cast<unsigned>(blocks), kThreads, 0, stream, true,
                                       t.seg_out, t.seg_src, segments, total_rows, cp * max_rank_token, t.index));
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchRerangeFromTable(void* out, const void* gathered, const void* table, int64_t batch, int64_t cp,
                              int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.rerange_copy");
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, row_bytes));
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(total_rows, row_bytes));
  if (total_rows == 0) return Status::Ok();
  // The rerange is now a plain index gather (rows with index -1 are left as they are, as the table kernel
  // counted them); bad = nullptr so those rows are not counted twice.
  const RerangeTable t = TableIn(const_cast<void*>(table), batch, cp);
  return LaunchGatherRows(out, gathered, cp * max_rank_token, t.index, total_rows, row_bytes, nullptr, stream);
}

namespace {

// Launches RerangeDirectKernel (batch * 2cp <= kDirectMaxSegments): one block per 512 / group rows up to as many as
// fit on the device at once, each building the table in shared memory first.
Status LaunchRerangeDirect(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                           int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad,
                           cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.rerange_direct");
  const int segments = static_cast<int>(batch * 2 * cp);
  const size_t shared = static_cast<size_t>(Slot(segments) + 1 + Slot(segments - 1) + 1) * sizeof(int64_t);
  cudaError_t launched = cudaSuccess;
  DispatchVector(RowVectorBytes(row_bytes, out, gathered), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    static const cudaError_t opted_in = cudaFuncSetAttribute(
        RerangeDirectKernel<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kDirectMaxShared));
    if (opted_in != cudaSuccess) {
      launched = opted_in;
      return;
    }
    // Blocks resident on the device at the largest table (one per SM), asked once.
    static const std::pair<cudaError_t, int> resident = [] {
      int dev = 0, sms = 0, per_sm = 0;
      cudaError_t e = cudaGetDevice(&dev);
      if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      if (e == cudaSuccess) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, RerangeDirectKernel<V>, kDirectThreads,
                                                          kDirectMaxShared);
      }
      return std::make_pair(e, std::max(sms, 1) * std::max(per_sm, 1));
    }();
    if (resident.first != cudaSuccess) {
      launched = resident.first;
      return;
    }
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    const int64_t rows_per_block = kDirectThreads / group;
    const int64_t blocks =
        std::min<int64_t>((total_rows + rows_per_block - 1) / rows_per_block, int64_t{resident.second});
    launched =
        LaunchWithOverlap(RerangeDirectKernel<V>, static_cast<unsigned>(blocks), kDirectThreads, shared, stream, true,
                          static_cast<V*>(out), static_cast<const V*>(gathered), splits, static_cast<int>(batch),
                          static_cast<int>(cp), max_rank_token, total_rows, vecs, group, bad);
  });
  KVSHARD_CUDA_CHECK(launched);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

bool FitsDirect(int64_t batch, int64_t cp) { return batch * 2 * cp <= kDirectMaxSegments; }

}  // namespace

Status LaunchBatchRerange(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                          int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad, void* temp,
                          size_t temp_bytes, cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, row_bytes));
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(total_rows, row_bytes));
  if (total_rows == 0) return Status::Ok();
  if (FitsDirect(batch, cp)) {
    if (temp_bytes < BatchRerangeTempBytes(batch, cp, total_rows)) {
      return InvalidArgument("temp_bytes: need ", BatchRerangeTempBytes(batch, cp, total_rows), ", got ", temp_bytes);
    }
    return LaunchRerangeDirect(out, gathered, splits, batch, cp, max_rank_token, total_rows, row_bytes, bad, stream);
  }
  KVSHARD_RETURN_IF_ERROR(
      LaunchBuildRerangeTable(splits, batch, cp, max_rank_token, total_rows, bad, temp, temp_bytes, stream));
  // The gather right behind the index kernel, resident early and waiting for it (as the index kernel waits for
  // the table kernel): the per-call rerange pays the table's latency, not also two launch gaps.
  const RerangeTable t = TableIn(temp, batch, cp);
  return LaunchGatherRows(out, gathered, cp * max_rank_token, t.index, total_rows, row_bytes, nullptr, stream,
                          LaunchOverlap::kProgrammatic);
}

Status LaunchBatchRerange(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                          int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad,
                          cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, row_bytes));
  if (total_rows == 0) return CpRowSizeCheck(total_rows, row_bytes);
  if (FitsDirect(batch, cp)) {
    KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(total_rows, row_bytes));
    return LaunchRerangeDirect(out, gathered, splits, batch, cp, max_rank_token, total_rows, row_bytes, bad, stream);
  }
  const size_t bytes = BatchRerangeTempBytes(batch, cp, total_rows);
  void* temp = nullptr;
  KVSHARD_CUDA_CHECK(cudaMallocAsync(&temp, bytes, stream));
  const Status s = LaunchBatchRerange(out, gathered, splits, batch, cp, max_rank_token, total_rows, row_bytes, bad,
                                      temp, bytes, stream);
  KVSHARD_CUDA_CHECK(cudaFreeAsync(temp, stream));
  return s;
}

}  // namespace kvshard::gpu

// The CP batch rerange (spec §5): a segment table built on the device from the split lists (block scans, any
// batch), a per-row source index, and an index gather (LaunchGatherRows).
#include <cuda_runtime.h>

#include <algorithm>

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
  KVSHARD_CUDA_CHECK(LaunchWithOverlap(RerangeIndexKernel, static_cast<unsigned>(blocks), kThreads, stream, true,
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

Status LaunchBatchRerange(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                          int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad, void* temp,
                          size_t temp_bytes, cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, row_bytes));
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(total_rows, row_bytes));
  if (total_rows == 0) return Status::Ok();
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
  const size_t bytes = BatchRerangeTempBytes(batch, cp, total_rows);
  void* temp = nullptr;
  KVSHARD_CUDA_CHECK(cudaMallocAsync(&temp, bytes, stream));
  const Status s = LaunchBatchRerange(out, gathered, splits, batch, cp, max_rank_token, total_rows, row_bytes, bad,
                                      temp, bytes, stream);
  KVSHARD_CUDA_CHECK(cudaFreeAsync(temp, stream));
  return s;
}

}  // namespace kvshard::gpu

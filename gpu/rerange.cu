// The CP batch rerange (spec §5): a segment table built on the device from the split lists (block scans, any
// batch), a per-row source index, and an index gather (LaunchGatherRows).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <random>

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
// 256 x 8 per pass, no register spills at one block per SM (a single 1,024 x 8 block spilled 1.6 KB per thread
// and took 25 us for 4,096 entries on an H200).
constexpr int kTableThreads = 256;
constexpr int kTableItems = 8;  // entries per thread per pass of the table kernel
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

// The fused rerange (one cooperative launch, no per-row index). Phase A: tile t (kFusedThreads / 2cp whole
// requests, an entry per thread) scans its splits request-major (output rows) and rank-major (rows in the rank
// blocks), publishes its cp + 1 aggregates, looks back over earlier tiles for its exclusive prefix (decoupled
// look-back: an earlier tile's aggregate, or its inclusive prefix, which ends the walk) and writes its part of
// seg_out / seg_src; states say how far a tile got. Phase B: each warp takes chunks of kFusedChunkRows output
// rows, waits until the tiles covering them are written, finds every row's segment (the 32-ary search of
// RerangeIndexKernel) and copies the rows, lanes striding over the chunk's flattened vectors. All blocks are
// co-resident (cooperative launch), so spinning on another block's state cannot deadlock. States carry the
// launch's tag (unique per launch in this process, randomised per process), so the scratch needs no reset.
constexpr int kFusedThreads = 256;
constexpr int kFusedChunkRows = 32;
constexpr int kFusedUnroll = 4;
constexpr unsigned long long kStateAggregate = 1, kStateInclusive = 2, kStateWritten = 3;

using FusedScan = cub::BlockScan<int64_t, kFusedThreads>;

// The fused rerange's scratch after the segment table: tile states, then aggregates and inclusive prefixes
// (cp + 1 words per tile: output rows, then each rank's rows).
struct FusedTiles {
  unsigned long long* state;
  int64_t* agg;
  int64_t* incl;
};

__device__ __forceinline__ unsigned long long WaitForState(const unsigned long long* state, unsigned long long tag,
                                                           unsigned long long at_least) {
  for (;;) {
    const unsigned long long s = *reinterpret_cast<const volatile unsigned long long*>(state);
    if ((s & ~3ull) == tag && (s & 3ull) >= at_least) {
      __threadfence();
      return s & 3ull;
    }
    __nanosleep(64);
  }
}

// Stores a tile state; the block's writes it publishes were fenced by their writers before a __syncthreads.
__device__ __forceinline__ void SetState(unsigned long long* state, unsigned long long value) {
  *reinterpret_cast<volatile unsigned long long*>(state) = value;
}

template <typename V>
__global__ void __launch_bounds__(kFusedThreads)
    RerangeFusedKernel(V* __restrict__ out, const V* __restrict__ in, const int64_t* __restrict__ splits, int64_t batch,
                       int64_t cp, int64_t m, int64_t total_rows, int vecs, int64_t* seg_out, int64_t* seg_src,
                       FusedTiles tiles_state, unsigned long long tag, int64_t* bad) {
  const int64_t segs = 2 * cp, segments = batch * segs;
  const int64_t tile_requests = kFusedThreads / segs;
  const int64_t tiles = (batch + tile_requests - 1) / tile_requests;
  const int j = static_cast<int>(threadIdx.x);
  __shared__ typename FusedScan::TempStorage scan;
  __shared__ int64_t rank_major[kFusedThreads];  // a tile's splits in rank-major order, then their exclusive scan
  __shared__ int64_t column_start[kFusedThreads / 2 + 1];  // rank r's first entry in that scan; [cp] = tile total
  __shared__ int64_t prefix[kFusedThreads / 2 + 1];        // the tile's exclusive prefix: rows, each rank's rows
  __shared__ unsigned long long seen;
  // Phase A; tiles go to the last blocks first, so the first blocks start copying the first rows.
  for (int64_t t = gridDim.x - 1 - blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t q0 = t * tile_requests, nq = min(tile_requests, batch - q0), n = nq * segs;
    const int64_t v = j < n ? splits[q0 * segs + j] : 0;
    int64_t out_before, out_total;
    FusedScan(scan).ExclusiveSum(v, out_before, out_total);
    int64_t r = 0, pos = 0;
    if (j < n) {
      const int64_t q = j / segs, k = j % segs;
      r = k < cp ? k : segs - 1 - k;
      pos = r * 2 * nq + q * 2 + (k < cp ? 0 : 1);
      rank_major[pos] = v;
    }
    __syncthreads();  // rank_major written; the scan storage free again
    int64_t rank_before, all_ranks;
    FusedScan(scan).ExclusiveSum(j < n ? rank_major[j] : 0, rank_before, all_ranks);
    __syncthreads();  // every rank_major read
    if (j < n) {
      rank_major[j] = rank_before;
      if (j % (2 * nq) == 0) column_start[j / (2 * nq)] = rank_before;
    }
    if (j == 0) column_start[cp] = all_ranks;
    __syncthreads();
    int64_t aggregate = 0;
    if (j <= cp) {
      aggregate = j == 0 ? out_total : column_start[j] - column_start[j - 1];
      tiles_state.agg[t * (cp + 1) + j] = aggregate;
      if (t == 0) tiles_state.incl[j] = aggregate;
      __threadfence();
    }
    __syncthreads();
    if (j == 0) SetState(&tiles_state.state[t], tag | (t == 0 ? kStateInclusive : kStateAggregate));
    int64_t before = 0;
    for (int64_t i = t - 1; i >= 0; --i) {
      if (j == 0) seen = WaitForState(&tiles_state.state[i], tag, kStateAggregate);
      __syncthreads();
      const bool inclusive = seen >= kStateInclusive;
      if (j <= cp) before += __ldcg((inclusive ? tiles_state.incl : tiles_state.agg) + i * (cp + 1) + j);
      __syncthreads();  // seen read by all
      if (inclusive) break;
    }
    if (t > 0) {
      if (j <= cp) tiles_state.incl[t * (cp + 1) + j] = before + aggregate;
      __threadfence();
      __syncthreads();
      if (j == 0) SetState(&tiles_state.state[t], tag | kStateInclusive);
    }
    if (j <= cp) prefix[j] = before;
    __syncthreads();
    if (j < n) {
      seg_out[q0 * segs + j] = prefix[0] + out_before;
      seg_src[q0 * segs + j] = r * m + prefix[1 + r] + (rank_major[pos] - column_start[r]);
    }
    if (t == tiles - 1) {  // the table's end and its consistency checks (as RerangeTableKernel counts them)
      if (j == 0) {
        seg_out[segments] = prefix[0] + out_total;
        if (prefix[0] + out_total != total_rows && bad) atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      }
      if (j < cp && prefix[1 + j] + column_start[j + 1] - column_start[j] > m && bad) {
        atomicAdd(reinterpret_cast<unsigned long long*>(bad), 1ull);
      }
    }
    __threadfence();
    __syncthreads();
    if (j == 0) SetState(&tiles_state.state[t], tag | kStateWritten);
  }
  // Phase B.
  constexpr unsigned kFull = 0xffffffffu;
  const int lane = j % 32;
  const int64_t warps = int64_t{gridDim.x} * (kFusedThreads / 32);
  const int64_t chunks = (total_rows + kFusedChunkRows - 1) / kFusedChunkRows;
  int64_t next_tile = 0, covered = 0;  // tiles [0, next_tile) are written and end at output row `covered`
  for (int64_t c = blockIdx.x * int64_t{kFusedThreads / 32} + j / 32; c < chunks; c += warps) {
    const int64_t w0 = c * kFusedChunkRows, rows = min(int64_t{kFusedChunkRows}, total_rows - w0);
    if (lane == 0) {
      while (next_tile < tiles && covered < w0 + rows) {
        WaitForState(&tiles_state.state[next_tile], tag, kStateWritten);
        covered = __ldcg(tiles_state.incl + next_tile * (cp + 1));
        ++next_tile;
      }
    }
    next_tile = __shfl_sync(kFull, next_tile, 0);
    covered = __shfl_sync(kFull, covered, 0);
    __syncwarp();
    // The segment of row w0 + lane among the written ones (seg_out[k + 1] of the last written segment is
    // `covered`), as RerangeIndexKernel finds it; src = -1 where the table is inconsistent.
    const int64_t written = next_tile >= tiles ? segments : next_tile * tile_requests * segs;
    int64_t lo = 0, span = written;
    while (span > 32) {
      const int64_t step = (span + 31) / 32;
      const unsigned hit = __ballot_sync(kFull, lane * step < span && __ldcg(seg_out + lo + lane * step) <= w0);
      const int pickw = hit ? 31 - __clz(hit) : 0;
      lo += pickw * step;
      span = min(step, span - pickw * step);
    }
    const int64_t i = w0 + lane;
    const int64_t b = lo + lane < written ? __ldcg(seg_out + lo + lane) : INT64_MAX;
    int pick = -1;
    for (int x = 0; x < 32; ++x) {
      if (__shfl_sync(kFull, b, x) <= i) pick = x;
    }
    int64_t src = -1;
    if (lane < rows && pick >= 0) {
      int64_t k = lo + pick;
      if (pick == 31 && k + 1 < written) {
        int64_t hi = written;  // the last k' in [k, written) with seg_out[k'] <= i
        while (hi - k > 1) {
          const int64_t mid = (k + hi) / 2;
          if (__ldcg(seg_out + mid) <= i)
            k = mid;
          else
            hi = mid;
        }
      }
      const int64_t start = __ldcg(seg_out + k), end = k + 1 < written ? __ldcg(seg_out + k + 1) : covered;
      if (start <= i && i < end) {
        src = __ldcg(seg_src + k) + (i - start);
        if (src < 0 || src >= cp * m) src = -1;  // a rank payload past its block (counted in phase A)
      }
    }
    // The chunk's rows as one run of rows * vecs vectors, kFusedUnroll loads in flight per lane.
    const int n_vec = static_cast<int>(rows) * vecs;
    for (int f0 = 0; f0 < n_vec; f0 += 32 * kFusedUnroll) {  // warp-uniform trip count: every lane shuffles
      V val[kFusedUnroll];
      int row_of[kFusedUnroll], col_of[kFusedUnroll];
      int64_t src_of[kFusedUnroll];
#pragma unroll
      for (int u = 0; u < kFusedUnroll; ++u) {
        const int f = f0 + u * 32 + lane;
        row_of[u] = min(f / vecs, kFusedChunkRows - 1);
        col_of[u] = f - row_of[u] * vecs;
        src_of[u] = __shfl_sync(kFull, src, row_of[u]);
        if (f < n_vec && src_of[u] >= 0) val[u] = in[src_of[u] * vecs + col_of[u]];
      }
#pragma unroll
      for (int u = 0; u < kFusedUnroll; ++u) {
        if (f0 + u * 32 + lane < n_vec && src_of[u] >= 0) out[(w0 + row_of[u]) * vecs + col_of[u]] = val[u];
      }
    }
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
  const size_t three_launches =
      static_cast<size_t>(2 * batch * 2 * cp + 1 + std::max<int64_t>(total_rows, 0)) * sizeof(int64_t);
  if (2 * cp > kFusedThreads) return three_launches;
  return std::max(three_launches, BatchRerangeFusedTempBytes(batch, cp));
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
  RerangeIndexKernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(t.seg_out, t.seg_src, segments, total_rows,
                                                                        cp * max_rank_token, t.index);
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

int64_t FusedTileCount(int64_t batch, int64_t cp) {
  const int64_t tile_requests = kFusedThreads / (2 * cp);
  return (batch + tile_requests - 1) / tile_requests;
}

// A tag no earlier launch of this process used (the low two bits hold the tile state), from a per-process
// random start, so stale states in reused or fresh scratch never read as this launch's.
unsigned long long NextFusedTag() {
  static std::atomic<unsigned long long> next{[] {
    std::random_device rd;
    return (static_cast<unsigned long long>(rd()) << 32 | rd()) & ~3ull;
  }()};
  unsigned long long tag = next.fetch_add(4, std::memory_order_relaxed);
  return tag == 0 ? next.fetch_add(4, std::memory_order_relaxed) : tag;  // 0 is what zeroed scratch holds
}

// Co-resident blocks per SM of the fused kernel for vector width kB (at most 4, as PersistentBlocks leaves room
// for concurrent kernels), and the SM count; 0 where the device cannot launch it cooperatively.
template <int kB>
int FusedBlocksPerSm() {
  static const int blocks = [] {
    int dev = 0, coop = 0, occ = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess || !coop) return 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, RerangeFusedKernel<typename VecOf<kB>::T>, kFusedThreads,
                                                      0) != cudaSuccess) {
      return 0;
    }
    return std::min(occ, 4);
  }();
  return blocks;
}

// Whether the fused rerange can be launched on this device for rows of this size at these addresses.
bool FusedAvailable(int64_t row_bytes, const void* out, const void* in) {
  bool ok = false;
  DispatchVector(RowVectorBytes(row_bytes, out, in), [&]<int kB>() { ok = FusedBlocksPerSm<kB>() > 0; });
  return ok;
}

int SmCount() {
  static const int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 1;
  }();
  return sms;
}

}  // namespace

size_t BatchRerangeFusedTempBytes(int64_t batch, int64_t cp) {
  const int64_t tiles = FusedTileCount(batch, cp);
  return static_cast<size_t>(2 * batch * 2 * cp + 1 + tiles * (1 + 2 * (cp + 1))) * sizeof(int64_t);
}

Status BatchRerangeFusedCanImplement(int64_t batch, int64_t cp, int64_t max_rank_token, int64_t row_bytes) {
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, row_bytes));
  if (2 * cp > kFusedThreads) {
    return InvalidArgument("cp_size: the fused rerange takes a request's 2*cp_size segments in one tile of ",
                           kFusedThreads, ", got cp_size ", cp);
  }
  return Status::Ok();
}

Status LaunchBatchRerangeFused(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                               int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad, void* temp,
                               size_t temp_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.cp.rerange_fused");
  KVSHARD_RETURN_IF_ERROR(BatchRerangeFusedCanImplement(batch, cp, max_rank_token, row_bytes));
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(total_rows, row_bytes));
  if (total_rows == 0) return Status::Ok();
  if (temp_bytes < BatchRerangeFusedTempBytes(batch, cp)) {
    return InvalidArgument("temp_bytes: need ", BatchRerangeFusedTempBytes(batch, cp), ", got ", temp_bytes);
  }
  const int64_t segments = batch * 2 * cp, tiles = FusedTileCount(batch, cp);
  int64_t* w = static_cast<int64_t*>(temp);
  int64_t* seg_out = w;
  int64_t* seg_src = w + segments + 1;
  FusedTiles t{reinterpret_cast<unsigned long long*>(w + 2 * segments + 1), w + 2 * segments + 1 + tiles,
               w + 2 * segments + 1 + tiles + tiles * (cp + 1)};
  Status status = Status::Ok();
  DispatchVector(RowVectorBytes(row_bytes, out, gathered), [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int per_sm = FusedBlocksPerSm<kB>();
    if (per_sm == 0) {
      status = FailedPrecondition("the device cannot launch the fused rerange cooperatively");
      return;
    }
    const int64_t chunks = (total_rows + kFusedChunkRows - 1) / kFusedChunkRows;
    const int64_t want = std::max<int64_t>(tiles, (chunks + kFusedThreads / 32 - 1) / (kFusedThreads / 32));
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(want, int64_t{SmCount()} * per_sm));
    V* out_v = static_cast<V*>(out);
    const V* in_v = static_cast<const V*>(gathered);
    int vecs = static_cast<int>(row_bytes / kB);
    unsigned long long tag = NextFusedTag();
    void* args[] = {&out_v,      &in_v, const_cast<int64_t**>(&splits),
                    &batch,      &cp,   &max_rank_token,
                    &total_rows, &vecs, &seg_out,
                    &seg_src,    &t,    &tag,
                    &bad};
    const cudaError_t e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&RerangeFusedKernel<V>), grid,
                                                      kFusedThreads, args, 0, stream);
    if (e != cudaSuccess) {
      status = Internal(__FILE__, ":", __LINE__, ": CUDA error ", cudaGetErrorName(e), ": ", cudaGetErrorString(e),
                        " (cudaLaunchCooperativeKernel, RerangeFusedKernel)");
    }
  });
  return status;
}

Status LaunchBatchRerange(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                          int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad, void* temp,
                          size_t temp_bytes, cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(batch, cp, max_rank_token, row_bytes));
  KVSHARD_RETURN_IF_ERROR(CpRowSizeCheck(total_rows, row_bytes));
  if (total_rows == 0) return Status::Ok();
  if (BatchRerangeFusedCanImplement(batch, cp, max_rank_token, row_bytes).ok() &&
      FusedAvailable(row_bytes, out, gathered)) {
    return LaunchBatchRerangeFused(out, gathered, splits, batch, cp, max_rank_token, total_rows, row_bytes, bad, temp,
                                   temp_bytes, stream);
  }
  KVSHARD_RETURN_IF_ERROR(
      LaunchBuildRerangeTable(splits, batch, cp, max_rank_token, total_rows, bad, temp, temp_bytes, stream));
  return LaunchRerangeFromTable(out, gathered, temp, batch, cp, max_rank_token, total_rows, row_bytes, stream);
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

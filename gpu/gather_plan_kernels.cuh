// The device gather plan's kernels and the phases they share (gather_plan.cu's host code launches them): the
// grid-wide build's three kernels around CUB's scan, the one-block build of a small batch, and Download's compaction.
#ifndef KVSHARD_GPU_GATHER_PLAN_KERNELS_CUH_
#define KVSHARD_GPU_GATHER_PLAN_KERNELS_CUH_

#include <cstdint>
#include <limits>

#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

namespace kvshard::gpu::gather_plan_kernels {

constexpr int kThreads = 256;
constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// state_[] slots.
enum : int {
  kMappedCount = 0,
  kFirstCyclic = 1,
  kFirstStaleChunk = 2,
  kUniquePrefix = 3,
  kOverflow = 4,
  kOffTrash = 5,  // Download's count of page_pos entries off the trash page
  kStateWords
};

struct PlanArgs {
  const int64_t* pages;      // all position-pages, request-major
  const int64_t* page_off;   // [B+1] first position-page of request i in `pages`
  const int64_t* k_pages;    // [B] prefix pages of request i
  const int64_t* ref_off;    // [B+1] exclusive prefix of k_pages
  const int64_t* chunk_off;  // [B+1] exclusive prefix of chunk pages
  int64_t batch, n_refs, n_chunk;
  int64_t n, ps, stride, block_pages, chunk_base, trash, page_pos_size, send_rank;
  int64_t keys;  // key space n * stride; flags/scan hold keys + 1 entries
  int32_t* page_pos;
  int64_t* send_pages;  // [n * block_pages]
  int64_t* send_rows;   // [block_pages * ps]
  int64_t* mapped;      // previous build's mapped pages on entry; this build's on exit
  int64_t* state;
  int32_t* flags;  // [keys + 1] 1 where a prefix reference has the key (all 0 between builds)
  int32_t* scan;   // [keys + 1] exclusive prefix of flags: the unique index of a key
};

__device__ inline int64_t UpperBoundMinus1(const int64_t* off, int64_t count, int64_t t) {
  int64_t lo = 0, hi = count;  // off[lo] <= t
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (off[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

__device__ __forceinline__ int64_t GridThread() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ __forceinline__ int64_t GridThreads() { return int64_t{gridDim.x} * blockDim.x; }

// Which thread of how many runs a phase below: the grid's in the grid-wide launches, the block's in the one-block
// build.
struct Worker {
  int64_t id, count;
};

// Request of prefix reference t.
__device__ __forceinline__ int64_t RefRequest(const PlanArgs& a, int64_t t) {
  return UpperBoundMinus1(a.ref_off, a.batch, t);
}

// Phase 1: reset what the previous build mapped; pad every send block with the trash page (local page 0);
// flag every prefix reference's key; reset the error words.
__device__ __forceinline__ void ResetAndFlag(const PlanArgs& a, Worker w) {
  const int64_t prev = a.state[kMappedCount];
  const int64_t send = a.n * a.block_pages;
  const int64_t ps_work = prev > send ? prev : send;
  const int64_t work = ps_work > a.n_refs ? ps_work : a.n_refs;
  for (int64_t t = w.id; t < work; t += w.count) {
    if (t < prev) a.page_pos[a.mapped[t]] = static_cast<int32_t>(a.trash);
    if (t < send) a.send_pages[t] = 0;
    if (t < a.n_refs) {
      const int64_t i = RefRequest(a, t);
      const int64_t page = a.pages[a.page_off[i] + (t - a.ref_off[i])];
      a.flags[(page % a.n) * a.stride + page / a.n] = 1;  // same value from every duplicate: no race
    }
  }
  if (w.id == 0) {
    a.state[kFirstCyclic] = kNone;
    a.state[kFirstStaleChunk] = kNone;
    a.state[kOverflow] = 0;
  }
}

// Phase 3 (after the scan, phase 2): slots, page_pos and send pages of the unique prefix pages (clearing their flags
// for the next build), and chunk pages at chunk_base + t in batch order (the earliest reference wins).
__device__ __forceinline__ void Place(const PlanArgs& a, Worker w) {
  const int64_t n_unique = a.scan[a.keys];
  for (int64_t key = w.id; key < a.keys; key += w.count) {
    if (!a.flags[key]) continue;
    a.flags[key] = 0;
    const int64_t owner = key / a.stride, local = key % a.stride;
    const int64_t u = a.scan[key];
    const int64_t within = u - a.scan[owner * a.stride];
    const int64_t page = local * a.n + owner;
    a.mapped[u] = page;
    if (within >= a.block_pages) {
      a.state[kOverflow] = 1;  // a rank owns more than block_pages pages: negative all-gather pad
    } else {
      a.page_pos[page] = static_cast<int32_t>(owner * a.block_pages + within);
      a.send_pages[owner * a.block_pages + within] = local;
    }
  }
  // A chunk page's atomicMin and a prefix page's store to the same entry leave the prefix slot either way
  // (prefix slots < chunk_base), which the stale check below reports.
  for (int64_t t = w.id; t < a.n_chunk; t += w.count) {
    const int64_t i = UpperBoundMinus1(a.chunk_off, a.batch, t);
    const int64_t page = a.pages[a.page_off[i] + a.k_pages[i] + (t - a.chunk_off[i])];
    atomicMin(&a.page_pos[page], static_cast<int32_t>(a.chunk_base + t));
    a.mapped[n_unique + t] = page;
  }
}

// Phase 4: stale chunk pages, cyclic owners, this rank's send rows and the mapped count.
__device__ __forceinline__ void CheckAndExpand(const PlanArgs& a, Worker w) {
  const int64_t n_unique = a.scan[a.keys];
  for (int64_t t = w.id; t < a.n_chunk; t += w.count) {
    const int64_t page = a.mapped[n_unique + t];
    if (a.page_pos[page] != a.chunk_base + t) {  // a prefix page, or an earlier chunk reference of the page
      atomicMin(reinterpret_cast<long long*>(&a.state[kFirstStaleChunk]), t);
    }
  }
  for (int64_t t = w.id; t < a.n_refs; t += w.count) {
    const int64_t i = RefRequest(a, t);
    const int64_t kk = t - a.ref_off[i];
    const int64_t first_owner = a.pages[a.page_off[i]] % a.n;
    if (a.pages[a.page_off[i] + kk] % a.n != (first_owner + kk) % a.n) {
      atomicMin(reinterpret_cast<long long*>(&a.state[kFirstCyclic]), i);
    }
  }
  const int64_t rows = a.block_pages * a.ps;
  for (int64_t j = w.id; j < rows; j += w.count) {
    const int64_t p = j / a.ps;
    a.send_rows[j] = a.send_pages[a.send_rank * a.block_pages + p] * a.ps + (j - p * a.ps);
  }
  if (w.id == 0) {
    a.state[kMappedCount] = n_unique + a.n_chunk;
    a.state[kUniquePrefix] = n_unique;
  }
}

// The grid-wide build: launch 1, the CUB scan (launch 2), launch 3, launch 4.
__global__ void __launch_bounds__(kThreads) ResetAndFlagKernel(PlanArgs a) {
  ResetAndFlag(a, {GridThread(), GridThreads()});
}
__global__ void __launch_bounds__(kThreads) PlaceKernel(PlanArgs a) { Place(a, {GridThread(), GridThreads()}); }
__global__ void __launch_bounds__(kThreads) CheckAndExpandKernel(PlanArgs a) {
  CheckAndExpand(a, {GridThread(), GridThreads()});
}

// The one-block build of a small batch: the four phases in one launch, the block's barrier between them (it orders
// the block's global writes before its later reads) and the scan a block scan in tiles.
constexpr int kOneBlockThreads = 1024;
__global__ void __launch_bounds__(kOneBlockThreads) PlanOneBlockKernel(PlanArgs a) {
  const Worker w{threadIdx.x, blockDim.x};
  ResetAndFlag(a, w);
  __syncthreads();
  using Scan = cub::BlockScan<int32_t, kOneBlockThreads>;
  __shared__ typename Scan::TempStorage temp;
  int32_t carry = 0;  // the flags before this tile
  for (int64_t base = 0; base <= a.keys; base += kOneBlockThreads) {
    const int64_t key = base + threadIdx.x;
    const int32_t flag = key <= a.keys ? a.flags[key] : 0;
    int32_t before = 0, tile = 0;
    Scan(temp).ExclusiveSum(flag, before, tile);
    if (key <= a.keys) a.scan[key] = carry + before;
    carry += tile;
    __syncthreads();  // the scan's storage is reused by the next tile
  }
  Place(a, w);
  __syncthreads();
  CheckAndExpand(a, w);
}

// Download's compaction: pairs[2t], pairs[2t + 1] = mapped[t], page_pos[mapped[t]] for t < the build's mapped count
// (a page outside the table gets the trash page), and state[kOffTrash] += the entries of page_pos off the trash page
// (zeroed before).
__global__ void CompactMappedKernel(const int32_t* __restrict__ page_pos, int64_t page_pos_size, int64_t trash,
                                    const int64_t* __restrict__ mapped, int64_t* state, int64_t* __restrict__ pairs) {
  const int64_t count = state[kMappedCount];
  const int64_t work = count > page_pos_size ? count : page_pos_size;
  unsigned long long off = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < work; i += int64_t{gridDim.x} * blockDim.x) {
    if (i < page_pos_size && page_pos[i] != trash) ++off;
    if (i < count) {
      const int64_t page = mapped[i];
      pairs[2 * i] = page;
      pairs[2 * i + 1] = page >= 0 && page < page_pos_size ? page_pos[page] : trash;
    }
  }
  if (off != 0) atomicAdd(reinterpret_cast<unsigned long long*>(state + kOffTrash), off);
}

}  // namespace kvshard::gpu::gather_plan_kernels

#endif  // KVSHARD_GPU_GATHER_PLAN_KERNELS_CUH_

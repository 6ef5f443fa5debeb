// Device gather plan. One block of 1024 threads: reset the previous batch's page_pos entries, key every prefix
// page reference by (owner, local page), block-radix-sort the keys in shared memory, dedup, assign owner-major
// slots, place chunk pages (atomicMin detects non-fresh chunk pages), and expand one rank's send rows.
#include <cuda_runtime.h>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>

#include "gpu/gather_plan.h"

namespace kvshard::gpu {
namespace {

constexpr int kThreads = 1024;
constexpr int kItems = 16;  // kThreads * kItems == kMaxDevicePlanPrefixPages
static_assert(int64_t{kThreads} * kItems == kMaxDevicePlanPrefixPages);
constexpr uint32_t kNoKey = 0xffffffffu;

using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems>;
using Scan = cub::BlockScan<int, kThreads>;

// state_[] slots.
enum : int { kMappedCount = 0, kFirstCyclic = 1, kFirstStaleChunk = 2, kUniquePrefix = 3, kOverflow = 4, kStateWords };

struct PlanArgs {
  const int64_t* pages;      // all position-pages, request-major
  const int64_t* page_off;   // [B+1] first position-page of request i in `pages`
  const int64_t* k_pages;    // [B] prefix pages of request i
  const int64_t* ref_off;    // [B+1] exclusive prefix of k_pages
  const int64_t* chunk_off;  // [B+1] exclusive prefix of chunk pages
  int64_t batch, n_refs, n_chunk;
  int64_t n, ps, stride, block_pages, chunk_base, trash, page_pos_size, send_rank;
  int key_bits;
  int32_t* page_pos;
  int64_t* send_pages;       // [n * block_pages]
  int64_t* send_rows;        // [block_pages * ps]
  int64_t* mapped;           // previous build's mapped pages on entry; this build's on exit
  int64_t* state;
};

// Bytes of the four request tables in shared memory, rounded up to 16 (the sort storage follows).
__host__ __device__ constexpr int64_t TablesBytes(int64_t batch) { return (4 * (batch + 1) * 8 + 15) / 16 * 16; }

__device__ int64_t UpperBoundMinus1(const int64_t* off, int64_t count, int64_t t) {
  int64_t lo = 0, hi = count;  // off[lo] <= t
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (off[mid] <= t) lo = mid; else hi = mid;
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads) GatherPlanKernel(PlanArgs a) {
  extern __shared__ __align__(16) unsigned char smem_base[];
  // Dynamic shared memory: the request tables (binary searches stay on chip), then the sort storage.
  int64_t* s_page_off = reinterpret_cast<int64_t*>(smem_base);
  int64_t* s_k_pages = s_page_off + (a.batch + 1);
  int64_t* s_ref_off = s_k_pages + (a.batch + 1);
  int64_t* s_chunk_off = s_ref_off + (a.batch + 1);
  unsigned char* smem_raw = smem_base + TablesBytes(a.batch);
  auto& sort_temp = *reinterpret_cast<typename Sort::TempStorage*>(smem_raw);
  __shared__ typename Scan::TempStorage scan_temp;
  __shared__ int owner_start[1024];
  __shared__ int block_total;
  const int tid = threadIdx.x;

  for (int64_t t = tid; t <= a.batch; t += kThreads) {
    s_page_off[t] = a.page_off[t];
    s_k_pages[t] = t < a.batch ? a.k_pages[t] : 0;
    s_ref_off[t] = a.ref_off[t];
    s_chunk_off[t] = a.chunk_off[t];
  }
  // Phase 0: reset what the previous build mapped; pad every send block with the trash page (local page 0).
  const int64_t prev = a.state[kMappedCount];
  for (int64_t t = tid; t < prev; t += kThreads) a.page_pos[a.mapped[t]] = static_cast<int32_t>(a.trash);
  for (int64_t t = tid; t < a.n * a.block_pages; t += kThreads) a.send_pages[t] = 0;
  if (tid == 0) {
    a.state[kFirstCyclic] = a.batch;
    a.state[kFirstStaleChunk] = a.n_chunk;
    a.state[kOverflow] = 0;
  }
  __syncthreads();

  // Phase 1: key each prefix reference by (owner, local page); check cyclic owners per request.
  uint32_t keys[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t t = int64_t{tid} * kItems + k;
    keys[k] = kNoKey;
    if (t < a.n_refs) {
      // Logical pages are < 2^24 (ValidateExtendBatch), so 32-bit division is exact and much cheaper.
      const int64_t i = UpperBoundMinus1(s_ref_off, a.batch, t);
      const uint32_t kk = static_cast<uint32_t>(t - s_ref_off[i]);
      const uint32_t n32 = static_cast<uint32_t>(a.n);
      const uint32_t page = static_cast<uint32_t>(a.pages[s_page_off[i] + kk]);
      const uint32_t owner = page % n32;
      const uint32_t first_owner = static_cast<uint32_t>(a.pages[s_page_off[i]]) % n32;
      if (owner != (first_owner + kk % n32) % n32) atomicMin(reinterpret_cast<long long*>(&a.state[kFirstCyclic]), i);
      keys[k] = owner * static_cast<uint32_t>(a.stride) + page / n32;
    }
  }
  Sort(sort_temp).Sort(keys, 0, a.key_bits);  // blocked: thread tid holds sorted ranks tid*kItems + k
  __syncthreads();
  uint32_t* sorted = reinterpret_cast<uint32_t*>(smem_raw);  // reuse the sort storage
#pragma unroll
  for (int k = 0; k < kItems; ++k) sorted[tid * kItems + k] = keys[k];
  for (int o = tid; o < 1024; o += kThreads) owner_start[o] = 0;
  __syncthreads();

  // Phase 2: dedup (first of equal keys), unique index by block scan, owner starts.
  int flags = 0;
  int first_mask = 0;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int j = tid * kItems + k;
    const bool first = keys[k] != kNoKey && (j == 0 || sorted[j - 1] != keys[k]);
    first_mask |= first << k;
    flags += first;
  }
  int u;
  Scan(scan_temp).ExclusiveSum(flags, u, block_total);
  __syncthreads();
  const int n_unique = block_total;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (!((first_mask >> k) & 1)) continue;
    const int j = tid * kItems + k;
    const uint32_t stride32 = static_cast<uint32_t>(a.stride);
    const uint32_t owner = keys[k] / stride32;
    const bool owner_first = j == 0 || sorted[j - 1] / stride32 != owner;
    if (owner_first) owner_start[owner] = u + __popc(first_mask & ((1 << k) - 1));
  }
  __syncthreads();
  // Phase 3: slots, page_pos and send pages of the unique prefix pages.
  int uu = u;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (!((first_mask >> k) & 1)) continue;
    const uint32_t stride32 = static_cast<uint32_t>(a.stride);
    const int64_t owner = keys[k] / stride32;
    const int64_t local = keys[k] % stride32;
    const int64_t within = uu - owner_start[owner];
    const int64_t page = local * a.n + owner;
    a.mapped[uu] = page;
    if (within >= a.block_pages) {
      a.state[kOverflow] = 1;  // a rank owns more than block_pages pages: negative all-gather pad
    } else {
      a.page_pos[page] = static_cast<int32_t>(owner * a.block_pages + within);
      a.send_pages[owner * a.block_pages + within] = local;
    }
    ++uu;
  }
  __syncthreads();

  // Phase 4: chunk pages at chunk_base + t in batch order; the earliest reference of a page wins.
  for (int64_t t = tid; t < a.n_chunk; t += kThreads) {
    const int64_t i = UpperBoundMinus1(s_chunk_off, a.batch, t);
    const int64_t page = a.pages[s_page_off[i] + s_k_pages[i] + (t - s_chunk_off[i])];
    atomicMin(&a.page_pos[page], static_cast<int32_t>(a.chunk_base + t));
    a.mapped[n_unique + t] = page;
  }
  __syncthreads();
  for (int64_t t = tid; t < a.n_chunk; t += kThreads) {
    const int64_t page = a.mapped[n_unique + t];
    if (a.page_pos[page] != a.chunk_base + t) {  // a prefix page, or an earlier chunk reference of the page
      atomicMin(reinterpret_cast<long long*>(&a.state[kFirstStaleChunk]), t);
    }
  }
  // Phase 5: this rank's send rows (block_pages pages expanded to rows).
  __syncthreads();
  // A warp per page: lanes write its ps consecutive rows (no division).
  const int warp = tid / 32, lane = tid % 32;
  for (int64_t p = warp; p < a.block_pages; p += kThreads / 32) {
    const int64_t base = a.send_pages[a.send_rank * a.block_pages + p] * a.ps;
    int64_t* row = a.send_rows + p * a.ps;
    for (int64_t k = lane; k < a.ps; k += 32) row[k] = base + k;
  }
  if (tid == 0) {
    a.state[kMappedCount] = n_unique + a.n_chunk;
    a.state[kUniquePrefix] = n_unique;
  }
}

constexpr int64_t kMaxPlanBatch = 4096;

int64_t SortTempBytes() {
  return std::max<int64_t>(sizeof(typename Sort::TempStorage), kMaxDevicePlanPrefixPages * sizeof(uint32_t));
}

int64_t SharedBytes(int64_t batch) { return TablesBytes(batch) + SortTempBytes(); }

}  // namespace

Status GatherPlanCanImplement(const ExtendBatch& batch) {
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatch(batch));
  int64_t refs = 0;
  for (const ExtendRequest& r : batch.requests) refs += r.prefix_len / batch.page_size;
  if (refs > kMaxDevicePlanPrefixPages) {
    return OutOfRange("requests: ", refs, " prefix page references exceed the single-launch device plan limit (",
                      kMaxDevicePlanPrefixPages, ")");
  }
  if (batch.shard_size > 1024) return OutOfRange("shard_size: device plan supports at most 1024 ranks");
  if (static_cast<int64_t>(batch.requests.size()) > kMaxPlanBatch) {
    return OutOfRange("requests: device plan supports at most ", kMaxPlanBatch, " requests per batch");
  }
  if (batch.max_prefix_tokens / batch.page_size + batch.chunk_tokens / batch.page_size + 1 > INT32_MAX) {
    return OutOfRange("max_prefix_tokens: scratch pages exceed int32 page_pos");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<DeviceGatherPlanner>> DeviceGatherPlanner::Create(const ExtendBatch& geometry) {
  ExtendBatch g = geometry;
  g.requests.clear();
  KVSHARD_RETURN_IF_ERROR(GatherPlanCanImplement(g));
  std::unique_ptr<DeviceGatherPlanner> p(new DeviceGatherPlanner());
  p->geometry_ = g;
  p->page_pos_size_ = g.shard_size * (g.pages_per_rank + 2);
  p->trash_page_ = (g.max_prefix_tokens + g.chunk_tokens) / g.page_size;
  std::vector<int32_t> fill(p->page_pos_size_, static_cast<int32_t>(p->trash_page_));
  KVSHARD_ASSIGN_OR_RETURN(p->page_pos_, gpu::Upload(fill));
  KVSHARD_ASSIGN_OR_RETURN(p->state_, gpu::Upload(std::vector<int64_t>(kStateWords, 0)));
  KVSHARD_CUDA_CHECK(cudaFuncSetAttribute(GatherPlanKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(SharedBytes(kMaxPlanBatch))));
  return p;
}

Status DeviceGatherPlanner::Upload(const ExtendBatch& batch, cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(GatherPlanCanImplement(batch));
  if (batch.shard_size != geometry_.shard_size || batch.page_size != geometry_.page_size ||
      batch.pages_per_rank != geometry_.pages_per_rank ||
      batch.max_prefix_tokens != geometry_.max_prefix_tokens || batch.chunk_tokens != geometry_.chunk_tokens) {
    return InvalidArgument("batch: geometry differs from the planner's (create a planner per geometry)");
  }
  KVSHARD_CUDA_CHECK(cudaStreamSynchronize(stream));  // the previous build's buffers may still be in use
  const int64_t n = batch.shard_size, ps = batch.page_size, b = static_cast<int64_t>(batch.requests.size());
  std::vector<int64_t> pages, meta(4 * (b + 1), 0);
  int64_t* page_off = meta.data();
  int64_t* k_pages = page_off + (b + 1);
  int64_t* ref_off = k_pages + (b + 1);
  int64_t* chunk_off = ref_off + (b + 1);
  block_pages_ = 0;
  first_misaligned_ = -1;
  for (int64_t i = 0; i < b; ++i) {
    const ExtendRequest& r = batch.requests[i];
    if (r.prefix_len % ps != 0 && first_misaligned_ < 0) first_misaligned_ = i;
    page_off[i] = static_cast<int64_t>(pages.size());
    pages.insert(pages.end(), r.pages.begin(), r.pages.end());
    k_pages[i] = r.prefix_len / ps;
    ref_off[i + 1] = ref_off[i] + k_pages[i];
    chunk_off[i + 1] = chunk_off[i] + static_cast<int64_t>(r.pages.size()) - k_pages[i];
    block_pages_ += (k_pages[i] + n - 1) / n;  // SGLang's sync-free host bound
  }
  page_off[b] = static_cast<int64_t>(pages.size());
  n_prefix_refs_ = ref_off[b];
  n_chunk_ = chunk_off[b];
  batch_ = batch;
  KVSHARD_ASSIGN_OR_RETURN(pages_, gpu::Upload(pages.empty() ? std::vector<int64_t>{0} : pages));
  KVSHARD_ASSIGN_OR_RETURN(req_meta_, gpu::Upload(meta));
  KVSHARD_ASSIGN_OR_RETURN(send_pages_, DeviceBuffer::Allocate(std::max<int64_t>(1, n * block_pages_) * 8));
  KVSHARD_ASSIGN_OR_RETURN(send_rows_, DeviceBuffer::Allocate(std::max<int64_t>(1, block_pages_ * ps) * 8));
  const int64_t need = n_prefix_refs_ + n_chunk_;
  if (need > capacity_pages_ || !mapped_.data()) {
    // Keep the previous build's mapped list (the next launch resets those page_pos entries).
    int64_t prev = 0;
    KVSHARD_RETURN_IF_ERROR(CopyToHost(&prev, state_.data(), sizeof(prev)));
    std::vector<int64_t> old = prev ? gpu::Download<int64_t>(mapped_.data(), prev).value() : std::vector<int64_t>{};
    old.resize(std::max<int64_t>(need, prev) + 1, 0);
    KVSHARD_ASSIGN_OR_RETURN(mapped_, gpu::Upload(old));
    capacity_pages_ = static_cast<int64_t>(old.size());
  }
  return Status::Ok();
}

Status DeviceGatherPlanner::Launch(int64_t send_rank, cudaStream_t stream) {
  const ExtendBatch& g = geometry_;
  if (send_rank < 0 || send_rank >= g.shard_size) return InvalidArgument("send_rank: must be in [0, ", g.shard_size, ")");
  const int64_t b = static_cast<int64_t>(batch_.requests.size());
  const int64_t* meta = req_meta_.as<int64_t>();
  PlanArgs a;
  a.pages = pages_.as<int64_t>();
  a.page_off = meta;
  a.k_pages = meta + (b + 1);
  a.ref_off = meta + 2 * (b + 1);
  a.chunk_off = meta + 3 * (b + 1);
  a.batch = b;
  a.n_refs = n_prefix_refs_;
  a.n_chunk = n_chunk_;
  a.n = g.shard_size;
  a.ps = g.page_size;
  a.stride = g.pages_per_rank + 2;  // SGLang's _local_page_stride
  a.block_pages = block_pages_;
  a.chunk_base = g.max_prefix_tokens / g.page_size;
  a.trash = trash_page_;
  a.page_pos_size = page_pos_size_;
  a.send_rank = send_rank;
  const uint64_t max_key = static_cast<uint64_t>(g.shard_size) * a.stride;
  a.key_bits = 1;
  while ((uint64_t{1} << a.key_bits) <= max_key) ++a.key_bits;  // the sentinel sorts after every real key
  a.page_pos = page_pos_.as<int32_t>();
  a.send_pages = send_pages_.as<int64_t>();
  a.send_rows = send_rows_.as<int64_t>();
  a.mapped = mapped_.as<int64_t>();
  a.state = state_.as<int64_t>();
  GatherPlanKernel<<<1, kThreads, SharedBytes(b), stream>>>(a);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status DeviceGatherPlanner::Finish(cudaStream_t stream) {
  KVSHARD_CUDA_CHECK(cudaStreamSynchronize(stream));
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  int64_t st[kStateWords];
  KVSHARD_RETURN_IF_ERROR(CopyToHost(st, state_.data(), sizeof(st)));
  const int64_t b = static_cast<int64_t>(batch_.requests.size());
  const int64_t n = batch_.shard_size, ps = batch_.page_size;
  const int64_t cyclic = st[kFirstCyclic];
  if (first_misaligned_ >= 0 && first_misaligned_ <= cyclic) {
    const ExtendRequest& r = batch_.requests[first_misaligned_];
    return InvalidArgument("requests[", first_misaligned_, "].prefix_len: sharded prefill requires physical-page-aligned "
                           "prefixes (the radix-tree match quantum), got prefix_len=", r.prefix_len, ", page_size=", ps);
  }
  if (cyclic < b) {
    const ExtendRequest& r = batch_.requests[cyclic];
    std::string owners = "[";
    for (int64_t k = 0; k < r.prefix_len / ps && k < 16; ++k) owners += (k ? ", " : "") + std::to_string(r.pages[k] % n);
    return InvalidArgument("requests[", cyclic, "].pages: sharded prefix owners of request ", cyclic,
                           " are not cyclic — rotation base out of sync (owners[:16]=", owners, "])");
  }
  if (n * block_pages_ * ps > batch_.max_prefix_tokens) {
    return OutOfRange("max_prefix_tokens: prefix (", st[kUniquePrefix], " pages, padded gather span ",
                      n * block_pages_ * ps, " tokens) exceeds the scratch prefix capacity (", batch_.max_prefix_tokens,
                      ") — the PrefillAdder scratch reservation should have deferred this batch");
  }
  if (n_chunk_ * ps > batch_.chunk_tokens) {
    return OutOfRange("chunk_tokens: chunk (", n_chunk_ * ps, " tokens) exceeds the scratch chunk capacity (",
                      batch_.chunk_tokens, ")");
  }
  if (st[kFirstStaleChunk] < n_chunk_) {
    int64_t t = st[kFirstStaleChunk], i = 0;
    while (true) {
      const ExtendRequest& r = batch_.requests[i];
      const int64_t c = static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
      if (t < c) break;
      t -= c;
      ++i;
    }
    const ExtendRequest& r = batch_.requests[i];
    const int64_t j = r.prefix_len / ps + t;
    return InvalidArgument("requests[", i, "].pages[", j, "]: chunk page ", r.pages[j],
                           " is already in the plan (a prefix page or an earlier chunk page); chunk pages must be "
                           "fresh allocations");
  }
  if (st[kOverflow]) return Internal("negative all-gather pad: a rank owns more than block_pages=", block_pages_, " prefix pages");
  return Status::Ok();
}

StatusOr<GatherPlan> DeviceGatherPlanner::Download(cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(Finish(stream));
  const int64_t n = batch_.shard_size, ps = batch_.page_size;
  GatherPlan plan;
  plan.shard_size = n;
  plan.page_size = ps;
  plan.block_pages = block_pages_;
  plan.n_prefix_slots = n * block_pages_;
  plan.chunk_base_page = batch_.max_prefix_tokens / ps;
  plan.trash_page = trash_page_;
  plan.page_pos_size = page_pos_size_;
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int32_t> pos, gpu::Download<int32_t>(page_pos_.data(), page_pos_size_));
  for (int64_t p = 0; p < page_pos_size_; ++p) {
    if (pos[p] != trash_page_) {
      plan.mapped_pages.push_back(p);
      plan.mapped_scratch_pages.push_back(pos[p]);
    }
  }
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> send, gpu::Download<int64_t>(send_pages_.data(), n * block_pages_));
  for (int64_t r = 0; r < n; ++r) {
    RankSend rs;
    rs.rank = r;
    rs.send_local_pages.assign(send.begin() + r * block_pages_, send.begin() + (r + 1) * block_pages_);
    for (int64_t p : rs.send_local_pages) {
      for (int64_t k = 0; k < ps; ++k) rs.send_rows.push_back(p * ps + k);
    }
    plan.ranks.push_back(std::move(rs));
  }
  return plan;
}

}  // namespace kvshard::gpu

// Device gather plan, grid-wide (any batch): key every prefix page reference by (owner, local page) and flag
// it in a key-space array; an exclusive scan (CUB DeviceScan) of the flags is the sorted, deduplicated,
// owner-major order; then slots, page_pos and send pages, chunk pages (atomicMin finds non-fresh ones) and one
// rank's send rows. Five launches, no host round trip; a small batch's build is one launch of one block.
// The kernels and their phases are in gather_plan_kernels.cuh; this file sizes, launches and checks them.
#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "gpu/gather_plan.h"
#include "gpu/gather_plan_kernels.cuh"
#include "gpu/nvtx.h"

namespace kvshard::gpu {
namespace {

using gather_plan_kernels::CheckAndExpandKernel;
using gather_plan_kernels::CompactMappedKernel;
using gather_plan_kernels::kFirstCyclic;
using gather_plan_kernels::kFirstStaleChunk;
using gather_plan_kernels::kMappedCount;
using gather_plan_kernels::kOffTrash;
using gather_plan_kernels::kOneBlockThreads;
using gather_plan_kernels::kOverflow;
using gather_plan_kernels::kStateWords;
using gather_plan_kernels::kThreads;
using gather_plan_kernels::kUniquePrefix;
using gather_plan_kernels::PlaceKernel;
using gather_plan_kernels::PlanArgs;
using gather_plan_kernels::PlanOneBlockKernel;
using gather_plan_kernels::ResetAndFlagKernel;

int GridFor(int64_t work) {
  static const int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 1;
  }();
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, int64_t{sms} * 8));
}

}  // namespace

Status GatherPlanCanImplement(const ExtendBatch& batch) {
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatch(batch));
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
  const size_t state_bytes = kStateWords * sizeof(int64_t);
  KVSHARD_ASSIGN_OR_RETURN(p->answers_, DeviceBuffer::Allocate(state_bytes + fill.size() * sizeof(int32_t)));
  p->state_at_ = p->answers_.as<int64_t>();
  p->page_pos_at_ = reinterpret_cast<int32_t*>(p->answers_.as<char>() + state_bytes);
  const std::vector<int64_t> zeros(kStateWords, 0);
  KVSHARD_RETURN_IF_ERROR(CopyToDevice(p->state_at_, zeros.data(), state_bytes));
  KVSHARD_RETURN_IF_ERROR(CopyToDevice(p->page_pos_at_, fill.data(), fill.size() * sizeof(int32_t)));
  // Key space: owner * stride + local page, stride = pages_per_rank + 2 (SGLang's _local_page_stride), so
  // keys == page_pos_size <= 2^24 (ValidateExtendBatch).
  p->keys_ = g.shard_size * (g.pages_per_rank + 2);
  KVSHARD_ASSIGN_OR_RETURN(p->flags_, gpu::Upload(std::vector<int32_t>(p->keys_ + 1, 0)));
  KVSHARD_ASSIGN_OR_RETURN(p->scan_, DeviceBuffer::Allocate((p->keys_ + 1) * sizeof(int32_t)));
  size_t temp = 0;
  KVSHARD_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp, p->flags_.as<int32_t>(), p->scan_.as<int32_t>(),
                                                   static_cast<int>(p->keys_ + 1)));
  KVSHARD_ASSIGN_OR_RETURN(p->scan_temp_, DeviceBuffer::Allocate(std::max<size_t>(temp, 1)));
  return p;
}

Status DeviceGatherPlanner::Upload(const ExtendBatch& batch, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.plan.upload");
  KVSHARD_RETURN_IF_ERROR(GatherPlanCanImplement(batch));
  if (batch.shard_size != geometry_.shard_size || batch.page_size != geometry_.page_size ||
      batch.pages_per_rank != geometry_.pages_per_rank || batch.max_prefix_tokens != geometry_.max_prefix_tokens ||
      batch.chunk_tokens != geometry_.chunk_tokens) {
    return InvalidArgument("batch: geometry differs from the planner's (create a planner per geometry)");
  }
  if (!idle_) KVSHARD_CUDA_CHECK(cudaStreamSynchronize(stream));  // the previous build's buffers may still be in use
  idle_ = true;
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
  // Buffers reused batch after batch (grown when a batch needs more): no allocation and free per batch.
  if (pages.empty()) pages.push_back(0);
  const size_t page_bytes = pages.size() * sizeof(int64_t), meta_bytes = meta.size() * sizeof(int64_t);
  KVSHARD_RETURN_IF_ERROR(Reserve(&meta_and_pages_, meta_bytes + page_bytes));
  KVSHARD_RETURN_IF_ERROR(Reserve(&upload_, meta_bytes + page_bytes));  // the stream is idle (synchronized above)
  std::memcpy(upload_.data(), meta.data(), meta_bytes);
  std::memcpy(static_cast<char*>(upload_.data()) + meta_bytes, pages.data(), page_bytes);
  idle_ = false;
  KVSHARD_CUDA_CHECK(
      cudaMemcpyAsync(meta_and_pages_.data(), upload_.data(), meta_bytes + page_bytes, cudaMemcpyHostToDevice, stream));
  KVSHARD_RETURN_IF_ERROR(Reserve(&send_pages_, std::max<int64_t>(1, n * block_pages_) * 8));
  KVSHARD_RETURN_IF_ERROR(Reserve(&send_rows_, std::max<int64_t>(1, block_pages_ * ps) * 8));
  const int64_t need = n_prefix_refs_ + n_chunk_;
  if (need > capacity_pages_ || !mapped_.data()) {
    // Keep the previous build's mapped list (the next launch resets those page_pos entries).
    int64_t prev = 0;
    KVSHARD_RETURN_IF_ERROR(CopyToHost(&prev, state_at_, sizeof(prev)));
    std::vector<int64_t> old = prev ? gpu::Download<int64_t>(mapped_.data(), prev).value() : std::vector<int64_t>{};
    old.resize(std::max<int64_t>(need, prev) + 1, 0);
    KVSHARD_ASSIGN_OR_RETURN(mapped_, gpu::Upload(old));
    capacity_pages_ = static_cast<int64_t>(old.size());
  }
  return Status::Ok();
}

Status DeviceGatherPlanner::Launch(int64_t send_rank, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.plan.build");
  const ExtendBatch& g = geometry_;
  if (send_rank < 0 || send_rank >= g.shard_size)
    return InvalidArgument("send_rank: must be in [0, ", g.shard_size, ")");
  const int64_t b = static_cast<int64_t>(batch_.requests.size());
  const int64_t* meta = meta_and_pages_.as<int64_t>();
  PlanArgs a;
  a.pages = meta + 4 * (b + 1);
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
  a.keys = keys_;
  a.page_pos = page_pos_at_;
  a.send_pages = send_pages_.as<int64_t>();
  a.send_rows = send_rows_.as<int64_t>();
  a.mapped = mapped_.as<int64_t>();
  a.state = state_at_;
  a.flags = flags_.as<int32_t>();
  a.scan = scan_.as<int32_t>();
  int64_t prev_bound = capacity_pages_;  // the previous build mapped at most this many pages
  idle_ = false;
  const int64_t work = std::max(
      {prev_bound, g.shard_size * block_pages_, n_prefix_refs_, keys_ + 1, n_chunk_, block_pages_ * g.page_size});
  if (work <= one_block_work_) {  // a small batch: one launch, where the grid-wide build makes five
    PlanOneBlockKernel<<<1, kOneBlockThreads, 0, stream>>>(a);
    KVSHARD_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }
  ResetAndFlagKernel<<<GridFor(std::max({prev_bound, g.shard_size * block_pages_, n_prefix_refs_})), kThreads, 0,
                       stream>>>(a);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  size_t temp = scan_temp_.bytes();
  KVSHARD_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(scan_temp_.data(), temp, a.flags, a.scan, static_cast<int>(keys_ + 1), stream));
  PlaceKernel<<<GridFor(std::max(keys_, n_chunk_)), kThreads, 0, stream>>>(a);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  CheckAndExpandKernel<<<GridFor(std::max({n_chunk_, n_prefix_refs_, block_pages_ * g.page_size})), kThreads, 0,
                         stream>>>(a);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status DeviceGatherPlanner::Finish(cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.plan.finish");
  KVSHARD_CUDA_CHECK(cudaStreamSynchronize(stream));
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  int64_t st[kStateWords];
  idle_ = true;
  KVSHARD_RETURN_IF_ERROR(CopyToHost(st, state_at_, sizeof(st)));
  return CheckState(st);
}

Status DeviceGatherPlanner::CheckState(const int64_t* st) const {
  const int64_t b = static_cast<int64_t>(batch_.requests.size());
  const int64_t n = batch_.shard_size, ps = batch_.page_size;
  const int64_t cyclic = st[kFirstCyclic];
  if (first_misaligned_ >= 0 && first_misaligned_ <= cyclic) {
    const ExtendRequest& r = batch_.requests[first_misaligned_];
    return InvalidArgument("requests[", first_misaligned_,
                           "].prefix_len: sharded prefill requires physical-page-aligned "
                           "prefixes (the radix-tree match quantum), got prefix_len=",
                           r.prefix_len, ", page_size=", ps);
  }
  if (cyclic < b) {
    const ExtendRequest& r = batch_.requests[cyclic];
    std::string owners = "[";
    for (int64_t k = 0; k < r.prefix_len / ps && k < 16; ++k)
      owners += (k ? ", " : "") + std::to_string(r.pages[k] % n);
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
  if (st[kOverflow])
    return Internal("negative all-gather pad: a rank owns more than block_pages=", block_pages_, " prefix pages");
  return Status::Ok();
}

StatusOr<GatherPlan> DeviceGatherPlanner::Download(cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.plan.download");
  const int64_t n = batch_.shard_size, ps = batch_.page_size;
  // One pinned buffer: the state words, then page_pos (int32) or the mapped pairs (int64), then the send pages (int64,
  // 8-byte aligned). The build maps at most its prefix references and chunk pages.
  const bool dense = page_pos_size_ * static_cast<int64_t>(sizeof(int32_t)) <= max_dense_download_bytes_;
  const int64_t pair_bound = std::max<int64_t>(1, n_prefix_refs_ + n_chunk_);
  const size_t state_bytes = kStateWords * sizeof(int64_t), pos_bytes = page_pos_size_ * sizeof(int32_t);
  const size_t pairs_bytes = static_cast<size_t>(pair_bound) * 2 * sizeof(int64_t);
  const size_t send_at = state_bytes + (dense ? (pos_bytes + 7) / 8 * 8 : pairs_bytes);
  const size_t send_bytes = n * block_pages_ * sizeof(int64_t);
  KVSHARD_RETURN_IF_ERROR(Reserve(&download_, send_at + send_bytes));
  auto* host = static_cast<char*>(download_.data());
  if (dense) {
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(host, answers_.data(), state_bytes + pos_bytes, cudaMemcpyDeviceToHost, stream));
  } else {
    KVSHARD_RETURN_IF_ERROR(Reserve(&mapped_pairs_, pairs_bytes));
    KVSHARD_CUDA_CHECK(cudaMemsetAsync(state_at_ + kOffTrash, 0, sizeof(int64_t), stream));
    CompactMappedKernel<<<GridFor(std::max(page_pos_size_, pair_bound)), kThreads, 0, stream>>>(
        page_pos_at_, page_pos_size_, trash_page_, mapped_.as<int64_t>(), state_at_, mapped_pairs_.as<int64_t>());
    KVSHARD_CUDA_CHECK(cudaGetLastError());
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(host, state_at_, state_bytes, cudaMemcpyDeviceToHost, stream));
    KVSHARD_CUDA_CHECK(
        cudaMemcpyAsync(host + state_bytes, mapped_pairs_.data(), pairs_bytes, cudaMemcpyDeviceToHost, stream));
  }
  if (send_bytes > 0) {
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(host + send_at, send_pages_.data(), send_bytes, cudaMemcpyDeviceToHost, stream));
  }
  KVSHARD_CUDA_CHECK(cudaStreamSynchronize(stream));
  idle_ = true;
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  const auto* state = reinterpret_cast<const int64_t*>(host);
  KVSHARD_RETURN_IF_ERROR(CheckState(state));
  GatherPlan plan;
  plan.shard_size = n;
  plan.page_size = ps;
  plan.block_pages = block_pages_;
  plan.n_prefix_slots = n * block_pages_;
  plan.chunk_base_page = batch_.max_prefix_tokens / ps;
  plan.trash_page = trash_page_;
  plan.page_pos_size = page_pos_size_;
  // The mapped pages: the compacted pairs where they are exactly the dense table's entries off the trash page
  // (distinct pages, none on the trash page, as many as the device counted), else the dense table itself.
  bool scanned = false;
  if (!dense) {
    const int64_t count = state[kMappedCount];
    if (count >= 0 && count <= pair_bound && state[kOffTrash] == count) {
      const auto* pairs = reinterpret_cast<const int64_t*>(host + state_bytes);
      std::vector<std::pair<int64_t, int64_t>> sorted(static_cast<size_t>(count));
      for (int64_t t = 0; t < count; ++t) sorted[t] = {pairs[2 * t], pairs[2 * t + 1]};
      std::sort(sorted.begin(), sorted.end());
      scanned = true;
      for (int64_t t = 0; t < count && scanned; ++t) {
        scanned = sorted[t].second != trash_page_ && (t == 0 || sorted[t].first != sorted[t - 1].first);
      }
      for (int64_t t = 0; t < count && scanned; ++t) {
        plan.mapped_pages.push_back(sorted[t].first);
        plan.mapped_scratch_pages.push_back(sorted[t].second);
      }
    }
  }
  if (!scanned) {
    std::vector<int32_t> dense_pos;
    const int32_t* pos = reinterpret_cast<const int32_t*>(host + state_bytes);
    if (!dense) {  // a disagreement: the dense table after all
      KVSHARD_ASSIGN_OR_RETURN(dense_pos, gpu::Download<int32_t>(page_pos_at_, static_cast<size_t>(page_pos_size_)));
      pos = dense_pos.data();
    }
    for (int64_t p = 0; p < page_pos_size_; ++p) {
      if (pos[p] != trash_page_) {
        plan.mapped_pages.push_back(p);
        plan.mapped_scratch_pages.push_back(pos[p]);
      }
    }
  }
  const auto* send = reinterpret_cast<const int64_t*>(host + send_at);
  for (int64_t r = 0; r < n; ++r) {
    RankSend rs;
    rs.rank = r;
    rs.send_local_pages.assign(send + r * block_pages_, send + (r + 1) * block_pages_);
    for (int64_t p : rs.send_local_pages) {
      for (int64_t k = 0; k < ps; ++k) rs.send_rows.push_back(p * ps + k);
    }
    plan.ranks.push_back(std::move(rs));
  }
  return plan;
}

}  // namespace kvshard::gpu

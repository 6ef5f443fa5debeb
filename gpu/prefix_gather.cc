// Layer-ahead prefix gather: the seed's _prefetch_layer / _acquire_slot_for_read on CUDA streams and NCCL.
// Several buffers per layer: each rank packs all pairs' send rows into one block [buf 0 rows | buf 1 rows | ...]
// of a staging region, ONE in-place all-gather moves every rank's block, and one strided device copy per
// buffer splits the gathered blocks into the buffers' scratch tensors (the seed issues one all-gather per pair).
// Host code (the C++ toolchain, not nvcc): the kernels are kv_ops.cu's, and spin_kernel.cu's for the stand-in.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "gpu/nvtx.h"
#include "gpu/prefix_gather.h"
#include "gpu/prefix_gather_rank.h"
#include "gpu/spin_kernel.h"

namespace kvshard::gpu {

Status PrefixGatherCanImplement(const PrefixGatherShape& s, int n) {
  if (n < 1) return InvalidArgument("shard_size: must be >= 1, got ", n);
  if (s.layers < 1) return InvalidArgument("layers: must be >= 1, got ", s.layers);
  if (s.page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", s.page_size);
  if (s.buffer_row_bytes.empty() && (s.row_bytes < 1 || s.row_bytes > (1 << 20))) {
    return InvalidArgument("row_bytes: must be in [1, 2^20], got ", s.row_bytes);
  }
  if (s.buffer_row_bytes.size() > 16)
    return InvalidArgument("buffer_row_bytes: at most 16 buffers, got ", s.buffer_row_bytes.size());
  int64_t row_sum = 0;
  for (size_t b = 0; b < s.buffer_row_bytes.size(); ++b) {
    if (s.buffer_row_bytes[b] < 1 || s.buffer_row_bytes[b] > (1 << 20)) {
      return InvalidArgument("buffer_row_bytes[", b, "]: must be in [1, 2^20], got ", s.buffer_row_bytes[b]);
    }
  }
  for (int64_t w : s.buffers()) row_sum += w;
  if (s.pool_rows < s.page_size || s.pool_rows % s.page_size != 0) {
    return InvalidArgument("pool_rows: must be a positive multiple of page_size, got ", s.pool_rows);
  }
  if (s.max_prefix_tokens < 0 || s.max_prefix_tokens % (n * s.page_size) != 0) {
    return InvalidArgument("max_prefix_tokens: must be a multiple of shard_size*page_size, got ", s.max_prefix_tokens);
  }
  if (s.chunk_tokens < 0 || s.chunk_tokens % s.page_size != 0) {
    return InvalidArgument("chunk_tokens: must be a multiple of page_size, got ", s.chunk_tokens);
  }
  if (s.n_page_pos < 0) return InvalidArgument("n_page_pos: must be >= 0");
  const double staging = s.buffers().size() > 1 ? 2.0 * s.max_prefix_tokens : 0.0;
  const double bytes = (static_cast<double>(s.layers * s.pool_rows + 2 * s.scratch_rows()) + staging) * row_sum;
  if (bytes > 100e9) return OutOfRange("pool + scratch: ", bytes / 1e9, " GB per rank exceeds 100 GB");
  return Status::Ok();
}

LayerAheadGather::LayerAheadGather(RankGroup* comm, const PrefixGatherShape& shape)
    : comm_(comm), shape_(shape), ranks_(comm->local_ranks()) {}

struct LayerAheadGather::TraceEvents {
  std::string label;
  cudaEvent_t start = nullptr, end = nullptr;
  ~TraceEvents() {
    if (start) cudaEventDestroy(start);
    if (end) cudaEventDestroy(end);
  }
};

LayerAheadGather::~LayerAheadGather() = default;

void LayerAheadGather::TraceBegin(const std::string& label, cudaStream_t stream) {
  if (!trace_) return;
  auto t = std::make_unique<TraceEvents>();
  t->label = label;
  cudaSetDevice(state_[0]->device);
  cudaEventCreate(&t->start);
  cudaEventCreate(&t->end);
  cudaEventRecord(t->start, stream);
  trace_events_.push_back(std::move(t));
}

void LayerAheadGather::TraceEnd(cudaStream_t stream) {
  if (!trace_ || trace_events_.empty()) return;
  cudaSetDevice(state_[0]->device);
  cudaEventRecord(trace_events_.back()->end, stream);
}

StatusOr<std::vector<LayerAheadGather::TraceSpan>> LayerAheadGather::TakeTrace() {
  std::vector<TraceSpan> out;
  if (trace_events_.empty()) return out;
  KVSHARD_CUDA_CHECK(cudaSetDevice(state_[0]->device));
  KVSHARD_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t origin = trace_events_.front()->start;
  for (const auto& t : trace_events_) {
    float a = 0, b = 0;
    KVSHARD_CUDA_CHECK(cudaEventElapsedTime(&a, origin, t->start));
    KVSHARD_CUDA_CHECK(cudaEventElapsedTime(&b, origin, t->end));
    out.push_back({t->label, a * 1e3, b * 1e3});
  }
  trace_events_.clear();
  return out;
}

StatusOr<std::unique_ptr<LayerAheadGather>> LayerAheadGather::Create(RankGroup* comm, const PrefixGatherShape& shape) {
  KVSHARD_RETURN_IF_ERROR(PrefixGatherCanImplement(shape, comm->size()));
  std::unique_ptr<LayerAheadGather> g(new LayerAheadGather(comm, shape));
  g->one_stream_ = shape.one_stream;
  for (size_t i = 0; i < g->ranks_.size(); ++i) g->one_stream_ &= comm->device(static_cast<int>(i)) == comm->device(0);
  for (size_t i = 0; i < g->ranks_.size(); ++i) {
    auto r = std::make_unique<Rank>();
    r->device = comm->device(static_cast<int>(i));
    r->rank = g->ranks_[i];
    KVSHARD_CUDA_CHECK(cudaSetDevice(r->device));
    if (g->one_stream_ && i > 0) {
      r->compute = r->gather = r->pack = g->state_[0]->compute;
      r->owns_streams = false;
    } else {
      KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&r->compute, cudaStreamNonBlocking));
      r->gather = r->pack = r->compute;
      if (!g->one_stream_) {
        KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&r->gather, cudaStreamNonBlocking));
        KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&r->pack, cudaStreamNonBlocking));
      }
    }
    for (auto& e : r->ready) KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&r->compute_done, cudaEventDisableTiming));
    KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&r->uploaded, cudaEventDisableTiming));
    for (auto& e : r->packed) KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    KVSHARD_ASSIGN_OR_RETURN(r->owned_count, DeviceBuffer::Allocate(sizeof(int64_t)));
    int64_t row_sum = 0;
    for (int64_t w : shape.buffers()) {
      row_sum += w;
      KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer p, DeviceBuffer::Allocate(shape.layers * shape.pool_rows * w));
      KVSHARD_CUDA_CHECK(cudaMemset(p.data(), 0, p.bytes()));
      r->pools.push_back(std::move(p));
      for (auto& slot : r->slots) {
        KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer s, DeviceBuffer::Allocate(shape.scratch_rows() * w));
        KVSHARD_CUDA_CHECK(cudaMemset(s.data(), 0, s.bytes()));
        slot.push_back(std::move(s));
      }
    }
    if (shape.buffers().size() > 1) {
      for (auto& s : r->staging) {
        KVSHARD_ASSIGN_OR_RETURN(s, DeviceBuffer::Allocate(std::max<int64_t>(1, shape.max_prefix_tokens) * row_sum));
      }
    }
    KVSHARD_ASSIGN_OR_RETURN(r->page_pos,
                             DeviceBuffer::Allocate(std::max<int64_t>(1, shape.n_page_pos) * sizeof(int32_t)));
    KVSHARD_ASSIGN_OR_RETURN(r->bad, DeviceBuffer::Allocate(sizeof(int64_t)));
    KVSHARD_CUDA_CHECK(cudaMemset(r->bad.data(), 0, sizeof(int64_t)));
    KVSHARD_ASSIGN_OR_RETURN(r->bad_host, PinnedBuffer::Allocate(sizeof(int64_t)));
    g->state_.push_back(std::move(r));
  }
  for (auto& r : g->state_) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(r->device));
    KVSHARD_CUDA_CHECK(cudaDeviceSynchronize());
  }
  g->shared_device_ = true;
  for (auto& r : g->state_) g->shared_device_ &= r->device == g->state_[0]->device;
  for (auto& r : g->state_) {
    r->page_pos_at = r->page_pos.as<int32_t>();
    r->bad_at = (g->one_stream_ ? g->state_[0] : r)->bad.as<int64_t>();  // one stream: BadRows copies one counter
  }
  return g;
}

void* LayerAheadGather::pool(int i, int64_t layer, int buffer) const {
  return static_cast<char*>(state_[i]->pools[buffer].data()) + layer * shape_.pool_rows * shape_.buffers()[buffer];
}
cudaStream_t LayerAheadGather::compute_stream(int i) const { return state_[i]->compute; }
const int32_t* LayerAheadGather::page_pos(int i) const { return state_[i]->page_pos_at; }
const int64_t* LayerAheadGather::chunk_locs(int i) const { return state_[i]->chunk_locs_at; }

Status LayerAheadGather::BeginExtend(int64_t block_pages, const std::vector<int32_t>& page_pos,
                                     const std::vector<std::vector<int64_t>>& send_rows,
                                     const std::vector<int64_t>& chunk_locs) {
  if (static_cast<int64_t>(page_pos.size()) != shape_.n_page_pos) {
    return InvalidArgument("page_pos: expected ", shape_.n_page_pos, " entries, got ", page_pos.size());
  }
  return BeginExtendImpl(block_pages, page_pos.data(), nullptr,
                         std::vector<std::span<const int64_t>>(send_rows.begin(), send_rows.end()), chunk_locs);
}

Status LayerAheadGather::BeginExtendMapped(int64_t block_pages, const PagePosMap& page_pos,
                                           const std::vector<std::span<const int64_t>>& send_rows,
                                           std::span<const int64_t> chunk_locs) {
  if (page_pos.pages.size() != page_pos.scratch_pages.size()) {
    return InvalidArgument("page_pos: ", page_pos.pages.size(), " pages but ", page_pos.scratch_pages.size(),
                           " scratch pages");
  }
  const auto fits = [](int64_t v) { return v >= 0 && v <= INT32_MAX; };
  if (!fits(page_pos.trash_page)) return InvalidArgument("page_pos: trash page ", page_pos.trash_page, " not an int32");
  for (size_t k = 0; k < page_pos.pages.size(); ++k) {
    if (page_pos.pages[k] < 0 || page_pos.pages[k] >= shape_.n_page_pos) {
      return InvalidArgument("page_pos: mapped page ", page_pos.pages[k], " outside [0, ", shape_.n_page_pos, ")");
    }
    if (!fits(page_pos.scratch_pages[k])) {
      return InvalidArgument("page_pos: scratch page ", page_pos.scratch_pages[k], " not an int32");
    }
  }
  if (one_stream_ && shape_.n_page_pos * static_cast<int64_t>(sizeof(int32_t)) > shape_.max_dense_page_pos_bytes) {
    return BeginExtendImpl(block_pages, nullptr, &page_pos, send_rows, chunk_locs);
  }
  std::vector<int32_t> dense(shape_.n_page_pos, static_cast<int32_t>(page_pos.trash_page));
  for (size_t k = 0; k < page_pos.pages.size(); ++k) {
    dense[page_pos.pages[k]] = static_cast<int32_t>(page_pos.scratch_pages[k]);
  }
  return BeginExtendImpl(block_pages, dense.data(), nullptr, send_rows, chunk_locs);
}

Status LayerAheadGather::BeginExtendImpl(int64_t block_pages, const int32_t* dense, const PagePosMap* mapped,
                                         const std::vector<std::span<const int64_t>>& send_rows,
                                         std::span<const int64_t> chunk_locs) {
  KVSHARD_NVTX_RANGE("kvshard.gather.begin_extend");
  const int64_t ps = shape_.page_size;
  if (block_pages < 0) return InvalidArgument("block_pages: must be >= 0, got ", block_pages);
  if (comm_->size() * block_pages * ps > shape_.max_prefix_tokens) {
    return OutOfRange("block_pages: padded gather span ", comm_->size() * block_pages * ps,
                      " tokens exceeds the scratch prefix capacity (", shape_.max_prefix_tokens, ")");
  }
  if (send_rows.size() != state_.size()) return InvalidArgument("send_rows: expected one list per local rank");
  for (size_t i = 0; i < send_rows.size(); ++i) {
    if (static_cast<int64_t>(send_rows[i].size()) != block_pages * ps) {
      return InvalidArgument("send_rows[", i, "]: expected ", block_pages * ps, " rows, got ", send_rows[i].size());
    }
  }
  KVSHARD_RETURN_IF_ERROR(IssueGathers(INT64_MAX));  // a previous batch that was not ended
  // The plan's bytes go through one pinned buffer, laid out [page_pos | chunk_locs | send rows of local rank 0, 1,
  // ...] (page_pos dense, or its mapped pages as (page, scratch page) int32 pairs): each rank copies its parts from
  // there. The last batch's copies must be done with it first (they are
  // ordered after that batch's work, so a stalled collective holds them: wait under the group's deadline).
  for (size_t i = 0; i < state_.size(); ++i) {
    Rank& r = *state_[i];
    if (!r.uploading) continue;
    KVSHARD_CUDA_CHECK(cudaSetDevice(r.device));
    const cudaError_t state = cudaEventQuery(r.uploaded);
    if (state == cudaErrorNotReady) {
      KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(static_cast<int>(i), r.compute));
    } else {
      KVSHARD_CUDA_CHECK(state);
    }
    r.uploading = false;
  }
  const int64_t n_mapped = mapped != nullptr ? static_cast<int64_t>(mapped->pages.size()) : 0;
  const size_t pos_bytes =
      mapped != nullptr ? n_mapped * 2 * sizeof(int32_t) : static_cast<size_t>(shape_.n_page_pos) * sizeof(int32_t);
  const size_t pos_room = (pos_bytes + 7) / 8 * 8;
  const size_t loc_bytes = chunk_locs.size() * sizeof(int64_t);
  size_t staged = pos_room + loc_bytes;
  for (std::span<const int64_t> rows : send_rows) staged += rows.size() * sizeof(int64_t);
  KVSHARD_RETURN_IF_ERROR(Reserve(&plan_upload_, staged));
  auto* upload = static_cast<char*>(plan_upload_.data());
  if (mapped != nullptr) {
    auto* pairs = reinterpret_cast<int32_t*>(upload);
    for (int64_t k = 0; k < n_mapped; ++k) {
      pairs[2 * k] = static_cast<int32_t>(mapped->pages[k]);
      pairs[2 * k + 1] = static_cast<int32_t>(mapped->scratch_pages[k]);
    }
  } else {
    std::memcpy(upload, dense, pos_bytes);
  }
  if (loc_bytes > 0) std::memcpy(upload + pos_room, chunk_locs.data(), loc_bytes);
  size_t send_at = pos_room + loc_bytes;
  const int64_t n = static_cast<int64_t>(chunk_locs.size());
  // Ranks emulated on one device get their write plans from one launch on local rank 0's compute stream (no CUB
  // selection, so no temporary storage); other groups build one per rank.
  const bool one_plan_launch = shared_device_ && state_.size() > 1 && n <= kMaxWritePlansLocs;
  size_t temp_bytes = 0;
  if (!one_plan_launch) {
    KVSHARD_ASSIGN_OR_RETURN(temp_bytes, WritePlanTempBytes(n));
  }
  if (one_stream_) {
    // Every rank on one stream: the whole upload goes up once, after everything issued so far (the last batch's
    // readers of the plan), and each rank's plan is a view into it (page_pos and chunk locs are every rank's).
    Rank& first = *state_[0];
    KVSHARD_CUDA_CHECK(cudaSetDevice(first.device));
    for (std::span<const int64_t> rows : send_rows) {
      if (!rows.empty()) std::memcpy(upload + send_at, rows.data(), rows.size() * sizeof(int64_t));
      send_at += rows.size() * sizeof(int64_t);
    }
    if (plan_.bytes() < staged || first.owned_idx.bytes() < loc_bytes || first.plan_temp.bytes() < temp_bytes) {
      KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(0, first.compute));  // the old buffers' last readers
      KVSHARD_RETURN_IF_ERROR(Reserve(&plan_, staged));
      for (auto& rp : state_) {
        KVSHARD_RETURN_IF_ERROR(Reserve(&rp->owned_idx, loc_bytes));
        KVSHARD_RETURN_IF_ERROR(Reserve(&rp->local_rows, loc_bytes));
        KVSHARD_RETURN_IF_ERROR(Reserve(&rp->plan_temp, temp_bytes));
      }
    }
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(plan_.data(), upload, staged, cudaMemcpyHostToDevice, first.compute));
    KVSHARD_CUDA_CHECK(cudaEventRecord(first.uploaded, first.compute));
    first.uploading = true;
    // Mapped pages: rank 0's page_pos buffer is every rank's, refilled after the last batch's readers (same stream).
    int32_t* page_pos_at = reinterpret_cast<int32_t*>(plan_.as<char>());
    if (mapped != nullptr) {
      page_pos_at = first.page_pos.as<int32_t>();
      KVSHARD_RETURN_IF_ERROR(LaunchSetPagePos(page_pos_at, shape_.n_page_pos, static_cast<int32_t>(mapped->trash_page),
                                               plan_.as<int32_t>(), n_mapped, nullptr, first.compute));
    }
    size_t rows_at = pos_room + loc_bytes;
    for (size_t i = 0; i < state_.size(); ++i) {
      Rank& r = *state_[i];
      r.page_pos_at = page_pos_at;
      r.chunk_locs_at = reinterpret_cast<int64_t*>(plan_.as<char>() + pos_room);
      r.send_rows_at = reinterpret_cast<int64_t*>(plan_.as<char>() + rows_at);
      rows_at += send_rows[i].size() * sizeof(int64_t);
      if (one_plan_launch) continue;
      KVSHARD_RETURN_IF_ERROR(LaunchBuildWritePlan(
          r.chunk_locs_at, n, {comm_->size(), shape_.page_size}, r.rank, r.owned_idx.as<int64_t>(),
          r.local_rows.as<int64_t>(), r.owned_count.as<int64_t>(), r.plan_temp.data(), temp_bytes, r.compute));
    }
  }
  for (size_t i = 0; i < state_.size() && !one_stream_; ++i) {
    Rank& r = *state_[i];
    KVSHARD_CUDA_CHECK(cudaSetDevice(r.device));
    // Plan uploads are ordered after all earlier work on this rank (the previous batch's packs, gathers and reads)
    // on the device: the compute stream waits for the pack and gather streams and uploads on its own order, so the
    // host does not wait here (the next read or end waits, with the group's deadline). Only a buffer that must grow
    // (its old memory freed) needs that work finished on the host first.
    const size_t send_bytes = send_rows[i].size() * sizeof(int64_t);
    if (r.send_rows.bytes() < send_bytes || r.chunk_locs.bytes() < loc_bytes || r.owned_idx.bytes() < loc_bytes ||
        r.local_rows.bytes() < loc_bytes || r.plan_temp.bytes() < temp_bytes) {
      KVSHARD_CUDA_CHECK(cudaStreamSynchronize(r.pack));
      KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(static_cast<int>(i), r.gather));
      KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(static_cast<int>(i), r.compute));
      KVSHARD_RETURN_IF_ERROR(Reserve(&r.send_rows, send_bytes));
      KVSHARD_RETURN_IF_ERROR(Reserve(&r.chunk_locs, loc_bytes));
      KVSHARD_RETURN_IF_ERROR(Reserve(&r.owned_idx, loc_bytes));
      KVSHARD_RETURN_IF_ERROR(Reserve(&r.local_rows, loc_bytes));
      KVSHARD_RETURN_IF_ERROR(Reserve(&r.plan_temp, temp_bytes));
    }
    r.send_rows_at = r.send_rows.as<int64_t>();
    r.chunk_locs_at = r.chunk_locs.as<int64_t>();
    KVSHARD_RETURN_IF_ERROR(AfterPackAndGather(r));
    if (send_bytes > 0) std::memcpy(upload + send_at, send_rows[i].data(), send_bytes);
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(r.page_pos.data(), upload, pos_bytes, cudaMemcpyHostToDevice, r.compute));
    if (send_bytes > 0) {
      KVSHARD_CUDA_CHECK(
          cudaMemcpyAsync(r.send_rows.data(), upload + send_at, send_bytes, cudaMemcpyHostToDevice, r.compute));
    }
    send_at += send_bytes;
    if (loc_bytes > 0) {
      KVSHARD_CUDA_CHECK(
          cudaMemcpyAsync(r.chunk_locs.data(), upload + pos_room, loc_bytes, cudaMemcpyHostToDevice, r.compute));
    }
    KVSHARD_CUDA_CHECK(cudaEventRecord(r.uploaded, r.compute));
    r.uploading = true;
    if (one_plan_launch) continue;
    KVSHARD_RETURN_IF_ERROR(LaunchBuildWritePlan(
        r.chunk_locs_at, n, {comm_->size(), shape_.page_size}, r.rank, r.owned_idx.as<int64_t>(),
        r.local_rows.as<int64_t>(), r.owned_count.as<int64_t>(), r.plan_temp.data(), temp_bytes, r.compute));
  }
  if (one_plan_launch && one_stream_ && shape_.buffers().size() == 1 &&
      state_.size() <= static_cast<size_t>(kMaxRankJobs)) {
    return StartOnOneStream(block_pages, n);  // the write plans and the first two layers' packs in one launch
  }
  if (one_plan_launch) {
    // Rank 0's stream waits for every rank's uploads and earlier use of its plan buffers (the last batch's
    // scatters), builds every plan from its own copy of the chunk locs, and every other rank waits for it.
    Rank& first = *state_[0];
    KVSHARD_CUDA_CHECK(cudaSetDevice(first.device));
    KVSHARD_RETURN_IF_ERROR(JoinComputeStreams());
    KVSHARD_RETURN_IF_ERROR(LaunchBuildWritePlans(first.chunk_locs_at, n, {comm_->size(), shape_.page_size},
                                                  WritePlanOuts(), first.compute));
    KVSHARD_RETURN_IF_ERROR(ForkComputeStreams());
  }
  n_chunk_locs_ = static_cast<int64_t>(chunk_locs.size());
  ++epoch_;
  block_pages_ = block_pages;
  active_ = true;
  if (block_pages_ > 0) {
    KVSHARD_RETURN_IF_ERROR(Pack(0));
    return IssueGathers(0);
  }
  return Status::Ok();
}

Status LayerAheadGather::EndExtend() {
  KVSHARD_NVTX_RANGE("kvshard.gather.end_extend");
  active_ = false;
  return IssueGathers(INT64_MAX);
}

StatusOr<std::vector<void*>> LayerAheadGather::AcquireForRead(int64_t layer) {
  KVSHARD_ASSIGN_OR_RETURN(auto all, AcquireBuffersForRead(layer));
  std::vector<void*> first;
  for (const auto& rank : all) first.push_back(rank[0]);
  return first;
}

StatusOr<std::vector<std::vector<void*>>> LayerAheadGather::AcquireBuffersForRead(int64_t layer) {
  KVSHARD_NVTX_RANGE("kvshard.gather.acquire_for_read");
  if (!active_) return FailedPrecondition("sharded pool read outside an active sharded extend batch");
  if (layer < 0 || layer >= shape_.layers)
    return InvalidArgument("layer: must be in [0, ", shape_.layers, "), got ", layer);
  const int which = static_cast<int>(layer % 2);
  if (block_pages_ > 0 && resident_[which] != std::make_pair(layer, epoch_)) {
    return FailedPrecondition("prefix scratch miss for layer ", layer, " (resident=(", resident_[which].first, ", ",
                              resident_[which].second, "), epoch=", epoch_, ")");
  }
  if (block_pages_ > 0) {
    // Layer-ahead: pack layer + 1's send block first (it overlaps this layer's all-gather), then make sure this
    // layer's all-gather is issued. The host issues layer + 1's collective at the next read, right after this
    // layer's compute is enqueued, so on the device it runs alongside that compute; a collective call that
    // blocks the host therefore never delays the compute launch.
    KVSHARD_RETURN_IF_ERROR(Pack(layer + 1));
    KVSHARD_RETURN_IF_ERROR(IssueGathers(layer));
  }
  std::vector<std::vector<void*>> slots;
  for (auto& rp : state_) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(rp->device));
    if (block_pages_ > 0 && !one_stream_) KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(rp->compute, rp->ready[which], 0));
    slots.emplace_back();
    for (DeviceBuffer& b : rp->slots[which]) slots.back().push_back(b.data());
  }
  return slots;
}

StatusOr<int64_t> LayerAheadGather::BadRows() {
  KVSHARD_NVTX_RANGE("kvshard.gather.bad_rows");
  // Each compute stream waits for its rank's pack and gather streams and copies the counter back; one wait per rank
  // under the group's deadline then drains every stream that may wait on a collective. One stream: rank 0's
  // counter holds every rank's count, one copy and one wait.
  for (const std::unique_ptr<Rank>& rp : state_) {
    Rank& r = *rp;
    KVSHARD_CUDA_CHECK(cudaSetDevice(r.device));
    KVSHARD_RETURN_IF_ERROR(AfterPackAndGather(r));
    KVSHARD_CUDA_CHECK(
        cudaMemcpyAsync(r.bad_host.data(), r.bad.data(), sizeof(int64_t), cudaMemcpyDeviceToHost, r.compute));
    if (one_stream_) break;
  }
  int64_t total = 0;
  for (size_t i = 0; i < state_.size(); ++i) {
    KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(static_cast<int>(i), state_[i]->compute));
    total += *state_[i]->bad_host.as<int64_t>();
    if (one_stream_) break;
  }
  return total;
}

const int64_t* LayerAheadGather::bad_counter() const { return state_[0]->bad.as<int64_t>(); }

Status LayerAheadGather::CopyBadRows(int64_t* to) {
  if (!one_stream_) return FailedPrecondition("CopyBadRows: every rank must be on one stream");
  Rank& first = *state_[0];
  KVSHARD_CUDA_CHECK(cudaSetDevice(first.device));
  KVSHARD_RETURN_IF_ERROR(AfterPackAndGather(first));
  KVSHARD_CUDA_CHECK(cudaMemcpyAsync(to, first.bad.data(), sizeof(int64_t), cudaMemcpyDeviceToDevice, first.compute));
  return Status::Ok();
}

Status LayerAheadGather::AfterPackAndGather(Rank& r) {
  for (cudaStream_t earlier : {r.pack, r.gather}) {
    if (earlier == r.compute) continue;
    KVSHARD_CUDA_CHECK(cudaEventRecord(r.compute_done, earlier));
    KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(r.compute, r.compute_done, 0));
  }
  return Status::Ok();
}

std::vector<WritePlanOut> LayerAheadGather::WritePlanOuts() const {
  std::vector<WritePlanOut> plans;
  for (const std::unique_ptr<Rank>& r : state_) {
    plans.push_back({r->rank, r->owned_idx.as<int64_t>(), r->local_rows.as<int64_t>(), r->owned_count.as<int64_t>()});
  }
  return plans;
}

Status LayerAheadGather::CheckNotAborted() const {
  if (comm_->aborted()) return Unavailable("collective all_gather_in_place: the ", comm_->Kind(), " group was aborted");
  return Status::Ok();
}

Status LayerAheadGather::JoinComputeStreams() {
  Rank& first = *state_[0];
  for (size_t i = 1; i < state_.size(); ++i) {
    if (state_[i]->compute == first.compute) continue;
    KVSHARD_CUDA_CHECK(cudaEventRecord(state_[i]->compute_done, state_[i]->compute));
    KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(first.compute, state_[i]->compute_done, 0));
  }
  return Status::Ok();
}

Status LayerAheadGather::ForkComputeStreams() {
  Rank& first = *state_[0];
  if (one_stream_ || state_.size() == 1) return Status::Ok();
  KVSHARD_CUDA_CHECK(cudaEventRecord(first.compute_done, first.compute));
  for (size_t i = 1; i < state_.size(); ++i) {
    KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(state_[i]->compute, first.compute_done, 0));
  }
  return Status::Ok();
}

Status LaunchComputeStandIn(int64_t ns, bool busy, cudaStream_t stream, int blocks) {
  if (ns < 0) return InvalidArgument("ns: must be >= 0, got ", ns);
  int dev = 0, sms = 1;
  KVSHARD_CUDA_CHECK(cudaGetDevice(&dev));
  KVSHARD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // One block per SM, like a layer's attention/MLP kernels: busy = 4 warps issuing timer reads nonstop,
  // otherwise 1 warp that sleeps between reads (holds the SMs without competing for issue slots). LaunchSpin
  // asks for the maximum shared-memory carveout, as attention kernels do.
  return LaunchSpin(ns, /*sleep=*/!busy, blocks > 0 ? blocks : sms, busy ? 128 : 32, stream);
}

}  // namespace kvshard::gpu

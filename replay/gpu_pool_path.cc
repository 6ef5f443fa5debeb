// The pool pipeline on CUDA: gpu::DeviceGatherPlanner builds each extend's plan, gpu::LayerAheadGather
// installs it and moves every row. This file: the path's set-up, plans, writes through a ring of staging buffers,
// a batch's end and the staging's events; its reads are gpu_pool_path_reads.cc.
#include "replay/gpu_pool_path.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/gather_plan.h"
#include "gpu/kv_ops.h"
#include "gpu/nvtx.h"
#include "gpu/payload_rows.h"
#include "gpu/prefix_gather.h"
#include "replay/gpu_pool_path_impl.h"

namespace kvshard::replay {
namespace gpu_path {

GpuPoolPath::~GpuPoolPath() {
  if (gather_ != nullptr) (void)Quiesce();  // the staging buffers outlive what uses them
  for (cudaEvent_t e : read_done_.events) cudaEventDestroy(e);
  for (WriteSlot& w : writes_) {
    for (cudaEvent_t e : w.done.events) cudaEventDestroy(e);
  }
  for (cudaEvent_t e : order_) cudaEventDestroy(e);
  if (plan_stream_ != nullptr) cudaStreamDestroy(plan_stream_);
}

Status GpuPoolPath::Start() {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };
  const Clock::time_point start = Clock::now();
  std::string why;
  const int visible = gpu::VisibleDeviceCount(&why);  // the driver's start (cuInit)
  if (visible == 0) return Unavailable("--backend: no CUDA device visible (", why, ")");
  const Clock::time_point driver_up = Clock::now();
  KVSHARD_RETURN_IF_ERROR(gpu::StartContext(0));  // device 0's context: the emulated ranks' device, NCCL's first
  start_times_ = {seconds(start, driver_up), seconds(driver_up, Clock::now())};
  if (gpus_ <= 1) {
    KVSHARD_ASSIGN_OR_RETURN(comm_, gpu::CreateEmulatedGroup(static_cast<int>(g_.shard_size), 0));
  } else {
    if (visible < gpus_) return Unavailable("--gpus: ", gpus_, " devices needed, ", visible, " visible");
    KVSHARD_ASSIGN_OR_RETURN(comm_, gpu::CreateNcclGroup(gpus_));
  }
  // The device thread runs beside the checking thread and the readers: its waits nap instead of spinning.
  comm_->set_wait_style(gpu::WaitStyle::kPatient);
  return Init();
}

Status GpuPoolPath::Init() {
  KVSHARD_NVTX_RANGE("kvshard.pool.init");
  ExtendBatch geometry;
  geometry.shard_size = g_.shard_size;
  geometry.page_size = g_.page_size;
  geometry.pages_per_rank = g_.pages_per_rank;
  geometry.max_prefix_tokens = g_.max_prefix_tokens;
  geometry.chunk_tokens = g_.chunk_tokens;
  KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
  KVSHARD_ASSIGN_OR_RETURN(planner_, gpu::DeviceGatherPlanner::Create(geometry));
  KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&plan_stream_, cudaStreamNonBlocking));
  gpu::PrefixGatherShape shape;
  shape.layers = g_.num_layers;
  shape.page_size = g_.page_size;
  shape.pool_rows = (g_.pages_per_rank + 1) * g_.page_size;
  shape.max_prefix_tokens = g_.max_prefix_tokens;
  shape.chunk_tokens = g_.chunk_tokens;
  shape.row_bytes = g_.buffers[0].row_bytes;
  if (g_.buffers.size() > 1) {
    for (const ref::PoolBuffer& b : g_.buffers) shape.buffer_row_bytes.push_back(b.row_bytes);
  }
  shape.n_page_pos = planner_->page_pos_size();
  shape.one_stream = true;  // ranks emulated on one device: one stream, no events between ranks' streams
  KVSHARD_RETURN_IF_ERROR(gpu::PrefixGatherCanImplement(shape, comm_->size()));
  KVSHARD_ASSIGN_OR_RETURN(gather_, gpu::LayerAheadGather::Create(comm_.get(), shape));
  staging_.resize(comm_->local_ranks().size());
  // Ranks emulated on one device share a write's rows and a read's locs and output: one copy each way instead
  // of one per rank, the other ranks' streams ordered after it by events.
  shared_device_ = true;
  for (int i = 0; i < static_cast<int>(staging_.size()); ++i) shared_device_ &= comm_->device(i) == comm_->device(0);
  for (size_t i = 0; i < staging_.size(); ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(static_cast<int>(i))));
    cudaEvent_t e = nullptr;
    KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    order_.push_back(e);
  }
  if (shared_device_ && gather_->one_stream()) {
    // The last-write table the checks read (zeroed on rank 0's stream, before any write): without room for it, and
    // 1 GiB to spare for the staging buffers that grow later, the caller keeps the table on the host and hands each
    // read's generations over, as before.
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    table_slots_ = g_.shard_size * (g_.pages_per_rank + 1) * g_.page_size;
    const size_t bytes = static_cast<size_t>(g_.num_layers * table_slots_) * sizeof(uint32_t);
    size_t free_bytes = 0, total_bytes = 0;
    KVSHARD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    constexpr size_t kSpare = size_t{1} << 30;
    StatusOr<gpu::DeviceBuffer> table =
        free_bytes >= bytes + kSpare ? gpu::DeviceBuffer::Allocate(bytes)
                                     : StatusOr<gpu::DeviceBuffer>(Unavailable("no room for the generation table"));
    if (table.ok()) {
      generations_ = std::move(*table);
      KVSHARD_CUDA_CHECK(cudaMemsetAsync(generations_.data(), 0, bytes, gather_->compute_stream(0)));
    } else {
      (void)cudaGetLastError();  // an allocation's failure is not sticky: clear it for the launches' checks
    }
  }
  return Status::Ok();
}

StatusOr<GatherPlan> GpuPoolPath::Plan(const ExtendBatch& batch) {
  KVSHARD_NVTX_RANGE("kvshard.pool.plan");
  KVSHARD_RETURN_IF_ERROR(gpu::GatherPlanCanImplement(batch));
  KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
  KVSHARD_RETURN_IF_ERROR(planner_->Upload(batch, plan_stream_));
  KVSHARD_RETURN_IF_ERROR(planner_->Launch(0, plan_stream_));
  return planner_->Download(plan_stream_);
}

Status GpuPoolPath::Install(const ExtendBatch& batch, const GatherPlan& plan,
                            const std::vector<int64_t>& out_cache_loc) {
  (void)batch;
  KVSHARD_NVTX_RANGE("kvshard.pool.begin_extend");
  // A begin without an end: the last batch's work reads what this replaces. After an end nothing waits here (the
  // gather orders the new plan's upload after the last batch's work).
  if (active_) KVSHARD_RETURN_IF_ERROR(Quiesce());
  snap_check_ = -1;
  KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
  // Every rank installs the device plan (page_pos mirrored, its own send rows): page_pos goes as the plan's mapped
  // pages (a Mooncake-sized pool's dense page_pos was 1.25 MB a batch, made, copied and uploaded on this thread).
  std::vector<std::span<const int64_t>> send;
  for (int rank : comm_->local_ranks()) send.emplace_back(plan.ranks[rank].send_rows);
  KVSHARD_RETURN_IF_ERROR(gather_->BeginExtendMapped(
      plan.block_pages, {plan.trash_page, plan.mapped_pages, plan.mapped_scratch_pages}, send, out_cache_loc));
  out_cache_loc_ = out_cache_loc;
  active_ = true;
  return Status::Ok();
}

Status GpuPoolPath::CheckWrite(bool in_extend, const std::vector<int64_t>& locs,
                               const std::vector<int64_t>& out_cache_loc) const {
  if (in_extend && &locs != &out_cache_loc && locs != out_cache_loc) {  // the batch's own list: equal, not compared
    return InvalidArgument(
        "locs: during an extend the GPU backend writes the batch's out_cache_loc only "
        "(leave locs out, or give exactly those slots)");
  }
  return Status::Ok();
}

Status GpuPoolPath::WriteStaged(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows* rows,
                                int64_t generation) {
  KVSHARD_NVTX_RANGE("kvshard.pool.write_layer");
  const int64_t n = static_cast<int64_t>(locs.size());
  KVSHARD_RETURN_IF_ERROR(CheckWrite(active_, locs, out_cache_loc_));
  snap_check_ = -1;
  if (rows == nullptr && active_ && gather_->one_stream() && gather_->CanWriteMade()) {
    // Rows made where they are written (the chunk's staging and owner scatter), from the chunk locs on the device
    // since Install: one launch a buffer, nothing staged, no event (the next user of what it writes comes later on
    // the same stream).
    // The slots' generation is marked by the same launch (where the table is kept).
    uint32_t* mark = KeepsGenerations() ? generations_.as<uint32_t>() + layer * table_slots_ : nullptr;
    KVSHARD_RETURN_IF_ERROR(gather_->WriteLayerMade(layer, g_.payload_seed, generation, mark, table_slots_));
    in_flight_ = true;
    return Status::Ok();
  }
  // The staging buffers go round kWriteSlots writes: the copies and kernels of the write that last used this
  // slot must be done with them (the write kWriteSlots before this one: rarely a wait).
  WriteSlot& slot = writes_[next_write_];
  next_write_ = (next_write_ + 1) % kWriteSlots;
  // Rows made on the device during an extend stage nothing from the host: on one stream their device buffer's next
  // user comes later on the same stream, so no event guards the slot (two CUDA calls fewer a write).
  const bool guarded = rows != nullptr || !active_ || !gather_->one_stream();
  if (guarded) KVSHARD_RETURN_IF_ERROR(WaitForStaging(&slot.done));
  const size_t bytes = n * RowBytes();  // every buffer's rows, in turn, then the locs, 8-aligned at locs_at
  const size_t locs_at = (bytes + 7) / 8 * 8;
  size_t given = 0;
  if (rows != nullptr) {
    for (const std::vector<uint8_t>& b : *rows) given += b.size();
    if (given != bytes) return InvalidArgument("rows: expected ", bytes, " bytes, got ", given);
  }
  // The locs go up only outside an extend (the owner-filtered write and the row maker read them there); during
  // one the rows go to the batch's chunk slots, which are on the device since Install.
  const size_t staged = active_ ? bytes : locs_at + locs.size() * sizeof(int64_t);
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&slot.host, staged));
  auto* host = static_cast<uint8_t*>(slot.host.data());
  if (rows != nullptr) {
    for (const std::vector<uint8_t>& b : *rows) host = std::copy(b.begin(), b.end(), host);
  }
  if (!active_ && !locs.empty()) {
    std::memcpy(static_cast<uint8_t*>(slot.host.data()) + locs_at, locs.data(), n * sizeof(int64_t));
  }
  const int ranks = static_cast<int>(comm_->local_ranks().size());
  std::vector<std::vector<const void*>> ptrs(ranks);
  for (int i = 0; i < ranks; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
    const cudaStream_t s = gather_->compute_stream(i);
    if (slot.rows.size() < staging_.size()) slot.rows.resize(staging_.size());
    gpu::DeviceBuffer& st_rows = slot.rows[shared_device_ ? 0 : i];
    if ((i == 0 || !shared_device_) && staged > 0) {
      KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&st_rows, staged));
      if (rows != nullptr) {
        KVSHARD_CUDA_CHECK(cudaMemcpyAsync(st_rows.data(), slot.host.data(), staged, cudaMemcpyHostToDevice, s));
      } else if (active_) {  // the rows are made from the locs, which are the batch's chunk locs, up since Install
        KVSHARD_RETURN_IF_ERROR(
            gpu::LaunchMakePayloadRows(st_rows.data(), gather_->chunk_locs(i), n, generation, Layout(layer), s));
      } else {  // only the locs go up; the rows are made from them
        KVSHARD_CUDA_CHECK(cudaMemcpyAsync(st_rows.as<uint8_t>() + locs_at,
                                           static_cast<uint8_t*>(slot.host.data()) + locs_at, n * sizeof(int64_t),
                                           cudaMemcpyHostToDevice, s));
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchMakePayloadRows(
            st_rows.data(), reinterpret_cast<const int64_t*>(st_rows.as<uint8_t>() + locs_at), n, generation,
            Layout(layer), s));
      }
    }
    KVSHARD_RETURN_IF_ERROR(AfterRankZero(i));
    size_t offset = 0;
    for (const ref::PoolBuffer& b : g_.buffers) {
      ptrs[i].push_back(st_rows.as<uint8_t>() + offset);
      offset += static_cast<size_t>(n * b.row_bytes);
    }
  }
  if (rows == nullptr && shared_device_) {  // made rows: their slots' generation (the ranks' locs are rank 0's)
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    const int64_t* d_locs =
        active_ ? gather_->chunk_locs(0) : reinterpret_cast<const int64_t*>(slot.rows[0].as<uint8_t>() + locs_at);
    KVSHARD_RETURN_IF_ERROR(MarkWritten(layer, d_locs, n, generation));
  }
  if (active_) {
    KVSHARD_RETURN_IF_ERROR(gather_->WriteLayerBuffers(layer, ptrs));
  } else {  // outside an extend (decode writes): the owner filter only, straight into each rank's pools
    const PlacementSpec spec{g_.shard_size, g_.page_size};
    for (int i = 0; i < ranks; ++i) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
      const auto* d_locs = reinterpret_cast<const int64_t*>(slot.rows[shared_device_ ? 0 : i].as<uint8_t>() + locs_at);
      for (size_t b = 0; b < g_.buffers.size(); ++b) {
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchOwnerFilteredWrite(
            gather_->pool(i, layer, static_cast<int>(b)), gather_->shape().pool_rows, ptrs[i][b], d_locs, n, spec,
            comm_->local_ranks()[i], g_.buffers[b].row_bytes, nullptr, gather_->compute_stream(i)));
      }
    }
  }
  if (!guarded) {
    in_flight_ = true;
    return Status::Ok();
  }
  return RecordStaging(&slot.done);
}

Status GpuPoolPath::End() {
  KVSHARD_NVTX_RANGE("kvshard.pool.end_extend");
  snap_check_ = -1;
  KVSHARD_RETURN_IF_ERROR(gather_->EndExtend());
  active_ = false;
  if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
  // The batch's one wait: BadRows waits for everything issued on every rank (the batch's writes and reads too).
  KVSHARD_ASSIGN_OR_RETURN(int64_t bad, gather_->BadRows());
  MarkQuiet();
  if (bad != 0) return Mismatch("invariant: ", bad, " rows skipped on the GPU for out-of-range indices");
  return Status::Ok();
}

size_t GpuPoolPath::RowBytes() const {
  size_t row_bytes = 0;
  for (const ref::PoolBuffer& b : g_.buffers) row_bytes += static_cast<size_t>(b.row_bytes);
  return row_bytes;
}

gpu::PayloadLayout GpuPoolPath::Layout(int64_t layer) const {
  gpu::PayloadLayout l;
  l.seed = g_.payload_seed;
  l.layer = layer;
  for (const ref::PoolBuffer& b : g_.buffers) l.widths.push_back(b.row_bytes);
  if (KeepsGenerations() && layer >= 0) {
    l.generation_table = generations_.as<uint32_t>() + layer * table_slots_;
    l.table_slots = table_slots_;
  }
  return l;
}

Status GpuPoolPath::MarkWritten(int64_t layer, const int64_t* d_locs, int64_t n, int64_t generation) {
  if (!KeepsGenerations()) return Status::Ok();
  return gpu::LaunchMarkGenerations(generations_.as<uint32_t>() + layer * table_slots_, table_slots_, d_locs, n,
                                    static_cast<uint32_t>(generation), gather_->compute_stream(0));
}

Status GpuPoolPath::AfterRankZero(int i) {
  if (!shared_device_ || i == 0 || gather_->one_stream()) return Status::Ok();
  if (i == 1) KVSHARD_CUDA_CHECK(cudaEventRecord(order_[0], gather_->compute_stream(0)));
  KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(gather_->compute_stream(i), order_[0], 0));
  return Status::Ok();
}

Status GpuPoolPath::Quiesce() {
  if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
  if (!in_flight_) return Status::Ok();
  for (int i = 0; i < StreamCount(); ++i) {
    KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(i, gather_->compute_stream(i)));
  }
  MarkQuiet();
  return Status::Ok();
}

void GpuPoolPath::MarkQuiet() {
  in_flight_ = false;
  read_done_.recorded = false;
  for (WriteSlot& w : writes_) w.done.recorded = false;
}

Status GpuPoolPath::WaitForStaging(Done* done) {
  if (!done->recorded) return Status::Ok();
  done->recorded = false;
  for (int i = 0; i < static_cast<int>(done->events.size()); ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
    const cudaError_t state = cudaEventQuery(done->events[i]);
    if (state == cudaSuccess) continue;
    if (state != cudaErrorNotReady) KVSHARD_CUDA_CHECK(state);
    KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(i, gather_->compute_stream(i)));  // still running: wait for it
  }
  return Status::Ok();
}

Status GpuPoolPath::RecordStaging(Done* done) {
  const int ranks = StreamCount();
  for (int i = static_cast<int>(done->events.size()); i < ranks; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
    cudaEvent_t e = nullptr;
    KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    done->events.push_back(e);
  }
  for (int i = 0; i < ranks; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
    KVSHARD_CUDA_CHECK(cudaEventRecord(done->events[i], gather_->compute_stream(i)));
  }
  done->recorded = true;
  in_flight_ = true;
  return Status::Ok();
}

}  // namespace gpu_path

void PrepareGpuPoolPaths(int gpus, int replays) {
  if (gpus <= 1) gpu::PreferHardwareQueues(std::clamp(2 * replays, 2, 8));
}

StatusOr<std::unique_ptr<PoolDataPath>> MakeGpuPoolPath(const PoolGeometry& geometry, int gpus) {
  if (gpus > 1 && gpus != geometry.shard_size) {
    return InvalidArgument("--gpus: must be 1 (emulated ranks) or the trace's shard_size ", geometry.shard_size,
                           ", got ", gpus);
  }
  return std::unique_ptr<PoolDataPath>(new gpu_path::GpuPoolPath(geometry, gpus));
}

StatusOr<std::unique_ptr<PoolDataPath>> CreateGpuPoolPath(const PoolGeometry& geometry, int gpus) {
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<PoolDataPath> path, MakeGpuPoolPath(geometry, gpus));
  KVSHARD_RETURN_IF_ERROR(path->Start());
  return path;
}

}  // namespace kvshard::replay

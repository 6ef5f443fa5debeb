// The pool pipeline on CUDA: gpu::DeviceGatherPlanner builds each extend's plan, gpu::LayerAheadGather
// installs it and moves every row; reads are translated and gathered on the device and downloaded. Writes and reads
// are asynchronous on the ranks' compute streams through reused device and pinned buffers: a write returns once
// its rows are staged, a read is collected after the caller's own work, and End waits once per batch.
#include "replay/gpu_pool_path.h"

#include <algorithm>
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

namespace kvshard::replay {
namespace {

class GpuPoolPath : public PoolDataPath {
 public:
  GpuPoolPath(const PoolGeometry& g, int gpus) : g_(g), gpus_(gpus) {}
  ~GpuPoolPath() override {
    if (gather_ != nullptr) (void)Quiesce();  // the staging buffers outlive what uses them
    for (cudaEvent_t e : read_done_.events) cudaEventDestroy(e);
    for (WriteSlot& w : writes_) {
      for (cudaEvent_t e : w.done.events) cudaEventDestroy(e);
    }
    for (cudaEvent_t e : order_) cudaEventDestroy(e);
    if (plan_stream_ != nullptr) cudaStreamDestroy(plan_stream_);
  }

  // The rank group (device 0 for emulated ranks, an NCCL communicator for one GPU per rank), then Init.
  Status Start() override {
    std::string why;
    const int visible = gpu::VisibleDeviceCount(&why);
    if (visible == 0) return Unavailable("--backend: no CUDA device visible (", why, ")");
    if (gpus_ <= 1) {
      KVSHARD_ASSIGN_OR_RETURN(comm_, gpu::CreateEmulatedGroup(static_cast<int>(g_.shard_size), 0));
    } else {
      if (visible < gpus_) return Unavailable("--gpus: ", gpus_, " devices needed, ", visible, " visible");
      KVSHARD_ASSIGN_OR_RETURN(comm_, gpu::CreateNcclGroup(gpus_));
    }
    return Init();
  }

  Status Init() {
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
    return Status::Ok();
  }

  std::string Name() const override {  // known before Start (the host names the path in its errors)
    return gpus_ <= 1 ? StrCat("gpu (", g_.shard_size, " ranks emulated on device 0)")
                      : StrCat("gpu (nccl, ", gpus_, " devices)");
  }

  // On the planner's own stream (never another call's): the replay's plan thread checks this batch's device plan
  // while the device thread installs the host's plan and moves the batch's rows.
  StatusOr<GatherPlan> Plan(const ExtendBatch& batch) override {
    KVSHARD_NVTX_RANGE("kvshard.pool.plan");
    KVSHARD_RETURN_IF_ERROR(gpu::GatherPlanCanImplement(batch));
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    KVSHARD_RETURN_IF_ERROR(planner_->Upload(batch, plan_stream_));
    KVSHARD_RETURN_IF_ERROR(planner_->Launch(0, plan_stream_));
    return planner_->Download(plan_stream_);
  }

  Status Install(const ExtendBatch& batch, const GatherPlan& plan, const std::vector<int64_t>& out_cache_loc) override {
    (void)batch;
    KVSHARD_NVTX_RANGE("kvshard.pool.begin_extend");
    KVSHARD_RETURN_IF_ERROR(Quiesce());  // a begin without an end: the last batch's work reads what this replaces
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    // Every rank installs the device plan (page_pos mirrored, its own send rows); page_pos is the downloaded plan's.
    std::vector<int32_t> page_pos(plan.page_pos_size, static_cast<int32_t>(plan.trash_page));
    for (size_t k = 0; k < plan.mapped_pages.size(); ++k) {
      page_pos[plan.mapped_pages[k]] = static_cast<int32_t>(plan.mapped_scratch_pages[k]);
    }
    std::vector<std::vector<int64_t>> send;
    for (int rank : comm_->local_ranks()) send.push_back(plan.ranks[rank].send_rows);
    KVSHARD_RETURN_IF_ERROR(gather_->BeginExtend(plan.block_pages, page_pos, send, out_cache_loc));
    out_cache_loc_ = out_cache_loc;
    active_ = true;
    return Status::Ok();
  }

  Status CheckWrite(bool in_extend, const std::vector<int64_t>& locs,
                    const std::vector<int64_t>& out_cache_loc) const override {
    if (in_extend && locs != out_cache_loc) {
      return InvalidArgument(
          "locs: during an extend the GPU backend writes the batch's out_cache_loc only "
          "(leave locs out, or give exactly those slots)");
    }
    return Status::Ok();
  }

  Status Write(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) override {
    return WriteStaged(layer, locs, &rows, 0);
  }

  // Ranks emulated on one device (the default group) make their payload rows and check their reads on it.
  bool MakesRows() const override { return gpus_ <= 1; }

  Status WriteMade(int64_t layer, const std::vector<int64_t>& locs, int64_t generation) override {
    return WriteStaged(layer, locs, nullptr, generation);
  }

  StatusOr<std::optional<RowDifference>> ReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                                                     const std::vector<uint32_t>& generations) override {
    if (pending_checks_ > 0) return FailedPrecondition("gpu: ReadChecked while checked reads are pending");
    KVSHARD_RETURN_IF_ERROR(StartReadChecked(layer, locs, generations));
    std::vector<CheckAnswer> answers = TakeChecked();
    if (answers.size() != 1) return Internal("gpu: expected one checked read, got ", answers.size());
    return std::move(answers[0]);
  }

  // Each pending check has its own pinned upload ([locs | the key, UINT64_MAX until a difference is found | the
  // check's finished blocks | generations], copied to the device) and its own slot in checks_ for the key and the
  // differing row the check's last block publishes there: the next read may reuse the device's staging at once.
  Status StartReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                          const std::vector<uint32_t>& generations) override {
    KVSHARD_NVTX_RANGE("kvshard.pool.read_checked");
    if (!shared_device_) return FailedPrecondition("gpu: reads are checked on the device for emulated ranks only");
    if (generations.size() != locs.size()) return InvalidArgument("generations: expected one per loc");
    if (pending_checks_ >= kMaxPendingChecks) {
      return FailedPrecondition("gpu: more than ", kMaxPendingChecks, " checked reads pending");
    }
    if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
    KVSHARD_ASSIGN_OR_RETURN(auto slots, gather_->AcquireBuffersForRead(layer));
    const int64_t m = static_cast<int64_t>(locs.size());
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&checks_, CheckRowAt(kMaxPendingChecks)));
    const int slot = pending_checks_;
    gpu::PayloadCheckOut out{nullptr, checks_.as<unsigned long long>() + slot,
                             checks_.as<uint8_t>() + CheckRowAt(slot)};
    if (m == 0) {  // nothing to read: the check of no rows publishes "no difference"
      KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
      KVSHARD_RETURN_IF_ERROR(gpu::LaunchCheckPayloadRows(nullptr, 1, nullptr, nullptr, 0, Layout(layer), nullptr,
                                                          gather_->compute_stream(0), &out));
      ++pending_checks_;
      return Status::Ok();
    }
    const size_t key_at = m * sizeof(int64_t), done_at = key_at + sizeof(uint64_t), gens_at = done_at + 8;
    gpu::PinnedBuffer& up = check_uploads_[slot];
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&up, gens_at + m * sizeof(uint32_t)));
    auto* host = static_cast<char*>(up.data());
    std::memcpy(host, locs.data(), key_at);
    const uint64_t none = UINT64_MAX, zero = 0;
    std::memcpy(host + key_at, &none, sizeof(none));
    std::memcpy(host + done_at, &zero, sizeof(zero));
    std::memcpy(host + gens_at, generations.data(), m * sizeof(uint32_t));
    KVSHARD_RETURN_IF_ERROR(StartSharedRead(slots, m, m * RowBytes(), layer, up, gens_at + m * sizeof(uint32_t), &out));
    ++pending_checks_;
    return Status::Ok();
  }

  // One copy of the pending keys and one wait (the group's deadline); a differing row is copied from its slot.
  std::vector<CheckAnswer> TakeChecked() override {
    KVSHARD_NVTX_RANGE("kvshard.pool.take_checked");
    const int n = std::exchange(pending_checks_, 0);
    if (n == 0) return {};
    if (Status s = DownloadKeys(n); !s.ok()) return std::vector<CheckAnswer>(static_cast<size_t>(n), s);
    std::vector<CheckAnswer> answers;
    for (int i = 0; i < n; ++i) {
      uint64_t key = 0;
      std::memcpy(&key, static_cast<const char*>(host_keys_.data()) + i * sizeof(uint64_t), sizeof(key));
      if (key == UINT64_MAX) {
        answers.emplace_back(std::optional<RowDifference>());
        continue;
      }
      const gpu::PayloadKey at = gpu::DecodePayloadKey(key, static_cast<int64_t>(g_.buffers.size()));
      RowDifference d{at.rank, at.buffer, at.byte, {}};
      d.got_row.resize(static_cast<size_t>(g_.buffers[at.buffer].row_bytes));
      const Status copied = gpu::CopyToHost(d.got_row.data(), checks_.as<uint8_t>() + CheckRowAt(i), d.got_row.size());
      if (copied.ok()) {
        answers.emplace_back(std::optional<RowDifference>(std::move(d)));
      } else {
        answers.emplace_back(copied);
      }
    }
    return answers;
  }

  // set_kv_buffer of `rows`, or (rows null) of the payload rows of `generation` made on the device.
  Status WriteStaged(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows* rows, int64_t generation) {
    KVSHARD_NVTX_RANGE("kvshard.pool.write_layer");
    const int64_t n = static_cast<int64_t>(locs.size());
    KVSHARD_RETURN_IF_ERROR(CheckWrite(active_, locs, out_cache_loc_));
    // The staging buffers go round kWriteSlots writes: the copies and kernels of the write that last used this
    // slot must be done with them (a batch's End waited for all of them: within a batch, rarely a wait).
    WriteSlot& slot = writes_[next_write_];
    next_write_ = (next_write_ + 1) % kWriteSlots;
    KVSHARD_RETURN_IF_ERROR(WaitForStaging(&slot.done));
    const size_t bytes = n * RowBytes();  // every buffer's rows, in turn, then the locs, 8-aligned at locs_at
    const size_t locs_at = (bytes + 7) / 8 * 8;
    size_t given = 0;
    if (rows != nullptr) {
      for (const std::vector<uint8_t>& b : *rows) given += b.size();
      if (given != bytes) return InvalidArgument("rows: expected ", bytes, " bytes, got ", given);
    }
    const size_t staged = locs_at + locs.size() * sizeof(int64_t);
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&slot.host, staged));
    auto* host = static_cast<uint8_t*>(slot.host.data());
    if (rows != nullptr) {
      for (const std::vector<uint8_t>& b : *rows) host = std::copy(b.begin(), b.end(), host);
    }
    if (!locs.empty()) std::memcpy(static_cast<uint8_t*>(slot.host.data()) + locs_at, locs.data(), n * sizeof(int64_t));
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
    if (active_) {
      KVSHARD_RETURN_IF_ERROR(gather_->WriteLayerBuffers(layer, ptrs));
    } else {  // outside an extend (decode writes): the owner filter only, straight into each rank's pools
      const PlacementSpec spec{g_.shard_size, g_.page_size};
      for (int i = 0; i < ranks; ++i) {
        KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
        const auto* d_locs =
            reinterpret_cast<const int64_t*>(slot.rows[shared_device_ ? 0 : i].as<uint8_t>() + locs_at);
        for (size_t b = 0; b < g_.buffers.size(); ++b) {
          KVSHARD_RETURN_IF_ERROR(gpu::LaunchOwnerFilteredWrite(
              gather_->pool(i, layer, static_cast<int>(b)), gather_->shape().pool_rows, ptrs[i][b], d_locs, n, spec,
              comm_->local_ranks()[i], g_.buffers[b].row_bytes, nullptr, gather_->compute_stream(i)));
        }
      }
    }
    return RecordStaging(&slot.done);
  }

  Status StartRead(int64_t layer, const std::vector<int64_t>& locs) override {
    KVSHARD_NVTX_RANGE("kvshard.pool.start_read");
    KVSHARD_ASSIGN_OR_RETURN(auto slots, BeginRead(layer));
    const int64_t m = static_cast<int64_t>(locs.size());
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_locs_, locs.size() * sizeof(int64_t)));
    if (m > 0) std::memcpy(host_locs_.data(), locs.data(), locs.size() * sizeof(int64_t));
    const int ranks = static_cast<int>(comm_->local_ranks().size());
    host_out_.resize(ranks);
    const size_t rank_bytes = m * RowBytes();  // one rank's gathered rows of every buffer
    if (shared_device_ && m > 0) {
      return StartSharedRead(slots, m, rank_bytes, -1, host_locs_, m * sizeof(int64_t), nullptr);
    }
    // Ranks on devices of their own (or nothing to read): each reads its own rows on its stream.
    for (int i = 0; i < ranks; ++i) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
      const cudaStream_t s = gather_->compute_stream(i);
      Staging& st = staging_[i];
      KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&st.locs, 2 * m * sizeof(int64_t)));  // the locs, then their rows
      KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&st.out, rank_bytes));
      KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_out_[i], rank_bytes));
      if (m == 0) continue;
      int64_t* d_rows = st.locs.as<int64_t>() + m;
      KVSHARD_CUDA_CHECK(
          cudaMemcpyAsync(st.locs.data(), host_locs_.data(), m * sizeof(int64_t), cudaMemcpyHostToDevice, s));
      KVSHARD_RETURN_IF_ERROR(gpu::LaunchTranslate(d_rows, st.locs.as<int64_t>(), m, gather_->page_pos(i),
                                                   gather_->shape().n_page_pos, g_.page_size, s));
      size_t offset = 0;
      for (size_t b = 0; b < g_.buffers.size(); ++b) {
        const int64_t width = g_.buffers[b].row_bytes;
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchGatherRows(st.out.as<uint8_t>() + offset, slots[i][b],
                                                      gather_->shape().scratch_rows(), d_rows, m, width, nullptr, s));
        offset += static_cast<size_t>(m * width);
      }
      KVSHARD_CUDA_CHECK(cudaMemcpyAsync(host_out_[i].data(), st.out.data(), rank_bytes, cudaMemcpyDeviceToHost, s));
    }
    KVSHARD_RETURN_IF_ERROR(RecordStaging(&read_done_));
    reading_ = true;
    read_rows_ = m;
    return Status::Ok();
  }

  StatusOr<std::vector<ref::BufferRows>> FinishRead() override {
    KVSHARD_ASSIGN_OR_RETURN(std::vector<RowSpans> spans, FinishReadSpans());
    std::vector<ref::BufferRows> out;
    for (const RowSpans& rank : spans) {
      out.emplace_back();
      for (std::span<const uint8_t> b : rank) out.back().emplace_back(b.begin(), b.end());
    }
    return out;
  }

  // The rows stay in the pinned buffers they were copied back into (reused by the next read).
  StatusOr<std::vector<RowSpans>> FinishReadSpans() override {
    KVSHARD_NVTX_RANGE("kvshard.pool.finish_read");
    if (!reading_) return FailedPrecondition("gpu: FinishRead without a StartRead");
    reading_ = false;
    std::vector<RowSpans> out;
    const int ranks = static_cast<int>(comm_->local_ranks().size());
    const size_t rank_bytes = read_rows_ * RowBytes();
    for (int i = 0; i < ranks; ++i) {
      // The compute stream waits on the gathered layer: the group's deadline. Shared: rank 0's copy waited for all.
      if (i == 0 || !shared_device_) {
        KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(i, gather_->compute_stream(i)));
      }
      out.emplace_back();
      const auto* host = shared_device_ ? static_cast<const uint8_t*>(host_out_[0].data()) + i * rank_bytes
                                        : static_cast<const uint8_t*>(host_out_[i].data());
      for (const ref::PoolBuffer& b : g_.buffers) {
        const size_t bytes = static_cast<size_t>(read_rows_ * b.row_bytes);
        out.back().emplace_back(host, bytes);
        host += bytes;
      }
    }
    return out;
  }

  Status End() override {
    KVSHARD_NVTX_RANGE("kvshard.pool.end_extend");
    KVSHARD_RETURN_IF_ERROR(gather_->EndExtend());
    active_ = false;
    KVSHARD_RETURN_IF_ERROR(Quiesce());  // one wait per batch for every write and read issued in it
    KVSHARD_ASSIGN_OR_RETURN(int64_t bad, gather_->BadRows());
    if (bad != 0) return Mismatch("invariant: ", bad, " rows skipped on the GPU for out-of-range indices");
    return Status::Ok();
  }

 private:
  // One local rank's device buffers, reused record after record (grown when a record needs more).
  struct Staging {
    gpu::DeviceBuffer locs;  // a read's locs, then their scratch rows
    gpu::DeviceBuffer out;   // a read's gathered rows of every buffer
  };
  // Per local rank, an event after the copies and kernels that use a set of staging buffers.
  struct Done {
    std::vector<cudaEvent_t> events;
    bool recorded = false;
  };

  // StartRead with every local rank on one device: rank 0's stream waits for every rank's stream (each waited for
  // its layer's all-gather), copies `from`'s first `upload` bytes up, reads every rank's rows with one launch a
  // buffer (LaunchTranslateGatherRanks), copies all of them back, and every other rank's stream waits for it (their
  // scratch slots are not reused before the read is done). With `publish` (StartReadChecked, checking against
  // `check_layer`), the upload also holds the key, the check's block count and the generations, and the rows stay:
  // they are checked there, and the check publishes its key (and a differing row) to `publish`.
  Status StartSharedRead(const std::vector<std::vector<void*>>& slots, int64_t m, size_t rank_bytes,
                         int64_t check_layer, const gpu::PinnedBuffer& from, size_t upload,
                         gpu::PayloadCheckOut* publish) {
    const int ranks = static_cast<int>(comm_->local_ranks().size());
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    const cudaStream_t s0 = gather_->compute_stream(0);
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&staging_[0].locs, upload));
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&staging_[0].out, rank_bytes * ranks));
    const int64_t* d_locs = staging_[0].locs.as<int64_t>();
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(staging_[0].locs.data(), from.data(), upload, cudaMemcpyHostToDevice, s0));
    for (int i = 1; i < StreamCount(); ++i) {
      KVSHARD_CUDA_CHECK(cudaEventRecord(order_[i], gather_->compute_stream(i)));
      KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(s0, order_[i], 0));
    }
    size_t offset = 0;  // buffer b of rank i lands at i * rank_bytes + (the widths of the buffers before b) * m
    for (size_t b = 0; b < g_.buffers.size(); ++b) {
      const int64_t width = g_.buffers[b].row_bytes;
      std::vector<gpu::TranslateGatherJob> jobs;
      for (int i = 0; i < ranks; ++i) {
        jobs.push_back({staging_[0].out.as<uint8_t>() + i * rank_bytes + offset, slots[i][b],
                        gather_->shape().scratch_rows(), gather_->page_pos(i), gather_->shape().n_page_pos});
      }
      for (size_t first = 0; first < jobs.size(); first += gpu::kMaxRankJobs) {
        const size_t last = std::min(jobs.size(), first + gpu::kMaxRankJobs);
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchTranslateGatherRanks({jobs.begin() + first, jobs.begin() + last}, d_locs, m,
                                                                g_.page_size, width, s0));
      }
      offset += static_cast<size_t>(m * width);
    }
    if (publish != nullptr) {
      auto* key = reinterpret_cast<unsigned long long*>(staging_[0].locs.as<uint8_t>() + m * sizeof(int64_t));
      publish->blocks_done = reinterpret_cast<unsigned*>(key + 1);
      const auto* gens = reinterpret_cast<const uint32_t*>(key + 2);
      KVSHARD_RETURN_IF_ERROR(gpu::LaunchCheckPayloadRows(staging_[0].out.data(), ranks, d_locs, gens, m,
                                                          Layout(check_layer), key, s0, publish));
    } else {
      KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_out_[0], rank_bytes * ranks));
      KVSHARD_CUDA_CHECK(
          cudaMemcpyAsync(host_out_[0].data(), staging_[0].out.data(), rank_bytes * ranks, cudaMemcpyDeviceToHost, s0));
    }
    if (StreamCount() > 1) KVSHARD_CUDA_CHECK(cudaEventRecord(order_[0], s0));
    for (int i = 1; i < StreamCount(); ++i) {
      KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(gather_->compute_stream(i), order_[0], 0));
    }
    if (publish != nullptr) {  // its upload is its own until TakeChecked (or Quiesce) has waited for it
      in_flight_ = true;
      return Status::Ok();
    }
    KVSHARD_RETURN_IF_ERROR(RecordStaging(&read_done_));
    reading_ = true;
    read_rows_ = m;
    return Status::Ok();
  }

  // What every read does first: finishes a read left unfinished (its caller failed), takes the layer's scratch slots
  // (the layer-ahead gather's state moves on) and waits until the last read's copies are done with the locs.
  StatusOr<std::vector<std::vector<void*>>> BeginRead(int64_t layer) {
    if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
    KVSHARD_ASSIGN_OR_RETURN(auto slots, gather_->AcquireBuffersForRead(layer));
    KVSHARD_RETURN_IF_ERROR(WaitForStaging(&read_done_));
    return slots;
  }

  // Where checks_ holds pending check i's differing row: after the kMaxPendingChecks keys, one widest row each.
  size_t CheckRowAt(int i) const {
    size_t widest = 0;
    for (const ref::PoolBuffer& b : g_.buffers) widest = std::max(widest, static_cast<size_t>(b.row_bytes));
    return kMaxPendingChecks * sizeof(uint64_t) + static_cast<size_t>(i) * widest;
  }

  // The first n pending keys into host_keys_, once the checks are done.
  Status DownloadKeys(int n) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_keys_, kMaxPendingChecks * sizeof(uint64_t)));
    const cudaStream_t s0 = gather_->compute_stream(0);
    KVSHARD_CUDA_CHECK(
        cudaMemcpyAsync(host_keys_.data(), checks_.data(), n * sizeof(uint64_t), cudaMemcpyDeviceToHost, s0));
    return comm_->SynchronizeRank(0, s0);  // the group's deadline
  }

  // Bytes of a slot's row, every buffer.
  size_t RowBytes() const {
    size_t row_bytes = 0;
    for (const ref::PoolBuffer& b : g_.buffers) row_bytes += static_cast<size_t>(b.row_bytes);
    return row_bytes;
  }

  // The payload of `layer` as the device makes and checks it.
  gpu::PayloadLayout Layout(int64_t layer) const {
    gpu::PayloadLayout l;
    l.seed = g_.payload_seed;
    l.layer = layer;
    for (const ref::PoolBuffer& b : g_.buffers) l.widths.push_back(b.row_bytes);
    return l;
  }

  // Local ranks 0 .. StreamCount() - 1 have streams of their own; the others share rank 0's (one stream).
  int StreamCount() const { return gather_->one_stream() ? 1 : static_cast<int>(comm_->local_ranks().size()); }

  // Shared device: orders rank i's stream (i > 0) after what rank 0's stream was given so far (a copy all ranks
  // read); else nothing.
  Status AfterRankZero(int i) {
    if (!shared_device_ || i == 0 || gather_->one_stream()) return Status::Ok();
    if (i == 1) KVSHARD_CUDA_CHECK(cudaEventRecord(order_[0], gather_->compute_stream(0)));
    KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(gather_->compute_stream(i), order_[0], 0));
    return Status::Ok();
  }

  // Waits for everything issued (a read left unfinished included) on every rank; the group's deadline.
  Status Quiesce() {
    if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
    if (!in_flight_) return Status::Ok();
    for (int i = 0; i < StreamCount(); ++i) {
      KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(i, gather_->compute_stream(i)));
    }
    in_flight_ = false;
    read_done_.recorded = false;
    for (WriteSlot& w : writes_) w.done.recorded = false;
    return Status::Ok();
  }

  // Waits until the work recorded in *done (if any) no longer uses its staging buffers; the group's deadline.
  Status WaitForStaging(Done* done) {
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

  // Records on every compute stream that the work issued so far is what uses the staging buffers of *done.
  Status RecordStaging(Done* done) {
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

  PoolGeometry g_;
  int gpus_ = 1;
  std::unique_ptr<gpu::RankGroup> comm_;  // made by Start
  std::unique_ptr<gpu::DeviceGatherPlanner> planner_;
  cudaStream_t plan_stream_ = nullptr;  // Plan's alone (device 0)
  std::unique_ptr<gpu::LayerAheadGather> gather_;
  std::vector<int64_t> out_cache_loc_;
  bool active_ = false;
  std::vector<Staging> staging_;                        // per local rank
  gpu::PinnedBuffer host_locs_;                         // a read's locs
  std::vector<gpu::PinnedBuffer> host_out_;             // per local rank: a read's rows, copied back
  gpu::DeviceBuffer checks_;                            // pending checks: their keys, then one differing row each
  gpu::PinnedBuffer check_uploads_[kMaxPendingChecks];  // pending check i's upload
  gpu::PinnedBuffer host_keys_;                         // the pending checks' keys, copied back
  int pending_checks_ = 0;                              // checked reads started since the last TakeChecked
  // A write's staging: its rows and locs pinned, copied to every rank's device buffer (one when the ranks share a
  // device), and the event after the work that uses them.
  struct WriteSlot {
    gpu::PinnedBuffer host;
    std::vector<gpu::DeviceBuffer> rows;
    Done done;
  };
  static constexpr int kWriteSlots = 4;
  WriteSlot writes_[kWriteSlots];
  int next_write_ = 0;  // the slot of the next write
  Done read_done_;
  bool shared_device_ = false;      // every local rank on one device (emulated ranks)
  std::vector<cudaEvent_t> order_;  // per local rank: orders one rank's stream after another's
  bool reading_ = false;            // a StartRead waits for its FinishRead
  bool in_flight_ = false;          // writes or reads were issued since the last Quiesce
  int64_t read_rows_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<PoolDataPath>> MakeGpuPoolPath(const PoolGeometry& geometry, int gpus) {
  if (gpus > 1 && gpus != geometry.shard_size) {
    return InvalidArgument("--gpus: must be 1 (emulated ranks) or the trace's shard_size ", geometry.shard_size,
                           ", got ", gpus);
  }
  return std::unique_ptr<PoolDataPath>(new GpuPoolPath(geometry, gpus));
}

StatusOr<std::unique_ptr<PoolDataPath>> CreateGpuPoolPath(const PoolGeometry& geometry, int gpus) {
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<PoolDataPath> path, MakeGpuPoolPath(geometry, gpus));
  KVSHARD_RETURN_IF_ERROR(path->Start());
  return path;
}

}  // namespace kvshard::replay

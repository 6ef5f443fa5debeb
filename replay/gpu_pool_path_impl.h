// GpuPoolPath, the CUDA data path behind replay/gpu_pool_path.h, declared for its two source files:
// gpu_pool_path.cc (set-up, plans, writes, a batch's end, the staging buffers' events) and gpu_pool_path_reads.cc
// (reads, and their checks on the device). Internal to //replay:gpu_pool_path.
#ifndef KVSHARD_REPLAY_GPU_POOL_PATH_IMPL_H_
#define KVSHARD_REPLAY_GPU_POOL_PATH_IMPL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/gather_plan.h"
#include "gpu/payload_rows.h"
#include "gpu/prefix_gather.h"
#include "replay/pool_replay.h"

namespace kvshard::replay::gpu_path {

// Writes and reads are asynchronous on the ranks' compute streams through reused device and pinned buffers: a write
// returns once its rows are staged, a read is collected after the caller's own work, and End waits once per batch.
class GpuPoolPath : public PoolDataPath {
 public:
  GpuPoolPath(const PoolGeometry& g, int gpus) : g_(g), gpus_(gpus) {}
  ~GpuPoolPath() override;

  // The rank group (device 0 for emulated ranks, an NCCL communicator for one GPU per rank), then Init.
  Status Start() override;
  StartTimes start_times() const override { return start_times_; }

  Status Init();

  std::string Name() const override {  // known before Start (the host names the path in its errors)
    return gpus_ <= 1 ? StrCat("gpu (", g_.shard_size, " ranks emulated on device 0)")
                      : StrCat("gpu (nccl, ", gpus_, " devices)");
  }

  // On the planner's own stream (never another call's): the replay's plan thread checks this batch's device plan
  // while the device thread installs the host's plan and moves the batch's rows.
  StatusOr<GatherPlan> Plan(const ExtendBatch& batch) override;

  Status Install(const ExtendBatch& batch, const GatherPlan& plan, const std::vector<int64_t>& out_cache_loc) override;

  Status CheckWrite(bool in_extend, const std::vector<int64_t>& locs,
                    const std::vector<int64_t>& out_cache_loc) const override;

  Status Write(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) override {
    return WriteStaged(layer, locs, &rows, 0);
  }

  // Ranks emulated on one device (the default group) make their payload rows and check their reads on it.
  bool MakesRows() const override { return gpus_ <= 1; }

  Status WriteMade(int64_t layer, const std::vector<int64_t>& locs, int64_t generation) override {
    return WriteStaged(layer, locs, nullptr, generation);
  }

  // Emulated ranks keep a table of every (layer, slot)'s last WriteMade generation on the device (generations_),
  // marked by each write and read by each check, unless the device had no room for it (then the caller's lists).
  bool KeepsGenerations() const override { return generations_.data() != nullptr; }

  StatusOr<std::optional<RowDifference>> ReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                                                     const std::vector<uint32_t>& generations) override;

  // Each pending check has its own pinned upload ([locs | the key, UINT64_MAX until a difference is found | the
  // check's finished blocks | generations, unless the path keeps them], copied to the device) and its own slot in
  // checks_ for the key, the differing row and its generation the check's last block publishes there: the next read
  // may reuse the device's staging at once.
  Status StartReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                          const std::vector<uint32_t>& generations) override;

  // One copy of the pending keys and one wait (the group's deadline); a differing row is copied from its slot.
  std::vector<CheckAnswer> TakeChecked() override;

  // set_kv_buffer of `rows`, or (rows null) of the payload rows of `generation` made on the device (during an
  // extend from the batch's chunk locs, on the device since Install: nothing goes up).
  Status WriteStaged(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows* rows, int64_t generation);

  Status StartRead(int64_t layer, const std::vector<int64_t>& locs) override;

  StatusOr<std::vector<ref::BufferRows>> FinishRead() override;

  // The rows stay in the pinned buffers they were copied back into (reused by the next read).
  StatusOr<std::vector<RowSpans>> FinishReadSpans() override;

  Status End() override;

  // Emulated ranks (one device, one stream): a batch's end is a pending check whose key is the skipped-rows count,
  // copied on the device after the batch's work and downloaded with the reads' keys (no wait at the end).
  bool EndsChecked() const override { return gpus_ <= 1; }
  Status StartEndChecked() override;

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
                         gpu::PayloadCheckOut* publish);

  // What every read does first: finishes a read left unfinished (its caller failed), takes the layer's scratch slots
  // (the layer-ahead gather's state moves on) and waits until the last read's copies are done with the locs.
  StatusOr<std::vector<std::vector<void*>>> BeginRead(int64_t layer);

  // Where checks_ holds pending check i's differing row: after the kMaxPendingChecks keys, as many counter copies
  // (CountAt) and as many generations (GenerationAt, a word each), one widest row each.
  size_t CheckRowAt(int i) const;
  // Where checks_ holds pending check i's copy of the skipped-rows counter.
  size_t CountAt(int i) const { return (kMaxPendingChecks + i) * sizeof(uint64_t); }
  // Where checks_ holds the generation pending check i's differing row was checked against.
  size_t GenerationAt(int i) const { return (2 * kMaxPendingChecks + i) * sizeof(uint64_t); }

  // Marks `n` slots (device memory `d_locs`) of `layer` as written by `generation` in generations_ (where kept), on
  // rank 0's stream after the write.
  Status MarkWritten(int64_t layer, const int64_t* d_locs, int64_t n, int64_t generation);

  // The first n pending keys and counter copies into host_keys_ (keys at 0, copies at kMaxPendingChecks), once the
  // checks are done.
  Status DownloadKeys(int n);

  // Bytes of a slot's row, every buffer.
  size_t RowBytes() const;

  // The payload of `layer` as the device makes and checks it.
  gpu::PayloadLayout Layout(int64_t layer) const;

  // Local ranks 0 .. StreamCount() - 1 have streams of their own; the others share rank 0's (one stream).
  int StreamCount() const { return gather_->one_stream() ? 1 : static_cast<int>(comm_->local_ranks().size()); }

  // Shared device: orders rank i's stream (i > 0) after what rank 0's stream was given so far (a copy all ranks
  // read); else nothing.
  Status AfterRankZero(int i);

  // Waits for everything issued (a read left unfinished included) on every rank; the group's deadline.
  Status Quiesce();

  // After a wait for everything issued: no staging buffer is in use any more.
  void MarkQuiet();

  // Waits until the work recorded in *done (if any) no longer uses its staging buffers; the group's deadline.
  Status WaitForStaging(Done* done);

  // Records on every compute stream that the work issued so far is what uses the staging buffers of *done.
  Status RecordStaging(Done* done);

  PoolGeometry g_;
  int gpus_ = 1;
  StartTimes start_times_;                // Start's driver and context seconds
  std::unique_ptr<gpu::RankGroup> comm_;  // made by Start
  std::unique_ptr<gpu::DeviceGatherPlanner> planner_;
  cudaStream_t plan_stream_ = nullptr;  // Plan's alone (device 0)
  std::unique_ptr<gpu::LayerAheadGather> gather_;
  std::vector<int64_t> out_cache_loc_;
  bool active_ = false;
  // Emulated ranks: the generation of every (layer, slot)'s last WriteMade, [layer][slot] (table_slots_ a layer, the
  // pool's every slot, trash pages included), zero until written; null where the device had no room.
  gpu::DeviceBuffer generations_;
  int64_t table_slots_ = 0;
  std::vector<Staging> staging_;                        // per local rank
  gpu::PinnedBuffer host_locs_;                         // a read's locs
  std::vector<gpu::PinnedBuffer> host_out_;             // per local rank: a read's rows, copied back
  gpu::DeviceBuffer checks_;                            // pending checks: their keys, then one differing row each
  gpu::PinnedBuffer check_uploads_[kMaxPendingChecks];  // pending check i's upload
  size_t check_upload_peak_ = 0;                        // the largest check upload so far
  gpu::PinnedBuffer host_keys_;                         // the pending checks' keys, copied back
  int pending_checks_ = 0;                              // checked reads and ends started since the last TakeChecked
  bool end_check_[kMaxPendingChecks] = {};              // pending check i is an end (its key: rows skipped)
  // Pending end i's count is pending check end_from_[i]'s copy of the skipped-rows counter (-1: its own key).
  int end_from_[kMaxPendingChecks] = {};
  // The pending checked read whose last block copied the skipped-rows counter after everything issued so far (no
  // device work since), or -1: an end right after it reads its count there and issues nothing.
  int snap_check_ = -1;
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

}  // namespace kvshard::replay::gpu_path

#endif  // KVSHARD_REPLAY_GPU_POOL_PATH_IMPL_H_

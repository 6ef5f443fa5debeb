// The sharded-pool pipeline records of a trace (begin_shard_extend, set_kv_buffer, get_key_buffer,
// end_shard_extend): run on the reference pool and/or a GPU data path, every read checked against an
// unsharded baseline, and in diff mode every plan and every byte of the two paths compared.
#ifndef KVSHARD_REPLAY_POOL_REPLAY_H_
#define KVSHARD_REPLAY_POOL_REPLAY_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "replay/backend.h"
#include "replay/device_worker.h"
#include "replay/field_answer.h"
#include "replay/pool_data_path.h"
#include "core/gather_plan.h"
#include "core/json.h"
#include "core/status.h"
#include "cpu_fast/gather_plan.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::replay {

// The trace header's "pool" object completed with the allocator's geometry.
struct PoolGeometry {
  int64_t shard_size = 1;
  int64_t page_size = 1;
  int64_t pages_per_rank = 0;     // allocatable pages per rank (the allocator's), excluding the trash page
  int64_t max_prefix_tokens = 0;  // scratch prefix region rows
  int64_t chunk_tokens = 0;       // scratch chunk region rows
  int64_t num_layers = 1;
  int64_t row_words = 1;      // 32-bit words per KV row (row bytes = 4 * row_words), the one-buffer form
  uint64_t payload_seed = 0;  // the S of every payload word W(S, layer, slot, generation, word)
  // The per-layer buffers (header "buffers": MHA K/V, MLA latent, extras); always filled: the one-buffer form
  // is {"kv", 4 * row_words}.
  std::vector<ref::PoolBuffer> buffers;
  // True when the header gave "buffers" (else the one-buffer word form).
  bool explicit_buffers = false;
};

// The header keys of "pool".
const std::vector<std::string>& PoolHeaderKeys();

// Reads the header's "pool" object (errors "pool.<field>: ..."); shard geometry comes from the allocator.
StatusOr<PoolGeometry> PoolGeometryFromJson(const Json& pool, int64_t shard_size, int64_t page_size,
                                            int64_t pages_per_rank);

// A run of a write's or a read's slots: `len` consecutive slots from `first`, all on first's page.
struct SlotRun {
  int64_t first = 0, len = 0;
};
// Splits `locs` into maximal runs of consecutive slots within one page of `page_size` slots (into *runs, reused),
// checking each slot is in [0, slots): the index of the first that is not, or -1. `slots` is a multiple of page_size.
int64_t SlotRuns(const std::vector<int64_t>& locs, int64_t page_size, int64_t slots, std::vector<SlotRun>* runs);

// Word `word` of the row set_kv_buffer writes for `loc` of `layer` in write generation `generation`: every
// (seed, layer, slot, generation) gives other bytes, so a misplaced or stale row is visible.
uint32_t PayloadWord(uint64_t seed, int64_t layer, int64_t loc, int64_t generation, int64_t word);
// The rows of every buffer for `locs`: a slot's buffers concatenated are the PayloadWord bytes of that slot (low
// byte first), so a row in the wrong buffer differs too; one buffer of 4*w bytes is the old word row.
ref::BufferRows PayloadRows(const PoolGeometry& g, int64_t layer, const std::vector<int64_t>& locs, int64_t generation);
// PayloadRows with generation `generation_of(i)` for locs[i]; generation 0 (a slot never written) is zero bytes, what
// a pool holds before its first write.
ref::BufferRows PayloadRowsOf(const PoolGeometry& g, int64_t layer, const std::vector<int64_t>& locs,
                              const std::function<int64_t(size_t)>& generation_of);

// The pipeline state of one trace.
class PoolReplay {
 public:
  // The reference pool (unless backend == kGpu) and `device` (required unless backend == kRef). With `device_thread`,
  // the device's steps run on a thread of their own (DeviceWorker) while the host checks the reference (diff) or
  // the baseline (gpu: the host planner's plan answers begin_shard_extend), the device's plans are built and
  // compared on a third (the plan thread), and what they find is taken by SettleDevice; else every step runs at
  // its record.
  static StatusOr<std::unique_ptr<PoolReplay>> Create(const PoolGeometry& geometry, Backend backend,
                                                      std::unique_ptr<PoolDataPath> device, bool device_thread = false);

  // A record's slot list, shared by the record's device step (and its pending check) without a copy: an extend's
  // default lists are one list for every record of the batch.
  using SharedLocs = std::shared_ptr<const std::vector<int64_t>>;

  // The pipeline records (docs/trace-format.md): each answer is what its expect is checked against. A read that
  // differs from the unsharded baseline, or (diff) between the paths, is a Mismatch "invariant: ..." / "diff: ...".
  // Begin takes the record's requests as ExtendRequestsFromJson reads them; Write and Read the record's "locs"
  // (null where it has none: the extend's default list).
  StatusOr<FieldAnswer> Begin(const std::vector<ExtendRequest>& requests, const Json* only);
  StatusOr<FieldAnswer> Write(const Json& rec, SharedLocs record_locs, const Json* only);
  StatusOr<FieldAnswer> Read(const Json& rec, SharedLocs record_locs, const Json* only);
  StatusOr<Json> End();

  // Rows compared so far (reads against the baseline, and between paths in diff mode; with a device thread, the
  // device's share as of its last finished step).
  int64_t rows_compared() const { return rows_compared_ + device_rows_.load(std::memory_order_relaxed); }

  // A difference a device step found on the device thread, reported when the replay settles.
  struct DeviceFinding {
    int64_t step = 0;          // the step's number (device_steps() before the record that submitted it)
    Status status;             // a Mismatch: "diff: ...", or the device path's own "invariant: ..."
    int64_t rows_at_stop = 0;  // rows_compared() of a replay that stops at the step's record
    int64_t host_rows = 0;     // rows the host counted at that record (a record that fails counts none)
  };
  // Device steps submitted to the device thread so far (its first, the path's Start, not counted) (a pipeline record
  // submits at most one).
  int64_t device_steps() const { return steps_; }
  // The plan thread's DeviceWorker (null without a device thread), for its timings.
  const DeviceWorker* plan_worker() const { return plan_worker_.get(); }
  // Device steps whose outcome is final so far (they ran, and no check of theirs is pending: a difference of theirs
  // is among the findings), and whether one of them found a difference (both cheap, any time).
  int64_t device_steps_done() const { return final_steps_.load(std::memory_order_acquire); }
  bool device_found() const { return found_.load(std::memory_order_acquire); }
  // The device thread's DeviceWorker (null without one), for its timings.
  const DeviceWorker* device_worker() const { return worker_.get(); }
  // The device path's Start error on the device thread (OK until SettleDevice has seen one; no step runs after it).
  const Status& device_error() const { return device_error_; }
  // Seconds the device path's Start took on the device thread (its context, buffers), and how many times the pending
  // checks were taken from the path (TakeChecked: one wait for the device each); read after SettleDevice.
  double device_setup_seconds() const { return setup_seconds_; }
  // Of those, the driver's start and the device context's (PoolDataPath::start_times); read after SettleDevice.
  PoolDataPath::StartTimes device_start_times() const { return start_times_; }
  int64_t checks_taken() const { return checks_taken_.load(std::memory_order_relaxed); }
  // Waits for every submitted device step and returns what they found since the last call, in step order.
  std::vector<DeviceFinding> SettleDevice();

 private:
  PoolReplay(const PoolGeometry& g, Backend backend) : geometry_(g), backend_(backend) {}
  // A device step's place: its number, the host's rows before its record, and the host's rows of its record.
  struct StepAt {
    int64_t index = 0, host_before = 0, host_rows = 0;
  };
  // How a step runs beside the checks pending on the device thread: kSettles resolves them first (the step counts
  // rows as it runs, or waits for the device anyway: an end answered at once; its counts and findings come after
  // theirs); kDefers runs with them pending (a begin, a write; a checked read or an end, which add their own).
  enum class StepKind { kSettles, kDefers };
  // --backend gpu|diff: runs `step` (a callable returning Status: the device's call, compared with the reference's
  // answer or the baseline: OK or a Mismatch) at once, or on the device thread (then OK here). `host_rows`: rows the
  // host counted for this record, uncounted when the step fails; `bytes`: the payload `step` holds. A template, so a
  // step is one closure (one allocation, made and freed on this thread), not a function wrapped in another.
  template <typename Step>
  Status RunDeviceStep(size_t bytes, int64_t host_rows, Step step, StepKind kind = StepKind::kSettles) {
    if (!worker_) return RanAtRecord(host_rows, step());
    const StepAt at{steps_++, rows_compared_ - host_rows, host_rows};
    worker_->Submit(bytes, [this, at, kind, step = std::move(step)] {
      if (StartDeviceStep(at, kind)) FinishDeviceStep(at, step());
    });
    return Status::Ok();
  }
  // A step run at its record: its status, its record's rows uncounted when it failed.
  Status RanAtRecord(int64_t host_rows, Status s);
  // On the device thread, around a step: whether it runs (the path started), resolving the pending checks first for
  // kSettles; then what its status makes of it (a finding) and of the checks still pending.
  bool StartDeviceStep(const StepAt& at, StepKind kind);
  void FinishDeviceStep(const StepAt& at, Status s);
  // A read checked by a path that checks its rows (MakesRows) against `generations`: at its record, answered at once
  // (ReadChecked); on the device thread, started (StartReadChecked) and answered with the others pending by
  // ResolveChecks (a failed start at once). `diff`: diff's texts, else gpu's.
  Status CheckedRead(bool diff, int64_t layer, SharedLocs locs, std::vector<uint32_t> generations);
  // Takes every pending check's answer (one wait) and records each difference as its own step's finding, in order.
  void ResolveChecks();
  // What a checked read's answer `d` makes of the record: OK (its rows counted) or gpu's "invariant: ..." / diff's
  // "diff: ..." Mismatch.
  Status CheckedAnswer(bool diff, int64_t layer, const std::vector<int64_t>& locs,
                       const std::vector<uint32_t>& generations, PoolDataPath::CheckAnswer d);
  // Records `status` as the finding of `step`, with the rows compared as of now.
  void AddFinding(const StepAt& step, Status status);
  // The device steps: diff runs every call and compares it with the reference's answer (`plan`, `ref_rows`); gpu
  // with the host planner's plan and the payload of each slot's last write (`generations`): a write takes `rows`,
  // or rows of `generation` made by the path or here. A failed call is a Mismatch ("diff: ..." or "invariant: ...").
  // A batch and the host's answer to it (a plan, or the error the device must give too), shared by the begin's device
  // step and the plan thread's check (read-only on both, so neither copies it).
  struct PlanCheck {
    ExtendBatch batch;
    StatusOr<GatherPlan> want;
  };
  // DeviceBegin installs the plan of `check` (the host's, which the record answered with) and checks the device's own
  // plan of its batch against it: at once, or on the plan thread (a pending check, taken with the read checks).
  Status DeviceBegin(std::shared_ptr<const PlanCheck> check, const std::vector<int64_t>& chunk);
  // The device's plan of `batch` against the host's answer `want`: OK, or diff's / gpu's Mismatch naming the first
  // field and index that differ.
  Status CheckDevicePlan(const ExtendBatch& batch, const StatusOr<GatherPlan>& want) const;
  // Runs CheckDevicePlan at once, or on the plan thread as a pending check of the running step (the device step of
  // a begin_shard_extend: DeviceBegin's, or, where the host refused the batch, this alone).
  Status StartPlanCheck(std::shared_ptr<const PlanCheck> check);
  Status DeviceWrite(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows, int64_t generation);
  Status DiffRead(int64_t layer, const std::vector<int64_t>& locs, const std::vector<ref::BufferRows>& ref_rows,
                  bool compare);
  // gpu's read on a path that gives its rows (not MakesRows), checked here.
  Status GpuRead(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& generations);
  // A device read that failed (`error`): diff's or gpu's Mismatch.
  Status ReadFailed(bool diff, int64_t layer, const Status& error) const;
  // The text of a path's RowDifference in a read of (layer, locs) checked against `generations` (RowDiffText, the
  // expected row being the payload).
  std::string PayloadDiffText(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& generations,
                              const PoolDataPath::RowDifference& at) const;
  // Slots of the pool: N * (pages_per_rank + 1) * page_size (the trash pages included).
  int64_t Slots() const;
  // Device steps (the device thread's, or at their record), in step order: a write of `generation` to `locs` in
  // `layer` (last_write_), and the generation of the last write of each of a read's `locs` (checked slots), in a
  // spare list where one is kept. Kept where the device steps run, so the checking thread neither fills nor copies
  // them; a path that keeps generations itself (PoolDataPath::KeepsGenerations) needs neither: nothing is marked and
  // the list is empty.
  void MarkWritten(int64_t layer, const std::vector<int64_t>& locs, int64_t generation);
  std::vector<uint32_t> LastWrites(int64_t layer, const std::vector<int64_t>& locs);
  // end_shard_extend on the device: answered at once, or (on the device thread, a path whose ends are checks) as a
  // pending check answered with the reads'.
  Status DeviceEnd();
  // What an end's answer `s` makes of the record: OK, the path's own Mismatch, or diff's / gpu's "... failed".
  Status EndAnswer(const Status& s) const;
  // Rows a device step compared: on the device thread's count, or (at its record) the host's.
  void CountDeviceRows(int64_t rows);

  PoolGeometry geometry_;
  Backend backend_;
  std::optional<ref::ShardedPool> pool_;        // the reference path (absent for kGpu)
  std::optional<ref::UnshardedPool> baseline_;  // reads are checked against it (absent for kGpu)
  // kGpu, and kDiff on a path that makes its rows: the generation of the last write of every (layer, slot), 0 for
  // none: the baseline's rows of a slot are PayloadRowsOf that generation, so this is all a read is checked by. The
  // device steps' own (MarkWritten, LastWrites): with a device thread, only it touches this. From calloc, whose large
  // blocks are untouched zero pages: only the slots a trace writes cost memory and time (zeroing a Mooncake trace's
  // 20 M slots x 2 layers up front took 0.1 s). Null for the others.
  struct FreeDeleter {
    void operator()(uint32_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint32_t[], FreeDeleter> last_write_;
  std::vector<SlotRun> runs_;  // the current write's (or a read's own list's) slot runs (reused)
  // A batch's default list split into runs and checked by the first record of batch `epoch` that used it.
  struct EpochRuns {
    std::vector<SlotRun> runs;
    int64_t epoch = -1;
  };
  EpochRuns batch_runs_;                  // the default read list's (batch_locs_)
  EpochRuns chunk_runs_;                  // the default write list's (out_cache_loc_)
  std::unique_ptr<PoolDataPath> device_;  // the GPU path (absent for kRef)
  bool active_ = false;
  // The empty slot list (no extend in flight).
  static const SharedLocs& NoLocs() {
    static const SharedLocs none = std::make_shared<const std::vector<int64_t>>();
    return none;
  }
  SharedLocs out_cache_loc_ = NoLocs();   // the current extend's chunk slots (set_kv_buffer's default locs)
  SharedLocs batch_locs_ = NoLocs();      // every slot of the current extend (get_key_buffer's default locs)
  DensePagePosCache page_pos_;            // the current plan's dense page_pos
  int64_t epoch_ = 0;                     // extends begun so far
  int64_t locs_counted_epoch_ = -1;       // the batch whose default read list a queued device step counted
  int64_t generation_ = 0;                // set_kv_buffer records so far
  int64_t rows_compared_ = 0;             // by the host (and by device steps run at their record)
  std::atomic<int64_t> device_rows_{0};   // by device steps on the device thread
  int64_t steps_ = 0;                     // device steps submitted to the thread
  std::mutex findings_mu_;                // guards findings_
  std::vector<DeviceFinding> findings_;   // since the last SettleDevice
  std::atomic<bool> found_{false};        // findings_ is not empty, or the device path failed to start
  Status device_error_;                   // written by the device thread's first step
  bool device_started_ = false;           // written by the device thread's first step (read after a settle)
  double setup_seconds_ = 0;              // written by the device thread's first step (read after a settle)
  PoolDataPath::StartTimes start_times_;  // the same
  std::atomic<int64_t> checks_taken_{0};  // TakeChecked calls
  fast::GatherPlanner host_planner_;      // --backend gpu: begin_shard_extend's answer
  // The device thread's (the settling thread's once settled): checks started and not yet answered (reads on the
  // path; plans on the plan thread, `plan_answer` set), and the step running now.
  struct PendingCheck {
    StepAt step;
    bool diff = false;
    int64_t layer = 0;
    SharedLocs locs;  // null for plans and ends
    std::vector<uint32_t> generations;
    std::shared_ptr<Status> plan_answer;  // a plan check: CheckDevicePlan's answer, written on the plan thread
    bool end = false;                     // an end (StartEndChecked), not a read
  };
  // Adds a started check; at kMaxPendingChecks pending, answers them all (the path holds no more).
  void AddPendingCheck(PendingCheck check);
  std::vector<PendingCheck> pending_checks_;
  // The generation lists of answered checks, kept for LastWrites to refill instead of allocating: the device steps
  // make them and ResolveChecks answers them, both on the device thread (the settling thread once it settled). At
  // most kSpareLists lists of at most kSpareListInts entries each (the bound of a record's kept lists,
  // PreparedRecord::kKeptInts).
  static constexpr size_t kSpareLists = 64, kSpareListInts = size_t{1} << 14;
  std::vector<std::vector<uint32_t>> spare_lists_;
  // Keeps the generation lists of `checks` (answered) as spares, as far as they fit.
  void KeepSpareLists(std::vector<PendingCheck>* checks);
  StepAt running_;
  std::atomic<int64_t> final_steps_{0};  // device_steps_done()
  // The plan thread: device plans checked beside the device thread's steps (fed by them, so joined after worker_).
  std::unique_ptr<DeviceWorker> plan_worker_;
  std::unique_ptr<DeviceWorker> worker_;  // last: joined before the state its steps use goes
};

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_POOL_REPLAY_H_

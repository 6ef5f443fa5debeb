// The data-path interface of the sharded-pool pipeline: what `replay --backend gpu|diff` runs beside the
// reference pool (replay/gpu_pool_path.h implements it on CUDA) and what the GPU stream property mirrors.
#ifndef KVSHARD_REPLAY_POOL_DATA_PATH_H_
#define KVSHARD_REPLAY_POOL_DATA_PATH_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/gather_plan.h"
#include "core/status.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::replay {

// A data path of the pipeline, driving every rank of the shard group in lockstep.
class PoolDataPath {
 public:
  virtual ~PoolDataPath() = default;
  // The set-up a path leaves out of its creation (a device context, its buffers): called once, before any call
  // below, on the thread that makes them; an error ends the replay.
  virtual Status Start() { return Status::Ok(); }
  // Of Start's seconds, the driver's start and the device context's (0 for a path without them): the rest is the
  // path's own buffers and streams. Read after Start returned.
  struct StartTimes {
    double driver_seconds = 0, context_seconds = 0;
  };
  virtual StartTimes start_times() const { return {}; }
  // "gpu (N ranks emulated on device 0)" and the like, for messages (known before Start).
  virtual std::string Name() const = 0;
  // begin_shard_extend of `batch`, in two halves. Plan builds the path's own plan (errors as the reference's): it
  // may run on another thread than every other call, while they run (not before Start returned; one Plan at a time).
  virtual StatusOr<GatherPlan> Plan(const ExtendBatch& batch) = 0;
  // Install makes `plan` (Plan's answer for `batch`) every rank's plan, with the chunk slots `out_cache_loc`; a
  // begin while an extend is in flight replaces it (SGLang's begin_shard_extend has no guard).
  virtual Status Install(const ExtendBatch& batch, const GatherPlan& plan,
                         const std::vector<int64_t>& out_cache_loc) = 0;
  // Plan then Install.
  StatusOr<GatherPlan> Begin(const ExtendBatch& batch, const std::vector<int64_t>& out_cache_loc) {
    KVSHARD_ASSIGN_OR_RETURN(GatherPlan plan, Plan(batch));
    KVSHARD_RETURN_IF_ERROR(Install(batch, plan, out_cache_loc));
    return plan;
  }
  // Whether the path can write `locs` (in an extend whose chunk slots are `out_cache_loc`, or outside one): its
  // rule for the record's error, checked before anything is written (thread-safe: uses only its arguments).
  virtual Status CheckWrite(bool in_extend, const std::vector<int64_t>& locs,
                            const std::vector<int64_t>& out_cache_loc) const {
    (void)in_extend, (void)locs, (void)out_cache_loc;
    return Status::Ok();
  }
  // set_kv_buffer on every rank; rows[b] holds locs.size() * buffers[b].row_bytes bytes (copied before it returns;
  // the write itself may still be running: the next read or End waits for it).
  virtual Status Write(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) = 0;
  // get_key_buffer(layer) then every buffer's rows at translate_loc_to_scratch(locs) on every rank ([rank][buffer]):
  // StartRead issues it and FinishRead waits for it and returns the rows, so the caller may do its own work in
  // between (a write before it may still be running too); an error of either ends the read.
  virtual Status StartRead(int64_t layer, const std::vector<int64_t>& locs) = 0;
  virtual StatusOr<std::vector<ref::BufferRows>> FinishRead() = 0;
  // FinishRead's rows as spans ([rank][buffer]) into memory the path owns until its next StartRead: a path whose
  // rows already sit in buffers of its own overrides it to skip FinishRead's copies (this one keeps FinishRead's).
  using RowSpans = std::vector<std::span<const uint8_t>>;
  virtual StatusOr<std::vector<RowSpans>> FinishReadSpans() {
    KVSHARD_ASSIGN_OR_RETURN(held_rows_, FinishRead());
    std::vector<RowSpans> spans;
    for (const ref::BufferRows& rank : held_rows_) {
      spans.emplace_back();
      for (const std::vector<uint8_t>& b : rank) spans.back().emplace_back(b);
    }
    return spans;
  }
  // StartRead then FinishRead.
  StatusOr<std::vector<ref::BufferRows>> Read(int64_t layer, const std::vector<int64_t>& locs) {
    KVSHARD_RETURN_IF_ERROR(StartRead(layer, locs));
    return FinishRead();
  }
  // end_shard_extend on every rank, once everything issued before it finished.
  virtual Status End() = 0;

  // Rows made and checked where the path keeps its rows (no row crosses to the host): whether the path has
  // WriteMade and ReadChecked (asked after Start). `replay --backend gpu` uses them where it can; for a path
  // without them it makes and checks the same rows on its device thread.
  virtual bool MakesRows() const { return false; }
  // set_kv_buffer of the payload rows of (layer, locs, generation) (PayloadRows of replay/pool_replay.h, from the
  // payload seed of the path's geometry), made by the path.
  virtual Status WriteMade(int64_t layer, const std::vector<int64_t>& locs, int64_t generation) {
    (void)layer, (void)locs, (void)generation;
    return Internal("this data path does not make rows");
  }
  // The first byte where a rank's read differs from the payload: rank, buffer, byte in that buffer's rows (row
  // byte / row_bytes), and the row of that buffer that holds it as read.
  // `generation`: the generation the row was checked against, given by a path that keeps generations (below).
  struct RowDifference {
    int64_t rank = 0, buffer = 0, byte = 0;
    std::vector<uint8_t> got_row;
    uint32_t generation = 0;
  };
  // Whether the path keeps the generation of every slot's last WriteMade itself (where its rows are): then the
  // checked reads below take no generations (an empty list, not read) and a RowDifference carries its row's, so the
  // caller keeps no table of last writes and hands none over. Asked after Start, on the thread that calls the path.
  virtual bool KeepsGenerations() const { return false; }
  // get_key_buffer(layer) then every buffer's rows at translate_loc_to_scratch(locs) on every rank, each compared
  // with the payload of (layer, locs[i], generations[i]) (the generation of the last write of the slot; 0: never
  // written, zero bytes; the path's own where it keeps generations): the first difference (rank, then buffer, then
  // byte), or none.
  virtual StatusOr<std::optional<RowDifference>> ReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                                                             const std::vector<uint32_t>& generations) {
    (void)layer, (void)locs, (void)generations;
    return Internal("this data path does not check rows");
  }
  // ReadChecked in two halves, so that several reads are checked before the caller waits once (replay's device
  // thread waits once per batch, not once per read): StartReadChecked issues the read and its check (an error: the
  // read failed), TakeChecked waits for every read started since the last TakeChecked and returns their answers
  // in order, each as ReadChecked's. At most kMaxPendingChecks reads are started between two TakeChecked. This
  // default checks each read at its start.
  static constexpr int kMaxPendingChecks = 16;
  using CheckAnswer = StatusOr<std::optional<RowDifference>>;
  virtual Status StartReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                                  const std::vector<uint32_t>& generations) {
    if (checked_.size() >= kMaxPendingChecks)
      return FailedPrecondition("more than ", kMaxPendingChecks, " checks pending");
    checked_.push_back(ReadChecked(layer, locs, generations));
    return Status::Ok();
  }
  virtual std::vector<CheckAnswer> TakeChecked() { return std::exchange(checked_, {}); }
  // Whether end_shard_extend may be a pending check (StartEndChecked), so that the device thread need not wait at
  // every batch's end; a constant of the path (asked on any thread, before Start too). A path that overrides
  // TakeChecked and says yes overrides StartEndChecked too.
  virtual bool EndsChecked() const { return false; }
  // end_shard_extend as a pending check: issues the end (an error: the end failed), its answer coming with
  // TakeChecked's in order with the reads', as no difference (ended) or End's error; it counts toward
  // kMaxPendingChecks. This default ends at once.
  virtual Status StartEndChecked() {
    if (checked_.size() >= kMaxPendingChecks)
      return FailedPrecondition("more than ", kMaxPendingChecks, " checks pending");
    const Status ended = End();
    checked_.push_back(ended.ok() ? CheckAnswer(std::optional<RowDifference>()) : CheckAnswer(ended));
    return Status::Ok();
  }

 private:
  std::vector<ref::BufferRows> held_rows_;  // what the default FinishReadSpans points into
  std::vector<CheckAnswer> checked_;        // the default StartReadChecked's answers
};

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_POOL_DATA_PATH_H_

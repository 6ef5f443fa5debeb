// PoolReplay's device steps (replay/pool_replay.h): each record's call of the device data path, at its record or on
// the device thread, what it found kept as a finding of its step, and the checked reads the thread answers later.
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "replay/pool_replay.h"
#include "replay/read_diff_text.h"
#include "core/pool_json.h"
#include "core/status.h"

namespace kvshard::replay {

Status PoolReplay::RunDeviceStep(size_t bytes, int64_t host_rows, std::function<Status()> step, StepKind kind) {
  if (!worker_) {
    Status s = step();
    if (!s.ok()) rows_compared_ -= host_rows;  // the record failed: its rows were not compared
    return s;
  }
  const StepAt at{steps_++, rows_compared_ - host_rows, host_rows};
  worker_->Submit(bytes, [this, at, kind, step = std::move(step)] {
    if (!device_started_) return;                     // the replay ends with the Start error at the next settle
    if (kind == StepKind::kSettles) ResolveChecks();  // its counts and findings come after theirs
    running_ = at;
    if (Status s = step(); !s.ok()) {
      ResolveChecks();  // the checks still pending came before it
      AddFinding(at, std::move(s));
    }
    // Release: the findings of the steps before it are visible to whoever sees the count.
    final_steps_.store(pending_checks_.empty() ? at.index + 1 : pending_checks_.front().step.index,
                       std::memory_order_release);
  });
  return Status::Ok();
}

std::vector<PoolReplay::DeviceFinding> PoolReplay::SettleDevice() {
  if (!worker_) return {};
  worker_->Settle();
  if (device_started_) ResolveChecks();  // the device thread is idle: its pending checks are this thread's now
  std::lock_guard<std::mutex> lock(findings_mu_);
  found_.store(false, std::memory_order_relaxed);
  return std::exchange(findings_, {});
}

Status PoolReplay::AwaitDeviceStart() {
  if (!worker_ || start_awaited_) return Status::Ok();
  worker_->Settle();  // the path's Start (and any decode write before the first extend)
  start_awaited_ = true;
  return device_started_ ? Status::Ok() : device_error_;  // the replay stops with it at this record's settle
}

Status PoolReplay::DeviceBegin(const ExtendBatch& batch, const std::vector<int64_t>& chunk, const GatherPlan& plan) {
  if (!pool_) {  // --backend gpu: the plan (the record's answer) came from the device, its installation is left
    const Status s = device_->Install(batch, plan, chunk);
    if (s.ok()) return s;
    return Mismatch("invariant: begin_shard_extend: ", device_->Name(), " failed to install its plan: ", s.message());
  }
  StatusOr<GatherPlan> device_plan = device_->Begin(batch, chunk);
  if (!device_plan.ok()) {
    return Mismatch("diff: begin_shard_extend: the reference accepted the batch, ", device_->Name(),
                    " failed: ", device_plan.status().message());
  }
  if (*device_plan == plan) return Status::Ok();
  const Json want = GatherPlanToJson(plan), got = GatherPlanToJson(*device_plan);
  for (const auto& [key, value] : want.items()) {
    if (got.at(key) != value)
      return Mismatch("diff: ", device_->Name(), " plan field ", key, " differs from the reference");
  }
  return Mismatch("diff: ", device_->Name(), " plan differs from the reference");
}

Status PoolReplay::DeviceWrite(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows,
                               int64_t generation) {
  Status s = Status::Ok();
  if (device_->MakesRows()) {
    s = device_->WriteMade(layer, locs, generation);
  } else if (pool_) {
    s = device_->Write(layer, locs, rows);
  } else {  // --backend gpu, a path that takes rows: made here, on the device thread
    s = device_->Write(layer, locs, PayloadRows(geometry_, layer, locs, generation));
  }
  if (s.ok()) return s;
  if (!pool_) {
    return Mismatch("invariant: set_kv_buffer: ", device_->Name(), " failed to write layer ", layer, ": ", s.message());
  }
  return Mismatch("diff: set_kv_buffer: the reference wrote layer ", layer, ", ", device_->Name(),
                  " failed: ", s.message());
}

void PoolReplay::CountDeviceRows(int64_t rows) {
  if (worker_) {
    device_rows_.fetch_add(rows, std::memory_order_relaxed);
  } else {
    rows_compared_ += rows;
  }
}

namespace {

// Whether a rank's read (spans per buffer) is `want`, byte for byte.
bool SameRows(const PoolDataPath::RowSpans& rank, const ref::BufferRows& want) {
  if (rank.size() != want.size()) return false;
  for (size_t b = 0; b < rank.size(); ++b) {
    if (!std::equal(rank[b].begin(), rank[b].end(), want[b].begin(), want[b].end())) return false;
  }
  return true;
}

std::string FirstSpanDiff(const PoolDataPath::RowSpans& rank, const ref::BufferRows& want, const PoolGeometry& g,
                          const std::vector<int64_t>& locs) {
  ref::BufferRows rows;
  for (std::span<const uint8_t> b : rank) rows.emplace_back(b.begin(), b.end());
  return FirstRowDiff(rows, want, g, locs);
}

}  // namespace

Status PoolReplay::DiffRead(int64_t layer, const std::vector<int64_t>& locs,
                            const std::vector<ref::BufferRows>& ref_rows, bool compare) {
  const Status started = device_->StartRead(layer, locs);
  StatusOr<std::vector<PoolDataPath::RowSpans>> got =
      started.ok() ? device_->FinishReadSpans() : StatusOr<std::vector<PoolDataPath::RowSpans>>(started);
  if (!compare) return Status::Ok();  // the reference failed: the record's error is the reference's
  if (!got.ok()) return ReadFailed(true, layer, got.status());
  for (size_t r = 0; r < ref_rows.size() && r < got->size(); ++r) {  // every byte of both paths, where they lie
    if (!SameRows((*got)[r], ref_rows[r])) {
      return Mismatch("diff: layer ", layer, " rank ", r, ": ", device_->Name(), " read differs from the reference at ",
                      FirstSpanDiff((*got)[r], ref_rows[r], geometry_, locs));
    }
  }
  CountDeviceRows(static_cast<int64_t>(locs.size() * ref_rows.size()));
  return Status::Ok();
}

Status PoolReplay::ReadFailed(bool diff, int64_t layer, const Status& error) const {
  if (diff) {
    return Mismatch("diff: get_key_buffer: the reference read layer ", layer, ", ", device_->Name(),
                    " failed: ", error.message());
  }
  return Mismatch("invariant: get_key_buffer: ", device_->Name(), " failed to read layer ", layer, ": ",
                  error.message());
}

Status PoolReplay::CheckedAnswer(bool diff, int64_t layer, const std::vector<int64_t>& locs,
                                 const std::vector<uint32_t>& generations, PoolDataPath::CheckAnswer d) {
  const int64_t m = static_cast<int64_t>(locs.size());
  if (!d.ok()) return ReadFailed(diff, layer, d.status());
  if (!d->has_value()) {
    CountDeviceRows(m * geometry_.shard_size);
    return Status::Ok();
  }
  const PoolDataPath::RowDifference& at = **d;
  if (diff) {  // where the device differs from the payload it differs from the reference's read, which is that payload
    return Mismatch("diff: layer ", layer, " rank ", at.rank, ": ", device_->Name(),
                    " read differs from the reference at ", PayloadDiffText(layer, locs, generations, at));
  }
  CountDeviceRows(m * at.rank);  // the ranks before it matched
  return Mismatch(
      SharedReadDiffers(layer, static_cast<size_t>(at.rank), PayloadDiffText(layer, locs, generations, at)));
}

Status PoolReplay::CheckedRead(bool diff, int64_t layer, std::vector<int64_t> locs, std::vector<uint32_t> generations) {
  if (!worker_) return CheckedAnswer(diff, layer, locs, generations, device_->ReadChecked(layer, locs, generations));
  if (Status s = device_->StartReadChecked(layer, locs, generations); !s.ok()) {
    return CheckedAnswer(diff, layer, locs, generations, s);
  }
  pending_checks_.push_back({running_, diff, layer, std::move(locs), std::move(generations)});
  if (pending_checks_.size() >= static_cast<size_t>(PoolDataPath::kMaxPendingChecks)) ResolveChecks();
  return Status::Ok();
}

void PoolReplay::ResolveChecks() {
  if (pending_checks_.empty()) return;
  std::vector<PendingCheck> pending = std::exchange(pending_checks_, {});
  std::vector<PoolDataPath::CheckAnswer> answers = device_->TakeChecked();
  for (size_t i = 0; i < pending.size(); ++i) {
    PendingCheck& p = pending[i];
    PoolDataPath::CheckAnswer a = i < answers.size()
                                      ? std::move(answers[i])
                                      : PoolDataPath::CheckAnswer(Internal("no answer for a pending check"));
    Status s = CheckedAnswer(p.diff, p.layer, p.locs, p.generations, std::move(a));
    if (!s.ok()) AddFinding(p.step, std::move(s));
  }
}

void PoolReplay::AddFinding(const StepAt& step, Status status) {
  // A gpu read counts the ranks it compared before the one that differs, as at its record.
  const int64_t device_rows = device_rows_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(findings_mu_);
  findings_.push_back({step.index, std::move(status), step.host_before + device_rows, step.host_rows});
  found_.store(true, std::memory_order_release);
}

std::string PoolReplay::PayloadDiffText(int64_t layer, const std::vector<int64_t>& locs,
                                        const std::vector<uint32_t>& generations,
                                        const PoolDataPath::RowDifference& at) const {
  const size_t b = static_cast<size_t>(at.buffer), row = static_cast<size_t>(at.byte / geometry_.buffers[b].row_bytes);
  const ref::BufferRows want = PayloadRowsOf(geometry_, layer, {locs[row]}, [&](size_t) { return generations[row]; });
  return RowDiffText(geometry_, locs, b, static_cast<size_t>(at.byte), at.got_row, want[b]);
}

Status PoolReplay::GpuRead(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& generations) {
  const int64_t m = static_cast<int64_t>(locs.size());
  const Status started = device_->StartRead(layer, locs);
  StatusOr<std::vector<PoolDataPath::RowSpans>> got =
      started.ok() ? device_->FinishReadSpans() : StatusOr<std::vector<PoolDataPath::RowSpans>>(started);
  if (!got.ok()) return ReadFailed(false, layer, got.status());
  const ref::BufferRows want = PayloadRowsOf(geometry_, layer, locs, [&](size_t i) { return generations[i]; });
  for (size_t r = 0; r < got->size(); ++r) {
    if (!SameRows((*got)[r], want)) {
      return Mismatch(SharedReadDiffers(layer, r, FirstSpanDiff((*got)[r], want, geometry_, locs)));
    }
    CountDeviceRows(m);
  }
  return Status::Ok();
}

Status PoolReplay::DeviceEnd() {
  Status s = device_->End();
  if (s.ok() || s.code() == StatusCode::kMismatch) return s;  // the path's own "invariant: ..." as it says it
  if (!pool_) return Mismatch("invariant: end_shard_extend: ", device_->Name(), " failed: ", s.message());
  return Mismatch("diff: end_shard_extend: the reference ended the batch, ", device_->Name(), " failed: ", s.message());
}

}  // namespace kvshard::replay

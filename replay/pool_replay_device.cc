// PoolReplay's device steps (replay/pool_replay.h): each record's call of the device data path, at its record or on
// the device thread, what it found kept as a finding of its step, and the checked reads the thread answers later.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "replay/pool_replay.h"
#include "replay/read_diff_text.h"
#include "core/json.h"
#include "core/pool_json.h"
#include "core/status.h"
#include "core/trace.h"

namespace kvshard::replay {

Status PoolReplay::RanAtRecord(int64_t host_rows, Status s) {
  if (!s.ok()) rows_compared_ -= host_rows;  // the record failed: its rows were not compared
  return s;
}

bool PoolReplay::StartDeviceStep(const StepAt& at, StepKind kind) {
  if (!device_started_) return false;               // the replay ends with the Start error at the next settle
  if (kind == StepKind::kSettles) ResolveChecks();  // its counts and findings come after theirs
  running_ = at;
  return true;
}

void PoolReplay::FinishDeviceStep(const StepAt& at, Status s) {
  if (!s.ok()) {
    ResolveChecks();  // the checks still pending came before it
    AddFinding(at, std::move(s));
  }
  // Checks wait for the next settling step or for the pending limit while the host is ahead; once this thread has
  // caught up, they are answered at once (a live trace's differences are not held back).
  if (!pending_checks_.empty() && worker_->Drained()) ResolveChecks();
  // Release: the findings of the steps before it are visible to whoever sees the count.
  final_steps_.store(pending_checks_.empty() ? at.index + 1 : pending_checks_.front().step.index,
                     std::memory_order_release);
}

std::vector<PoolReplay::DeviceFinding> PoolReplay::SettleDevice() {
  if (!worker_) return {};
  worker_->Settle();
  if (device_started_) ResolveChecks();  // the device thread is idle: its pending checks are this thread's now
  std::lock_guard<std::mutex> lock(findings_mu_);
  found_.store(false, std::memory_order_relaxed);
  return std::exchange(findings_, {});
}

Status PoolReplay::DeviceBegin(std::shared_ptr<const PlanCheck> check, const std::vector<int64_t>& chunk) {
  // The plan check first (on the plan thread it runs while the host's plan is installed); the host's plan is
  // installed whatever the device's plan is, and a difference of the plan is the step's first.
  const Status planned = StartPlanCheck(check);
  const Status s = device_->Install(check->batch, *check->want, chunk);
  if (!planned.ok()) return planned;
  if (s.ok()) return s;
  if (!pool_) {
    return Mismatch("invariant: begin_shard_extend: ", device_->Name(), " failed to install the plan: ", s.message());
  }
  return Mismatch("diff: begin_shard_extend: the reference installed its plan, ", device_->Name(),
                  " failed: ", s.message());
}

Status PoolReplay::StartPlanCheck(std::shared_ptr<const PlanCheck> check) {
  if (!worker_) return CheckDevicePlan(check->batch, check->want);
  auto answer = std::make_shared<Status>();
  size_t bytes = 0;
  for (const ExtendRequest& r : check->batch.requests) bytes += r.pages.size() * sizeof(int64_t);
  if (const StatusOr<GatherPlan>& want = check->want; want.ok()) {
    bytes += (want->mapped_pages.size() + want->mapped_scratch_pages.size()) * sizeof(int64_t);
    for (const RankSend& r : want->ranks) bytes += (r.send_local_pages.size() + r.send_rows.size()) * sizeof(int64_t);
  }
  plan_worker_->Submit(
      bytes, [this, answer, check = std::move(check)] { *answer = CheckDevicePlan(check->batch, check->want); });
  plan_worker_->HandOver();  // at once: the plan thread works while this thread installs and moves rows
  AddPendingCheck({running_, pool_.has_value(), 0, {}, {}, std::move(answer)});
  return Status::Ok();
}

Status PoolReplay::CheckDevicePlan(const ExtendBatch& batch, const StatusOr<GatherPlan>& want) const {
  const StatusOr<GatherPlan> got = device_->Plan(batch);
  const char* prefix = pool_ ? "diff" : "invariant";
  const char* host = pool_ ? "the reference" : "the host planner";
  if (!want.ok()) {
    if (!got.ok() && got.status().code() == want.status().code() && got.status().message() == want.status().message())
      return Status::Ok();
    return Mismatch(prefix, ": begin_shard_extend: ", host, " refused the batch (", want.status().message(), "), ",
                    device_->Name(), got.ok() ? " planned it" : StrCat(" failed: ", got.status().message()));
  }
  if (!got.ok()) {
    return Mismatch(prefix, ": begin_shard_extend: ", host, " planned the batch, ", device_->Name(),
                    " failed: ", got.status().message());
  }
  if (*got == *want) return Status::Ok();
  // The first field and index that differ, as an expect mismatch names them.
  int64_t compared = 0;
  std::string where;
  if (const auto m = MatchExpect(GatherPlanToJson(*want), GatherPlanToJson(*got), &compared)) {
    where = StrCat(m->path, ": got ", m->GotText(), ", expected ", m->ExpectedText());
  } else {  // fields the JSON form leaves out
    where =
        StrCat("shard_size / page_size / page_pos_size: got ", got->shard_size, " / ", got->page_size, " / ",
               got->page_pos_size, ", expected ", want->shard_size, " / ", want->page_size, " / ", want->page_pos_size);
  }
  return Mismatch(prefix, ": begin_shard_extend: ", device_->Name(), " plan differs from ", host, "'s at ", where);
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

Status PoolReplay::CheckedRead(bool diff, int64_t layer, SharedLocs locs, std::vector<uint32_t> generations) {
  if (!worker_) return CheckedAnswer(diff, layer, *locs, generations, device_->ReadChecked(layer, *locs, generations));
  if (Status s = device_->StartReadChecked(layer, *locs, generations); !s.ok()) {
    return CheckedAnswer(diff, layer, *locs, generations, s);
  }
  AddPendingCheck({running_, diff, layer, std::move(locs), std::move(generations)});
  return Status::Ok();
}

void PoolReplay::ResolveChecks() {
  if (pending_checks_.empty()) return;
  std::vector<PendingCheck> pending = std::exchange(pending_checks_, {});
  // Reads and ends are the path's checks, answered by TakeChecked; plans are the plan thread's.
  const bool path_checks =
      std::any_of(pending.begin(), pending.end(), [](const PendingCheck& p) { return !p.plan_answer; });
  const bool plans = std::any_of(pending.begin(), pending.end(), [](const PendingCheck& p) { return !!p.plan_answer; });
  std::vector<PoolDataPath::CheckAnswer> answers;
  if (path_checks) {
    answers = device_->TakeChecked();
    checks_taken_.fetch_add(1, std::memory_order_relaxed);
  }
  if (plans) plan_worker_->Settle();  // their answers are written
  size_t next_answer = 0;
  for (PendingCheck& p : pending) {
    Status s = Status::Ok();
    if (p.plan_answer) {
      s = std::move(*p.plan_answer);
    } else {
      PoolDataPath::CheckAnswer a = next_answer < answers.size()
                                        ? std::move(answers[next_answer])
                                        : PoolDataPath::CheckAnswer(Internal("no answer for a pending check"));
      ++next_answer;
      if (!p.end) {
        s = CheckedAnswer(p.diff, p.layer, *p.locs, p.generations, std::move(a));
      } else if (a.ok() && a->has_value()) {
        s = EndAnswer(Internal("a row difference as the answer of an end"));
      } else {
        s = EndAnswer(a.status());
      }
    }
    if (!s.ok()) AddFinding(p.step, std::move(s));
  }
  KeepSpareLists(&pending);
}

void PoolReplay::KeepSpareLists(std::vector<PendingCheck>* checks) {
  for (PendingCheck& p : *checks) {
    const size_t capacity = p.generations.capacity();
    if (capacity == 0 || capacity > kSpareListInts || spare_lists_.size() == kSpareLists) continue;
    p.generations.clear();
    spare_lists_.push_back(std::move(p.generations));
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
  // The generation the row was checked against: the caller's list, or the path's own (a path that keeps them).
  const int64_t generation = generations.empty() ? at.generation : generations[row];
  const ref::BufferRows want = PayloadRowsOf(geometry_, layer, {locs[row]}, [&](size_t) { return generation; });
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
  if (!worker_ || !device_->EndsChecked()) return EndAnswer(device_->End());
  if (Status s = device_->StartEndChecked(); !s.ok()) return EndAnswer(s);
  AddPendingCheck({running_, pool_.has_value(), 0, {}, {}, nullptr, /*end=*/true});
  return Status::Ok();
}

Status PoolReplay::EndAnswer(const Status& s) const {
  if (s.ok() || s.code() == StatusCode::kMismatch) return s;  // the path's own "invariant: ..." as it says it
  if (!pool_) return Mismatch("invariant: end_shard_extend: ", device_->Name(), " failed: ", s.message());
  return Mismatch("diff: end_shard_extend: the reference ended the batch, ", device_->Name(), " failed: ", s.message());
}

void PoolReplay::AddPendingCheck(PendingCheck check) {
  pending_checks_.push_back(std::move(check));
  if (pending_checks_.size() >= static_cast<size_t>(PoolDataPath::kMaxPendingChecks)) ResolveChecks();
}

}  // namespace kvshard::replay

// `replay --backend diff|gpu` with the device's steps on a thread of their own (replay/device_worker.h) reports what
// the same replay reports with every step at its record: a data path on the host (the reference pool, with faults
// injected at drawn calls: a failed or altered plan, a failed install, a failed write, a flipped byte or a failed
// read, a failed end or the path's own invariant), on generated traces with or without a corrupted expect, gives
// the same end, the same mismatches in the same order and the same counts (records, fields, mismatches, rows
// compared), stopping at the first mismatch and with --keep-going, whether the path answers a batch's end at once or
// as a pending check taken with later batches' reads. Under gpu the path's plan is made on the
// checking thread and every read is checked against the unsharded baseline on the device thread.
#include <chrono>
#include <map>
#include <optional>
#include <ostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/host_pool_path.h"
#include "replay/pool_data_path.h"
#include "replay/replayer.h"
#include "replay/trace_gen.h"
#include "core/status.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

// A fault at call number kEndFault + k lands on the k-th end (the ends' call numbers depend on the trace's layers).
constexpr int64_t kEndFault = 1'000'000;

// What a FaultyHostPath reached: ends answered after a later check had started, ends that failed at their take.
struct PathStats {
  int64_t ends_taken_late = 0, ends_failed_at_take = 0;
};

// kFailBegin, kAlterPlan and kPlanRefused (a plan where the reference refuses the batch) are Plan's faults, the others
// those of the calls the device thread makes.
enum class Fault {
  kFailBegin,
  kAlterPlan,
  kPlanRefused,
  kFailInstall,
  kFailWrite,
  kFlipByte,
  kFailRead,
  kFailEnd,
  kEndInvariant
};

// The reference pool as a device data path (replay/host_pool_path.h), wrong where `faults` (call number -> fault)
// say; `delay_every` sleeps a little at every such call, so the device thread falls behind the host by varying
// amounts. Plan calls are numbered apart from the others (with a device thread Plan runs on the plan thread, the
// others on the device thread), so a fault lands on the same call whichever thread makes it. With `makes_rows` it
// stands for a path that makes its rows and checks its reads (the GPU path's contract): WriteMade and ReadChecked
// take the faults of Write and of a read. With `keeps_generations` too, it keeps each slot's last WriteMade
// generation itself (the GPU path's table) and its checks take none. With `ends_checked` its ends are pending checks
// too (StartEndChecked); `stats` counts what the property should reach.
class FaultyHostPath : public replay::PoolDataPath {
 public:
  FaultyHostPath(std::unique_ptr<replay::PoolDataPath> inner, const replay::PoolGeometry& g, bool makes_rows,
                 bool keeps_generations, std::map<int64_t, Fault> faults, int64_t delay_every, bool start_fails,
                 bool ends_checked, PathStats* stats)
      : inner_(std::move(inner)),
        geometry_(g),
        makes_rows_(makes_rows),
        keeps_generations_(makes_rows && keeps_generations),
        faults_(std::move(faults)),
        delay_every_(delay_every),
        start_fails_(start_fails),
        ends_checked_(ends_checked),
        stats_(stats != nullptr ? stats : &own_stats_) {}

  Status Start() override { return start_fails_ ? Unavailable("injected: no device to start") : inner_->Start(); }

  std::string Name() const override { return "host path (faults injected)"; }

  StatusOr<GatherPlan> Plan(const ExtendBatch& batch) override {
    const auto fault = Next(&plan_calls_);
    if (fault == Fault::kFailBegin) return Internal("injected: begin failed");
    StatusOr<GatherPlan> plan = inner_->Plan(batch);
    if (!plan.ok() && fault == Fault::kPlanRefused) return GatherPlan();
    if (plan.ok() && fault == Fault::kAlterPlan) ++plan->trash_page;
    return plan;
  }

  Status Install(const ExtendBatch& batch, const GatherPlan& plan, const std::vector<int64_t>& out_cache_loc) override {
    if (Next() == Fault::kFailInstall) return Internal("injected: install failed");
    return inner_->Install(batch, plan, out_cache_loc);
  }

  Status Write(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) override {
    if (Next() == Fault::kFailWrite) return Internal("injected: write failed");
    return inner_->Write(layer, locs, rows);
  }

  Status StartRead(int64_t layer, const std::vector<int64_t>& locs) override {
    read_fault_ = Next();
    return inner_->StartRead(layer, locs);
  }

  StatusOr<std::vector<ref::BufferRows>> FinishRead() override {
    StatusOr<std::vector<ref::BufferRows>> rows = inner_->FinishRead();
    if (read_fault_ == Fault::kFailRead) return Internal("injected: read failed");
    if (!rows.ok() || read_fault_ != Fault::kFlipByte) return rows;
    for (ref::BufferRows& rank : *rows) {
      for (std::vector<uint8_t>& buffer : rank) {
        if (!buffer.empty()) {
          buffer[buffer.size() / 2] ^= 0x10;
          return rows;
        }
      }
    }
    return rows;
  }

  bool MakesRows() const override { return makes_rows_; }

  // The generation is kept before the write (the GPU path marks its table first too), so a failed write leaves the
  // kept generation where the caller's own table would have it.
  Status WriteMade(int64_t layer, const std::vector<int64_t>& locs, int64_t generation) override {
    if (keeps_generations_) {
      for (int64_t loc : locs) last_write_[{layer, loc}] = static_cast<uint32_t>(generation);
    }
    if (Next() == Fault::kFailWrite) return Internal("injected: write failed");
    return inner_->Write(layer, locs, replay::PayloadRows(geometry_, layer, locs, generation));
  }

  bool KeepsGenerations() const override { return keeps_generations_; }

  // The read as StartRead and FinishRead make it (faults included), checked as the GPU path checks it: against the
  // caller's generations, or (keeping them) its own, which the difference then carries.
  StatusOr<std::optional<RowDifference>> ReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                                                     const std::vector<uint32_t>& generations) override {
    if (keeps_generations_ && !generations.empty()) return Internal("generations handed to a path that keeps them");
    std::vector<uint32_t> kept;
    if (keeps_generations_) {
      for (int64_t loc : locs) {
        const auto it = last_write_.find({layer, loc});
        kept.push_back(it == last_write_.end() ? 0 : it->second);
      }
    }
    KVSHARD_RETURN_IF_ERROR(StartRead(layer, locs));
    KVSHARD_ASSIGN_OR_RETURN(std::vector<ref::BufferRows> rows, FinishRead());
    std::optional<RowDifference> d =
        replay::FirstPayloadDifference(geometry_, layer, locs, keeps_generations_ ? kept : generations, rows);
    if (d && keeps_generations_) {
      d->generation = kept[static_cast<size_t>(d->byte / geometry_.buffers[d->buffer].row_bytes)];
    }
    return d;
  }

  // Deferred checks (the device thread's): a failed read fails at its start or at its take, by its call's number,
  // as the GPU path's fail either at the launch or at the wait.
  Status StartReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                          const std::vector<uint32_t>& generations) override {
    if (pending_.size() >= kMaxPendingChecks) return FailedPrecondition("more than ", kMaxPendingChecks, " pending");
    CheckAnswer answer = ReadChecked(layer, locs, generations);
    if (!answer.ok() && calls_ % 2 == 0) return answer.status();
    pending_.push_back(std::move(answer));
    pending_is_end_.push_back(false);
    return Status::Ok();
  }
  std::vector<CheckAnswer> TakeChecked() override {
    for (size_t i = 0; i + 1 < pending_is_end_.size(); ++i) stats_->ends_taken_late += pending_is_end_[i] ? 1 : 0;
    pending_is_end_.clear();
    return std::exchange(pending_, {});
  }

  // An end as a pending check: a failed end fails at its start or at its take, every other end (the ends' call
  // numbers all have one parity with a fixed layer count).
  bool EndsChecked() const override { return ends_checked_; }
  Status StartEndChecked() override {
    if (pending_.size() >= kMaxPendingChecks) return FailedPrecondition("more than ", kMaxPendingChecks, " pending");
    const Status ended = End();
    const bool at_start = ends_++ % 2 == 0;
    if (!ended.ok() && at_start) return ended;
    pending_.push_back(ended.ok() ? CheckAnswer(std::optional<RowDifference>()) : CheckAnswer(ended));
    pending_is_end_.push_back(true);
    stats_->ends_failed_at_take += ended.ok() ? 0 : 1;
    return Status::Ok();
  }

  Status End() override {
    std::optional<Fault> fault = Next();
    if (const auto it = faults_.find(kEndFault + end_calls_++); !fault && it != faults_.end()) fault = it->second;
    KVSHARD_RETURN_IF_ERROR(inner_->End());
    if (fault == Fault::kFailEnd) return Internal("injected: end failed");
    if (fault == Fault::kEndInvariant) return Mismatch("invariant: injected: rows skipped");
    return Status::Ok();
  }

 private:
  // This call's fault (none: an unused value, or a fault of the other kind of call).
  std::optional<Fault> Next(int64_t* calls = nullptr) {
    const bool plan = calls != nullptr;
    const int64_t call = plan ? (*calls)++ : calls_++;
    if (delay_every_ > 0 && call % delay_every_ == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    const auto it = faults_.find(call);
    if (it == faults_.end()) return std::nullopt;
    const bool plan_fault =
        it->second == Fault::kFailBegin || it->second == Fault::kAlterPlan || it->second == Fault::kPlanRefused;
    if (plan != plan_fault) return std::nullopt;
    return it->second;
  }

  std::unique_ptr<replay::PoolDataPath> inner_;
  std::vector<CheckAnswer> pending_;  // started checks' answers
  std::vector<bool> pending_is_end_;  // whether each is an end's
  replay::PoolGeometry geometry_;
  bool makes_rows_ = false;
  bool keeps_generations_ = false;
  std::map<std::pair<int64_t, int64_t>, uint32_t> last_write_;  // (layer, slot) -> last WriteMade generation
  std::map<int64_t, Fault> faults_;
  int64_t delay_every_ = 0;
  bool start_fails_ = false;
  bool ends_checked_ = false;
  PathStats own_stats_;  // where the counts go when the caller wants none
  PathStats* stats_ = &own_stats_;
  int64_t ends_ = 0;        // StartEndChecked's calls so far
  int64_t end_calls_ = 0;   // End's
  int64_t calls_ = 0;       // the device thread's calls (all of them at the record)
  int64_t plan_calls_ = 0;  // Plan's
  std::optional<Fault> read_fault_;
};

// The property replay options of `backend` with a FaultyHostPath (counting into `stats`, if given) as its device.
replay::ReplayOptions FaultyOptions(replay::Backend backend, bool device_thread, std::map<int64_t, Fault> faults,
                                    int64_t delay_every, bool start_fails, bool makes_rows, bool ends_checked,
                                    PathStats* stats, bool keeps_generations) {
  replay::ReplayOptions options = PropertyReplayOptions();
  options.backend = backend;
  options.device_thread = device_thread;
  options.make_device = [=](const replay::PoolGeometry& g) -> StatusOr<std::unique_ptr<replay::PoolDataPath>> {
    KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<replay::PoolDataPath> inner, replay::CreateHostPoolPath(g));
    return std::unique_ptr<replay::PoolDataPath>(new FaultyHostPath(
        std::move(inner), g, makes_rows, keeps_generations, faults, delay_every, start_fails, ends_checked, stats));
  };
  return options;
}

Outcome RunReplay(replay::Backend backend, const std::string& text, const std::map<int64_t, Fault>& faults,
                  int64_t delay_every, bool device_thread, bool keep_going, bool start_fails = false,
                  bool makes_rows = false, bool ends_checked = false, PathStats* stats = nullptr,
                  bool keeps_generations = false) {
  return ReplayOutcome(text,
                       FaultyOptions(backend, device_thread, faults, delay_every, start_fails, makes_rows, ends_checked,
                                     stats, keeps_generations),
                       keep_going);
}

// A `kvshard gen` trace of `records` records with a 2-layer pipeline.
std::string TwoLayerTrace(uint64_t seed, int64_t records) {
  replay::TraceGenOptions o;
  o.seed = seed;
  o.records = records;
  o.num_layers = 2;
  std::ostringstream trace;
  KVSHARD_CHECK(replay::GenerateTrace(o, trace).ok());
  return trace.str();
}

KVSHARD_PROP(DeviceThreadProps, TheDeviceThreadChangesNoOutcome, ()) {
  // A third of the traces have 17-20 layers: batches of more reads than the device thread leaves pending
  // (kMaxPendingChecks).
  const bool deep = *rc::gen::element(false, false, true);
  std::string text = deep ? ArbitraryPipelineTrace(/*max_records=*/119, /*max_layers=*/20, /*min_layers=*/17)
                          : ArbitraryPipelineTrace(/*max_records=*/119, /*max_layers=*/3);
  RC_CLASSIFY(MostReadsInABatch(text) > replay::PoolDataPath::kMaxPendingChecks, "a batch of more than 16 reads");
  if (*rc::gen::arbitrary<bool>()) text = CorruptOneExpect(text);
  std::map<int64_t, Fault> faults;
  const int64_t n_faults = *rc::gen::inRange<int64_t>(0, 7);
  for (int64_t i = 0; i < n_faults; ++i) {
    faults[*rc::gen::inRange<int64_t>(0, 24)] =
        *rc::gen::element(Fault::kFailBegin, Fault::kAlterPlan, Fault::kFailInstall, Fault::kFailWrite,
                          Fault::kFlipByte, Fault::kFailRead, Fault::kFailEnd, Fault::kEndInvariant);
  }
  if (*rc::gen::element(false, false, true)) {  // a batch's end that fails, wherever the ends fall
    faults[kEndFault + *rc::gen::inRange<int64_t>(0, 6)] = *rc::gen::element(Fault::kFailEnd, Fault::kEndInvariant);
  }
  if (*rc::gen::element(false, false, true)) {  // a batch the host refuses, mostly; half the time the device plans it
    int64_t begin = -1;
    text = ShiftOnePrefix(text, &begin);
    if (begin >= 0 && *rc::gen::arbitrary<bool>()) faults.erase(begin);
    if (begin >= 0 && *rc::gen::arbitrary<bool>())
      faults[begin] = *rc::gen::element(Fault::kFailBegin, Fault::kPlanRefused);
  }
  const int64_t delay_every = *rc::gen::element<int64_t>(0, 1, 7);
  const replay::Backend backend = *rc::gen::element(replay::Backend::kDiff, replay::Backend::kGpu);
  const bool makes_rows = *rc::gen::arbitrary<bool>();
  const bool keeps_generations = makes_rows && *rc::gen::arbitrary<bool>();
  const bool ends_checked = *rc::gen::arbitrary<bool>();
  RC_CLASSIFY(backend == replay::Backend::kGpu, "--backend gpu");
  RC_CLASSIFY(makes_rows, "rows made and checked by the path");
  RC_CLASSIFY(keeps_generations, "the path keeps the generations");
  RC_CLASSIFY(ends_checked, "ends answered as pending checks");
  for (const bool keep_going : {false, true}) {
    const Outcome at_record = RunReplay(backend, text, faults, delay_every, /*device_thread=*/false, keep_going, false,
                                        makes_rows, ends_checked, nullptr, keeps_generations);
    PathStats stats;
    const Outcome threaded = RunReplay(backend, text, faults, delay_every, /*device_thread=*/true, keep_going, false,
                                       makes_rows, ends_checked, &stats, keeps_generations);
    RC_CLASSIFY(stats.ends_taken_late > 0, "an end answered after a later check started");
    RC_CLASSIFY(stats.ends_failed_at_take > 0, "an end failed at its take");
    RC_CLASSIFY(at_record.mismatches > 0, "mismatches");
    RC_CLASSIFY(at_record.mismatches > 1, "several mismatches");
    RC_CLASSIFY(at_record.first_mismatch.find(": diff: ") != std::string::npos, "a device difference first");
    RC_CLASSIFY(at_record.first_mismatch.find(": invariant: layer") != std::string::npos, "a read differs first");
    RC_CLASSIFY(at_record.first_mismatch.find("failed") != std::string::npos, "a failed device call first");
    RC_CLASSIFY(at_record.first_mismatch.find(": invariant: injected") != std::string::npos, "the path's invariant");
    RC_CLASSIFY(at_record.first_mismatch.find("plan differs") != std::string::npos, "the device's plan differs first");
    RC_CLASSIFY(ToString(at_record).find("page-aligned") != std::string::npos, "the host refuses a batch");
    RC_CLASSIFY(ToString(at_record).find("refused the batch") != std::string::npos,
                "the device fails otherwise on a batch the host refuses");
    if (!(at_record == threaded)) {
      RC_FAIL(StrCat(keep_going ? "--keep-going" : "stop at the first", ": at each record:\n", ToString(at_record),
                     "\nwith the device thread:\n", ToString(threaded)));
    }
    if (makes_rows) {  // the path's own check reports what comparing its rows on the host reports
      const Outcome host_checked =
          RunReplay(backend, text, faults, delay_every, true, keep_going, false, false, ends_checked);
      if (!(host_checked == threaded)) {
        RC_FAIL(StrCat(keep_going ? "--keep-going" : "stop at the first", ": rows checked on the host:\n",
                       ToString(host_checked), "\nby the path:\n", ToString(threaded)));
      }
    }
  }
}

// --backend gpu checks a read against the last write of each slot (PoolReplay's last_write_) where ref checks it
// against the unsharded pool's rows: on the reference pool as the device path, both give the same verdicts, texts
// and counts, on traces with a dropped write (stale scratch rows) or a corrupted expect, stopping and with
// --keep-going, with the device thread or without.
KVSHARD_PROP(DeviceThreadProps, GpuBackendOnTheReferencePathReportsWhatRefReports, ()) {
  std::string text = ArbitraryPipelineTrace(/*max_records=*/149, /*max_layers=*/4);
  if (*rc::gen::arbitrary<bool>()) text = DropOneWrite(text);
  if (*rc::gen::arbitrary<bool>()) text = CorruptOneExpect(text);
  const bool device_thread = *rc::gen::arbitrary<bool>();
  for (const bool keep_going : {false, true}) {
    const Outcome ref = RunReplay(replay::Backend::kRef, text, {}, 0, false, keep_going);
    const bool makes_rows = *rc::gen::arbitrary<bool>();
    const bool keeps_generations = makes_rows && *rc::gen::arbitrary<bool>();  // checked against the path's table
    RC_CLASSIFY(keeps_generations, "the path keeps the generations");
    const Outcome gpu = RunReplay(replay::Backend::kGpu, text, {}, 0, device_thread, keep_going, false, makes_rows,
                                  false, nullptr, keeps_generations);
    RC_CLASSIFY(ref.first_mismatch.find(": invariant: layer") != std::string::npos, "a read differs first");
    RC_CLASSIFY(ref.mismatches > 0, "mismatches");
    RC_CLASSIFY(ref.rows_compared > 0, "rows compared");
    if (!(ref == gpu)) {
      RC_FAIL(StrCat(keep_going ? "--keep-going" : "stop at the first", ": ref:\n", ToString(ref), "\ngpu:\n",
                     ToString(gpu)));
    }
  }
}

// The summary's device figures: the path's set-up is timed, and a path that checks its reads where its rows are has
// its pending checks taken at least once and at most once per read or end (once per batch or less when its ends are
// pending checks too: the count the next GPU run compares).
TEST(DeviceThreadTest, TheReportCountsTheTakesOfPendingChecks) {
  const std::string text = TwoLayerTrace(11, 400);
  const auto count = [&](const std::string& needle) {
    int64_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  };
  const int64_t reads = count(R"("op":"get_key_buffer")"), ends = count(R"("op":"end_shard_extend")");
  ASSERT_GT(reads, 0);
  for (const bool ends_checked : {false, true}) {
    const replay::ReplayOptions options = FaultyOptions(replay::Backend::kGpu, /*device_thread=*/true, {}, 0, false,
                                                        /*makes_rows=*/true, ends_checked, nullptr,
                                                        /*keeps_generations=*/ends_checked);
    std::istringstream in(text);
    replay::ReplayReport report;
    ASSERT_TRUE(replay::ReplayStream(in, options, &report).ok()) << "ends checked " << ends_checked;
    EXPECT_TRUE(report.device_thread);
    EXPECT_GE(report.device_setup_seconds, 0);
    EXPECT_GE(report.device_checks_taken, 1) << "ends checked " << ends_checked;
    EXPECT_LE(report.device_checks_taken, reads + (ends_checked ? ends : 0)) << "ends checked " << ends_checked;
  }
}

// A path that cannot start ends the replay with its error, whether it starts at creation or on the device thread
// (where the first records are checked meanwhile): exit 3's Unavailable, its message as the path gave it.
TEST(DeviceThreadTest, APathThatCannotStartEndsTheReplayWithItsError) {
  const std::string text = TwoLayerTrace(7, 60);
  for (const replay::Backend backend : {replay::Backend::kDiff, replay::Backend::kGpu}) {
    for (const bool device_thread : {false, true}) {
      for (const bool keep_going : {false, true}) {
        const Outcome out = RunReplay(backend, text, {}, 0, device_thread, keep_going, /*start_fails=*/true);
        EXPECT_EQ(out.status, StrCat(static_cast<int>(StatusCode::kUnavailable), " injected: no device to start"))
            << "gpu " << (backend == replay::Backend::kGpu) << " device_thread " << device_thread << " keep_going "
            << keep_going;
        EXPECT_EQ(out.mismatches, 0);
      }
    }
  }
}

}  // namespace
}  // namespace kvshard::props

// A record's expect and invariant checks (Replayer::Replay, which fills the record's ReplayMismatch) and
// ReplayStream over a whole trace, with a truncated last record reported after every complete one was checked.
#include <chrono>
#include <cstring>
#include <istream>
#include <optional>
#include <thread>
#include <utility>

#include "core/pool_json.h"
#include "core/trace_read_ahead.h"
#include "replay/op_table.h"
#include "replay/replayer.h"

namespace kvshard::replay {
namespace {

// `at` (a record's line, op and meta) as the Mismatch an executor, an invariant check or a device step returned:
// "invariant: <what>" or "diff: <what>" (the leading word is the field these messages are built with).
ReplayMismatch WithModelMessage(ReplayMismatch at, const std::string& message) {
  const size_t colon = message.find(": ");
  at.field = colon == std::string::npos ? "invariant" : message.substr(0, colon);
  at.detail = colon == std::string::npos ? message : message.substr(colon + 2);
  return at;
}

ReplayMismatch ModelMismatch(const TraceRecord& record, const std::string& message) {
  return WithModelMessage(RecordMismatch(record, "", ""), message);
}

// A malformed expect.error is the record's own error, before anything runs.
Status CheckExpectError(const TraceRecord& record) {
  const Json* expect = record.json.contains("expect") ? &record.json.at("expect") : nullptr;
  if (expect && expect->contains("error") && (!expect->at("error").is_string() || expect->size() != 1)) {
    return AtLine(record.line, InvalidArgument("expect.error: must be the only key, a string"));
  }
  return Status::Ok();
}

// A typed answer against its record's expect: nullopt when the fields surely equal it (their scalars counted in
// *fields, nothing built), else the answer as JSON, or its error, for Judge to decide.
std::optional<StatusOr<Json>> UnlessSurelyMatches(const StatusOr<FieldAnswer>& answer, const Json* expect,
                                                  int64_t* fields, const TypedExpect* typed = nullptr) {
  if (answer.ok() && expect != nullptr &&
      (typed != nullptr ? answer->SurelyMatches(*typed, fields) : answer->SurelyMatches(*expect, fields))) {
    return std::nullopt;
  }
  return answer.ok() ? StatusOr<Json>(answer->ToJson()) : StatusOr<Json>(answer.status());
}

}  // namespace

Status Replayer::Fail(ReplayMismatch mismatch) {
  last_mismatch_ = std::move(mismatch);
  return Mismatch(MismatchText(last_mismatch_));
}

Status Replayer::Judge(const TraceRecord& record, const StatusOr<const ReplayOp*>& op, const Status* shape,
                       StatusOr<Json>* got, int64_t* fields, ReplayMismatch* mismatch) const {
  const Json* expect = record.json.contains("expect") ? &record.json.at("expect") : nullptr;
  const bool expect_error = expect && expect->contains("error");
  const auto fail = [mismatch](ReplayMismatch m) {
    *mismatch = std::move(m);
    return Mismatch(MismatchText(*mismatch));
  };
  if (!got->ok()) {
    const std::string& message = got->status().message();
    if (got->status().code() == StatusCode::kMismatch) return fail(ModelMismatch(record, message));
    const Status checked = !op.ok() ? op.status() : shape ? *shape : CheckRecord(record.json, **op, budget_);
    if (!checked.ok() || (!expect_error && !expect)) return AtLine(record.line, got->status());
    if (!expect_error) {
      return fail(
          RecordMismatch(record, "error", StrCat("expected success, got \"", message, "\""), std::nullopt, message));
    }
    const std::string want = expect->at("error").get<std::string>();
    ++*fields;
    if (message.find(want) == std::string::npos) {
      return fail(RecordMismatch(record, "error",
                                 StrCat("expected a message containing ", QuoteInput(want), ", got \"", message, "\""),
                                 want, message));
    }
    return Status::Ok();
  }
  if (expect_error) {
    const std::string want = expect->at("error").get<std::string>();
    return fail(RecordMismatch(record, "error",
                               StrCat("expected an error containing ", QuoteInput(want), ", got success"), want));
  }
  if (expect) {
    if (auto m = MatchExpect(*expect, **got, fields)) return fail(ExpectValueMismatch(record, *m));
  }
  return Status::Ok();
}

void Replayer::PrepareInputs(const Json& rec, const ReplayOp& op, PreparedRecord* p) {
  for (const FieldShape& f : op.fields) {
    if (f.shape != Shape::kIntList || !rec.contains(f.key)) continue;
    if (p->typed_ints.size() == p->typed_int_count) p->typed_ints.emplace_back();
    PreparedRecord::TypedInts& t = p->typed_ints[p->typed_int_count++];
    t.key = f.key;
    JsonIntsInto(rec.at(f.key), &t.ints);  // the list this record had last time: its memory reused
  }
  if (rec.contains("requests")) {
    p->requests = ExtendRequestsFromJson(rec.at("requests"));
    p->has_requests = true;
  }
}

PreparedRecord::TypedInts* Replayer::TakeTyped(const char* key) {
  if (current_ == nullptr) return nullptr;
  for (size_t i = 0; i < current_->typed_int_count; ++i) {
    PreparedRecord::TypedInts& t = current_->typed_ints[i];
    if (t.key != nullptr && std::strcmp(t.key, key) == 0) {
      t.key = nullptr;
      return &t;
    }
  }
  return nullptr;
}

const std::vector<int64_t>& Replayer::TakeInts(const Json& rec, const char* key, std::vector<int64_t>* holder) {
  PreparedRecord::TypedInts* t = TakeTyped(key);
  if (t == nullptr) {
    JsonIntsInto(rec.at(key), holder);
    return *holder;
  }
  if (t->ints.size() <= PreparedRecord::kKeptInts) return t->ints;  // its reader reuses the memory
  *holder = std::move(t->ints);                                     // a long list is not kept for the record's next use
  return *holder;
}

PoolReplay::SharedLocs Replayer::TakeLocs(const Json& rec) {
  if (!rec.contains("locs")) return nullptr;
  // Moved, not copied: the list lives on with the device steps that read it.
  PreparedRecord::TypedInts* t = TakeTyped("locs");
  return std::make_shared<const std::vector<int64_t>>(t != nullptr ? std::move(t->ints) : JsonInts(rec.at("locs")));
}

StatusOr<const std::vector<ExtendRequest>*> Replayer::TakeRequests(const Json& rec,
                                                                   std::vector<ExtendRequest>* holder) {
  if (current_ != nullptr && current_->has_requests) {
    current_->has_requests = false;
    if (!current_->requests.ok()) return current_->requests.status();
    size_t pages = 0;
    for (const ExtendRequest& r : *current_->requests) pages += r.pages.size();
    if (pages <= PreparedRecord::kKeptInts) return &*current_->requests;  // as TakeInts keeps a list
    *holder = std::move(*current_->requests);
    return holder;
  }
  KVSHARD_ASSIGN_OR_RETURN(*holder, ExtendRequestsFromJson(rec.at("requests")));
  return holder;
}

void Replayer::Prepare(TraceRecord* record, bool run_stateless) const {
  if (record->prepared == nullptr || record->prepared->maker != this)
    record->prepared = std::make_unique<PreparedRecord>();
  auto* p = static_cast<PreparedRecord*>(record->prepared.get());  // a record's prepared is made by its consumer
  p->maker = this;
  p->line = record->line;
  p->judged = false;
  p->fields = 0;
  p->verdict = CheckExpectError(*record);
  const StatusOr<const ReplayOp*> op = FindOp(record->op);
  p->op = op.ok() ? *op : nullptr;
  p->shape = op.ok() ? CheckRecord(record->json, **op, budget_) : op.status();
  p->has_typed_expect = false;
  p->typed_int_count = 0;
  p->has_requests = false;
  if (!run_stateless || !p->verdict.ok() || p->op == nullptr) return;
  const Json* expect = record->json.contains("expect") ? &record->json.at("expect") : nullptr;
  const Json* only = expect && !expect->contains("error") ? expect : nullptr;
  if (p->op->state != OpState::kNone) {  // stateful: its expect and inputs typed for the checking thread
    if (p->shape.ok() && p->op->run_fields != nullptr && only != nullptr) {
      p->typed_expect.Assign(*only);
      p->has_typed_expect = true;
    }
    if (p->shape.ok() && p->op->takes_typed) PrepareInputs(record->json, *p->op, p);
    return;
  }
  // A stateless record (plans, CP helpers) depends on nothing before it: run and judge it here.
  Replayer& self = const_cast<Replayer&>(*this);  // a stateless executor touches no state
  StatusOr<Json> got = p->shape;
  if (p->shape.ok() && p->op->run_fields != nullptr) {
    // Typed fields: when they surely equal the expect, the record is judged without JSON (as in ReplayRecord).
    std::optional<StatusOr<Json>> json =
        UnlessSurelyMatches(p->op->run_fields(self, record->json, only), only, &p->fields);
    if (!json) {
      p->verdict = Status::Ok();
      p->judged = true;
      return;
    }
    got = std::move(*json);
  } else if (p->shape.ok()) {
    got = p->op->run(self, record->json, only);
  }
  p->verdict = Judge(*record, op, &p->shape, &got, &p->fields, &p->mismatch);
  if (got.ok()) ClearJson(&*got);
  p->judged = true;
}

Status Replayer::Replay(const TraceRecord& record) {
  const int64_t steps = pool_ ? pool_->device_steps() : 0, fields = summary_.fields;
  Status status = ReplayRecord(record);
  if (pool_ == nullptr || pool_->device_steps() == steps) return status;
  // This record's device step runs on the device thread: keep what reporting its difference would need.
  if (!pool_->device_found()) {
    const int64_t done = pool_->device_steps_done();  // acquire: a finding before `done` is visible
    while (!device_steps_.empty() && device_steps_.front().step < done && !pool_->device_found()) {
      device_steps_.pop_front();
    }
  }
  device_steps_.push_back({steps, RecordMismatch(record, "", ""), summary_.records, fields, summary_.fields});
  return status;
}

std::vector<Replayer::DeviceMismatch> Replayer::SettleDevice() {
  std::vector<DeviceMismatch> out;
  if (pool_ == nullptr) return out;
  for (PoolReplay::DeviceFinding& f : pool_->SettleDevice()) {
    while (!device_steps_.empty() && device_steps_.front().step < f.step) device_steps_.pop_front();
    if (device_steps_.empty() || device_steps_.front().step != f.step) continue;  // not a step of a record
    const DeviceStepRecord& r = device_steps_.front();
    DeviceMismatch d;
    d.mismatch = WithModelMessage(r.at, f.status.message());
    d.records = r.records;
    d.fields_before = r.fields_before;
    d.record_fields = r.fields_after - r.fields_before;
    d.rows_at_stop = f.rows_at_stop;
    d.record_rows = f.host_rows;
    out.push_back(std::move(d));
    device_steps_.pop_front();
  }
  device_steps_.clear();  // every step submitted so far has run
  return out;
}

Status Replayer::ReplayRecord(const TraceRecord& record) {
  ++summary_.records;
  auto* prepared = record.prepared && record.prepared->maker == this && record.prepared->line == record.line
                       ? static_cast<PreparedRecord*>(record.prepared.get())
                       : nullptr;  // made by this replayer for this record, or not used
  if (prepared != nullptr && prepared->op != nullptr && prepared->op->state == OpState::kNone) {
    ++stateless_records_;
    if (prepared->judged) ++stateless_judged_ahead_;
  }
  if (prepared != nullptr && (prepared->judged || !prepared->verdict.ok())) {
    summary_.fields += prepared->fields;
    if (prepared->verdict.code() == StatusCode::kMismatch) return Fail(prepared->mismatch);
    return prepared->verdict;
  }
  // The record's inputs a reader typed ahead are taken while it runs, and by no other record.
  current_ = prepared;
  const struct ClearCurrent {
    PreparedRecord** current;
    ~ClearCurrent() { *current = nullptr; }
  } clear_current{&current_};
  if (prepared == nullptr) KVSHARD_RETURN_IF_ERROR(CheckExpectError(record));
  const Json* expect = record.json.contains("expect") ? &record.json.at("expect") : nullptr;
  const bool expect_error = expect && expect->contains("error");
  const StatusOr<const ReplayOp*> op = prepared != nullptr ? (prepared->op ? StatusOr<const ReplayOp*>(prepared->op)
                                                                           : StatusOr<const ReplayOp*>(prepared->shape))
                                                           : FindOp(record.op);  // looked up once per record
  const Status* shape = prepared != nullptr ? &prepared->shape : nullptr;
  if (prepared == nullptr && op.ok() && (*op)->state == OpState::kNone) ++stateless_records_;  // counted above else
  StatusOr<Json> got = Json();
  if (!op.ok()) {
    got = op.status();
  } else if (shape != nullptr && !shape->ok()) {
    got = *shape;
  } else if ((*op)->run_fields != nullptr && expect != nullptr && !expect_error) {
    // Typed fields: when they surely equal the expect, no JSON is built (else the JSON path below decides).
    Status begun = BeginOp(**op, record, shape != nullptr);
    std::optional<StatusOr<Json>> json = UnlessSurelyMatches(
        begun.ok() ? (*op)->run_fields(*this, record.json, expect) : StatusOr<FieldAnswer>(begun), expect,
        &summary_.fields, prepared != nullptr && prepared->has_typed_expect ? &prepared->typed_expect : nullptr);
    if (!json) {
      if (Status s = CheckInvariantsAfter(**op); !s.ok()) return Fail(ModelMismatch(record, s.message()));
      return Status::Ok();
    }
    got = std::move(*json);
  } else {
    got = ExecuteOp(**op, record, expect_error ? nullptr : expect, shape != nullptr);
  }
  ReplayMismatch mismatch;
  if (Status s = Judge(record, op, shape, &got, &summary_.fields, &mismatch); !s.ok()) {
    return s.code() == StatusCode::kMismatch ? Fail(std::move(mismatch)) : s;
  }
  if (!got.ok()) return Status::Ok();  // an expected rejection
  ClearJson(&*got);
  if (Status s = CheckInvariantsAfter(**op); !s.ok()) return Fail(ModelMismatch(record, s.message()));
  return Status::Ok();
}

Status Replayer::CheckInvariantsAfter(const ReplayOp& op) {
  if (op.state == OpState::kRequests) KVSHARD_RETURN_IF_ERROR(CheckRequestInvariants());
  if (op.state == OpState::kAllocator) {
    KVSHARD_RETURN_IF_ERROR(CheckAllocatorInvariants());
    KVSHARD_RETURN_IF_ERROR(CheckCacheInvariants());
    KVSHARD_RETURN_IF_ERROR(CheckTreeInvariants());
  }
  return Status::Ok();
}

int DefaultReadThreads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores >= 8 ? 4 : cores >= 4 ? 2 : 1;
}

namespace {

// ReplayStream's records, the replayer made into *replayer_out: it outlives the read-ahead (joined on return), so
// the caller times its release.
Status ReplayRecords(std::istream& in, const ReplayOptions& options, ReplayReport* report,
                     const std::function<void(const ReplayMismatch&)>& on_mismatch,
                     std::unique_ptr<Replayer>* replayer_out) {
  TraceReader reader(&in, options.line_check);
  KVSHARD_ASSIGN_OR_RETURN(Json header, reader.ReadHeader(TraceHeaderKeys()));
  KVSHARD_ASSIGN_OR_RETURN(*replayer_out, Replayer::Create(header, options));
  Replayer* replayer = replayer_out->get();
  ReplaySummary& s = replayer->summary();
  // The next records are parsed, shape-checked and (stateless ones) run and judged while this one is checked.
  const Replayer* prepare = replayer;
  TraceReadAhead records(
      &reader, [prepare](TraceRecord* record, bool ahead) { prepare->Prepare(record, ahead); },
      options.read_threads > 0 ? options.read_threads : DefaultReadThreads());
  // Counts one mismatch; false when the replay stops at it.
  const auto count = [&](const ReplayMismatch& m) {
    if (s.mismatches++ == 0) {
      s.first_mismatch = MismatchText(m);
      report->first = m;
    }
    if (on_mismatch) on_mismatch(m);
    return static_cast<bool>(on_mismatch);
  };
  // The device thread's differences (--backend diff), each reported as its record's mismatch with the counts the
  // record would have had if the device had answered at it: waits for the thread, then reports them before
  // anything after them. A difference of the current record (line `line`) takes the place of its own outcome
  // *status (a Mismatch or OK), as at its record a device difference comes first. False when the replay stops.
  int64_t rows_adjust = 0;
  std::optional<int64_t> rows_at_stop;
  Status stopped_at = Status::Ok();
  const auto settle = [&](int64_t line, Status* status) {
    for (const Replayer::DeviceMismatch& d : replayer->SettleDevice()) {
      if (d.mismatch.line == line && status != nullptr && (status->ok() || status->code() == StatusCode::kMismatch)) {
        *status = Status::Ok();
      }
      if (!on_mismatch) {  // stop where the synchronous replay would have stopped
        s.records = d.records;
        s.fields = d.fields_before;
        rows_at_stop = d.rows_at_stop;
        count(d.mismatch);
        stopped_at = Mismatch(MismatchText(d.mismatch));
        return false;
      }
      s.fields -= d.record_fields;
      rows_adjust -= d.record_rows;
      count(d.mismatch);
    }
    if (Status e = replayer->device_error(); !e.ok()) {  // the device path could not start: nothing to diff against
      stopped_at = e;
      return false;
    }
    return true;
  };
  TraceRecord record;
  Status result = Status::Ok();
  const double checking_cpu_start = CallingThreadCpuSeconds();
  while (result.ok()) {
    if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
      result = FailedPrecondition(kCancelledReplay);
      break;
    }
    StatusOr<bool> more = records.Next(&record);
    if (!more.ok()) {
      if (!settle(0, nullptr)) break;
      result = more.status();
      if (records.truncated_line() != 0) {  // every complete record was checked: say how that went
        report->truncated_line = records.truncated_line();
        result = InvalidArgument(more.status().message(), "; ", s.records, " records before it checked, ", s.mismatches,
                                 " mismatches");
      }
      break;
    }
    if (!*more) break;
    Status status = replayer->Replay(record);
    if (status.ok() && !replayer->device_found()) continue;
    if (!settle(record.line, &status)) break;
    if (status.ok()) continue;
    if (status.code() != StatusCode::kMismatch) {
      result = status;
      break;
    }
    if (!count(replayer->last_mismatch())) result = status;
  }
  if (stopped_at.ok()) settle(0, nullptr);  // the last records' device steps
  if (!stopped_at.ok()) result = stopped_at;
  report->summary = s;
  report->checking_cpu_seconds = CallingThreadCpuSeconds() - checking_cpu_start;
  report->reader_wait_seconds = records.CallerWaitSeconds();
  report->read_threads = records.threads();
  report->reader_cpu_seconds = records.ReaderCpuSeconds();
  report->stateless_records = replayer->stateless_records();
  report->stateless_judged_ahead = replayer->stateless_judged_ahead();
  if (const DeviceWorker* worker = replayer->device_worker()) {
    report->device_thread = true;
    report->device_busy_seconds = worker->busy_seconds();
    report->device_waited_seconds = worker->waited_seconds();
    report->device_setup_seconds = replayer->device_setup_seconds();
    const PoolDataPath::StartTimes start = replayer->device_start_times();
    report->device_driver_seconds = start.driver_seconds;
    report->device_context_seconds = start.context_seconds;
    report->device_checks_taken = replayer->device_checks_taken();
  }
  if (const DeviceWorker* planner = replayer->plan_worker()) {
    report->plan_busy_seconds = planner->busy_seconds();
    report->plan_waited_seconds = planner->waited_seconds();
  }
  report->rows_compared = rows_at_stop ? *rows_at_stop : replayer->rows_compared() + rows_adjust;
  return result;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status ReplayStream(std::istream& in, const ReplayOptions& options, ReplayReport* report,
                    const std::function<void(const ReplayMismatch&)>& on_mismatch) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Replayer> replayer;
  const Status result = ReplayRecords(in, options, report, on_mismatch, &replayer);
  report->replay_seconds = SecondsSince(start);
  const auto release = std::chrono::steady_clock::now();
  replayer.reset();
  report->release_seconds = SecondsSince(release);
  return result;
}

}  // namespace kvshard::replay

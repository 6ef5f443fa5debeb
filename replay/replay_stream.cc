// A record's expect and invariant checks (Replayer::Replay, which fills the record's ReplayMismatch) and
// ReplayStream over a whole trace, with a truncated last record reported after every complete one was checked.
#include <istream>
#include <utility>

#include "replay/op_table.h"
#include "replay/replayer.h"

namespace kvshard::replay {
namespace {

// A Mismatch an executor or an invariant check returned: "invariant: <what>" or "diff: <what>" (the leading word is
// the field these messages are built with).
ReplayMismatch ModelMismatch(const TraceRecord& record, const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return RecordMismatch(record, "invariant", message);
  return RecordMismatch(record, message.substr(0, colon), message.substr(colon + 2));
}

}  // namespace

Status Replayer::Fail(ReplayMismatch mismatch) {
  last_mismatch_ = std::move(mismatch);
  return Mismatch(MismatchText(last_mismatch_));
}

Status Replayer::Replay(const TraceRecord& record) {
  ++summary_.records;
  const Json* expect = record.json.contains("expect") ? &record.json.at("expect") : nullptr;
  const bool expect_error = expect && expect->contains("error");
  if (expect_error && (!expect->at("error").is_string() || expect->size() != 1)) {
    return AtLine(record.line, InvalidArgument("expect.error: must be the only key, a string"));
  }
  const StatusOr<const ReplayOp*> op = FindOp(record.op);  // looked up once per record
  StatusOr<Json> got = op.ok() ? ExecuteOp(**op, record, expect_error ? nullptr : expect) : StatusOr<Json>(op.status());
  if (!got.ok()) {
    const std::string& message = got.status().message();
    if (got.status().code() == StatusCode::kMismatch) return Fail(ModelMismatch(record, message));
    const Status shape = op.ok() ? CheckRecord(record.json, **op, budget_) : op.status();
    if (!shape.ok() || (!expect_error && !expect)) return AtLine(record.line, got.status());
    if (!expect_error) {
      return Fail(
          RecordMismatch(record, "error", StrCat("expected success, got \"", message, "\""), std::nullopt, message));
    }
    const std::string want = expect->at("error").get<std::string>();
    ++summary_.fields;
    if (message.find(want) == std::string::npos) {
      return Fail(RecordMismatch(record, "error",
                                 StrCat("expected a message containing ", QuoteInput(want), ", got \"", message, "\""),
                                 want, message));
    }
    return Status::Ok();
  }
  if (expect_error) {
    const std::string want = expect->at("error").get<std::string>();
    return Fail(RecordMismatch(record, "error",
                               StrCat("expected an error containing ", QuoteInput(want), ", got success"), want));
  }
  if (expect) {
    if (auto m = MatchExpect(*expect, *got, &summary_.fields)) return Fail(ExpectValueMismatch(record, *m));
  }
  ClearJson(&*got);
  if ((*op)->state == OpState::kRequests) {
    if (Status s = CheckRequestInvariants(); !s.ok()) return Fail(ModelMismatch(record, s.message()));
  }
  if ((*op)->state == OpState::kAllocator) {  // a record that ran has its op
    if (Status s = CheckAllocatorInvariants(record.json, *got); !s.ok())
      return Fail(ModelMismatch(record, s.message()));
    if (Status s = CheckCacheInvariants(); !s.ok()) return Fail(ModelMismatch(record, s.message()));
    if (Status s = CheckTreeInvariants(); !s.ok()) return Fail(ModelMismatch(record, s.message()));
  }
  return Status::Ok();
}

Status ReplayStream(std::istream& in, const ReplayOptions& options, ReplayReport* report,
                    const std::function<void(const ReplayMismatch&)>& on_mismatch) {
  TraceReader reader(&in, options.line_check);
  KVSHARD_ASSIGN_OR_RETURN(Json header, reader.ReadHeader(TraceHeaderKeys()));
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<Replayer> replayer, Replayer::Create(header, options));
  ReplaySummary& s = replayer->summary();
  TraceReadAhead records(&reader);  // the next records are parsed while this one is checked
  TraceRecord record;
  Status result = Status::Ok();
  while (result.ok()) {
    StatusOr<bool> more = records.Next(&record);
    if (!more.ok()) {
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
    if (status.ok()) continue;
    if (status.code() != StatusCode::kMismatch) {
      result = status;
      break;
    }
    if (s.mismatches++ == 0) {
      s.first_mismatch = status.message();
      report->first = replayer->last_mismatch();
    }
    if (!on_mismatch) {
      result = status;
      break;
    }
    on_mismatch(replayer->last_mismatch());
  }
  report->summary = s;
  report->rows_compared = replayer->rows_compared();
  return result;
}

}  // namespace kvshard::replay

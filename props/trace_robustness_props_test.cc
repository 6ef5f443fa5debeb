// Recordings of a running engine (docs/trace-format.md): cutting any generated clean trace at any byte inside its
// last line is a truncated last record, reported after every complete record was checked; random "meta" objects
// on every record change no answer (counts, mismatches, their fields and values), they only ride along.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/trace.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"
#include "replay/mismatch.h"
#include "replay/replayer.h"
#include "replay/trace_gen.h"

namespace kvshard::props {
namespace {

std::string Generate(const replay::TraceGenOptions& o) {
  std::ostringstream out;
  RC_ASSERT_OK(replay::GenerateTrace(o, out));
  return out.str();
}

// What a --keep-going replay of `text` answered: the status, the report and every mismatch.
struct Answer {
  Status status;
  replay::ReplayReport report;
  std::vector<replay::ReplayMismatch> mismatches;
};

Answer ReplayKeepGoing(const std::string& text) {
  std::istringstream in(text);
  Answer a;
  a.status = replay::ReplayStream(in, PropertyReplayOptions(), &a.report,
                                  [&a](const replay::ReplayMismatch& m) { a.mismatches.push_back(m); });
  return a;
}

// A printable ASCII string (meta is any JSON object; its strings here stay valid UTF-8).
rc::Gen<std::string> PrintableString() { return rc::gen::container<std::string>(rc::gen::inRange<char>(32, 127)); }

// A random JSON value of at most `depth` more levels.
Json ArbitraryValue(int depth) {
  switch (*rc::gen::inRange(0, depth > 0 ? 8 : 6)) {
    case 0: return Json(*rc::gen::arbitrary<int64_t>());
    case 1: return Json(*PrintableString());
    case 2: return Json(*rc::gen::arbitrary<bool>());
    case 3: return Json(nullptr);
    case 4: return Json(static_cast<double>(*rc::gen::inRange(0, 1000000)) / 8);
    case 5: return Json(*rc::gen::container<std::vector<std::string>>(PrintableString()));  // rids
    case 6: {
      Json a = Json::array();
      for (int i = *rc::gen::inRange(0, 4); i > 0; --i) a.push_back(ArbitraryValue(depth - 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (int i = *rc::gen::inRange(0, 4); i > 0; --i) o[*PrintableString()] = ArbitraryValue(depth - 1);
      return o;
    }
  }
}

// A meta object: the recorder's keys and others, also names of record keys ("op", "expect", "locs"), which mean
// nothing inside meta.
Json ArbitraryMeta() {
  Json meta = Json::object();
  for (int i = *rc::gen::inRange(0, 6); i > 0; --i) {
    const std::string key =
        *rc::gen::oneOf(rc::gen::element<std::string>("rids", "rank", "step", "time", "op", "expect", "locs", "meta"),
                        PrintableString());
    meta[key] = ArbitraryValue(2);
  }
  return meta;
}

KVSHARD_PROP(TraceRobustnessProps, ACutInsideTheLastLineIsATruncatedRecordAfterEveryCompleteOne, ()) {
  replay::TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(1, 80);
  const std::string text = Generate(o);
  const size_t last = text.rfind('\n', text.size() - 2) + 1;  // where the last line starts
  const size_t length = text.size() - 1 - last;               // its bytes without the newline
  const size_t keep = *rc::gen::inRange<size_t>(1, length + 1);
  RC_CLASSIFY(keep == length, "only the newline cut");
  const std::string cut = text.substr(0, last + keep);
  std::istringstream in(cut);
  replay::ReplayReport report;
  const Status s = replay::ReplayStream(in, PropertyReplayOptions(), &report);
  const int64_t line = o.records + 1;
  if (keep == length) {  // a whole record without its newline: replayed as the last one
    RC_ASSERT_OK(s);
    RC_ASSERT(report.summary.records == o.records);
    RC_ASSERT(report.truncated_line == 0);
    return;
  }
  RC_LOG() << s.ToString() << "\n";
  RC_ASSERT(s.code() == StatusCode::kInvalidArgument);
  RC_ASSERT(s.message() == "line " + std::to_string(line) + ": truncated last record (no newline, not valid JSON); " +
                               std::to_string(o.records - 1) + " records before it checked, 0 mismatches");
  RC_ASSERT(report.truncated_line == line);
  RC_ASSERT(report.summary.records == o.records - 1);
  RC_ASSERT(report.summary.mismatches == 0);
}

KVSHARD_PROP(TraceRobustnessProps, RandomMetaOnEveryRecordChangesNoAnswer, ()) {
  replay::TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(1, 80);
  std::vector<std::string> lines = Lines(Generate(o));
  // One record's expect corrupted (an integer after a random point gets a leading 7), half the time, so that the
  // mismatches are compared too.
  if (*rc::gen::arbitrary<bool>()) {
    const size_t i = *rc::gen::inRange<size_t>(1, lines.size());
    const size_t e = lines[i].find("\"expect\":{");
    if (e != std::string::npos) {
      const size_t digit = lines[i].find_first_of("0123456789", *rc::gen::inRange<size_t>(e, lines[i].size()));
      if (digit != std::string::npos) lines[i].insert(digit, "7");
    }
  }
  std::string plain, with_meta;
  std::vector<Json> metas = {Json()};
  for (size_t i = 0; i < lines.size(); ++i) {
    plain += lines[i] + "\n";
    if (i == 0) {
      with_meta += lines[i] + "\n";
      continue;
    }
    metas.push_back(ArbitraryMeta());
    with_meta += lines[i].substr(0, lines[i].size() - 1) + ",\"meta\":" + metas.back().dump() + "}\n";
  }
  const Answer a = ReplayKeepGoing(plain);
  const Answer b = ReplayKeepGoing(with_meta);
  RC_CLASSIFY(!a.mismatches.empty(), "with mismatches");
  RC_ASSERT(a.status.code() == b.status.code());
  RC_ASSERT(a.status.message() == b.status.message());
  RC_ASSERT(a.report.summary.records == b.report.summary.records);
  RC_ASSERT(a.report.summary.fields == b.report.summary.fields);
  RC_ASSERT(a.report.summary.mismatches == b.report.summary.mismatches);
  RC_ASSERT(a.report.rows_compared == b.report.rows_compared);
  RC_ASSERT(a.mismatches.size() == b.mismatches.size());
  for (size_t k = 0; k < a.mismatches.size(); ++k) {
    const replay::ReplayMismatch& x = a.mismatches[k];
    const replay::ReplayMismatch& y = b.mismatches[k];
    RC_ASSERT(y.meta == metas.at(static_cast<size_t>(y.line - 1)));
    RC_ASSERT(replay::MismatchText(y) == replay::MismatchText(x) + " meta=" + y.meta.dump());
    Json jx = replay::MismatchJson(x), jy = replay::MismatchJson(y);
    RC_ASSERT(jy.at("meta") == y.meta);
    for (Json* j : {&jx, &jy}) {
      j->erase("meta");
      j->erase("message");
    }
    RC_ASSERT(jx == jy);
  }
}

}  // namespace
}  // namespace kvshard::props

// A replay mismatch's text line and --json object, both from the one ReplayMismatch the replayer fills.
#include "replay/mismatch.h"

#include <utility>

namespace kvshard::replay {

ReplayMismatch RecordMismatch(const TraceRecord& record, std::string field, std::string detail,
                              std::optional<Json> expected, std::optional<Json> got) {
  ReplayMismatch m;
  m.line = record.line;
  m.op = record.op;
  m.field = std::move(field);
  m.expected = std::move(expected);
  m.got = std::move(got);
  m.detail = std::move(detail);
  if (const auto meta = record.json.find("meta"); meta != record.json.end()) m.meta = *meta;
  return m;
}

ReplayMismatch ExpectValueMismatch(const TraceRecord& record, const ExpectMismatch& e) {
  return RecordMismatch(record, e.path, StrCat("expected ", e.ExpectedText(), ", got ", e.GotText()), e.expected,
                        e.got);
}

std::string MismatchText(const ReplayMismatch& m) {
  std::string text = StrCat("line ", m.line, ": ", m.op, ": ", m.field, ": ", m.detail);
  if (!m.meta.is_null()) text += StrCat(" meta=", m.meta.dump(-1, ' ', false, Json::error_handler_t::replace));
  return text;
}

Json MismatchJson(const ReplayMismatch& m) {
  Json j;
  j["line"] = m.line;
  j["op"] = m.op;
  j["field"] = m.field;
  if (m.expected) j["expected"] = *m.expected;
  if (m.got) j["got"] = *m.got;
  j["message"] = MismatchText(m);
  if (!m.meta.is_null()) j["meta"] = m.meta;
  return j;
}

}  // namespace kvshard::replay

// The trace reader and the expect matcher.
#include "core/trace.h"

#include <algorithm>
#include <istream>
#include <system_error>
#include <ostream>
#include <utility>

namespace kvshard {

Status AtLine(int64_t line, const Status& status) {
  if (status.ok()) return status;
  return Annotate(status, "line ", line, ": ");
}

namespace {

// Parses one non-empty line as a JSON object into `*json`, reusing what it holds (the reader's last record); null
// after an error.
Status ParseLineInto(const std::string& text, Json* json) {
  if (text.empty()) {
    ClearJson(json);
    *json = nullptr;
    return InvalidArgument("record: empty line");
  }
  KVSHARD_RETURN_IF_ERROR(ParseJsonStrictInto(text, json, "record"));
  if (!json->is_object()) return InvalidArgument("record: must be a JSON object");
  return Status::Ok();
}

bool Allowed(const std::vector<std::string>& allowed, const std::string& key) {
  return std::find(allowed.begin(), allowed.end(), key) != allowed.end();
}

}  // namespace

StatusOr<Json> TraceReader::ReadHeader(const std::vector<std::string>& allowed_keys) {
  line_ = 1;
  StatusOr<bool> got = ReadLine(*in_, &text_, check_);
  if (!got.ok()) return AtLine(line_, got.status());
  if (!*got) return InvalidArgument("line 1: kvshard_trace: the trace is empty (no header)");
  StatusOr<Json> j = Json();
  if (Status parsed = ParseLineInto(text_, &*j); !parsed.ok()) return AtLine(line_, parsed);
  if (!j->contains("kvshard_trace")) {
    return InvalidArgument("line 1: kvshard_trace: missing (the first line must be the trace header)");
  }
  const Json& v = j->at("kvshard_trace");
  if (!v.is_number_integer() || v.get<int64_t>() != kTraceVersion) {
    return InvalidArgument("line 1: kvshard_trace: this build reads version ", kTraceVersion, ", got ",
                           QuoteJsonInput(v));
  }
  for (const auto& [key, value] : j->items()) {
    if (key != "kvshard_trace" && !Allowed(allowed_keys, key)) {
      return InvalidArgument("line 1: ", QuoteInput(key, '\0'), ": unknown header key");
    }
  }
  return j;
}

StatusOr<bool> TraceReader::Next(TraceRecord* record) {
  bool newline = true;
  int64_t line = 0;
  KVSHARD_ASSIGN_OR_RETURN(const bool more, NextLine(&text_, &newline, &line));
  if (!more) return false;
  KVSHARD_RETURN_IF_ERROR(ParseRecord(text_, newline, line, record, &truncated_line_));
  return true;
}

StatusOr<bool> TraceReader::NextLine(std::string* text, bool* newline, int64_t* line) {
  ++line_;
  *newline = true;
  StatusOr<bool> got = ReadLine(*in_, text, check_, newline);
  if (!got.ok()) return AtLine(line_, got.status());
  if (!*got) {
    --line_;  // no such line
    return false;
  }
  *line = line_;
  return true;
}

Status TraceReader::ParseRecord(const std::string& text, bool newline, int64_t line, TraceRecord* record,
                                int64_t* truncated_line) {
  record->line = line;
  // Parsed into the last record's value: its containers and strings reused (a trace's records share a few shapes).
  if (Status parsed = ParseLineInto(text, &record->json); !parsed.ok()) {
    if (!newline && !Json::accept(text)) {  // the input ends inside this line: a writer stopped mid-record
      *truncated_line = line;
      return InvalidArgument("line ", line, ": truncated last record (no newline, not valid JSON)");
    }
    return AtLine(line, parsed);
  }
  const Json& op = record->json.contains("op") ? record->json.at("op") : Json();
  if (!op.is_string()) return AtLine(line, InvalidArgument("op: missing or not a string"));
  record->op = op.get<std::string>();
  if (record->json.contains("expect") && !record->json.at("expect").is_object()) {
    return AtLine(line, InvalidArgument("expect: must be an object"));
  }
  if (const auto meta = record->json.find("meta"); meta != record->json.end()) {
    if (!meta->is_object()) return AtLine(line, InvalidArgument("meta: must be an object"));
    const size_t bytes = meta->dump().size();
    if (bytes > static_cast<size_t>(kMaxTraceMetaBytes)) {
      return AtLine(
          line, InvalidArgument("meta: must be at most ", kMaxTraceMetaBytes, " bytes as compact JSON, got ", bytes));
    }
  }
  return Status::Ok();
}

Status CheckRecordKeys(const Json& record, const std::vector<std::string>& allowed) {
  return CheckRecordKeys(record, [&](const std::string& key) { return Allowed(allowed, key); });
}

Status CheckRecordKeys(const Json& record, const std::function<bool(const std::string&)>& allowed) {
  for (const auto& [key, value] : record.items()) {
    if (key != "op" && key != "expect" && key != "meta" && !allowed(key)) {
      return InvalidArgument(QuoteInput(key, '\0'), ": unknown key for op ",
                             QuoteInput(record.at("op").get<std::string>()));
    }
  }
  return Status::Ok();
}

std::string ShortJson(const Json& value, size_t max_chars) {
  std::string s = value.dump();
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

namespace {

// True when both are integers (signed or unsigned) of the same value; false for anything else, which Match then
// compares as before (so this only skips the general comparison, it never changes a verdict).
bool IntegersEqual(const Json& a, const Json& b) {
  using I = Json::number_integer_t;
  using U = Json::number_unsigned_t;
  if (!a.is_number_integer() || !b.is_number_integer()) return false;
  if (a.is_number_unsigned() == b.is_number_unsigned()) {
    return a.is_number_unsigned() ? a.get_ref<const U&>() == b.get_ref<const U&>()
                                  : a.get_ref<const I&>() == b.get_ref<const I&>();
  }
  const U u = a.is_number_unsigned() ? a.get_ref<const U&>() : b.get_ref<const U&>();
  const I i = a.is_number_unsigned() ? b.get_ref<const I&>() : a.get_ref<const I&>();
  return i >= 0 && static_cast<U>(i) == u;
}

// Matches without building paths; on a mismatch, `where` gets the path's parts innermost first.
bool Match(const Json& expect, const Json& got, int64_t* fields, std::vector<std::string>* where, ExpectMismatch* out) {
  if (expect.is_object() && got.is_object()) {
    for (const auto& [key, value] : expect.items()) {
      const auto it = got.find(key);
      if (it == got.end()) {
        *out = ExpectMismatch{"", value, std::nullopt};
      } else if (Match(value, *it, fields, where, out)) {
        continue;
      }
      where->push_back(key);
      return false;
    }
    return true;
  }
  if (expect.is_array() && got.is_array() && expect.size() == got.size()) {
    for (size_t i = 0; i < expect.size(); ++i) {
      if (IntegersEqual(expect[i], got[i])) {  // the common case, without the general comparison
        ++*fields;
        continue;
      }
      if (!Match(expect[i], got[i], fields, where, out)) {
        where->push_back("[" + std::to_string(i) + "]");
        return false;
      }
    }
    return true;
  }
  ++*fields;
  if (expect == got) return true;
  *out = ExpectMismatch{"", expect, got};
  return false;
}

}  // namespace

std::string ExpectMismatch::ExpectedText() const { return ShortJson(expected); }

std::string ExpectMismatch::GotText() const { return got ? ShortJson(*got) : "(absent)"; }

std::optional<ExpectMismatch> MatchExpect(const Json& expect, const Json& got, int64_t* fields) {
  ExpectMismatch m;
  std::vector<std::string> where;
  if (Match(expect, got, fields, &where, &m)) return std::nullopt;
  for (auto it = where.rbegin(); it != where.rend(); ++it) {
    m.path += (m.path.empty() || (*it)[0] == '[' ? "" : ".") + *it;
  }
  return m;
}

Status TraceWriter::Written() {
  if (!*out_) return Internal("trace: write failed");
  return Status::Ok();
}

Status TraceWriter::WriteHeader(const Json& header) {
  Json line{{"kvshard_trace", kTraceVersion}};
  for (const auto& [key, value] : header.items()) {
    if (key != "kvshard_trace") line[key] = value;
  }
  *out_ << line.dump() << '\n';
  return Written();
}

Status TraceWriter::WriteRecord(const Json& record) {
  KVSHARD_CHECK(record.is_object() && !record.empty() && record.begin().key() == "op");
  *out_ << record.dump() << '\n';
  ++records_;
  return Written();
}

Status TraceWriter::WriteRecordText(std::string_view text) {
  KVSHARD_CHECK(text.substr(0, 7) == "{\"op\": ");
  out_->write(text.data(), static_cast<std::streamsize>(text.size()));
  out_->put('\n');
  ++records_;
  return Written();
}

Status TraceWriter::Finish(const std::string& what) {
  out_->flush();
  if (!*out_) return InvalidArgument(what, ": write failed");
  return Status::Ok();
}

}  // namespace kvshard

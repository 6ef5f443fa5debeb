// The workload readers: lines, format detection, JSON Lines and CSV records, dates and arrival order.
#include "core/workload.h"

#include <charconv>
#include <cmath>
#include <istream>
#include <string_view>
#include <utility>

#include "core/json.h"

namespace kvshard {
namespace {

constexpr char kAzureHeader[] = "TIMESTAMP,ContextTokens,GeneratedTokens";
constexpr char kBurstGptHeader[] = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
constexpr int64_t kMaxSeconds = kMaxWorkloadArrivalUs / 1'000'000;
constexpr int64_t kMaxMilliseconds = kMaxWorkloadArrivalUs / 1'000;

const std::vector<std::string> kMooncakeKeys = {"timestamp", "input_length", "output_length", "hash_ids"};
const std::vector<std::string> kQwenKeys = {"chat_id",       "parent_chat_id", "timestamp", "input_length",
                                            "output_length", "type",           "turn",      "hash_ids"};

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

bool IsJsonFormat(WorkloadFormat format) {
  return format == WorkloadFormat::kMooncake || format == WorkloadFormat::kQwen;
}

bool IsDigits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Splits one CSV line: comma-separated, a column may be double-quoted with "" for a quote (RFC 4180, without
// line breaks inside quotes). Errors name the column.
Status SplitCsv(const std::string& line, std::vector<std::string>* columns) {
  columns->clear();
  const size_t n = line.size();
  size_t i = 0;
  while (true) {
    std::string column;
    if (i < n && line[i] == '"') {
      for (++i;; ++i) {
        if (i >= n) return InvalidArgument("row: column ", columns->size() + 1, ": unterminated quote");
        if (line[i] != '"') {
          column += line[i];
        } else if (i + 1 < n && line[i + 1] == '"') {
          column += '"';
          ++i;
        } else {
          ++i;
          break;
        }
      }
      if (i < n && line[i] != ',') {
        return InvalidArgument("row: column ", columns->size() + 1, ": text after the closing quote");
      }
    } else {
      size_t comma = line.find(',', i);
      if (comma == std::string::npos) comma = n;
      column.assign(line, i, comma - i);
      if (column.find('"') != std::string::npos) {
        return InvalidArgument("row: column ", columns->size() + 1, ": quote inside an unquoted column");
      }
      i = comma;
    }
    columns->push_back(std::move(column));
    if (i >= n) return Status::Ok();
    ++i;  // the comma
  }
}

std::vector<std::string> HeaderColumns(const char* header) {
  std::vector<std::string> columns;
  KVSHARD_CHECK(SplitCsv(header, &columns).ok());
  return columns;
}

// A CSV count in [0, hi].
StatusOr<int64_t> ParseCount(const std::string& text, const char* field, int64_t hi, int64_t lo = 0) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return InvalidArgument(field, ": must be an integer, got ", QuoteInput(text));
  }
  if (ec == std::errc::result_out_of_range || value < lo || value > hi) {
    return InvalidArgument(field, ": must be in [", lo, ", ", hi, "], got ", QuoteInput(text, '\0'));
  }
  return value;
}

// Digits after a decimal point -> microseconds, truncating past the sixth digit.
int64_t FractionUs(std::string_view digits) {
  int64_t us = 0;
  for (size_t i = 0; i < 6; ++i) us = us * 10 + (i < digits.size() ? digits[i] - '0' : 0);
  return us;
}

// "S" or "S.F" seconds (digits only, S <= kMaxSeconds) -> microseconds.
StatusOr<int64_t> ParseSeconds(const std::string& text, const char* field) {
  const size_t dot = text.find('.');
  const std::string_view whole = std::string_view(text).substr(0, dot);
  const std::string_view fraction =
      dot == std::string::npos ? std::string_view() : std::string_view(text).substr(dot + 1);
  if (!IsDigits(whole) || (dot != std::string::npos && !IsDigits(fraction))) {
    return InvalidArgument(field, ": must be a non-negative number of seconds (digits, optional decimals), got ",
                           QuoteInput(text));
  }
  const size_t nonzero = whole.find_first_not_of('0');
  const std::string_view significant = nonzero == std::string_view::npos ? "0" : whole.substr(nonzero);
  int64_t seconds = kMaxSeconds + 1;
  if (significant.size() <= 12) std::from_chars(significant.data(), significant.data() + significant.size(), seconds);
  if (seconds > kMaxSeconds || (seconds == kMaxSeconds && FractionUs(fraction) > 0)) {
    return InvalidArgument(field, ": must be at most ", kMaxSeconds, " seconds, got ", QuoteInput(text, '\0'));
  }
  return seconds * 1'000'000 + FractionUs(fraction);
}

// Days from 1970-01-01 to the proleptic Gregorian date y-m-d (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int64_t DaysInMonth(int64_t y, int64_t m) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// "YYYY-MM-DD HH:MM:SS[.F]" -> microseconds since 1970-01-01 00:00:00 (the fraction truncated to microseconds).
StatusOr<int64_t> ParseDateTime(const std::string& text, const char* field) {
  // Digit positions of "YYYY-MM-DD HH:MM:SS" and its separators.
  static constexpr char kPattern[] = "dddd-dd-dd dd:dd:dd";
  constexpr size_t kLength = sizeof(kPattern) - 1;
  bool ok = text.size() >= kLength;
  for (size_t i = 0; ok && i < kLength; ++i) {
    ok = kPattern[i] == 'd' ? (text[i] >= '0' && text[i] <= '9') : text[i] == kPattern[i];
  }
  const std::string_view rest = ok ? std::string_view(text).substr(kLength) : std::string_view();
  if (ok && !rest.empty()) ok = rest[0] == '.' && IsDigits(rest.substr(1));
  if (!ok) {
    return InvalidArgument(field, ": must be a date and time YYYY-MM-DD HH:MM:SS[.fraction], got ", QuoteInput(text));
  }
  const auto num = [&](size_t pos, size_t len) {
    int64_t v = 0;
    for (size_t i = pos; i < pos + len; ++i) v = v * 10 + (text[i] - '0');
    return v;
  };
  const int64_t year = num(0, 4), month = num(5, 2), day = num(8, 2);
  const int64_t hour = num(11, 2), minute = num(14, 2), second = num(17, 2);
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 || minute > 59 || second > 59) {
    return InvalidArgument(field, ": no such date and time: ", QuoteInput(text));
  }
  const int64_t seconds = DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * 1'000'000 + (rest.empty() ? 0 : FractionUs(rest.substr(1)));
}

// A required non-empty JSON string.
Status CheckJsonString(const Json& obj, const char* key) {
  if (!obj.contains(key)) return InvalidArgument(key, ": missing");
  const Json& v = obj.at(key);
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
    return InvalidArgument(key, ": must be a non-empty string, got ", QuoteJsonInput(v));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<WorkloadFormat> ParseWorkloadFormat(const std::string& name) {
  for (WorkloadFormat f : {WorkloadFormat::kAuto, WorkloadFormat::kMooncake, WorkloadFormat::kQwen,
                           WorkloadFormat::kAzure, WorkloadFormat::kBurstGpt}) {
    if (name == WorkloadFormatName(f)) return f;
  }
  return InvalidArgument("workload format: must be one of auto, mooncake, qwen, azure, burstgpt, got ",
                         QuoteInput(name));
}

const char* WorkloadFormatName(WorkloadFormat format) {
  switch (format) {
    case WorkloadFormat::kAuto: return "auto";
    case WorkloadFormat::kMooncake: return "mooncake";
    case WorkloadFormat::kAzure: return "azure";
    case WorkloadFormat::kBurstGpt: return "burstgpt";
    case WorkloadFormat::kQwen: return "qwen";
  }
  return "?";
}

int64_t WorkloadReader::block_tokens() const {
  switch (format_) {
    case WorkloadFormat::kMooncake: return kMooncakeBlockTokens;
    case WorkloadFormat::kQwen: return kQwenBlockTokens;
    default: return 0;
  }
}

StatusOr<bool> WorkloadReader::NextLine() {
  while (true) {
    StatusOr<bool> got = ReadLine(*in_, &text_, check_);
    if (!got.ok()) return Annotate(got.status(), "line ", line_ + 1, ": ");
    if (!*got) return false;
    ++line_;
    if (!text_.empty() && text_.back() == '\r') text_.pop_back();
    if (line_ == 1 && text_.starts_with("\xEF\xBB\xBF")) text_.erase(0, 3);  // a UTF-8 byte order mark
    if (text_.find_first_not_of(" \t") != std::string::npos) return true;
  }
}

StatusOr<WorkloadReader> WorkloadReader::Open(std::istream* in, WorkloadFormat format, LineCheck check) {
  WorkloadReader reader(in, format, std::move(check));
  KVSHARD_ASSIGN_OR_RETURN(const bool any, reader.NextLine());
  if (!any) return InvalidArgument("line ", reader.line_ + 1, ": workload: empty (no requests)");
  const std::string& text = reader.text_;
  std::vector<std::string> header;
  if (format == WorkloadFormat::kAuto) {
    if (text[text.find_first_not_of(" \t")] == '{') {
      const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      reader.format_ = j.is_object() && j.contains("chat_id") ? WorkloadFormat::kQwen : WorkloadFormat::kMooncake;
    } else if (SplitCsv(text, &header).ok() && header == HeaderColumns(kAzureHeader)) {
      reader.format_ = WorkloadFormat::kAzure;
    } else if (header == HeaderColumns(kBurstGptHeader)) {
      reader.format_ = WorkloadFormat::kBurstGpt;
    } else {
      return InvalidArgument("line ", reader.line_, ": header: not a known workload format, got ", QuoteInput(text),
                             " (expected JSON Lines records, or the CSV header \"", kAzureHeader, "\" or \"",
                             kBurstGptHeader, "\")");
    }
  }
  if (IsJsonFormat(reader.format_)) {
    reader.pending_ = true;
    return reader;
  }
  const char* expected = reader.format_ == WorkloadFormat::kAzure ? kAzureHeader : kBurstGptHeader;
  if (!SplitCsv(text, &header).ok() || header != HeaderColumns(expected)) {
    return InvalidArgument("line ", reader.line_, ": header: expected \"", expected, "\", got ", QuoteInput(text));
  }
  return reader;
}

StatusOr<bool> WorkloadReader::Next(WorkloadRequest* request) {
  if (!error_.ok()) return error_;
  bool more = true;
  if (pending_) {
    pending_ = false;
  } else if (StatusOr<bool> got = NextLine(); !got.ok()) {
    error_ = got.status();
    return error_;
  } else {
    more = *got;
  }
  if (!more) {
    if (in_->bad()) {
      error_ = Internal("line ", line_ + 1, ": workload: read error");
    } else if (requests_ == 0) {
      error_ = InvalidArgument("line ", line_ + 1, ": workload: no requests after the header");
    } else {
      return false;
    }
    return error_;
  }
  const Status status = IsJsonFormat(format_) ? ParseJsonRecord(request) : ParseCsvRecord(request);
  if (!status.ok()) {
    error_ = Annotate(status, "line ", line_, ": ");
    return error_;
  }
  ++requests_;
  return true;
}

Status WorkloadReader::SetArrival(int64_t time_us, const std::string& field, const std::string& as_written,
                                  WorkloadRequest* request) {
  if (requests_ == 0) {
    first_us_ = time_us;
  } else if (time_us < previous_us_) {
    return InvalidArgument(field, ": goes backwards: ", as_written, " after ", previous_as_written_,
                           " (requests must be in arrival order)");
  }
  if (time_us - first_us_ > kMaxWorkloadArrivalUs) {
    return InvalidArgument(field, ": ", as_written, " is more than ", kMaxWorkloadArrivalUs,
                           " us after the first request");
  }
  request->arrival_us = time_us - first_us_;
  previous_us_ = time_us;
  previous_as_written_ = as_written;
  return Status::Ok();
}

Status WorkloadReader::ParseJsonRecord(WorkloadRequest* request) {
  // Only the top-level object's keys (depth 1) are checked for duplicates; nlohmann keeps the last silently.
  std::vector<std::string> seen;
  std::string duplicate;
  bool too_deep = false;
  bool overflowed = false;
  const auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    overflowed = overflowed || (event == Json::parse_event_t::value && IsOverflowedInteger(parsed));
    const bool start = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (start && depth >= static_cast<int>(kMaxJsonDepth)) {  // depth: the containers open around this one
      too_deep = true;
      return false;  // not kept (printing a deeply nested value would recurse past the stack)
    }
    if (event == Json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      for (const std::string& s : seen) {
        if (s == key) duplicate = key;
      }
      seen.push_back(key);
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(text_, on_event);
  } catch (const Json::parse_error&) {
    return InvalidArgument("record: not valid JSON", JsonSyntaxErrorPlace(text_));
  } catch (const Json::exception&) {
    return InvalidArgument("record: not valid JSON (a number out of range)");
  }
  RememberOverflowedIntegers(text_, overflowed);
  if (too_deep) return InvalidArgument("record: nested deeper than ", kMaxJsonDepth, " arrays and objects");
  if (!j.is_object()) return InvalidArgument("record: must be a JSON object, got ", QuoteJsonInput(j));
  if (!duplicate.empty()) return InvalidArgument(QuoteInput(duplicate, '\0'), ": duplicate key");
  const bool qwen = format_ == WorkloadFormat::kQwen;
  const std::vector<std::string>& keys = qwen ? kQwenKeys : kMooncakeKeys;
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const std::string& k : keys) known = known || k == key;
    if (!known) {
      return InvalidArgument(QuoteInput(key, '\0'), ": unknown key (a ", qwen ? "Qwen" : "Mooncake", " record has ",
                             Join(keys), ")");
    }
  }

  int64_t time_us = 0;
  std::string as_written;
  if (qwen) {
    KVSHARD_RETURN_IF_ERROR(JsonInt(j, "chat_id", "", 0, INT64_MAX).status());
    KVSHARD_RETURN_IF_ERROR(JsonInt(j, "parent_chat_id", "", -1, INT64_MAX).status());
    if (!j.contains("timestamp")) return InvalidArgument("timestamp: missing");
    const Json& t = j.at("timestamp");
    if (!t.is_number()) return InvalidArgument("timestamp: must be a number of seconds, got ", QuoteJsonInput(t));
    const double seconds = t.get<double>();
    if (!(seconds >= 0 && seconds <= static_cast<double>(kMaxSeconds))) {
      return InvalidArgument("timestamp: must be in [0, ", kMaxSeconds, "] seconds, got ", QuoteJsonInput(t));
    }
    time_us = t.is_number_float() ? std::llround(seconds * 1e6) : t.get<int64_t>() * 1'000'000;
    as_written = QuoteJsonInput(t);
  } else {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t ms, JsonInt(j, "timestamp", "", 0, kMaxMilliseconds));
    time_us = ms * 1000;
    as_written = std::to_string(ms);
  }
  KVSHARD_ASSIGN_OR_RETURN(request->input_tokens, JsonInt(j, "input_length", "", 1, kMaxWorkloadTokens));
  KVSHARD_ASSIGN_OR_RETURN(request->output_tokens, JsonInt(j, "output_length", "", 0, kMaxWorkloadTokens));
  if (qwen) {
    KVSHARD_RETURN_IF_ERROR(CheckJsonString(j, "type"));
    KVSHARD_RETURN_IF_ERROR(JsonInt(j, "turn", "", 1, INT64_MAX).status());
  }
  KVSHARD_ASSIGN_OR_RETURN(request->block_hashes, JsonIntList(j, "hash_ids", "", 0, INT64_MAX));
  const int64_t block = qwen ? kQwenBlockTokens : kMooncakeBlockTokens;
  const int64_t want = (request->input_tokens + block - 1) / block;
  if (static_cast<int64_t>(request->block_hashes.size()) != want) {
    return InvalidArgument("hash_ids: ", request->block_hashes.size(), " ids, but input_length ", request->input_tokens,
                           " needs ceil(", request->input_tokens, " / ", block, ") = ", want);
  }
  return SetArrival(time_us, "timestamp", as_written, request);
}

Status WorkloadReader::ParseCsvRecord(WorkloadRequest* request) {
  std::vector<std::string> c;
  KVSHARD_RETURN_IF_ERROR(SplitCsv(text_, &c));
  const bool azure = format_ == WorkloadFormat::kAzure;
  const size_t want = azure ? 3 : 6;
  if (c.size() != want) {
    return InvalidArgument("row: ", c.size(), " columns, expected ", want, " (", azure ? kAzureHeader : kBurstGptHeader,
                           ")");
  }
  request->block_hashes.clear();
  if (azure) {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t time_us, ParseDateTime(c[0], "TIMESTAMP"));
    KVSHARD_ASSIGN_OR_RETURN(request->input_tokens, ParseCount(c[1], "ContextTokens", kMaxWorkloadTokens, 1));
    KVSHARD_ASSIGN_OR_RETURN(request->output_tokens, ParseCount(c[2], "GeneratedTokens", kMaxWorkloadTokens));
    return SetArrival(time_us, "TIMESTAMP", QuoteInput(c[0], '\0'), request);
  }
  KVSHARD_ASSIGN_OR_RETURN(const int64_t time_us, ParseSeconds(c[0], "Timestamp"));
  if (c[1].empty()) return InvalidArgument("Model: must not be empty");
  KVSHARD_ASSIGN_OR_RETURN(request->input_tokens, ParseCount(c[2], "Request tokens", kMaxWorkloadTokens, 1));
  KVSHARD_ASSIGN_OR_RETURN(request->output_tokens, ParseCount(c[3], "Response tokens", kMaxWorkloadTokens));
  KVSHARD_ASSIGN_OR_RETURN(const int64_t total, ParseCount(c[4], "Total tokens", 2 * kMaxWorkloadTokens));
  if (total != request->input_tokens + request->output_tokens) {
    return InvalidArgument("Total tokens: ", total,
                           ", but Request tokens + Response tokens = ", request->input_tokens + request->output_tokens);
  }
  if (c[5].empty()) return InvalidArgument("Log Type: must not be empty");
  return SetArrival(time_us, "Timestamp", QuoteInput(c[0], '\0'), request);
}

StatusOr<Workload> ReadWorkload(std::istream& in, WorkloadFormat format, const WorkloadLimits& limits) {
  KVSHARD_ASSIGN_OR_RETURN(WorkloadReader reader, WorkloadReader::Open(&in, format, limits.line));
  Workload workload;
  workload.format = reader.format();
  workload.block_tokens = reader.block_tokens();
  int64_t hashes = 0;
  const auto check_held = [&]() -> Status {
    if (!limits.held) return Status::Ok();
    const Status s = limits.held(static_cast<int64_t>(workload.requests.size()), hashes);
    return Annotate(s, "line ", reader.line(), ": ");
  };
  while (true) {
    WorkloadRequest request;
    KVSHARD_ASSIGN_OR_RETURN(const bool more, reader.Next(&request));
    if (!more) break;
    hashes += static_cast<int64_t>(request.block_hashes.size());
    workload.requests.push_back(std::move(request));
    if (static_cast<int64_t>(workload.requests.size()) % kHeldCheckRequests == 0) {
      KVSHARD_RETURN_IF_ERROR(check_held());
    }
  }
  KVSHARD_RETURN_IF_ERROR(check_held());
  return workload;
}

}  // namespace kvshard

// Traces (docs/trace-format.md, version 1): JSON Lines whose first line is a header and every later line a
// record {"op", inputs, "expect"}. A streaming reader with line numbers, and the expect-subset matcher.
#ifndef KVSHARD_CORE_TRACE_H_
#define KVSHARD_CORE_TRACE_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/line_reader.h"
#include "core/status.h"

namespace kvshard {

// The trace format version this build reads and writes.
inline constexpr int64_t kTraceVersion = 1;

// The most bytes a record's "meta" object may take as compact JSON (it is printed with every mismatch).
inline constexpr int64_t kMaxTraceMetaBytes = int64_t{1} << 16;

// The base of what TraceReadAhead's prepare step keeps with a record (the consumer derives its own).
struct TracePrepared {
  virtual ~TracePrepared() = default;
  const void* maker = nullptr;  // who made it (a consumer uses only its own)
  int64_t line = 0;             // the record it was made for
};

// One record line: its 1-based line number and its JSON object.
struct TraceRecord {
  int64_t line = 0;
  std::string op;
  Json json;
  // What a consumer worked out from this record ahead of it (TraceReadAhead's prepare step), or null. It travels
  // with the record and is handed back with it, so its memory is reused.
  std::unique_ptr<TracePrepared> prepared;
};

// Reads a trace line by line (memory flat in trace length). Errors are "line N: <field>: <what>".
class TraceReader {
 public:
  // `in` must outlive the reader; `check` bounds each line as it is read (an error there is "line N: ...").
  explicit TraceReader(std::istream* in, LineCheck check = {}) : in_(in), check_(std::move(check)) {}
  // Reads line 1: an object with "kvshard_trace": 1 and only the keys in `allowed_keys`.
  StatusOr<Json> ReadHeader(const std::vector<std::string>& allowed_keys);
  // Reads the next record into *record; false at the end of the trace. A record's optional "meta" must be an object
  // of at most kMaxTraceMetaBytes. A last line without its '\n' that is not valid JSON (a writer cut mid-record) is
  // InvalidArgument "line N: truncated last record (no newline, not valid JSON)", and truncated_line() is then N.
  StatusOr<bool> Next(TraceRecord* record);
  // The line of a truncated last record Next found, 0 when none.
  int64_t truncated_line() const { return truncated_line_; }
  // The bytes of the line Next read last.
  int64_t line_bytes() const { return static_cast<int64_t>(text_.size()); }

  // Next in two halves, for readers that parse on other threads. NextLine reads the next line's text into *text
  // (*newline: it ended with '\n') and its number into *line; false at the end (a read error is "line N: ...").
  StatusOr<bool> NextLine(std::string* text, bool* newline, int64_t* line);
  // ParseRecord makes that text the record, with Next's errors; a truncated last record sets *truncated_line.
  static Status ParseRecord(const std::string& text, bool newline, int64_t line, TraceRecord* record,
                            int64_t* truncated_line);

 private:
  std::istream* in_;
  LineCheck check_;
  int64_t line_ = 0;
  int64_t truncated_line_ = 0;
  std::string text_;
};

// Writes a trace (the one writer of `kvshard gen`, `simulate --emit-trace` and the recorder's fixtures): line 1 the
// header, then one record per line, each written whole; a failed write is an error, so a short trace never passes
// for a complete one. Memory flat in trace length.
class TraceWriter {
 public:
  // `out` must outlive the writer.
  explicit TraceWriter(std::ostream* out) : out_(out) {}
  // Line 1: {"kvshard_trace": kTraceVersion, then the keys of `header` (allocator, pool, generator)}.
  Status WriteHeader(const Json& header);
  // One record: an object whose first key is "op" (inputs, then "expect").
  Status WriteRecord(const Json& record);
  // One record the caller serialized itself (a hot path building its text directly): a JSON object starting
  // {"op": , without the newline.
  Status WriteRecordText(std::string_view text);
  // Flushes; InvalidArgument "<what>: write failed" when any write so far failed.
  Status Finish(const std::string& what);
  // Records written so far.
  int64_t records() const { return records_; }

 private:
  Status Written();
  std::ostream* out_;
  int64_t records_ = 0;
};

// Prefixes a status message with "line N: ".
Status AtLine(int64_t line, const Status& status);

// Rejects keys of `record` outside `allowed` (plus "op", "expect" and "meta"), naming the first one.
Status CheckRecordKeys(const Json& record, const std::vector<std::string>& allowed);
// The same with `allowed` as a test of each key (an op table's keys, with no list built per record).
Status CheckRecordKeys(const Json& record, const std::function<bool(const std::string&)>& allowed);

// The first place where `got` does not match `expect`: objects match when every key of expect is in got and
// matches; arrays when lengths match and elements match; {} matches any object; scalars match exactly.
struct ExpectMismatch {
  std::string path;         // "pages[0][3]", "ranks[1].send_rows"; empty for the whole value
  Json expected;            // expect's value there
  std::optional<Json> got;  // the answer's value there; nullopt when the answer has no such key
  // The two values as a mismatch line shows them: ShortJson, and "(absent)" for a missing key.
  std::string ExpectedText() const;
  std::string GotText() const;
};
// Returns the first mismatch, or nullopt; adds the number of scalars compared to *fields.
std::optional<ExpectMismatch> MatchExpect(const Json& expect, const Json& got, int64_t* fields);

// A JSON value in one line, cut to `max_chars` with "..." (for mismatch lines).
std::string ShortJson(const Json& value, size_t max_chars = 120);

}  // namespace kvshard

#endif  // KVSHARD_CORE_TRACE_H_

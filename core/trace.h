// Traces (docs/trace-format.md, version 1): JSON Lines whose first line is a header and every later line a
// record {"op", inputs, "expect"}. A streaming reader with line numbers, and the expect-subset matcher.
#ifndef KVSHARD_CORE_TRACE_H_
#define KVSHARD_CORE_TRACE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <thread>
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

 private:
  std::istream* in_;
  LineCheck check_;
  int64_t line_ = 0;
  int64_t truncated_line_ = 0;
  std::string text_;
};

// Reads a trace's records on a thread of its own, ahead of the caller (a 2-core machine parses the next records while
// the caller checks this one). Memory stays flat: the reader reads a line only while the lines queued and the one the
// caller holds take at most kReadAheadBytes (so a large record is read only once the caller is done with the one
// before it) and at most kReadAheadRecords wait. Where no thread can be made, the records are read in the caller.
class TraceReadAhead {
 public:
  static constexpr int64_t kReadAheadBytes = int64_t{4} << 20;
  static constexpr size_t kReadAheadRecords = 64;

  // Runs on the reader thread (or in Next without one) for every record read whole, before the caller gets it: work
  // that depends on the record alone (its shape, a stateless answer) moves off the caller's thread. `ahead` is true
  // when the reader is ahead of the caller (half its bound of records queued, or no thread): optional work is best
  // done then, and left to the caller otherwise, so the two threads share it. It may set or reuse record->prepared;
  // an exception it throws is rethrown by Next in order.
  using Prepare = std::function<void(TraceRecord* record, bool ahead)>;

  // `reader` (its header read) must outlive this object.
  explicit TraceReadAhead(TraceReader* reader, Prepare prepare = nullptr);
  // Stops the reader thread and joins it (a line it is reading is read to its end first: on a pipe, until the writer
  // writes it or closes).
  ~TraceReadAhead();
  TraceReadAhead(const TraceReadAhead&) = delete;
  TraceReadAhead& operator=(const TraceReadAhead&) = delete;

  // As TraceReader::Next, in the same order with the same errors (an exception the reader met is rethrown here).
  // The record *record held before is handed back to the reader thread, which reuses its memory.
  StatusOr<bool> Next(TraceRecord* record);
  // As TraceReader::truncated_line, once Next returned the error.
  int64_t truncated_line() const { return reader_->truncated_line(); }

 private:
  struct Item {
    TraceRecord record;
    StatusOr<bool> more = false;
    int64_t bytes = 0;
    std::exception_ptr exception;
  };
  void ReadAll();

  // How the caller waits for the reader: not, for a batch of kWakeBatch records (at most kBatchWait), or for any.
  enum CallerWait { kNotWaiting, kWaitingForBatch, kWaitingForAny };
  static constexpr size_t kWakeBatch = 8;
  static constexpr std::chrono::microseconds kBatchWait{500};

  TraceReader* reader_;
  Prepare prepare_;
  std::mutex mu_;
  std::condition_variable reader_wake_, caller_wake_;
  std::deque<Item> queue_;                // read, not yet taken; the last one ends the trace (false, or an error)
  std::vector<TraceRecord> spare_;        // records handed back, to read into again
  std::deque<Item> taken_;                // the caller's: taken from the queue together, not yet given out
  std::vector<TraceRecord> handed_back_;  // the caller's: records it is done with, for spare_ at its next lock
  int64_t queued_bytes_ = 0, held_bytes_ = 0;
  bool stop_ = false;
  bool reader_waiting_ = false;  // who to wake (a wake-up per record costs a system call)
  CallerWait caller_waiting_ = kNotWaiting;
  bool ended_ = false;  // the reader queued its last item (Next after it: false)
  std::thread thread_;  // not joinable when no thread could be made
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

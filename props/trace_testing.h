// Shared by the trace properties (reference and GPU replay): arbitrary `kvshard gen` options and an in-memory
// replay of a trace's text with a chosen backend.
#ifndef KVSHARD_PROPS_TRACE_TESTING_H_
#define KVSHARD_PROPS_TRACE_TESTING_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "replay/replayer.h"
#include "replay/trace_gen.h"
#include "core/trace.h"

namespace kvshard::props {

// gen options reaching the edges: N = 1, ps = 1, one-page pools, one-request batches, edge-heavy lengths.
inline replay::TraceGenOptions ArbitraryTraceGenOptions() {
  replay::TraceGenOptions o;
  o.seed = *rc::gen::arbitrary<uint64_t>();
  o.records = *rc::gen::inRange<int64_t>(0, 120);
  o.shard_size = *rc::gen::element<int64_t>(1, 2, 3, 4, 8);
  o.page_size = *rc::gen::element<int64_t>(1, 2, 3, 16);
  o.pages_per_rank = *rc::gen::inRange<int64_t>(1, 40);
  o.need_sort = *rc::gen::arbitrary<bool>();
  o.cp_size = *rc::gen::inRange<int64_t>(1, 9);
  o.batch_size = *rc::gen::inRange<int64_t>(1, 9);
  o.max_len = *rc::gen::element<int64_t>(1, 7, 64, 300);
  o.share_percent = *rc::gen::inRange<int64_t>(0, 101);
  o.edge_heavy = *rc::gen::arbitrary<bool>();
  o.num_layers = *rc::gen::inRange<int64_t>(0, 4);
  o.row_words = *rc::gen::inRange<int64_t>(1, 5);
  o.radix = *rc::gen::arbitrary<bool>();
  return o;
}

// The text of a `kvshard gen` trace of ArbitraryTraceGenOptions with 1 .. max_records records and min_layers ..
// max_layers pool layers (so pipeline records, whose data a device path moves; a batch reads once per layer).
inline std::string ArbitraryPipelineTrace(int64_t max_records, int64_t max_layers, int64_t min_layers = 1) {
  replay::TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(1, max_records + 1);
  o.num_layers = *rc::gen::inRange<int64_t>(min_layers, max_layers + 1);
  std::ostringstream out;
  const Status s = replay::GenerateTrace(o, out);
  RC_ASSERT(s.ok());
  return out.str();
}

// True iff a line of `text` is a record of `op`.
inline bool HasOp(const std::string& text, const std::string& op) {
  return text.find("{\"op\":\"" + op + "\"") != std::string::npos;
}

// The op of a record line ("" for the header).
inline std::string OpOf(const std::string& line) {
  const std::string head = "{\"op\":\"";
  if (line.rfind(head, 0) != 0) return "";
  return line.substr(head.size(), line.find('"', head.size()) - head.size());
}

// The lines of `text`.
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The most get_key_buffer records between a begin_shard_extend and the next begin or end in `text`.
inline int64_t MostReadsInABatch(const std::string& text) {
  int64_t most = 0, reads = 0;
  for (const std::string& line : Lines(text)) {
    const std::string op = OpOf(line);
    if (op == "begin_shard_extend" || op == "end_shard_extend") reads = 0;
    if (op == "get_key_buffer") most = std::max(most, ++reads);
  }
  return most;
}

// What an in-memory replay saw.
struct ReplayCounts {
  int64_t records = 0;
  int64_t rows_compared = 0;  // KV rows checked by the pool pipeline (both paths under diff)
};

// The options the properties replay with: the reference, and the whole radix cache walked after every allocator
// record besides the incremental checks (so a change the incremental check misses still fails a property).
inline replay::ReplayOptions PropertyReplayOptions() {
  replay::ReplayOptions options;
  options.full_invariants = true;
  return options;
}

// Everything a replay reports.
struct Outcome {
  std::string status;  // code and message
  int64_t records = 0, fields = 0, mismatches = 0, rows_compared = 0, truncated_line = 0;
  std::string first_mismatch;
  std::vector<std::string> reported;  // every mismatch passed on (--keep-going)
  bool operator==(const Outcome&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  os << "status=" << o.status << " records=" << o.records << " fields=" << o.fields << " mismatches=" << o.mismatches
     << " rows=" << o.rows_compared << " truncated=" << o.truncated_line << " first=" << o.first_mismatch;
  for (const std::string& m : o.reported) os << "\n  " << m;
  return os;
}

inline std::string ToString(const Outcome& o) {
  std::ostringstream os;
  os << o;
  return os.str();
}

// Replays `text` under `options` and says everything it reported: stopping at the first mismatch, or (keep_going)
// with every mismatch passed on.
inline Outcome ReplayOutcome(const std::string& text, const replay::ReplayOptions& options, bool keep_going) {
  Outcome o;
  std::istringstream in(text);
  replay::ReplayReport report;
  const Status s = keep_going ? replay::ReplayStream(in, options, &report,
                                                     [&o](const replay::ReplayMismatch& m) {
                                                       o.reported.push_back(replay::MismatchText(m));
                                                     })
                              : replay::ReplayStream(in, options, &report);
  o.status = s.ok() ? "OK" : StrCat(static_cast<int>(s.code()), " ", s.message());
  o.records = report.summary.records;
  o.fields = report.summary.fields;
  o.mismatches = report.summary.mismatches;
  o.first_mismatch = report.summary.first_mismatch;
  o.rows_compared = report.rows_compared;
  o.truncated_line = report.truncated_line;
  return o;
}

// Makes the first digit after a random record's "expect": another digit (no leading zero made).
inline std::string CorruptOneExpect(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t at = text.find("\"expect\":"); at != std::string::npos; at = text.find("\"expect\":", at + 1)) {
    starts.push_back(at);
  }
  if (starts.empty()) return text;
  const size_t at = starts[*rc::gen::inRange<size_t>(0, starts.size())];
  const size_t digit = text.find_first_of("0123456789", at);
  if (digit == std::string::npos || text.find('\n', at) < digit) return text;
  std::string out = text;
  out[digit] = out[digit] == '9' ? '8' : static_cast<char>(out[digit] + 1);
  return out;
}

// Drops a random set_kv_buffer record: a later read of its layer's scratch slot can then hold another layer's
// staged rows, which the read's check must see (unchanged when the trace has none).
inline std::string DropOneWrite(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t at = text.find("{\"op\":\"set_kv_buffer\""); at != std::string::npos;
       at = text.find("{\"op\":\"set_kv_buffer\"", at + 1)) {
    starts.push_back(at);
  }
  if (starts.empty()) return text;
  const size_t at = starts[*rc::gen::inRange<size_t>(0, starts.size())];
  const size_t end = text.find('\n', at);
  return text.substr(0, at) + (end == std::string::npos ? "" : text.substr(end + 1));
}

// Adds one to a random begin_shard_extend request's prefix_len: a prefix that is not page-aligned (SGLang's
// "page-aligned" refusal), or with ps = 1 another batch than the one expected (unchanged when the trace has none).
// *begin: which begin_shard_extend record of the trace it changed (from 0; -1: none).
inline std::string ShiftOnePrefix(const std::string& text, int64_t* begin) {
  const std::string op = "{\"op\":\"begin_shard_extend\"", key = "\"prefix_len\":";
  std::vector<std::pair<size_t, int64_t>> starts;  // of the numbers, and their record's begin number
  int64_t begins = 0;
  for (size_t line = text.find(op); line != std::string::npos; line = text.find(op, line + 1), ++begins) {
    const size_t end = std::min(text.find('\n', line), text.find("\"expect\"", line));
    for (size_t at = text.find(key, line); at < end; at = text.find(key, at + 1)) {
      starts.emplace_back(at + key.size(), begins);
    }
  }
  *begin = -1;
  if (starts.empty()) return text;
  const auto [at, record] = starts[*rc::gen::inRange<size_t>(0, starts.size())];
  *begin = record;
  const size_t end = text.find_first_not_of("0123456789", at);
  return text.substr(0, at) + std::to_string(std::stoll(text.substr(at, end - at)) + 1) + text.substr(end);
}

// Replays `text` under `options`; the first mismatch (or malformed record) is the status.
inline Status ReplayTraceText(const std::string& text, const replay::ReplayOptions& options, ReplayCounts* counts) {
  std::istringstream in(text);
  replay::ReplayReport report;
  const Status status = replay::ReplayStream(in, options, &report);
  counts->records = report.summary.records;
  counts->rows_compared = report.rows_compared;
  return status;
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_TRACE_TESTING_H_

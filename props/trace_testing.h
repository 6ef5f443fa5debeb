// Shared by the trace properties (reference and GPU replay): arbitrary `kvshard gen` options and an in-memory
// replay of a trace's text with a chosen backend.
#ifndef KVSHARD_PROPS_TRACE_TESTING_H_
#define KVSHARD_PROPS_TRACE_TESTING_H_

#include <cstdint>
#include <memory>
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

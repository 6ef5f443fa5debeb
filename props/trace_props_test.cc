// Trace properties (docs/trace-format.md): every `kvshard gen` trace replays clean on the reference, with and
// without its pipeline and radix records; a corrupted expect scalar anywhere, and in particular in a pipeline or
// radix cache record, is reported at its line; reading and re-writing a trace is the identity.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/replayer.h"
#include "replay/trace_gen.h"
#include "core/trace.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

using replay::TraceGenOptions;

const std::vector<std::string>& PipelineOps() {
  static const auto* ops =
      new std::vector<std::string>{"begin_shard_extend", "set_kv_buffer", "get_key_buffer", "end_shard_extend"};
  return *ops;
}

const std::vector<std::string>& RadixOps() {
  static const auto* ops = new std::vector<std::string>{"match_prefix", "dec_lock_ref", "insert", "evict"};
  return *ops;
}

// Replays `text` on the reference; returns the first mismatch status (OK when clean) and counts records.
Status ReplayText(const std::string& text, int64_t* records) {
  ReplayCounts counts;
  KVSHARD_RETURN_IF_ERROR(ReplayTraceText(text, PropertyReplayOptions(), &counts));
  *records = counts.records;
  return Status::Ok();
}

std::string Generate(const TraceGenOptions& o) {
  std::ostringstream out;
  RC_ASSERT_OK(replay::GenerateTrace(o, out));
  return out.str();
}

KVSHARD_PROP(TraceProps, GeneratedTracesReplayClean, ()) {
  const TraceGenOptions o = ArbitraryTraceGenOptions();
  const std::string text = Generate(o);
  RC_TAG(o.edge_heavy ? "edge-heavy" : "plain");
  RC_CLASSIFY(text.find("\"error\":") != std::string::npos, "has rejected records");
  RC_CLASSIFY(text.find("\"ok\":false") != std::string::npos, "has deferred batches");
  RC_CLASSIFY(HasOp(text, "begin_shard_extend"), "has pipeline records");
  RC_CLASSIFY(text.find("\"declined\":true") != std::string::npos, "has declined grafts");
  RC_CLASSIFY(HasOp(text, "evict"), "has evictions");
  // The options decide the header's pool and which records may appear.
  RC_ASSERT((Lines(text).at(0).find("\"pool\":") != std::string::npos) == (o.num_layers > 0));
  for (const std::string& op : PipelineOps()) RC_ASSERT(o.num_layers > 0 || !HasOp(text, op));
  for (const std::string& op : RadixOps()) RC_ASSERT(o.radix || !HasOp(text, op));
  // Only the CP plans and the gather plans' edge capacities are meant to be rejected: the generated serving loop
  // (allocs, frees, the cache, the pipeline under the header's pool) never is.
  for (const std::string& line : Lines(text)) {
    if (line.find("\"expect\":{\"error\"") == std::string::npos) continue;
    RC_LOG() << line << "\n";
    const std::string op = OpOf(line);
    RC_ASSERT(op == "gather_plan" || op == "split" || op == "rerange");
  }
  int64_t records = 0;
  RC_ASSERT_OK(ReplayText(text, &records));
  RC_ASSERT(records == o.records);
}

// Changes the first integer after a random position inside a record's expect; the replay must stop there.
KVSHARD_PROP(TraceProps, CorruptedExpectIsReportedAtItsLine, ()) {
  TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(1, 80);
  std::vector<std::string> lines = Lines(Generate(o));
  std::vector<size_t> with_number;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t e = lines[i].find("\"expect\":{");
    if (e != std::string::npos && lines[i].find_first_of("0123456789", e) != std::string::npos &&
        lines[i].find("\"expect\":{\"error\"") == std::string::npos) {
      with_number.push_back(i);
    }
  }
  RC_PRE(!with_number.empty());
  const size_t line = *rc::gen::elementOf(with_number);
  std::string& text = lines[line];
  const size_t e = text.find("\"expect\":{");
  const size_t from = *rc::gen::inRange<size_t>(e, text.size());
  size_t digit = text.find_first_of("0123456789", from);
  if (digit == std::string::npos) digit = text.find_first_of("0123456789", e);
  text.insert(digit, "7");  // 12 -> 712, 0 -> 70: another value, still an integer
  std::string corrupted;
  for (const std::string& l : lines) corrupted += l + "\n";
  RC_LOG() << "line " << line + 1 << ": " << text << "\n";
  int64_t records = 0;
  const Status s = ReplayText(corrupted, &records);
  RC_ASSERT(s.code() == StatusCode::kMismatch);
  RC_ASSERT(s.message().rfind("line " + std::to_string(line + 1) + ": ", 0) == 0);
}

// The same for pipeline and radix cache records: their expect subsets (plan fields, owned counts, scratch rows,
// matches, inserts, unlocks, evictions) are checked, so a changed value stops the replay at its line.
KVSHARD_PROP(TraceProps, CorruptedPipelineOrRadixExpectIsReportedAtItsLine, ()) {
  TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(10, 120);
  o.num_layers = *rc::gen::inRange<int64_t>(1, 4);
  o.radix = true;
  std::vector<std::string> lines = Lines(Generate(o));
  std::vector<size_t> candidates;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string op = OpOf(lines[i]);
    const bool new_op = std::count(PipelineOps().begin(), PipelineOps().end(), op) > 0 ||
                        std::count(RadixOps().begin(), RadixOps().end(), op) > 0;
    const size_t e = lines[i].find("\"expect\":{");
    if (new_op && e != std::string::npos && lines[i].find_first_of("0123456789", e) != std::string::npos &&
        lines[i].find("\"expect\":{\"error\"") == std::string::npos) {
      candidates.push_back(i);
    }
  }
  RC_PRE(!candidates.empty());
  const size_t line = *rc::gen::elementOf(candidates);
  std::string& text = lines[line];
  RC_TAG(OpOf(text));
  const size_t e = text.find("\"expect\":{");
  const size_t from = *rc::gen::inRange<size_t>(e, text.size());
  size_t digit = text.find_first_of("0123456789", from);
  if (digit == std::string::npos) digit = text.find_first_of("0123456789", e);
  text.insert(digit, "7");
  std::string corrupted;
  for (const std::string& l : lines) corrupted += l + "\n";
  RC_LOG() << "line " << line + 1 << ": " << text << "\n";
  int64_t records = 0;
  const Status s = ReplayText(corrupted, &records);
  RC_ASSERT(s.code() == StatusCode::kMismatch);
  RC_ASSERT(s.message().rfind("line " + std::to_string(line + 1) + ": " + OpOf(text) + ": ", 0) == 0);
}

KVSHARD_PROP(TraceProps, ReadThenWriteIsIdentity, ()) {
  const std::string text = Generate(ArbitraryTraceGenOptions());
  std::istringstream in(text);
  TraceReader reader(&in);
  std::string rewritten = RC_VALUE(reader.ReadHeader(replay::TraceHeaderKeys())).dump() + "\n";
  TraceRecord record;
  while (RC_VALUE(reader.Next(&record))) rewritten += record.json.dump() + "\n";
  RC_ASSERT(rewritten == text);
}

}  // namespace
}  // namespace kvshard::props

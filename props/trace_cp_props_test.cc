// gen -> replay of the CP shared-KV records (docs/trace-format.md, "CP shared-KV records"): traces written with
// --cp-records replay clean through the reference, their rejections are the model's reason tags, and a changed
// expect of a page_owners, cp_direct_write, cp_seq_idx, can_cp_split or cp_local_pair record (a value, a boolean,
// or an expected error's tag) is a mismatch at its line.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "replay/replayer.h"
#include "replay/trace_gen.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

const std::vector<std::string>& CpOps() {
  static const auto* ops =
      new std::vector<std::string>{"page_owners", "cp_direct_write", "cp_seq_idx", "can_cp_split", "cp_local_pair"};
  return *ops;
}

bool IsCpOp(const std::string& op) { return std::count(CpOps().begin(), CpOps().end(), op) > 0; }

std::string GenerateCp(replay::TraceGenOptions o) {
  o.cp_records = true;
  std::ostringstream out;
  RC_ASSERT_OK(replay::GenerateTrace(o, out));
  return out.str();
}

Status Replay(const std::string& text) {
  ReplayCounts counts;
  return ReplayTraceText(text, PropertyReplayOptions(), &counts);
}

KVSHARD_PROP(TraceCpProps, GeneratedCpRecordsReplayCleanAndRejectOnlyWithTags, ()) {
  replay::TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(0, 160);
  const std::string text = GenerateCp(o);
  RC_CLASSIFY(std::all_of(CpOps().begin(), CpOps().end(), [&](const std::string& op) { return HasOp(text, op); }),
              "every CP op");
  std::set<std::string> rejected;
  for (const std::string& line : Lines(text)) {
    if (!IsCpOp(OpOf(line))) continue;
    const Json rec = Json::parse(line);
    if (!rec.at("expect").contains("error")) continue;
    const std::string e = rec.at("expect").at("error").get<std::string>();
    rejected.insert(OpOf(line) + " rejected");
    if (OpOf(line) == "cp_direct_write") {
      RC_ASSERT(e.rfind("out_cache_loc: [CP_SHARED_KV_FAIL_FAST][direct_write] reason=", 0) == 0);
    } else if (OpOf(line) == "cp_local_pair") {
      RC_ASSERT(e.rfind("rows local in-seq CP length mismatch", 0) == 0);
    } else if (OpOf(line) == "can_cp_split") {
      RC_ASSERT(e.find("round-robin") != std::string::npos || e.find("round_robin_unsupported") != std::string::npos);
    }
  }
  for (const std::string& tag : rejected) RC_TAG(tag);
  RC_ASSERT_OK(Replay(text));
}

// Inserts a digit into a number, flips a boolean, or edits an expected error's text of one CP record's expect.
KVSHARD_PROP(TraceCpProps, CorruptedCpExpectIsAMismatchAtItsLine, ()) {
  replay::TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(20, 160);
  o.cp_size = std::max<int64_t>(o.cp_size, 2);
  std::vector<std::string> lines = Lines(GenerateCp(o));
  std::vector<size_t> candidates;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (IsCpOp(OpOf(lines[i]))) candidates.push_back(i);
  }
  RC_PRE(!candidates.empty());
  const size_t line = *rc::gen::elementOf(candidates);
  Json rec = Json::parse(lines[line]);
  Json& expect = rec["expect"];
  RC_TAG(OpOf(lines[line]) + (expect.contains("error") ? " error" : ""));
  if (expect.contains("error")) {
    expect["error"] = expect["error"].get<std::string>() + " (not this)";
  } else if (expect.contains("can_cp_split")) {
    expect["can_cp_split"] = !expect["can_cp_split"].get<bool>();
  } else {
    std::string text = expect.dump();
    const size_t from = *rc::gen::inRange<size_t>(0, text.size());
    size_t digit = text.find_first_of("0123456789", from);
    if (digit == std::string::npos) digit = text.find_first_of("0123456789");
    RC_PRE(digit != std::string::npos);
    text.insert(digit, "7");
    expect = Json::parse(text);
  }
  lines[line] = rec.dump();
  std::string corrupted;
  for (const std::string& l : lines) corrupted += l + "\n";
  RC_LOG() << "line " << line + 1 << ": " << lines[line] << "\n";
  const Status s = Replay(corrupted);
  RC_ASSERT(s.code() == StatusCode::kMismatch);
  RC_ASSERT(s.message().rfind("line " + std::to_string(line + 1) + ": " + OpOf(lines[line]) + ": ", 0) == 0);
}

}  // namespace
}  // namespace kvshard::props

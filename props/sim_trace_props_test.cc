// kvshard simulate --emit-trace over random small workloads and configurations: every emitted trace replays clean
// through the reference (the simulator's prefix cache, allocator calls and plans against cpu_ref's), and its
// records carry the simulator's counters.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "replay/replayer.h"
#include "sim/sim_trace.h"
#include "core/trace.h"
#include "core/workload.h"
#include "props/property.h"
#include "props/sim_generators.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

// Replays `text` through the reference; the first mismatch or malformed line, else OK.
Status ReplayText(const std::string& text) {
  ReplayCounts counts;
  return ReplayTraceText(text, PropertyReplayOptions(), &counts);
}

// Every emitted trace replays with 0 mismatches (also one cut short at --emit-max-batches, and the partial trace
// of a simulation refused for a pool too small); a complete one holds one committed alloc per batch, one insert
// per request, and the simulator's declined grafts, duplicate pages and evicted pages.
KVSHARD_PROP(SimTraceProps, EmittedTracesReplayClean, ()) {
  const Workload w = DrawWorkload();
  const sim::SimConfig c = DrawConfig(w);
  sim::SimTraceOptions o;
  o.num_layers = *rc::gen::element<int64_t>(0, 1, 2);
  o.max_batches = *rc::gen::element<int64_t>(0, 0, 0, 2, 5);
  std::ostringstream out;
  sim::SimResult result;
  const StatusOr<sim::SimTraceCounts> n = sim::SimulateWithTrace(w, c, o, out, &result);
  RC_CLASSIFY(c.cache_tokens > 0, "bounded pool");
  if (!n.ok()) {  // a bounded pool full of locked prefixes: what was emitted still replays
    RC_ASSERT(n.status().message().rfind("cache_tokens: ", 0) == 0u);
    RC_TAG("refused by the simulator");
    if (!out.str().empty()) RC_ASSERT_OK(ReplayText(out.str()));
    return;
  }
  RC_ASSERT(result.violations == 0);
  RC_ASSERT_OK(ReplayText(out.str()));
  int64_t committed = 0, inserts = 0, declined = 0, duplicates = 0, evicted = 0, deferred = 0;
  std::istringstream in(out.str());
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const Json r = Json::parse(line);
    const std::string op = r.at("op");
    const Json e = r.value("expect", Json::object());
    if (op == "alloc") (e.at("ok").get<bool>() ? committed : deferred)++;
    if (op == "insert") {
      ++inserts;
      declined += e.at("declined").get<bool>();
      duplicates += e.at("declined").get<bool>() ? 0 : e.at("freed_pages").get<int64_t>();
    }
    if (op == "evict" && e.contains("freed")) evicted += e.at("evicted_pages").get<int64_t>();
  }
  RC_CLASSIFY(deferred > 0, "deferred allocs");
  RC_CLASSIFY(evicted > 0, "evictions");
  RC_CLASSIFY(declined > 0, "declined grafts");
  RC_CLASSIFY(result.cached_tokens > 0, "prefix hits");
  if (n->truncated) {
    RC_TAG("truncated");
    RC_ASSERT(committed == o.max_batches);
    return;
  }
  RC_ASSERT(committed == result.batches);
  RC_ASSERT(inserts == result.requests + result.chunk_inserts);  // at each chunk (not declined) and at release
  RC_ASSERT(declined == result.declined_grafts - result.chunk_declined_grafts);  // a declined chunk is no insert
  RC_ASSERT(duplicates == result.duplicate_pages);
  RC_ASSERT(evicted == result.evicted_pages);
  RC_ASSERT(deferred >= result.deferrals);
}

}  // namespace
}  // namespace kvshard::props

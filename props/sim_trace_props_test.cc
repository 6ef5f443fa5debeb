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

#include "cli/replay.h"
#include "cli/sim_trace.h"
#include "core/trace.h"
#include "core/workload.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

// A workload of documents: request i reads the first k blocks of document d (16 tokens a block), then maybe a
// block of its own; prompts end anywhere in their last block.
Workload DrawWorkload() {
  Workload w;
  w.format = WorkloadFormat::kQwen;
  w.block_tokens = 16;
  const int64_t requests = *rc::gen::inRange<int64_t>(1, 31);
  const int64_t docs = *rc::gen::inRange<int64_t>(1, 5);
  int64_t ts = 0;
  for (int64_t i = 0; i < requests; ++i) {
    WorkloadRequest r;
    const int64_t d = *rc::gen::inRange<int64_t>(0, docs);
    const int64_t k = *rc::gen::inRange<int64_t>(1, 9);
    for (int64_t b = 0; b < k; ++b) r.block_hashes.push_back(d * 100 + b);
    if (*rc::gen::arbitrary<bool>()) r.block_hashes.push_back(1000 + i);
    const int64_t blocks = static_cast<int64_t>(r.block_hashes.size());
    r.input_tokens = 16 * (blocks - 1) + *rc::gen::inRange<int64_t>(1, 17);
    r.output_tokens = *rc::gen::inRange<int64_t>(0, 40);
    ts += *rc::gen::element<int64_t>(0, 0, 100, 5000, 200000);
    r.arrival_us = ts;
    w.requests.push_back(std::move(r));
  }
  return w;
}

sim::SimConfig DrawConfig(const Workload& w) {
  sim::SimConfig c;
  c.shard_size = *rc::gen::inRange<int64_t>(1, 9);
  c.page_size = *rc::gen::element<int64_t>(1, 4, 16);
  const int64_t ps = c.page_size;
  c.chunk_tokens = ps * *rc::gen::inRange<int64_t>(1, 9);
  c.max_batch_tokens = ps * *rc::gen::inRange<int64_t>(1, 17);
  c.max_batch_requests = *rc::gen::inRange<int64_t>(1, 7);
  c.need_sort = *rc::gen::arbitrary<bool>();
  c.time_scale = *rc::gen::element(0.0, 0.5, 1.0);
  c.decode_tokens_per_s = *rc::gen::element(5.0, 50.0, 1000.0);
  if (*rc::gen::arbitrary<bool>()) {  // bounded: from one prompt's pages per rank to a little more
    int64_t pages = 1;
    for (const WorkloadRequest& r : w.requests) pages = std::max(pages, (r.input_tokens + ps - 1) / ps);
    c.cache_tokens = c.shard_size * ps * (pages + *rc::gen::inRange<int64_t>(0, 24));
  }
  return c;
}

// Replays `text` through the reference; the first mismatch or malformed line, else OK.
Status ReplayText(const std::string& text) {
  ReplayCounts counts;
  return ReplayTraceText(text, cli::ReplayOptions{}, &counts);
}

// Every emitted trace replays with 0 mismatches (also one cut short at --emit-max-batches, and the partial trace
// of a simulation refused for a pool too small); a complete one holds one committed alloc per batch, one insert
// per request, and the simulator's declined grafts, duplicate pages and evicted pages.
KVSHARD_PROP(SimTraceProps, EmittedTracesReplayClean, ()) {
  const Workload w = DrawWorkload();
  const sim::SimConfig c = DrawConfig(w);
  cli::SimTraceOptions o;
  o.num_layers = *rc::gen::element<int64_t>(0, 1, 2);
  o.max_batches = *rc::gen::element<int64_t>(0, 0, 0, 2, 5);
  std::ostringstream out;
  sim::SimResult result;
  const StatusOr<cli::SimTraceCounts> n = cli::SimulateWithTrace(w, c, o, out, &result);
  RC_CLASSIFY(c.cache_tokens > 0, "bounded pool");
  if (!n.ok()) {  // a bounded pool full of locked prefixes: what was emitted still replays
    RC_ASSERT(n.status().message().rfind("--cache-tokens: ", 0) == 0u);
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
  RC_ASSERT(inserts == result.requests);
  RC_ASSERT(declined == result.declined_grafts);
  RC_ASSERT(duplicates == result.duplicate_pages);
  RC_ASSERT(evicted == result.evicted_pages);
  RC_ASSERT(deferred >= result.deferrals);
}

}  // namespace
}  // namespace kvshard::props

// Small serving workloads and simulator configurations for the simulator's properties (sim_trace_props_test,
// sim_owners_props_test): documents of 16-token blocks, bounded or unbounded pools, every batching edge.
#ifndef KVSHARD_PROPS_SIM_GENERATORS_H_
#define KVSHARD_PROPS_SIM_GENERATORS_H_

#include <algorithm>
#include <cstdint>
#include <utility>

#include <rapidcheck.h>

#include "core/workload.h"
#include "sim/simulator.h"

namespace kvshard::props {

// A workload of documents: request i reads the first k blocks of document d (16 tokens a block), then maybe a
// block of its own; prompts end anywhere in their last block.
inline Workload DrawWorkload() {
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

// A configuration for `w` with N shard ranks (drawn in [1, 8] when `shard_size` is 0): page size (> 1 when `cp`:
// the CP planner rejects ps = 1, batch_gt1_page_split_fallback), chunking, batch limits, need_sort, and half the
// time a bounded pool of one prompt's pages per rank to a little more, half of those tight instead (the longest
// prompt's pages over N, plus its N * ps reserve, just fit).
inline sim::SimConfig DrawConfig(const Workload& w, int64_t shard_size = 0, bool cp = false) {
  sim::SimConfig c;
  c.shard_size = shard_size > 0 ? shard_size : *rc::gen::inRange<int64_t>(1, 9);
  c.page_size = cp ? *rc::gen::element<int64_t>(2, 4, 16) : *rc::gen::element<int64_t>(1, 4, 16);
  const int64_t ps = c.page_size;
  c.chunked_prefill_size = ps * *rc::gen::inRange<int64_t>(1, 9);
  c.max_prefill_tokens = ps * *rc::gen::inRange<int64_t>(1, 17);
  c.max_running_requests = *rc::gen::inRange<int64_t>(1, 7);
  c.need_sort = *rc::gen::arbitrary<bool>();
  c.time_scale = *rc::gen::element(0.0, 0.5, 1.0);
  c.kv_transfer_gbps = *rc::gen::element(0.001, 1.0, 400.0);  // slow links hold pages long after the prefill
  c.bootstrap_ms = *rc::gen::element(0.0, 0.0, 5.0);
  c.schedule_policy = *rc::gen::arbitrary<bool>() ? sim::SchedulePolicy::kLpm : sim::SchedulePolicy::kFcfs;
  if (*rc::gen::arbitrary<bool>()) {  // bounded: from one prompt's pages per rank to a little more
    int64_t pages = 1;
    for (const WorkloadRequest& r : w.requests) pages = std::max(pages, (r.input_tokens + ps - 1) / ps);
    c.cache_tokens = c.shard_size * ps * (pages + *rc::gen::inRange<int64_t>(0, 24));
    if (*rc::gen::arbitrary<bool>()) {  // tight: the longest prompt and its N * ps reserve just fit an empty pool
      c.cache_tokens =
          c.shard_size * ps * ((pages + c.shard_size - 1) / c.shard_size + 2 + *rc::gen::inRange<int64_t>(0, 3));
    }
  }
  return c;
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_SIM_GENERATORS_H_

// kvshard simulate's CP shared-KV direct-write figures over random small workloads (docs/simulate.md, "CP
// shared-KV direct writes"): with --alloc-mode owners every batch's direct writes pass the owner check on every CP
// rank (checked through the reference direct write on the batch's out_cache_loc, not only by the counters); with
// the rotated allocator the simulator's mismatch count, failed batches and failed rank writes are the reference
// report (FindDirectWriteOwnerMismatches) summed over the batches it ran.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/gather_plan.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_shared_kv.h"
#include "cpu_ref/cp_split.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/sim_generators.h"
#include "sim/observer.h"
#include "sim/simulator.h"

namespace kvshard::props {
namespace {

// Every committed batch as the observer saw it.
class BatchLog : public sim::SimObserver {
 public:
  void OnBatch(const std::vector<int64_t>& requests, const std::vector<ExtendRequest>& batch) override {
    (void)requests;
    batches.push_back(batch);
  }
  std::vector<std::vector<ExtendRequest>> batches;
};

// The reference's view of one batch: the CP plan of `rank`, its extent pages and out_cache_loc.
struct BatchView {
  Int64List extend, prefix, locs;
  std::vector<Int64List> extent;
};

BatchView View(const std::vector<ExtendRequest>& batch, int64_t ps) {
  BatchView v;
  for (const ExtendRequest& r : batch) {
    v.extend.push_back(r.seq_len - r.prefix_len);
    v.prefix.push_back(r.prefix_len);
    v.extent.emplace_back(r.pages.begin() + r.prefix_len / ps, r.pages.end());
  }
  v.locs = RC_VALUE(ref::OutCacheLocFromPages(v.extend, v.extent, ps));
  return v;
}

// The simulation of a drawn workload with CP cp over N = cp * k shard ranks, or nullopt for a pool too small.
struct Run {
  sim::SimResult result;
  BatchLog log;
  sim::SimConfig config;
};

bool Simulate(sim::AllocMode mode, Run* run) {
  const Workload w = DrawWorkload();
  const int64_t cp = *rc::gen::inRange<int64_t>(2, 5);
  run->config = DrawConfig(w, cp * *rc::gen::element<int64_t>(1, 1, 2), /*cp=*/true);
  run->config.cp_size = cp;
  run->config.alloc_mode = mode;
  run->config.observer = &run->log;
  StatusOr<sim::SimResult> r = sim::Simulate(w, run->config);
  if (!r.ok()) {  // a bounded pool that cannot admit a prompt is the only refusal
    RC_ASSERT(r.status().message().rfind("cache_tokens: request ", 0) == 0);
    RC_TAG("pool too small");
    return false;
  }
  if (r->violations > 0) RC_LOG() << "first violation: " << r->first_violation << "\n";
  RC_ASSERT(r->violations == 0);
  run->result = *r;
  RC_TAG(run->config.cache_tokens > 0 ? "bounded" : "unbounded");
  return true;
}

KVSHARD_PROP(SimOwnersProps, OwnerPlanAllocationNeverFailsTheDirectWriteOwnerCheck, ()) {
  Run run;
  if (!Simulate(sim::AllocMode::kOwners, &run)) return;
  const int64_t ps = run.config.page_size, cp = run.config.cp_size;
  const sim::SimResult& r = run.result;
  RC_ASSERT(r.owner_mismatch_pages == 0);
  RC_ASSERT(r.direct_write_failed_batches == 0 && r.direct_write_failed_ranks == 0);
  int64_t pages = 0;
  for (const std::vector<ExtendRequest>& batch : run.log.batches) {
    const BatchView v = View(batch, ps);
    for (int64_t rank = 0; rank < cp; ++rank) {  // the reference direct write of every rank succeeds
      const CPSharedKVBatchPlan plan =
          RC_VALUE(ref::BuildBatchPageAlignedInSeqSplitPlan(v.extend, v.prefix, ps, cp, rank));
      ref::CpSharedKVForwardBatch b;
      b.uses_cp_shared_kv = true;
      b.nsa_cp_metadata = RC_VALUE(ref::BuildBatchMetadataFromPlan(plan));
      b.cp_shared_kv_layout = ref::CpSharedKVLayout{cp, rank, ps};
      b.out_cache_loc = v.locs;
      RC_ASSERT_OK(ref::GetCpSharedKVLocalOutCacheLoc(&b).status());
    }
    for (const Int64List& e : v.extent) pages += static_cast<int64_t>(e.size());
  }
  RC_ASSERT(r.direct_write_pages == pages);
  RC_ASSERT(r.batches == static_cast<int64_t>(run.log.batches.size()));
  RC_CLASSIFY(r.gather_plan_rejections > 0, "SGLang's gather rejects a non-cyclic prefix");
  RC_CLASSIFY(r.class_exhausted_deferrals > 0, "an owner class ran out first");
}

KVSHARD_PROP(SimOwnersProps, RotatedMismatchCountIsTheReferenceReportSummedOverBatches, ()) {
  Run run;
  if (!Simulate(sim::AllocMode::kRotated, &run)) return;
  const int64_t ps = run.config.page_size, cp = run.config.cp_size;
  int64_t mismatches = 0, failed_batches = 0, failed_ranks = 0, pages = 0;
  for (const std::vector<ExtendRequest>& batch : run.log.batches) {
    const BatchView v = View(batch, ps);
    const CPSharedKVBatchPlan plan = RC_VALUE(ref::BuildBatchPageAlignedInSeqSplitPlan(v.extend, v.prefix, ps, cp, 0));
    const std::vector<ref::DirectWriteOwnerMismatch> report =
        RC_VALUE(ref::FindDirectWriteOwnerMismatches(plan, v.extent));
    std::set<int64_t> ranks;
    for (const ref::DirectWriteOwnerMismatch& m : report) ranks.insert(m.compute_owner);
    mismatches += static_cast<int64_t>(report.size());
    failed_ranks += static_cast<int64_t>(ranks.size());
    failed_batches += ranks.empty() ? 0 : 1;
    for (const Int64List& e : v.extent) pages += static_cast<int64_t>(e.size());
  }
  const sim::SimResult& r = run.result;
  RC_ASSERT(r.owner_mismatch_pages == mismatches);
  RC_ASSERT(r.direct_write_failed_batches == failed_batches);
  RC_ASSERT(r.direct_write_failed_ranks == failed_ranks);
  RC_ASSERT(r.direct_write_pages == pages);
  RC_ASSERT(r.gather_plan_rejections == 0);  // rotated chains are cyclic
  RC_CLASSIFY(mismatches == 0, "no page fails (coincidence)");
}

}  // namespace
}  // namespace kvshard::props

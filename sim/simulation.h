// The simulator's internal state (sim/simulator.h's Simulate): one request in flight and the serving loop's
// class, shared by simulator.cc (the loop, batches, caching, transfers), scheduler.cc (SGLang's scheduling pass
// and PrefillAdder) and admission.cc (allocation, eviction, the gather plan and the CP direct-write check).
// Private to //sim:simulator.
#ifndef KVSHARD_SIM_SIMULATION_H_
#define KVSHARD_SIM_SIMULATION_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/alloc_script.h"
#include "core/cp_plan.h"
#include "core/gather_plan.h"
#include "cpu_fast/gather_plan.h"
#include "cpu_fast/allocator.h"
#include "sim/cost_model.h"
#include "sim/prefix_cache.h"
#include "sim/recorder.h"
#include "sim/simulator.h"

namespace kvshard::sim::internal {

// One request in flight.
struct Req {
  int64_t id = 0;
  const WorkloadRequest* w = nullptr;
  std::vector<uint64_t> fps;  // fingerprint of each full prompt page
  int64_t done = 0;           // prompt tokens in the KV pool (cached prefix + prefilled)
  int64_t base = kNewChain;
  std::vector<int64_t> pages;  // position pages so far
  int64_t own_pages = 0;       // pages allocated to this request and not (yet) the tree's
  int64_t lock_node = 0;       // the deepest node it holds a lock on (0: none)
  int64_t cached_at_admission = 0;
  double ready_us = 0;          // arrival + bootstrap: schedulable from then
  double scheduled_us = -1;     // start of its first chunk's batch
  double prefill_done_us = -1;  // end of its last chunk's batch
  double transfer_done_us = 0;  // its KV reached the decode side: pages released
  int64_t sent_tokens = 0;      // prompt tokens whose KV is queued on the link
};

// Page fingerprints of a prompt: the (block id, offset) runs each page covers, hashed; without block ids the
// request's own id makes every page unique.
std::vector<uint64_t> Fingerprints(const WorkloadRequest& w, int64_t id, int64_t block_tokens, int64_t ps);

// p50/p90/p99/max/total of a sample (empty: zeros).
Distribution Summarize(const std::vector<double>& v);

// Input throughput and goodput of `r` over first arrival .. its last prefill end (r->prefill_end_s).
void SetRates(double first_arrival_s, SimResult* r);

// New pages of `batch`: Σ ceil(seq / ps) - prefix / ps.
int64_t NewPages(const std::vector<std::pair<Req*, int64_t>>& batch, int64_t ps);

// One prefill node of a run (sim/cluster.cc drives one per instance): requests are offered to it in arrival
// order, and it runs its event loop up to each next arrival, then to the end.
class Simulation {
 public:
  Simulation(const Workload& w, const SimConfig& c, SimRecord* record, int64_t instances = 1)
      : w_(w),
        c_(c),
        instances_(instances),
        owners_(c.alloc_mode == AllocMode::kOwners && c.cp_size > 1),
        cache_(c.shard_size, /*cyclic_chains=*/!owners_) {
    if (record) rec_ = std::make_unique<SimRecorder>(record);
  }

  // Builds the pool (an input error: a prompt longer than the context, a pool below one page per rank).
  Status Setup();
  // Request `id` (w, which outlives the run) arrives; `last` marks the workload's last request.
  void Offer(const WorkloadRequest* w, int64_t id);
  void set_last_request(int64_t id) { last_request_id_ = id; }
  // Runs the node until its clock reaches `t` (a batch that starts before `t` runs to its end); an infinite `t`
  // drains it. An error when a request can never be admitted.
  Status RunUntil(double t);
  // Final checks and figures.
  StatusOr<SimResult> Finish();
  // Requests offered and not yet prefilled (in the bootstrap queue, waiting, or chunked): the router's load.
  int64_t Outstanding() const;
  int64_t finished() const { return finished_; }
  // Per finished request, in release order: time to first token, queueing delay, transfer time (ms).
  const std::vector<double>& ttft_ms() const { return ttft_ms_; }
  const std::vector<double>& queue_ms() const { return queue_ms_; }
  const std::vector<double>& transfer_ms() const { return transfer_ms_; }
  const std::vector<double>& gathered() const { return gathered_; }
  const std::vector<double>& batch_us() const { return batch_us_; }

 private:
  void Violation(const std::string& what);
  // match_prefix of the first input_length - 1 tokens, page-granular; with `lock`, admits r (locks its node).
  PrefixCache::Match Match(Req& r, bool lock);
  // One scheduling pass (SGLang's get_new_batch_prefill with its PrefillAdder): the chunked request first, then
  // the waiting queue in policy order until a budget stops it. Admitted requests leave the waiting queue.
  std::vector<std::pair<Req*, int64_t>> FormBatch();
  void SortWaiting();  // SchedulePolicy.calc_priority
  // Tries to allocate `batch` (evicting for it when the pool is short); false when deferred.
  StatusOr<bool> Allocate(const std::vector<std::pair<Req*, int64_t>>& batch, ExtendPages* out);
  // One allocator call for `batch` (ab): AllocExtend, or in owner-plan mode AllocExtendByClasses.
  StatusOr<bool> TryAlloc(const std::vector<std::pair<Req*, int64_t>>& batch, const AllocBatch& ab, ExtendPages* out);
  // Evicts N x `need` pages for a deferred batch and frees them to the allocator; false when nothing was evicted.
  StatusOr<bool> EvictFor(int64_t need);
  // Owner-plan mode with nothing running: evicts until `batch` is admitted or the cache has nothing evictable.
  StatusOr<bool> EvictUntilAdmitted(const std::vector<std::pair<Req*, int64_t>>& batch, ExtendPages* out);
  // The error for a batch that can never be admitted (nothing running, nothing left to evict).
  Status NotAdmitted(const std::vector<std::pair<Req*, int64_t>>& batch);
  // The error for a waiting request that no pass admits while nothing runs: why the last pass stopped at it.
  Status NotFormed(Req& r);
  // Builds the gather plan (or, for non-cyclic owner-plan prefixes, the owner-major gather size) into `work`.
  void PlanGather(ExtendBatch& eb, int64_t prefix_pages, int64_t chunk_pages, BatchWork* work);
  // The direct-write owner check of a batch with a CP plan (both modes).
  void CheckDirectWrites(const std::vector<std::pair<Req*, int64_t>>& batch, const ExtendPages& out);
  Status RunBatch(const std::vector<std::pair<Req*, int64_t>>& batch, const ExtendPages& out);
  // SGLang's cache_unfinished_req after a chunk: the prefilled full pages go into the tree (duplicates freed,
  // the row rebound to the tree's pages, the lock moved down), or, declined, stay the request's.
  Status CacheUnfinished(Req& r);
  // Queues the KV of r's newly prefilled tokens on the node's link to the decode side.
  void SendKv(Req& r);
  // SGLang's release_kv_cache (cache_finished_req) once r's KV transfer is done.
  Status Complete(Req& r);
  Status FreePages(const std::vector<int64_t>& pages);
  void CheckConservation(const char* where);
  void SamplePages();
  void Summarize();

  const Workload& w_;
  const SimConfig& c_;
  const int64_t instances_;  // nodes of the cluster (sizes an unbounded pool)
  const bool owners_;        // owner-plan allocation (AllocMode::kOwners with cp_size > 1)
  std::unique_ptr<fast::PageInterleaveAllocator> alloc_;
  PrefixCache cache_;
  fast::GatherPlanner planner_;
  GatherPlan plan_;
  CPSharedKVBatchPlan cp_plan_;
  ScratchSpec scratch_;
  std::vector<std::unique_ptr<Req>> live_;
  std::deque<Req*> inbox_;  // offered, in the bootstrap queue
  std::deque<Req*> waiting_;
  Req* pending_chunk_ = nullptr;  // the last batch's chunked request: cached and sent at the next pass
  int64_t last_request_id_ = -1;
  Req* chunked_ = nullptr;  // SGLang's self.chunked_req: continues first in the next batch
  // Why the last pass that admitted nothing stopped at the head of the waiting queue: SGLang's KV budget (the
  // request's extend + 1 + the per-request reserve, `need`, not below the free and evictable tokens, `available`),
  // or the assembly scratch (_kv_shard_reserve_scratch); kNone when it admitted a request or stopped otherwise.
  struct HeadStop {
    enum Kind { kNone, kKvBudget, kScratch } kind = kNone;
    int64_t need = 0, available = 0;
  };
  HeadStop head_stop_;
  int64_t holding_slots_ = 0;  // requests admitted and not yet released (SGLang's req_to_token_pool slots)
  // SGLang's disagg_prefill_inflight_queue: requests whose KV is on its way, in the order their prefills ended
  // (batch order). Released in that order once their transfer is done; transfer ends never decrease along it,
  // since every request queues behind the earlier ones on the same FIFO link.
  std::deque<Req*> inflight_;
  double now_us_ = 0, link_free_us_ = 0, busy_us_ = 0;
  int64_t step_ = 0, own_pages_ = 0, finished_ = 0, samples_ = 0;
  double in_use_sum_ = 0, skew_sum_ = 0;
  std::vector<double> gathered_, batch_us_, ttft_ms_, queue_ms_, transfer_ms_;
  SimResult r_;
  std::unique_ptr<SimRecorder> rec_;  // only when asked to record
};

}  // namespace kvshard::sim::internal

#endif  // KVSHARD_SIM_SIMULATION_H_

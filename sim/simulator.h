// kvshard simulate's model: SGLang's sharded PD prefill node serving a workload. SGLang's scheduler forms the
// batches (PrefillAdder budgets, the assembly-scratch gate, page-floored chunks, fcfs or lpm), the rotated
// owner-classed allocator (or, with AllocMode::kOwners, pages from their CP compute owners' classes) and the
// prefix cache with the rotation-base rule hold the KV, each prefill chunk is inserted so others can match, and
// pages are released once the request's KV reached the decode side. Every extend batch gets its gather plan
// and, with CP, its split plan; every invariant is checked as it runs; the cost model advances the clock.
#ifndef KVSHARD_SIM_SIMULATOR_H_
#define KVSHARD_SIM_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/workload.h"
#include "sim/cost_model.h"
#include "sim/record.h"
#include "sim/observer.h"

namespace kvshard::sim {

// How extend batches get their pages (docs/simulate.md, "CP shared-KV direct writes").
enum class AllocMode {
  kRotated,  // SGLang's rotated page-interleave allocator (AllocExtend): chains cyclic from their base
  kOwners,   // with cp_size > 1, each new page from its CP compute owner's class (AllocExtendByClasses)
};

// "rotated" / "owners".
const char* AllocModeName(AllocMode mode);

// How the waiting queue is ordered before each batch (SGLang's --schedule-policy; SchedulePolicy.calc_priority).
enum class SchedulePolicy {
  kFcfs,  // first come, first served (SGLang's default)
  kLpm,   // longest prefix match first (fcfs while more than 128 requests wait), in-batch prefix deprioritizing
};

// "fcfs" / "lpm".
const char* SchedulePolicyName(SchedulePolicy policy);

// How a cluster of prefill nodes spreads the arrivals (docs/simulate.md, "A cluster of prefill nodes").
enum class Router {
  kRoundRobin,      // request i to node i % K
  kLeastLoaded,     // the node with the fewest requests not yet prefilled (ties: the lowest index)
  kPrefixAffinity,  // sgl-router's cache_aware, simplified: the node whose routed prompts share the longest prefix
                    // when it covers at least half the prompt, else least-loaded
};

// "round-robin" / "least-loaded" / "prefix-affinity".
const char* RouterName(Router router);

// The most request slots a configuration may have (max_running_requests; it also sizes an unbounded pool).
inline constexpr int64_t kMaxRunningRequests = int64_t{1} << 20;

// The serving configuration of one sharded prefill node (SGLang's server arguments where SGLang has one).
struct SimConfig {
  int64_t shard_size = 8;               // N, KV shard ranks
  int64_t page_size = 64;               // ps
  int64_t cp_size = 1;                  // context-parallel ranks (1: no CP plan)
  int64_t cache_tokens = 0;             // KV pool capacity in tokens (all ranks); 0 = unbounded (never evicts)
  int64_t chunked_prefill_size = 8192;  // SGLang --chunked-prefill-size: tokens per batch (<= 0: unchunked)
  int64_t max_prefill_tokens = 16384;   // SGLang --max-prefill-tokens: prefill tokens per batch
  int64_t max_running_requests = 256;   // requests holding a request slot (in a batch, chunked, transferring)
                                        // (at most kMaxRunningRequests)
  int64_t context_length = 163840;      // the model's context: sizes the assembly scratch's prefix region
  SchedulePolicy schedule_policy = SchedulePolicy::kFcfs;
  double time_scale = 1.0;                     // arrival times are multiplied by this
  double kv_transfer_gbps = 400;               // per rank link to the decode side, Gbit/s (one 400G NIC per GPU)
  double bootstrap_ms = 0;                     // the bootstrap handshake before a request may be scheduled
  double slo_ttft_ms = 0;                      // time-to-first-token target for goodput; 0: none
  int64_t instances = 1;                       // prefill nodes, each N shard ranks with its own pool and cache
  Router router = Router::kRoundRobin;         // how arrivals are spread over the nodes
  int64_t kv_bytes_per_token_layer = 1152;     // one KV row (MLA: 576 bf16)
  std::string model_name = "deepseek-v3";      // the served model (sim/model.h sets the fields it shapes)
  int64_t weight_bytes = 671'000'000'000;      // the model's weights, split over the N ranks
  double hbm_gib = 0;                          // each GPU's memory, GiB (0: not checked)
  bool need_sort = false;                      // the allocator's need_sort mode
  AllocMode alloc_mode = AllocMode::kRotated;  // kOwners needs cp_size | shard_size (cp_size 1: as kRotated)
  CostModel cost;
  SimObserver* observer = nullptr;  // not owned; null (the default): no callbacks, no cost
};

// The assembly scratch a node provisions (SGLang's PageShardSpec as the PrefillAdder reads it): a prefix region
// for one full-context prefix, N * ps * ceil(ceil(context_length / ps) / N) tokens, and a chunk region for one
// chunk, chunked_prefill_size ceiled to ps (context_length ceiled to ps when unchunked).
struct ScratchSpec {
  int64_t max_prefix_tokens = 0, chunk_tokens = 0;
};
ScratchSpec NodeScratch(const SimConfig& config);

// One rank's memory as a planner counts it: weights (the model's / N), the KV pool, the assembly scratch (its
// prefix and chunk regions, two layers in flight), and what remains of `hbm_gib` for more KV.
struct RankMemory {
  int64_t weight_bytes = 0, kv_pool_bytes = 0, kv_peak_bytes = 0, scratch_bytes = 0;
  int64_t hbm_bytes = 0;         // 0 when not checked
  bool fits = true;              // weights + KV pool + scratch <= HBM
  int64_t max_cache_tokens = 0;  // the largest cache_tokens (all ranks) whose pool fits beside the rest; 0 if none
};
RankMemory RankMemoryOf(const SimConfig& config, int64_t pool_pages_per_rank, int64_t pages_in_use_max);

// Distribution summary of a per-batch or per-request quantity.
struct Distribution {
  double total = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// What a simulation measured.
struct SimResult {
  int64_t requests = 0, batches = 0, extend_tokens = 0;
  int64_t hash_blocks = 0, hit_blocks = 0;      // Σ hash blocks, Σ leading hash blocks found cached
  int64_t input_tokens = 0, cached_tokens = 0;  // Σ prompt tokens, Σ prompt tokens served from the cache
  int64_t deferrals = 0, declined_grafts = 0, evicted_pages = 0, duplicate_pages = 0;
  // Of those, by prefill chunks (cache_unfinished_req, not when the transfer is done): inserts not declined, and
  // declined grafts.
  int64_t chunk_inserts = 0, chunk_declined_grafts = 0;
  int64_t violations = 0;
  std::string first_violation;  // "step S request R: ..."
  int64_t pool_pages_per_rank = 0;
  // Pages in use per rank, sampled after every batch: the highest any rank reached, the mean over ranks and
  // samples, and the skew max/mean (worst sample, and mean over samples).
  int64_t pages_in_use_max = 0;
  double pages_in_use_mean = 0, pages_in_use_skew_max = 0, pages_in_use_skew_mean = 0;
  Distribution gathered_bytes_layer;  // per batch
  int64_t cp_compute_tokens = 0, cp_padding_tokens = 0;
  Distribution batch_time_us;  // the cost model's prediction per batch
  double simulated_s = 0;      // the clock at the last completion
  // The prefill node as a planner sees it (docs/simulate.md, "A planner's figures"):
  Distribution ttft_ms;                 // per request: arrival to the end of its last prefill chunk
  Distribution queue_ms;                // per request: arrival to the start of its first chunk's batch
  Distribution transfer_ms;             // per request: prefill end to its KV on the decode side (pages released)
  double arrival_span_s = 0;            // first to last arrival
  double busy_s = 0;                    // Σ batch times
  double prefill_end_s = 0;             // the last prefill's end
  double utilization = 0;               // busy_s / arrival_span_s (>= 1: the node cannot keep up)
  double input_tokens_per_s = 0;        // prompt tokens over first arrival .. last prefill end
  double goodput_requests_per_s = 0;    // requests meeting the TTFT SLO over the same time
  int64_t max_waiting = 0;              // the longest the waiting queue got
  int64_t waiting_at_last_arrival = 0;  // requests waiting when the last one arrived
  int64_t slo_met = 0;                  // requests with ttft <= slo_ttft_ms (all when no SLO is given)
  int64_t kv_peak_bytes_per_rank = 0;   // pages_in_use_max pages of KV, all layers
  int64_t kv_pool_bytes_per_rank = 0;   // the pool's pages of KV, all layers
  int64_t no_token_stops = 0;           // scheduling passes stopped by the KV budget (SGLang AddReqResult.NO_TOKEN)
  int64_t scratch_stops = 0;            // admissions deferred by the assembly scratch (_kv_shard_reserve_scratch)
  // With instances > 1, each node's own figures (the fields above are the cluster's: sums, maxima, and
  // distributions over all requests); empty for one node.
  std::vector<SimResult> nodes;
  // CP shared-KV direct writes (cp_size > 1), every batch checked on every CP rank in both modes:
  int64_t direct_write_pages = 0;           // extent pages written
  int64_t owner_mismatch_pages = 0;         // pages failing the owner check (local_loc_owner_mismatch)
  int64_t direct_write_failed_batches = 0;  // batches where at least one rank's direct write fails
  int64_t direct_write_failed_ranks = 0;    // Σ over batches of the ranks whose direct write fails
  int64_t gather_plan_rejections = 0;       // batches whose prefix owners are not cyclic (SGLang's gather rejects)
  int64_t class_exhausted_deferrals = 0;    // deferrals with enough free pages in the pool, short in one class
};

// Observes the simulation as it runs (for the progress bar): requests finished so far.
using SimProgress = std::function<void(int64_t finished, int64_t total)>;

// Whether the run is overloaded: the batches need at least as long as the arrivals span (utilization >= 1).
inline bool Overloaded(const SimResult& r) { return r.utilization >= 1.0; }

// Checks the configuration (field names as SimConfig's).
Status ValidateSimConfig(const SimConfig& config);

// Runs the workload; an input error (e.g. a request larger than the bounded pool) is InvalidArgument. Invariant
// violations are counted in the result (the first one described), not errors.
StatusOr<SimResult> Simulate(const Workload& workload, const SimConfig& config, const SimProgress& progress = nullptr);

// Simulate, and with a non-null `record` also one row per request and per batch (sim/record.h) for the
// timeline, CSV and plot writers; the result is the same as without. A record or an observer needs one instance.
StatusOr<SimResult> Simulate(const Workload& workload, const SimConfig& config, const SimProgress& progress,
                             SimRecord* record);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_SIMULATOR_H_

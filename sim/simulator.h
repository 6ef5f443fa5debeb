// kvshard simulate's model: a serving workload driven through the rotated owner-classed allocator (or, with
// AllocMode::kOwners, pages from their CP compute owners' classes), the prefix cache with the rotation-base rule,
// chunked prefill batches, the gather plan of every extend batch and, with CP, its split plan; every invariant checked
// as it runs; the cost model advances the clock.
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

// The serving configuration.
struct SimConfig {
  int64_t shard_size = 8;                      // N, KV shard ranks
  int64_t page_size = 64;                      // ps
  int64_t cp_size = 1;                         // context-parallel ranks (1: no CP plan)
  int64_t cache_tokens = 0;                    // KV pool capacity in tokens (all ranks); 0 = unbounded (never evicts)
  int64_t chunk_tokens = 8192;                 // most prefill tokens of one request per batch (a multiple of ps)
  int64_t max_batch_tokens = 16384;            // most prefill tokens per batch
  int64_t max_batch_requests = 256;            // most requests per batch
  double time_scale = 1.0;                     // arrival times are multiplied by this
  double decode_tokens_per_s = 50;             // per request: a finished prefill holds its pages output/rate seconds
  int64_t kv_bytes_per_token_layer = 1152;     // one KV row (MLA: 576 bf16)
  bool need_sort = false;                      // the allocator's need_sort mode
  AllocMode alloc_mode = AllocMode::kRotated;  // kOwners needs cp_size | shard_size (cp_size 1: as kRotated)
  CostModel cost;
  SimObserver* observer = nullptr;  // not owned; null (the default): no callbacks, no cost
};

// Distribution summary of a per-batch quantity.
struct Distribution {
  double total = 0, p50 = 0, p99 = 0, max = 0;
};

// What a simulation measured.
struct SimResult {
  int64_t requests = 0, batches = 0, extend_tokens = 0;
  int64_t hash_blocks = 0, hit_blocks = 0;      // Σ hash blocks, Σ leading hash blocks found cached
  int64_t input_tokens = 0, cached_tokens = 0;  // Σ prompt tokens, Σ prompt tokens served from the cache
  int64_t deferrals = 0, declined_grafts = 0, evicted_pages = 0, duplicate_pages = 0;
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

// Checks the configuration (field names as the CLI's flags).
Status ValidateSimConfig(const SimConfig& config);

// Runs the workload; an input error (e.g. a request larger than the bounded pool) is InvalidArgument. Invariant
// violations are counted in the result (the first one described), not errors.
StatusOr<SimResult> Simulate(const Workload& workload, const SimConfig& config, const SimProgress& progress = nullptr);

// Simulate, and with a non-null `record` also one row per request and per batch (sim/record.h) for the
// timeline, CSV and plot writers; the result is the same as without.
StatusOr<SimResult> Simulate(const Workload& workload, const SimConfig& config, const SimProgress& progress,
                             SimRecord* record);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_SIMULATOR_H_

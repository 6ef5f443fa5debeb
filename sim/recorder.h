// The simulator's side of a SimRecord (sim/record.h): hooks the simulation loop calls, only when asked to
// record, to fill the per-request and per-batch rows. Private to //sim:simulator.
#ifndef KVSHARD_SIM_RECORDER_H_
#define KVSHARD_SIM_RECORDER_H_

#include <cstdint>
#include <vector>

#include "core/workload.h"
#include "sim/cost_model.h"
#include "sim/record.h"
#include "sim/simulator.h"

namespace kvshard::sim {

// Fills a SimRecord as the simulation runs.
class SimRecorder {
 public:
  explicit SimRecorder(SimRecord* out) : out_(out) {}

  // Resets the record for a run of `w` under `c`: one request row per workload request.
  void Begin(const Workload& w, const SimConfig& c, int64_t pool_pages_per_rank);
  // Request `id` matched `cached_tokens` of its `prompt_tokens` (`hash_blocks` block ids) in the prefix cache.
  void OnMatch(int64_t id, int64_t cached_tokens, int64_t prompt_tokens, int64_t hash_blocks);
  // An extend batch ran from `start_us` for t.total_us; the counters are the run's totals after it.
  void OnBatch(double start_us, const BatchWork& work, const BatchTime& t, int64_t deferrals, int64_t evicted_pages,
               int64_t cached_tokens, int64_t hit_blocks);
  // Request `id` had a chunk in the last batch, with rotation base `base`.
  void OnChunk(int64_t id, int64_t base);
  // Request `id`'s prefill ended at `prefill_done_us`; its KV reaches the decode side at `transfer_done_us`.
  void OnPrefillDone(int64_t id, double prefill_done_us, double transfer_done_us);
  // The pool after the last batch: free pages per rank out of `pages_per_rank`.
  void OnPages(const std::vector<int64_t>& free_counts, int64_t pages_per_rank);

 private:
  SimRecord* out_;
  int64_t matched_tokens_ = 0, matched_blocks_ = 0;  // over the requests matched so far
};

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_RECORDER_H_

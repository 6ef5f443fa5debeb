// What `kvshard simulate --timeline/--csv/--plots` need from a run: one row per request and per extend batch,
// collected by the simulator only when a SimRecord is passed to it (the default run records nothing).
#ifndef KVSHARD_SIM_RECORD_H_
#define KVSHARD_SIM_RECORD_H_

#include <cstdint>
#include <vector>

namespace kvshard::sim {

// One request's life, simulated clock in microseconds (-1: the event never happened).
struct RequestRow {
  int64_t request_id = 0;
  double arrived_us = 0;             // arrival time after --time-scale
  double scheduled_us = -1;          // start of the batch that ran its first chunk
  double prefill_completed_us = -1;  // end of the batch that ran its last chunk (the first output token)
  double completed_us = -1;          // its KV reached the decode side (the prefill node released its pages)
  int64_t prefill_tokens = 0;        // prompt tokens
  int64_t decode_tokens = 0;         // output tokens
  int64_t cached_tokens = 0;         // prompt tokens matched in the prefix cache
  int64_t chunks = 0;                // extend batches it took part in
  int64_t rotation_base = -1;        // its allocation chain's rotation base
};

// One extend batch: its work, the cost model's phase times and the pool after it.
struct BatchRow {
  int64_t batch_id = 0;
  double start_us = 0, end_us = 0;
  int64_t requests = 0;
  int64_t prefill_tokens = 0;  // new tokens (Σ chunk lengths)
  int64_t compute_tokens = 0;  // including CP compute padding
  int64_t cp_padding_tokens = 0;
  int64_t prefix_pages = 0;          // distinct prefix pages gathered
  int64_t gathered_bytes_layer = 0;  // all-gather output per rank and layer
  double plan_us = 0, gather_us = 0, stage_us = 0, compute_us = 0, rerange_us = 0, total_us = 0;
  double pack_us = 0;  // the send-block packing part of gather_us (the rest is the all-gather)
  int64_t pages_in_use_min = 0, pages_in_use_max = 0;
  double pages_in_use_mean = 0;  // over ranks, sampled after the batch
  int64_t deferrals = 0;         // batches deferred so far
  int64_t evicted_pages = 0;     // pages evicted so far
  // Running totals over the requests matched so far (for the cumulative prefix hit rate).
  int64_t matched_prompt_tokens = 0, cached_tokens = 0, matched_hash_blocks = 0, hit_blocks = 0;
};

// Everything recorded about one run. Memory: ~100 bytes per request, ~200 + 8 * ranks_recorded per batch.
struct SimRecord {
  // Ranks whose pages in use are kept per batch: ranks 0 .. min(N, kMaxRanks) - 1 (the other ranks enter only
  // the min/mean/max columns), so a record stays bounded at large N.
  static constexpr int64_t kMaxRanks = 16;

  int64_t shard_size = 0, page_size = 0, cp_size = 1, layers = 0;
  int64_t pool_pages_per_rank = 0;
  bool has_block_ids = false;        // whether the workload carries prefix block ids
  int64_t ranks_recorded = 0;        // min(shard_size, kMaxRanks)
  std::vector<RequestRow> requests;  // by request id (= arrival order)
  std::vector<BatchRow> batches;     // in run order
  std::vector<int64_t> rank_pages;   // batches.size() x ranks_recorded: pages in use after each batch

  // Pages in use by rank `rank` (< ranks_recorded) after batch `batch`.
  int64_t RankPages(size_t batch, int64_t rank) const {
    return rank_pages[batch * static_cast<size_t>(ranks_recorded) + static_cast<size_t>(rank)];
  }
};

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_RECORD_H_

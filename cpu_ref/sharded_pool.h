// Reference sharded KV pool for N simulated ranks (spec §3, SGLang PageInterleaveKVPoolMixin): owner-
// filtered writes, chunk staging, the layer-ahead in-place all-gather into two scratch slots, and an
// unsharded baseline pool that serves the same reads. Ranks run in SPMD lockstep: one call = all ranks.
#ifndef KVSHARD_CPU_REF_SHARDED_POOL_H_
#define KVSHARD_CPU_REF_SHARDED_POOL_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/gather_plan.h"
#include "core/status.h"
#include "cpu_ref/gather_plan.h"

namespace kvshard::ref {

// Pool, scratch and model geometry.
struct ShardedPoolConfig {
  int64_t shard_size = 1;         // N simulated ranks
  int64_t page_size = 1;          // ps
  int64_t pages_per_rank = 0;     // allocatable local pages per rank; each rank's pool has one more, the trash page 0
  int64_t max_prefix_tokens = 0;  // scratch prefix region rows (multiple of N*ps)
  int64_t chunk_tokens = 0;       // scratch chunk region rows (multiple of ps)
  int64_t num_layers = 1;         // layers of the pool (start_layer = 0)
  int64_t row_words = 1;          // 32-bit words per KV row
};

// Word `word` of the row written for (layer, loc) in write generation `salt`: any misplaced row differs.
uint32_t RowValue(int64_t layer, int64_t loc, int64_t salt, int64_t word);
// RowValue rows of `locs`, concatenated (locs.size() * row_words words).
std::vector<uint32_t> RowValues(int64_t layer, const std::vector<int64_t>& locs, int64_t salt, int64_t row_words);

// Per-rank pools + two scratch slots per rank, driven in lockstep.
class ShardedPool {
 public:
  // Validates the geometry (as ValidateExtendBatch does, plus layers >= 1, row_words >= 1).
  static StatusOr<ShardedPool> Create(const ShardedPoolConfig& config);

  // begin_shard_extend: builds the batch's plan (errors leave the state unchanged), bumps the epoch,
  // activates staging and, when there is a prefix, kicks layer 0's gather.
  Status BeginShardExtend(const std::vector<ExtendRequest>& requests);
  // end_shard_extend: no sharded extend in flight.
  void EndShardExtend() { active_ = false; }
  // set_kv_buffer on every rank: rank r persists the rows it owns (write plan cached per (locs, epoch));
  // while active, every rank also stages the full rows into slot layer % 2 at translate(loc).
  Status Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows);
  // get_key_buffer + gather by translate(loc) on every rank: waits for slot layer % 2 (a residency miss
  // is an error), kicks layer + 1's gather, returns each rank's rows (rank-major).
  StatusOr<std::vector<std::vector<uint32_t>>> Read(int64_t layer, const std::vector<int64_t>& locs);

  // Rank `rank`'s persisted row `local_row` of `layer` (row_words words).
  std::vector<uint32_t> LocalRow(int64_t rank, int64_t layer, int64_t local_row) const;
  // The current batch's plan.
  const GatherPlan& plan() const { return plan_; }
  // Batches begun so far.
  int64_t epoch() const { return epoch_; }
  // True between BeginShardExtend and EndShardExtend.
  bool active() const { return active_; }
  // (layer, epoch) resident in rank's slot, or (-1, -1).
  std::pair<int64_t, int64_t> resident_key(int64_t rank, int64_t slot) const { return keys_[rank][slot]; }
  // Owner-filter computations so far (a cached write plan is not recomputed).
  int64_t write_plan_builds() const { return write_plan_builds_; }
  // Layer gathers executed so far.
  int64_t gathers() const { return gathers_; }

 private:
  explicit ShardedPool(const ShardedPoolConfig& config);
  void Prefetch(int64_t layer);
  const std::vector<int64_t>& TranslateCached(const std::vector<int64_t>& locs);
  Status CheckLayerAndLocs(int64_t layer, const std::vector<int64_t>& locs) const;

  ShardedPoolConfig config_;
  int64_t rows_per_rank_, scratch_rows_;
  std::vector<std::vector<uint32_t>> pools_;                // [rank][(layer * rows + row) * W + w]
  std::vector<std::vector<std::vector<uint32_t>>> slots_;  // [rank][slot][row * W + w]
  std::vector<std::vector<std::pair<int64_t, int64_t>>> keys_;  // [rank][slot] residency
  GatherPlanner planner_;
  GatherPlan plan_;
  std::vector<int64_t> page_pos_;  // dense, of plan_
  int64_t epoch_ = 0;
  bool active_ = false;
  std::map<std::vector<int64_t>, std::vector<int64_t>> translate_cache_;  // cleared per batch
  std::vector<int64_t> write_plan_locs_;
  int64_t write_plan_epoch_ = -1;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> write_plan_;  // [rank] (index into locs, local row)
  int64_t write_plan_builds_ = 0, gathers_ = 0;
};

// The unsharded baseline: one pool of every logical slot.
class UnshardedPool {
 public:
  // N * (pages_per_rank + 1) * ps slots (the trash pages included), num_layers layers, row_words words per row.
  static StatusOr<UnshardedPool> Create(const ShardedPoolConfig& config);
  // Stores rows at their slots.
  Status Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows);
  // Rows of `locs`.
  StatusOr<std::vector<uint32_t>> Read(int64_t layer, const std::vector<int64_t>& locs) const;

 private:
  UnshardedPool(int64_t slots, int64_t layers, int64_t words) : slots_(slots), layers_(layers), words_(words),
                                                               data_(slots * layers * words, 0) {}
  int64_t slots_, layers_, words_;
  std::vector<uint32_t> data_;
};

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_SHARDED_POOL_H_

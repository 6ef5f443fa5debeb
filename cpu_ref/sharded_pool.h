// Reference sharded KV pool for N simulated ranks (spec §3, SGLang PageInterleaveKVPoolMixin and its MHA/MLA
// pools): per layer a list of (pool buffer, scratch tensor) pairs, owner-filtered writes, chunk staging, the
// layer-ahead in-place all-gather of every pair into two scratch slots, and an unsharded baseline pool that
// serves the same reads. Ranks run in SPMD lockstep: one call = all ranks.
#ifndef KVSHARD_CPU_REF_SHARDED_POOL_H_
#define KVSHARD_CPU_REF_SHARDED_POOL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/gather_plan.h"
#include "core/status.h"
#include "core/zeroed_bytes.h"
#include "cpu_ref/gather_plan.h"

namespace kvshard::ref {

// One per-layer pool buffer and its scratch tensor: an entry of SGLang's `_gather_pairs` (MHA: "k" and "v",
// possibly of different widths; MLA: one latent "kv"; extra per-layer tensors such as an indexer's K and scale).
struct PoolBuffer {
  std::string name;       // the scratch tensor's name
  int64_t row_bytes = 4;  // bytes per token row (head_num * head_dim * element size, ...)
};

// Limits of a buffer list: at most kMaxPoolBuffers buffers, each row in [1, kMaxPoolRowBytes] bytes.
inline constexpr int64_t kMaxPoolBuffers = 16;
inline constexpr int64_t kMaxPoolRowBytes = 16384;

// Pool, scratch and model geometry.
struct ShardedPoolConfig {
  int64_t shard_size = 1;           // N simulated ranks
  int64_t page_size = 1;            // ps
  int64_t pages_per_rank = 0;       // allocatable local pages per rank; each rank's pool has one more, the trash page 0
  int64_t max_prefix_tokens = 0;    // scratch prefix region rows (multiple of N*ps)
  int64_t chunk_tokens = 0;         // scratch chunk region rows (multiple of ps)
  int64_t num_layers = 1;           // layers of the pool (start_layer = 0)
  int64_t row_words = 1;            // 32-bit words per KV row (the one-buffer form; ignored when `buffers` is set)
  std::vector<PoolBuffer> buffers;  // the per-layer buffers; empty: one buffer "kv" of 4 * row_words bytes
};

// The pool's buffer list: config.buffers, or the one-buffer form {"kv", 4 * row_words}.
std::vector<PoolBuffer> BuffersOf(const ShardedPoolConfig& config);
// SGLang's PageInterleaveMHATokenToKVPool pairs: "k" (head_num * head_dim) and "v" (head_num * v_head_dim).
std::vector<PoolBuffer> MhaBuffers(int64_t k_row_bytes, int64_t v_row_bytes);
// SGLang's PageInterleaveMLATokenToKVPool pair: the latent "kv" (kv_cache_dim).
std::vector<PoolBuffer> MlaBuffers(int64_t kv_row_bytes);
// Checks a buffer list (1..kMaxPoolBuffers buffers, unique non-empty names, widths in range); errors name
// `where` + "buffers[i].<field>".
Status ValidatePoolBuffers(const std::vector<PoolBuffer>& buffers, const std::string& where);

// SGLang's NotImplementedError text of set_kv_buffer_prefix_valid under logical-page KV sharding.
inline constexpr char kPrefixValidUnsupported[] =
    "prefix-valid commit is unsupported under logical-page KV sharding (it writes pool rows directly, bypassing "
    "the ownership filter)";

// Rows of one write or read, per buffer: rows[b] holds locs.size() * buffers[b].row_bytes bytes.
using BufferRows = std::vector<std::vector<uint8_t>>;

// Word `word` of the row written for (layer, loc) in write generation `salt`: any misplaced row differs.
uint32_t RowValue(int64_t layer, int64_t loc, int64_t salt, int64_t word);
// RowValue rows of `locs`, concatenated (locs.size() * row_words words).
std::vector<uint32_t> RowValues(int64_t layer, const std::vector<int64_t>& locs, int64_t salt, int64_t row_words);
// Rows of buffer `buffer` for `locs` (row_bytes bytes each): byte j of a row is byte j % 4 (little end first) of
// RowValue(layer, loc, salt, buffer << 12 | j / 4), so a row of another layer, buffer, slot or write differs;
// buffer 0 with row_bytes = 4 * w is the byte image of RowValues.
std::vector<uint8_t> BufferRowValues(int64_t layer, int64_t buffer, const std::vector<int64_t>& locs, int64_t salt,
                                     int64_t row_bytes);
// BufferRowValues of every buffer of `buffers`.
BufferRows AllBufferRowValues(int64_t layer, const std::vector<PoolBuffer>& buffers, const std::vector<int64_t>& locs,
                              int64_t salt);

// Per-rank pools + two scratch slots per rank, driven in lockstep.
class ShardedPool {
 public:
  // Validates the geometry (as ValidateExtendBatch does, plus layers >= 1, row_words >= 1, the buffer list).
  static StatusOr<ShardedPool> Create(const ShardedPoolConfig& config);
  // Create's errors, without allocating the pools.
  static Status CanCreate(const ShardedPoolConfig& config);

  // begin_shard_extend: builds the batch's plan (errors leave the state unchanged), bumps the epoch,
  // activates staging and, when there is a prefix, kicks layer 0's gather.
  Status BeginShardExtend(const std::vector<ExtendRequest>& requests);
  // end_shard_extend: no sharded extend in flight.
  void EndShardExtend() { active_ = false; }
  // set_kv_buffer on every rank (MHA: cache_k and cache_v; MLA: the latent): rank r persists the rows it owns
  // in every buffer (write plan cached per (locs, epoch)); while active, every rank also stages the full rows
  // of every buffer into its scratch tensor of slot layer % 2 at translate(loc).
  Status WriteBuffers(int64_t layer, const std::vector<int64_t>& locs, const BufferRows& rows);
  // WriteBuffers of a one-buffer pool whose rows are whole words: rows holds locs.size() * row_words words.
  Status Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows);
  // get_key_buffer / get_value_buffer + gather by translate(loc) on every rank: waits for slot layer % 2 (a
  // residency miss is an error), kicks layer + 1's gather, returns each rank's rows of every buffer
  // ([rank][buffer]).
  StatusOr<std::vector<BufferRows>> ReadBuffers(int64_t layer, const std::vector<int64_t>& locs);
  // ReadBuffers of a one-buffer pool of whole words: each rank's rows (rank-major).
  StatusOr<std::vector<std::vector<uint32_t>>> Read(int64_t layer, const std::vector<int64_t>& locs);
  // set_kv_buffer_prefix_valid: rejected as SGLang rejects it under sharding (it would write pool rows
  // directly, bypassing the owner filter); FailedPrecondition with kPrefixValidUnsupported, state unchanged.
  Status WritePrefixValid() const;

  // Rank `rank`'s persisted row `local_row` of `layer` (row_words words; a one-buffer pool of whole words).
  std::vector<uint32_t> LocalRow(int64_t rank, int64_t layer, int64_t local_row) const;
  // Rank `rank`'s persisted row `local_row` of buffer `buffer` of `layer` (row_bytes bytes).
  std::vector<uint8_t> LocalRowBytes(int64_t rank, int64_t layer, int64_t buffer, int64_t local_row) const;
  // The per-layer buffers (the gather pairs).
  const std::vector<PoolBuffer>& buffers() const { return buffers_; }
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
  // Layer gathers executed so far (one per layer, covering every pair).
  int64_t gathers() const { return gathers_; }
  // (pool buffer, scratch tensor) pairs gathered so far: gathers() * buffers().size().
  int64_t pair_gathers() const { return pair_gathers_; }

 private:
  explicit ShardedPool(const ShardedPoolConfig& config);
  void Prefetch(int64_t layer);
  const std::vector<int64_t>& TranslateCached(const std::vector<int64_t>& locs);
  Status CheckLayerAndLocs(int64_t layer, const std::vector<int64_t>& locs) const;
  Status CheckOneWordBuffer(const char* what) const;

  ShardedPoolConfig config_;
  std::vector<PoolBuffer> buffers_;
  int64_t rows_per_rank_, scratch_rows_;
  // Zeros until written (core/zeroed_bytes.h): a large pool costs only the pages a trace writes.
  std::vector<std::vector<ZeroedBytes>> pools_;                 // [rank][buffer][(layer * rows + row) * B]
  std::vector<std::vector<std::vector<ZeroedBytes>>> slots_;    // [rank][slot][buffer][row * B]
  std::vector<std::vector<std::pair<int64_t, int64_t>>> keys_;  // [rank][slot] residency
  GatherPlanner planner_;
  GatherPlan plan_;
  DensePagePosCache page_pos_;  // dense, of plan_ (rewritten where the last plan and this one map pages)
  int64_t epoch_ = 0;
  bool active_ = false;
  std::map<std::vector<int64_t>, std::vector<int64_t>> translate_cache_;  // cleared per batch
  std::vector<int64_t> write_plan_locs_;
  int64_t write_plan_epoch_ = -1;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> write_plan_;  // [rank] (index into locs, local row)
  int64_t write_plan_builds_ = 0, gathers_ = 0, pair_gathers_ = 0;
};

// The unsharded baseline: one pool of every logical slot.
class UnshardedPool {
 public:
  // N * (pages_per_rank + 1) * ps slots (the trash pages included), num_layers layers, the config's buffers.
  static StatusOr<UnshardedPool> Create(const ShardedPoolConfig& config);
  // Create's errors, without allocating the pool.
  static Status CanCreate(const ShardedPoolConfig& config);
  // Stores every buffer's rows at their slots.
  Status WriteBuffers(int64_t layer, const std::vector<int64_t>& locs, const BufferRows& rows);
  // Rows of `locs` of every buffer.
  StatusOr<BufferRows> ReadBuffers(int64_t layer, const std::vector<int64_t>& locs) const;
  // WriteBuffers / ReadBuffers of a one-buffer pool of whole words.
  Status Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows);
  StatusOr<std::vector<uint32_t>> Read(int64_t layer, const std::vector<int64_t>& locs) const;

 private:
  UnshardedPool(int64_t slots, int64_t layers, std::vector<PoolBuffer> buffers);
  Status CheckLayerAndLocs(int64_t layer, const std::vector<int64_t>& locs) const;
  int64_t slots_, layers_;
  std::vector<PoolBuffer> buffers_;
  std::vector<ZeroedBytes> data_;  // [buffer][(layer * slots + slot) * B], zeros until written
};

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_SHARDED_POOL_H_

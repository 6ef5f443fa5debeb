// The sharded-pool pipeline records of a trace (begin_shard_extend, set_kv_buffer, get_key_buffer,
// end_shard_extend): run on the reference pool and/or a GPU data path, every read checked against an
// unsharded baseline, and in diff mode every plan and every byte of the two paths compared.
#ifndef KVSHARD_REPLAY_POOL_REPLAY_H_
#define KVSHARD_REPLAY_POOL_REPLAY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "replay/backend.h"
#include "replay/field_answer.h"
#include "replay/pool_data_path.h"
#include "core/gather_plan.h"
#include "core/json.h"
#include "core/status.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::replay {

// The trace header's "pool" object completed with the allocator's geometry.
struct PoolGeometry {
  int64_t shard_size = 1;
  int64_t page_size = 1;
  int64_t pages_per_rank = 0;     // allocatable pages per rank (the allocator's), excluding the trash page
  int64_t max_prefix_tokens = 0;  // scratch prefix region rows
  int64_t chunk_tokens = 0;       // scratch chunk region rows
  int64_t num_layers = 1;
  int64_t row_words = 1;      // 32-bit words per KV row (row bytes = 4 * row_words), the one-buffer form
  uint64_t payload_seed = 0;  // the S of every payload word W(S, layer, slot, generation, word)
  // The per-layer buffers (header "buffers": MHA K/V, MLA latent, extras); always filled: the one-buffer form
  // is {"kv", 4 * row_words}.
  std::vector<ref::PoolBuffer> buffers;
  // True when the header gave "buffers" (else the one-buffer word form).
  bool explicit_buffers = false;
};

// The header keys of "pool".
const std::vector<std::string>& PoolHeaderKeys();

// Reads the header's "pool" object (errors "pool.<field>: ..."); shard geometry comes from the allocator.
StatusOr<PoolGeometry> PoolGeometryFromJson(const Json& pool, int64_t shard_size, int64_t page_size,
                                            int64_t pages_per_rank);

// Word `word` of the row set_kv_buffer writes for `loc` of `layer` in write generation `generation`: every
// (seed, layer, slot, generation) gives other bytes, so a misplaced or stale row is visible.
uint32_t PayloadWord(uint64_t seed, int64_t layer, int64_t loc, int64_t generation, int64_t word);
// The rows of every buffer for `locs`: a slot's buffers concatenated are the PayloadWord bytes of that slot (low
// byte first), so a row in the wrong buffer differs too; one buffer of 4*w bytes is the old word row.
ref::BufferRows PayloadRows(const PoolGeometry& g, int64_t layer, const std::vector<int64_t>& locs, int64_t generation);

// The pipeline state of one trace.
class PoolReplay {
 public:
  // The reference pool (unless backend == kGpu) and `device` (required unless backend == kRef).
  static StatusOr<std::unique_ptr<PoolReplay>> Create(const PoolGeometry& geometry, Backend backend,
                                                      std::unique_ptr<PoolDataPath> device);

  // The pipeline records (docs/trace-format.md): each answer is what its expect is checked against. A read that
  // differs from the unsharded baseline, or (diff) between the paths, is a Mismatch "invariant: ..." / "diff: ...".
  StatusOr<Json> Begin(const Json& rec, const Json* only);
  StatusOr<FieldAnswer> Write(const Json& rec, const Json* only);
  StatusOr<FieldAnswer> Read(const Json& rec, const Json* only);
  StatusOr<Json> End();

  // Rows compared so far (reads against the baseline, and between paths in diff mode).
  int64_t rows_compared() const { return rows_compared_; }

 private:
  PoolReplay(const PoolGeometry& g, Backend backend) : geometry_(g), backend_(backend) {}

  PoolGeometry geometry_;
  Backend backend_;
  std::optional<ref::ShardedPool> pool_;  // the reference path (absent for kGpu)
  std::optional<ref::UnshardedPool> baseline_;
  std::unique_ptr<PoolDataPath> device_;  // the GPU path (absent for kRef)
  bool active_ = false;
  std::vector<int64_t> out_cache_loc_;  // the current extend's chunk slots (set_kv_buffer's default locs)
  std::vector<int64_t> batch_locs_;     // every slot of the current extend (get_key_buffer's default locs)
  std::vector<int64_t> page_pos_;       // the current plan's dense page_pos
  int64_t epoch_ = 0;                   // extends begun so far
  int64_t generation_ = 0;              // set_kv_buffer records so far
  int64_t rows_compared_ = 0;
};

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_POOL_REPLAY_H_

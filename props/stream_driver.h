// Drives random request streams through the whole reference model: radix match -> alloc_extend (with
// eviction and deferral) -> begin_shard_extend -> per-layer writes and reads on the sharded pool and the
// unsharded baseline -> insert into the cache (graft rule) -> free the partial tail page.
#ifndef KVSHARD_PROPS_STREAM_DRIVER_H_
#define KVSHARD_PROPS_STREAM_DRIVER_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "replay/pool_data_path.h"
#include "core/gather_plan.h"
#include "core/status.h"
#include "cpu_ref/allocator.h"
#include "cpu_ref/radix_cache.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::props {

// Stream geometry.
struct StreamConfig {
  int64_t shard_size = 1;
  int64_t page_size = 1;
  int64_t pages_per_rank = 4;  // allocatable pages per rank (the pool has one more: the trash page)
  int64_t num_layers = 1;
  int64_t row_words = 1;
  std::vector<ref::PoolBuffer> buffers;  // the per-layer buffers (MHA K/V, MLA latent, extras); empty: row_words
  int64_t max_batch = 1;                 // requests per step
  int64_t max_len = 1;                   // tokens per request
  bool need_sort = false;
  std::vector<int64_t> shared;  // per document: tokens shared with document 0
};

// One request of a step: a prefix of a document.
struct StreamRequest {
  int64_t doc = 0;
  int64_t len = 1;
};

// RapidCheck printers (found by ADL) for readable counterexamples.
inline void showValue(const StreamRequest& r, std::ostream& os) { os << "(doc " << r.doc << ", len " << r.len << ")"; }
inline void showValue(const StreamConfig& c, std::ostream& os) {
  os << "N=" << c.shard_size << " ps=" << c.page_size << " pages_per_rank=" << c.pages_per_rank
     << " layers=" << c.num_layers << " row_words=" << c.row_words << " buffers=" << c.buffers.size()
     << " max_batch=" << c.max_batch << " max_len=" << c.max_len << " need_sort=" << c.need_sort
     << " docs=" << c.shared.size();
}

// The pool geometry a stream runs on (capacities sized for max_batch requests of max_len tokens).
ref::ShardedPoolConfig StreamPoolConfig(const StreamConfig& config);

// Counters of what a stream exercised.
struct StreamStats {
  int64_t batches = 0, deferred = 0, evicted_pages = 0, declined = 0, prefix_hits = 0, rows_compared = 0;
  int64_t mirror_rows_compared = 0;
};

// The whole model under one stream. Not copyable or movable: the cache points at the driver's allocator.
class StreamDriver {
 public:
  // A driver over a fresh allocator, cache and pools; an error names the invalid geometry (never aborts). With
  // `mirror` (e.g. the GPU backend's data path), every plan and every byte of every buffer of its reads must equal
  // the reference pool's.
  static StatusOr<std::unique_ptr<StreamDriver>> Create(const StreamConfig& config,
                                                        replay::PoolDataPath* mirror = nullptr);
  StreamDriver(const StreamDriver&) = delete;
  StreamDriver& operator=(const StreamDriver&) = delete;
  // Runs one extend batch (or defers it); an error names the first violated expectation.
  Status Step(const std::vector<StreamRequest>& requests);
  // Cache chains cyclic by owners, pages conserved and never duplicated (allocator lists + cache).
  Status CheckInvariants() const;
  // What the stream exercised so far.
  const StreamStats& stats() const { return stats_; }
  // Tokens of a document prefix.
  std::vector<int64_t> Tokens(int64_t doc, int64_t len) const;

 private:
  StreamDriver(const StreamConfig& config, ref::PageInterleaveAllocator allocator, ref::ShardedPool pool,
               ref::UnshardedPool baseline);
  // One layer's set_kv_buffer of the chunk and get_key_buffer of every slot, checked against the baseline:
  // through the one-buffer word API, or every buffer of the pool.
  Status WriteAndReadWords(int64_t layer, const std::vector<int64_t>& chunk, const std::vector<int64_t>& read_locs,
                           int64_t salt);
  Status WriteAndReadBuffers(int64_t layer, const std::vector<int64_t>& chunk, const std::vector<int64_t>& read_locs,
                             int64_t salt);
  // The mirror's write and read of the layer, compared byte for byte with the reference pool's read.
  Status MirrorLayer(int64_t layer, const std::vector<int64_t>& chunk, const std::vector<int64_t>& read_locs,
                     int64_t salt);

  StreamConfig config_;
  ref::PageInterleaveAllocator allocator_;
  ref::RadixCache cache_;
  ref::ShardedPool pool_;
  ref::UnshardedPool baseline_;
  StreamStats stats_;
  replay::PoolDataPath* mirror_ = nullptr;
};

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_STREAM_DRIVER_H_

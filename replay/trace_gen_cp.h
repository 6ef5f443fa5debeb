// kvshard gen --cp-records: a committed batch's CP records (page_owners, cp_direct_write of a random rank on the
// batch's own out_cache_loc or on owner-class pages, cp_seq_idx, can_cp_split, cp_local_pair), drawn from the
// generator's PRNG so the trace stays byte-identical for a seed.
#ifndef KVSHARD_REPLAY_TRACE_GEN_CP_H_
#define KVSHARD_REPLAY_TRACE_GEN_CP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace kvshard::replay {

// One committed extend batch as the CP records see it.
struct CpGenBatch {
  int64_t cp_size = 1;
  int64_t page_size = 1;
  std::vector<int64_t> extend_lens, prefix_lens;
  std::vector<std::vector<int64_t>> new_pages;  // per request: the allocator's pages (the extent, prefix aligned)
  Json split;                                   // the batch's in-seq split answer for one rank (null: rejected)
  bool edge_heavy = false;                      // also corrupted inputs (their expect is the model's error)
};

// What the generator lends: a uniform draw in [lo, hi], and Emit (runs a record through the reference, writes
// it with its expect; returns the answer, null when rejected). `full` says the trace has all its records.
struct CpGenHooks {
  std::function<int64_t(int64_t lo, int64_t hi)> uniform;
  std::function<StatusOr<Json>(Json rec)> emit;
  std::function<bool()> full;
};

// Writes the batch's CP records (stops when full).
Status EmitCpRecords(const CpGenBatch& batch, const CpGenHooks& hooks);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_TRACE_GEN_CP_H_

// The --json results of the CP shared-KV direct write, the page compute-owner plan and seed 003's helpers, from
// typed inputs: what `split --mode owners` prints and what `kvshard replay` checks the CP records' expect against.
#ifndef KVSHARD_REPLAY_CP_RESULTS_H_
#define KVSHARD_REPLAY_CP_RESULTS_H_

#include <cstdint>
#include <optional>

#include "replay/results.h"
#include "core/json.h"
#include "core/status.h"
#include "cpu_ref/cp_helpers.h"

namespace kvshard::replay {

// The page owner plan of `split` (BuildFlatPageOwnerPlan): cp_size, cp_rank, page_size, page_owner_plan (flat)
// and request_page_compute_owners (per request). Errors are the model's (batch_gt1_page_owner_plan_unavailable).
StatusOr<Json> PageOwnersJson(const InSeqSplit& split);

// The CP shared-KV direct write of split.plan.cp_rank (GetCpSharedKVLocal[Physical]OutCacheLoc over the split's
// metadata and layout): cp_local_out_cache_loc, cp_local_physical_out_cache_loc. A failure is InvalidArgument
// "<field>: [CP_SHARED_KV_FAIL_FAST][direct_write] reason=<tag> ...", the owner mismatch naming the first foreign loc.
StatusOr<Json> DirectWriteJson(const InSeqSplit& split, const Int64List& out_cache_loc,
                               std::optional<int64_t> extend_num_tokens, const char* field);

// calculate_cp_seq_idx: {"cp_seq_idx": [[[seq_idx, start, end], ...] per chunk]}.
StatusOr<Json> CpSeqIdxJson(const Int64List& cp_chunks_len, const Int64List& seqs_len);

// can_cp_split: {"can_cp_split": bool}; errors carry SGLang's tags (round_robin_unsupported, cp_split_*).
StatusOr<Json> CanCpSplitJson(int64_t seq_len, int64_t cp_size, bool use_nsa, const ref::CpForwardState& batch,
                              const ref::CpServerArgs& args);

// split_in_seq_cp_local_pair of a rank's local rows (one value each): {"prev": rows[0, prev_len), "next": the
// rest}; the length mismatch is the model's error.
StatusOr<Json> CpLocalPairJson(const Int64List& rows, int64_t prev_len, int64_t next_len);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_CP_RESULTS_H_

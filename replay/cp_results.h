// The --json results of the CP shared-KV direct write, the page compute-owner plan and seed 003's helpers, from
// typed inputs: what `split --mode owners` prints and what `kvshard replay` checks the CP records' expect against.
#ifndef KVSHARD_REPLAY_CP_RESULTS_H_
#define KVSHARD_REPLAY_CP_RESULTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "replay/results.h"
#include "core/json.h"
#include "core/status.h"
#include "cpu_ref/cp_helpers.h"
#include "cpu_ref/cp_split.h"

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

// ---- seed 003's data and NSA helpers (replay/cp_data_results.cc); tensors carry one int64 value per row ----

// compute_nsa_seqlens: {"nsa_seqlens": every length clamped to at most nsa_index_topk}.
Json NsaSeqlensJson(const Int64List& seq_lens, int64_t nsa_index_topk);

// cal_padded_tokens: {"cal_padded_tokens": n}.
StatusOr<Json> CalPaddedTokensJson(const ref::CpForwardState& batch, const ref::CpServerArgs& args, int64_t cp_size);

// pad_nsa_cache_seqlens: {"nsa_cache_seqlens": the lengths, zero-padded where DP or round-robin CP padding applies}.
StatusOr<Json> PadNsaCacheSeqlensJson(const ref::CpForwardState& batch, const ref::CpServerArgs& args, int64_t cp_size,
                                      const Int64List& nsa_cache_seqlens);

// nsa_cp_round_robin_split_data of a 1-D tensor: {"rows": rows t with t % cp_size == cp_rank}.
StatusOr<Json> RoundRobinRowsJson(const Int64List& rows, int64_t cp_size, int64_t cp_rank);

// split_tensor_by_cp_batch_plan (and _pad_cp_request_tensor_for_split) of the batch's flattened rows for
// split.plan.cp_rank: {"rows": the rank's local rows}. mode "data" | "1d" | "position", split_kind "compute" |
// "valid"; errors carry SGLang's tags (batch_gt1_split_input_len_mismatch, batch_gt1_compute_padding_*...).
StatusOr<Json> SplitRowsJson(const InSeqSplit& split, const Int64List& rows, const std::string& mode,
                             const std::string& split_kind, std::optional<int64_t> static_padded_tokens);

// _pad_cp_request_tensor_for_split of one request's rows (row_width int64 values per row, flattened):
// {"rows": the padded rows, flattened}.
StatusOr<Json> PadRequestJson(const Int64List& rows, int64_t row_width, int64_t target_len, const std::string& mode,
                              int64_t req_id);

// select_cp_local_valid_rows_for_cache_write of a rank's local compute rows: {"rows": its valid rows}; tag
// cache_write_valid_selector_shape when `rows` is not the rank's compute row count.
StatusOr<Json> ValidRowsJson(const InSeqSplit& split, const Int64List& rows);

// A batch and the collection's options: each rank's hidden rows are its split of the batch's flattened rows
// (in-seq: split_tensor_by_cp_batch_plan "data"/"compute" of its own plan; round-robin: the t % N split), less
// trim_tail rows at the end (to reach the out-of-bounds tags).
struct CpRowsBatch {
  int64_t cp_size = 1;
  int64_t page_size = 1;
  Int64List extend_lens;
  Int64List prefix_lens;
  int64_t trim_tail = 0;
};

// cp_collect_last_token_hidden over every rank (the all-gather simulated): {"last_tokens": one row per request}.
// mode "in-seq" (_in_seq_collect_last_token_batch), "round-robin" (_round_robin_collect_last_token) or "scalar"
// (one request without a batch plan: each rank's rows are cp_split_and_rebuild_data's zigzag split of the
// token-balanced scalar metadata, collected by _in_seq_collect_last_token's bs = 1 path).
StatusOr<Json> LastTokensJson(const CpRowsBatch& batch, const Int64List& rows, const std::string& mode, Impl impl);

// prepare_input_dp_with_cp_dsa (in-seq mode): {"nsa_cp_metadata": the metadata} of the batch path (shared KV) or
// the scalar token-balanced path; error cp_shared_missing_page_size or the planner's tags.
StatusOr<Json> PrepareMetadataJson(const ref::CPPrepareInput& in);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_CP_RESULTS_H_

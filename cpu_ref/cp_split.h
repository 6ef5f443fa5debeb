// Reference CP split plans (spec §4, seed 003 nsa/utils.py): token-balanced and page-aligned in-seq
// splits, the full CPSharedKVBatchPlan, the communication metadata built from it, the scalar bs=1
// metadata path, round-robin q lengths and last-token owners. Pure functions; errors carry SGLang's tags.
#ifndef KVSHARD_CPU_REF_CP_SPLIT_H_
#define KVSHARD_CPU_REF_CP_SPLIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cp_limits.h"
#include "core/cp_plan.h"
#include "core/status.h"

// The model limits (kMaxCp*), FailFast and the cp_size/cp_rank/page_size checks are in core/cp_limits.h.
namespace kvshard::ref {

// SGLang build_token_balanced_in_seq_split_list: 2N segments of total_len//2N, +1 for the first total_len%2N.
StatusOr<Int64List> BuildTokenBalancedInSeqSplitList(int64_t total_len, int64_t cp_size);

// A split list with its page metadata.
struct InSeqSplit {
  Int64List split_list;
  PageAlignedInSeqSplitInfo info;
};

// SGLang build_page_aligned_in_seq_split_list: page units dealt to 2N segments (pages//2N, +1 for the first
// pages%2N), a segment's tokens are its pages' valid tokens, total_len-extend_len padding goes to the last
// segment. Falls back to the token-balanced split (info.page_aligned=false) when page_size <= 1,
// extend_len <= 0 or the prefix is not page-aligned.
StatusOr<InSeqSplit> BuildPageAlignedInSeqSplitList(int64_t total_len, int64_t extend_len, int64_t extend_prefix_len,
                                                    int64_t page_size, int64_t cp_size);

// Full-page-unit split (SGLang _build_full_page_unit_split): every unit is page_size rows.
struct FullPageUnitSplit {
  Int64List split_list;
  Int64List segment_page_starts;
  Int64List segment_page_ends;
};

// Deals `page_units` full pages to the 2N segments starting at page extend_prefix_len/page_size.
StatusOr<FullPageUnitSplit> BuildFullPageUnitSplit(int64_t page_units, int64_t extend_prefix_len, int64_t page_size,
                                                   int64_t cp_size);

// Where the real last token lives: the rank and its row within that rank's request-local rows.
struct LastTokenLocation {
  int64_t owner = 0;
  int64_t local_offset = 0;
  bool operator==(const LastTokenLocation&) const = default;
};

// SGLang _get_in_seq_last_token_owner_and_offset: token actual_token_count-1 located in `split_list`.
StatusOr<LastTokenLocation> GetInSeqLastTokenOwnerAndOffset(const Int64List& split_list, int64_t cp_size,
                                                            int64_t actual_token_count);

// SGLang build_batch_page_aligned_in_seq_split_plan: every CPSharedKVBatchPlan field for rank cp_rank.
// Errors: InvalidArgument naming the field (SGLang ValueErrors), or the fail-fast tags
// batch_gt1_empty_extend, batch_gt1_non_page_aligned_prefix, batch_gt1_page_split_fallback.
StatusOr<CPSharedKVBatchPlan> BuildBatchPageAlignedInSeqSplitPlan(const Int64List& extend_lens,
                                                                  const Int64List& prefix_lens, int64_t page_size,
                                                                  int64_t cp_size, int64_t cp_rank);

// The same assigned to *plan (fast::BuildBatchPageAlignedInSeqSplitPlanInto in cpu_fast/ reuses its storage).
// On error *plan is unspecified.
Status BuildBatchPageAlignedInSeqSplitPlanInto(const Int64List& extend_lens, const Int64List& prefix_lens,
                                               int64_t page_size, int64_t cp_size, int64_t cp_rank,
                                               CPSharedKVBatchPlan* plan);

// SGLang _build_batch_metadata_from_plan: communication sizes (per_rank_actual_token, max_rank_len from the
// compute splits when compute padding is enabled, else the valid splits) and request 0's scalar fields.
// The metadata keeps the plan (batch_plan). An empty batch is an error (SGLang indexes request 0 and
// raises IndexError).
StatusOr<NSAContextParallelMetadata> BuildBatchMetadataFromPlan(CPSharedKVBatchPlan plan);

// The scalar (bs=1) metadata of prepare_input_dp_with_cp_dsa for one split list of 2N segments
// (zigzag_index, per_rank_actual_token, reverse_split_len, cp_reverse_index, kv_len_prev/next, ...).
StatusOr<NSAContextParallelMetadata> BuildScalarCPMetadata(const InSeqSplit& split, int64_t cp_size, int64_t cp_rank);

// Inputs of prepare_input_dp_with_cp_dsa (in-seq mode) that the model needs from the forward batch.
struct CPPrepareInput {
  int64_t kv_len = 0;  // total tokens of the (single) request on the scalar path
  int64_t cp_rank = 0;
  int64_t cp_size = 1;
  bool uses_cp_shared_kv = false;    // forward_batch.uses_cp_shared_kv with extend/prefix lens present
  Int64List extend_lens;             // forward_batch.extend_seq_lens_cpu
  Int64List prefix_lens;             // forward_batch.extend_prefix_lens_cpu
  std::optional<int64_t> page_size;  // token_to_kv_pool.page_size (None when absent)
};

// prepare_input_dp_with_cp_dsa: shared-KV batches build the batch plan and its metadata (tag
// cp_shared_missing_page_size without a page size); otherwise the scalar token-balanced path.
StatusOr<NSAContextParallelMetadata> PrepareInputDpWithCpDsa(const CPPrepareInput& in);

// Round-robin q lengths of rank cp_rank (SGLang nsa_cp_round_robin_split_q_seqs_cpu).
struct RoundRobinQSeqs {
  Int64List q_lens;  // non-zero per-request lengths on this rank
  Int64List bs_idx;  // the requests they belong to
};

// L += carried remainder; q = L//N + (L%N > r); remainder = L - q*N; zero lengths dropped.
StatusOr<RoundRobinQSeqs> RoundRobinSplitQSeqs(const Int64List& extend_lens, int64_t cp_size, int64_t cp_rank);

// Round-robin last-token owners: global last index g of each request -> (g % N, g // N).
// Tag batch_gt1_empty_extend for a non-positive length.
StatusOr<std::vector<LastTokenLocation>> RoundRobinLastTokenLocations(const Int64List& extend_lens, int64_t cp_size);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_CP_SPLIT_H_

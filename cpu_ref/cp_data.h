// Reference CP data movement on host byte tensors (spec §4-5, seed 003): split a flattened batch by a plan,
// valid-row selection for cache writes, the padded all-gather and its trim, the batch and bs=1 reranges,
// round-robin split/restore and last-token collection. Rows are opaque payloads of any width.
#ifndef KVSHARD_CPU_REF_CP_DATA_H_
#define KVSHARD_CPU_REF_CP_DATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cp_plan.h"
#include "core/host_tensor.h"
#include "core/status.h"

// The tensors are kvshard::HostTensor (core/host_tensor.h).
namespace kvshard::ref {

// How split_tensor_by_cp_batch_plan pads: data/1d pad with zero rows, position continues last + 1
// (a position tensor is 1-D int64: 8-byte little-endian rows).
enum class SplitMode { kData, k1d, kPosition };

// Parses "data" | "1d" | "position" (InvalidArgument "mode: unsupported CP batch split mode='x'").
StatusOr<SplitMode> ParseSplitMode(const std::string& mode);
// Parses "compute" | "valid".
StatusOr<SplitKind> ParseSplitKind(const std::string& kind);

// SGLang split_tensor_by_cp_batch_plan: this rank's rows (per request segment r then 2N-1-r). `compute`
// pads each request to its compute length when compute padding is enabled; `valid` never pads.
// Tags: batch_gt1_missing_split_metadata, batch_gt1_split_input_len_mismatch,
// batch_gt1_split_target_len_mismatch, batch_gt1_compute_padding_len_mismatch,
// batch_gt1_compute_padding_empty_request, batch_gt1_position_padding_rank.
StatusOr<HostTensor> SplitTensorByCPBatchPlan(const HostTensor& input, const CPSharedKVBatchPlan& plan, SplitMode mode,
                                              SplitKind kind,
                                              std::optional<int64_t> static_padded_tokens = std::nullopt);

// SGLang _pad_cp_request_tensor_for_split: one request's rows padded to target_len rows (zero rows; position
// mode: positions continuing the last one by +1). Tags batch_gt1_compute_padding_len_mismatch (target shorter),
// batch_gt1_compute_padding_empty_request, batch_gt1_position_padding_rank (rows wider than one int64).
StatusOr<HostTensor> PadCPRequestTensorForSplit(const HostTensor& request, int64_t target_len, SplitMode mode,
                                                int64_t req_id);

// Local compute-row indices of this rank's valid rows and the compute row count they index into
// (SGLang _get_cp_local_valid_row_indices_cache). Tag cache_write_valid_selector_metadata.
struct ValidRowSelector {
  Int64List indices;
  int64_t compute_rows = 0;
};
StatusOr<ValidRowSelector> BuildCPLocalValidRowSelector(const CPSharedKVBatchPlan& plan);

// SGLang select_cp_local_valid_rows_for_cache_write: drops compute-padding rows (identity when compute
// padding is disabled). Tag cache_write_valid_selector_shape when `local` is not the compute rows.
StatusOr<HostTensor> SelectCPLocalValidRowsForCacheWrite(const HostTensor& local, const CPSharedKVBatchPlan& plan);

// SGLang _cp_attn_tp_all_gather_padded_tensor over all ranks: each rank's rows padded with zero rows to
// ceil(total_len / N) and concatenated rank-major.
StatusOr<HostTensor> AllGatherPadded(const std::vector<HostTensor>& rank_inputs, int64_t total_len);

// SGLang _trim_cp_rank_padding_after_all_gather: block r (max_rank_len[r] rows) cut to per_rank_actual_token[r].
StatusOr<HostTensor> TrimCPRankPaddingAfterAllGather(const HostTensor& gathered, const Int64List& max_rank_len,
                                                     const Int64List& per_rank_actual_token);

// SGLang _torch_in_seq_all_gather_rerange (bs=1): trim, split by reverse_split_len, reorder by cp_reverse_index.
StatusOr<HostTensor> InSeqAllGatherRerange(const HostTensor& gathered, const NSAContextParallelMetadata& metadata);

// One contiguous copy of the batch rerange: `rows` rows from gathered row src_row to output row dst_row.
struct RowCopy {
  int64_t src_row = 0;
  int64_t dst_row = 0;
  int64_t rows = 0;
};

// The batch rerange as contiguous segment copies, in output order (empty segments omitted); same layout and
// errors as BatchRerangeSourceRows.
StatusOr<std::vector<RowCopy>> BatchRerangeCopies(const Int64Table& split_lists, int64_t cp_size,
                                                  int64_t max_rank_token);

// Gathered row of every output row for the batch rerange: rank-major blocks of max_rank_token rows, rank r
// holding per request its rows of segment r then 2N-1-r (`split_lists`). Tag
// batch_gt1_full_rerange_unsupported reason=bad_request_split / rank_payload_exceeds_max.
StatusOr<Int64List> BatchRerangeSourceRows(const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token);

// SGLang _torch_batch_in_seq_all_gather_rerange (batch_size > 1; layout by metadata's request_split_lists).
StatusOr<HostTensor> BatchInSeqAllGatherRerange(const HostTensor& gathered, const NSAContextParallelMetadata& metadata,
                                                int64_t cp_size);
// The same assigned to *out (fast::BatchInSeqAllGatherRerangeInto in cpu_fast/ reuses the buffer).
Status BatchInSeqAllGatherRerangeInto(const HostTensor& gathered, const NSAContextParallelMetadata& metadata,
                                      int64_t cp_size, HostTensor* out);

// SGLang cp_split_and_rebuild_data without a batch plan (the scalar in-seq path): `input` split by
// metadata.split_list, the segments of metadata.zigzag_index concatenated. The split must cover every row.
StatusOr<HostTensor> CpSplitAndRebuildScalar(const HostTensor& input, const NSAContextParallelMetadata& metadata);

// nsa_cp_round_robin_split_data: rows t with t % N == cp_rank.
StatusOr<HostTensor> RoundRobinSplitData(const HostTensor& input, int64_t cp_size, int64_t cp_rank);
// The round-robin restore view(N, -1).T of a gathered buffer (rows must be a multiple of N).
StatusOr<HostTensor> RoundRobinRestore(const HostTensor& gathered, int64_t cp_size);

// Selects rows `indices` of `t` (all must be in range).
StatusOr<HostTensor> IndexRows(const HostTensor& t, const Int64List& indices);
// Concatenates tensors of one row width.
StatusOr<HostTensor> ConcatRows(const std::vector<HostTensor>& parts);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_CP_DATA_H_

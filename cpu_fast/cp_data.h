// Fast host batch rerange (spec §5): ref::BatchRerangeCopies / BatchRerangeSourceRows /
// BatchInSeqAllGatherRerange(Into)'s API, outputs and errors (differential-tested in
// props/fast_vs_ref_props_test.cc), copying whole segments, with streaming stores for large outputs.
#ifndef KVSHARD_CPU_FAST_CP_DATA_H_
#define KVSHARD_CPU_FAST_CP_DATA_H_

#include <concepts>
#include <cstdint>
#include <vector>

#include "core/cp_plan.h"
#include "core/status.h"

namespace kvshard::fast {

// A row-major host byte tensor shaped like HostTensor (core/host_tensor.h): `rows` rows of `row_bytes` bytes in
// `data`.
template <typename T>
concept HostRows = requires(T t) {
  { t.rows } -> std::convertible_to<int64_t>;
  { t.row_bytes } -> std::convertible_to<int64_t>;
  { t.data } -> std::same_as<std::vector<uint8_t>&>;
};

// One contiguous copy of the batch rerange: `rows` rows from gathered row src_row to output row dst_row.
struct RowCopy {
  int64_t src_row = 0;
  int64_t dst_row = 0;
  int64_t rows = 0;
  bool operator==(const RowCopy&) const = default;
};

// The batch rerange as contiguous segment copies, in output order (empty segments omitted). Tag
// batch_gt1_full_rerange_unsupported reason=bad_cp_size / bad_request_split / bad_max_rank_token /
// rank_payload_exceeds_max.
StatusOr<std::vector<RowCopy>> BatchRerangeCopies(const Int64Table& split_lists, int64_t cp_size,
                                                  int64_t max_rank_token);

// Gathered row of every output row of the batch rerange (BatchRerangeCopies expanded; same errors).
StatusOr<Int64List> BatchRerangeSourceRows(const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token);

// The copies of SGLang _torch_batch_in_seq_all_gather_rerange for a gathered tensor of `rows` rows of
// `row_bytes` bytes held in `bytes` bytes (field name "gathered" in shape errors).
StatusOr<std::vector<RowCopy>> BatchRerangeCopiesFor(int64_t rows, int64_t row_bytes, size_t bytes,
                                                     const NSAContextParallelMetadata& metadata, int64_t cp_size);

// Performs `copies` of row_bytes-byte rows from `src` to `dst` (dst_bytes long), with 64-byte non-temporal
// stores when dst_bytes >= kStreamingCopyBytes and the CPU has AVX-512, else memcpy.
void CopyRowRuns(const std::vector<RowCopy>& copies, const uint8_t* src, int64_t row_bytes, uint8_t* dst,
                 size_t dst_bytes);

// Outputs at least this large are written with streaming stores (beyond a core's share of the last-level cache).
inline constexpr size_t kStreamingCopyBytes = size_t{32} << 20;

// SGLang _torch_batch_in_seq_all_gather_rerange (batch_size > 1) into `out` (reallocated, zero-filled, only
// when its shape differs); any HostRows tensor (HostTensor). Call it qualified, fast::...: HostTensor and the
// metadata live in namespace kvshard, where argument-dependent lookup finds no rerange, so an unqualified call
// resolves by ordinary lookup alone: fast::'s inside kvshard::fast, ref::'s inside kvshard::ref, else none.
template <HostRows Tensor>
Status BatchInSeqAllGatherRerangeInto(const Tensor& gathered, const NSAContextParallelMetadata& metadata,
                                      int64_t cp_size, Tensor* out) {
  KVSHARD_ASSIGN_OR_RETURN(std::vector<RowCopy> copies, BatchRerangeCopiesFor(gathered.rows, gathered.row_bytes,
                                                                              gathered.data.size(), metadata, cp_size));
  const int64_t total = copies.empty() ? 0 : copies.back().dst_row + copies.back().rows;
  if (out->row_bytes != gathered.row_bytes || out->rows != total) {
    out->rows = total;
    out->row_bytes = gathered.row_bytes;
    out->data.assign(static_cast<size_t>(total * gathered.row_bytes), 0);
  }
  CopyRowRuns(copies, gathered.data.data(), gathered.row_bytes, out->data.data(), out->data.size());
  return Status::Ok();
}

// The same into a new tensor.
template <HostRows Tensor>
StatusOr<Tensor> BatchInSeqAllGatherRerange(const Tensor& gathered, const NSAContextParallelMetadata& metadata,
                                            int64_t cp_size) {
  Tensor out;
  // Qualified: an unqualified dependent call would also take overloads found by argument-dependent lookup in
  // the tensor type's namespace (a non-template exact match there would win over this template).
  KVSHARD_RETURN_IF_ERROR(fast::BatchInSeqAllGatherRerangeInto(gathered, metadata, cp_size, &out));
  return out;
}

}  // namespace kvshard::fast

#endif  // KVSHARD_CPU_FAST_CP_DATA_H_

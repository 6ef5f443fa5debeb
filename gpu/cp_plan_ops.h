// CP plan -> device work: segment tables for split-by-plan and valid-row selection built from a
// CPSharedKVBatchPlan (O(batch) host metadata, no per-row index), and host-vector runners of the CP kernels
// for tests and the CLI. Host-safe header.
#ifndef KVSHARD_GPU_CP_PLAN_OPS_H_
#define KVSHARD_GPU_CP_PLAN_OPS_H_

#include <cstdint>
#include <vector>

#include "core/cp_plan.h"
#include "core/status.h"
#include "gpu/cp_ops.h"

namespace kvshard::gpu {

// Descriptors of LaunchSegmentGather: one per (request, zigzag segment) of this rank.
struct SegmentTable {
  Int64List out_start;  // segments + 1 entries
  Int64List src_start, valid_len, last_row, pad_offset;
  int64_t out_rows = 0;
  int64_t segments() const { return static_cast<int64_t>(src_start.size()); }
};

// SGLang split_tensor_by_cp_batch_plan for plan.cp_rank as segments: `input_rows` must equal the batch's
// extend tokens (or, for compute splits with compute padding, lie in (tokens, sum of compute lengths]: the
// input is then trimmed). Errors carry SGLang's tags (batch_gt1_split_input_len_mismatch, ...).
StatusOr<SegmentTable> SplitSegments(const CPSharedKVBatchPlan& plan, SplitKind kind, int64_t input_rows);
// SGLang select_cp_local_valid_rows_for_cache_write as segments over this rank's compute rows (identity when
// compute padding is disabled); *compute_rows receives the local row count the input must have.
StatusOr<SegmentTable> ValidRowSegments(const CPSharedKVBatchPlan& plan, int64_t* compute_rows);

// Runs one segment gather on the current device (uploads, launches, downloads).
StatusOr<std::vector<uint8_t>> RunSegmentGather(const std::vector<uint8_t>& input, int64_t row_bytes,
                                                const SegmentTable& table, PadMode pad);
// Which launches RunBatchRerange makes.
enum class RerangeRun {
  kAuto,             // LaunchBatchRerange (table, index and gather), scratch from the stream-ordered pool
  kTableThenGather,  // LaunchBuildRerangeTable once, then LaunchRerangeFromTable (the per-batch, per-layer shape)
};

// Runs the batch rerange (valid split lists of every request, max_rank_token rows per rank block).
StatusOr<std::vector<uint8_t>> RunBatchRerange(const std::vector<uint8_t>& gathered, int64_t row_bytes,
                                               const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token,
                                               RerangeRun how = RerangeRun::kAuto);
// Runs this rank's last-token collection: B rows, zero where plan.cp_rank is not the owner.
StatusOr<std::vector<uint8_t>> RunCollectLastToken(const std::vector<uint8_t>& hidden, int64_t row_bytes,
                                                   const CPSharedKVBatchPlan& plan);
// Runs the round-robin split of rank `rank` / the restore of an all-gathered buffer.
StatusOr<std::vector<uint8_t>> RunRoundRobinSplit(const std::vector<uint8_t>& input, int64_t row_bytes, int64_t cp,
                                                  int64_t rank);
StatusOr<std::vector<uint8_t>> RunRoundRobinRestore(const std::vector<uint8_t>& gathered, int64_t row_bytes,
                                                    int64_t cp);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_CP_PLAN_OPS_H_

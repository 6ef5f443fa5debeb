// The CP current-chunk exchange on the GPU (seed 003, cp_all_gather_rerange_output): every rank's local rows
// padded to max_rank_token, one all-gather over the shard group, then the single-launch fused rerange back to
// request order. Host-safe header.
#ifndef KVSHARD_GPU_CP_GATHER_H_
#define KVSHARD_GPU_CP_GATHER_H_

#include <cstdint>
#include <vector>

#include "core/cp_plan.h"
#include "core/status.h"
#include "gpu/collective.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Checks the exchange's sizes: every local rank's row count <= max_rank_token, split table batch x 2N.
Status CpGatherRerangeCanImplement(const RankGroup& group, const Int64Table& split_lists, int64_t max_rank_token,
                                   const std::vector<int64_t>& local_rows, int64_t row_bytes);

// For each local rank i: copies local[i] (local_rows[i] rows) into the head of its padded send block of
// max_rank_token rows (the rest zero), all-gathers the blocks into gathered[i] (N * max_rank_token rows),
// and reranges them into out[i] (sum of split_lists rows, request order). `splits[i]` is the split table on
// rank i's device (batch x 2N, request-major); all buffers live on rank i's device; work runs on streams[i].
Status CpGatherRerange(RankGroup& group, const std::vector<const void*>& local, const std::vector<int64_t>& local_rows,
                       const std::vector<void*>& send, const std::vector<void*>& gathered,
                       const std::vector<void*>& out, const std::vector<const int64_t*>& splits,
                       const Int64Table& split_lists, int64_t max_rank_token, int64_t row_bytes,
                       const std::vector<cudaStream_t>& streams);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_CP_GATHER_H_

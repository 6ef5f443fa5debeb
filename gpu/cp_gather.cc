// CP current-chunk exchange: pad, all-gather, fused rerange.
#include <cuda_runtime.h>

#include "gpu/cp_gather.h"
#include "gpu/cp_ops.h"
#include "gpu/nvtx.h"

namespace kvshard::gpu {

Status CpGatherRerangeCanImplement(const RankGroup& group, const Int64Table& split_lists, int64_t max_rank_token,
                                   const std::vector<int64_t>& local_rows, int64_t row_bytes) {
  const int64_t n = group.size();
  if (split_lists.width != 2 * n) {
    return InvalidArgument("split_lists: width must be 2 * cp_size = ", 2 * n, ", got ", split_lists.width);
  }
  KVSHARD_RETURN_IF_ERROR(BatchRerangeCanImplement(split_lists.rows(), n, max_rank_token, row_bytes));
  if (local_rows.size() != group.local_ranks().size()) return InvalidArgument("local_rows: one count per local rank");
  for (size_t i = 0; i < local_rows.size(); ++i) {
    if (local_rows[i] < 0 || local_rows[i] > max_rank_token) {
      return InvalidArgument("local_rows[", i, "]: must be in [0, max_rank_token = ", max_rank_token, "], got ",
                             local_rows[i]);
    }
  }
  return Status::Ok();
}

Status CpGatherRerange(RankGroup& group, const std::vector<const void*>& local, const std::vector<int64_t>& local_rows,
                       const std::vector<void*>& send, const std::vector<void*>& gathered,
                       const std::vector<void*>& out, const std::vector<const int64_t*>& splits,
                       const Int64Table& split_lists, int64_t max_rank_token, int64_t row_bytes,
                       const std::vector<cudaStream_t>& streams) {
  KVSHARD_NVTX_RANGE("kvshard.cp.gather_rerange");
  KVSHARD_RETURN_IF_ERROR(CpGatherRerangeCanImplement(group, split_lists, max_rank_token, local_rows, row_bytes));
  const size_t k = group.local_ranks().size();
  if (local.size() != k || send.size() != k || gathered.size() != k || out.size() != k || splits.size() != k ||
      streams.size() != k) {
    return InvalidArgument("buffers: one of each per local rank");
  }
  int64_t total = 0;
  for (int64_t v : split_lists.values) total += v;
  const size_t block = static_cast<size_t>(max_rank_token * row_bytes);
  std::vector<const void*> send_c(send.begin(), send.end());
  for (size_t i = 0; i < k; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(group.device(static_cast<int>(i))));
    const size_t used = static_cast<size_t>(local_rows[i] * row_bytes);
    if (used) KVSHARD_CUDA_CHECK(cudaMemcpyAsync(send[i], local[i], used, cudaMemcpyDeviceToDevice, streams[i]));
    if (block > used)
      KVSHARD_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(send[i]) + used, 0, block - used, streams[i]));
  }
  if (block) KVSHARD_RETURN_IF_ERROR(group.AllGather(send_c, gathered, block, streams));
  for (size_t i = 0; i < k; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(group.device(static_cast<int>(i))));
    KVSHARD_RETURN_IF_ERROR(LaunchBatchRerange(out[i], gathered[i], splits[i], split_lists.rows(), group.size(),
                                               max_rank_token, total, row_bytes, nullptr, streams[i]));
  }
  return Status::Ok();
}

}  // namespace kvshard::gpu

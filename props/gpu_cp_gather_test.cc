// The CP current-chunk exchange end to end: each rank splits the batch by its plan (valid rows), the ranks pad
// and all-gather their rows and rerange them; every rank must get the batch back in request order, bit-exact.
// Emulated groups of N = 1..8 ranks on one GPU, and NCCL across 2 GPUs. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "gpu/collective.h"
#include "gpu/cp_gather.h"
#include "gpu/device.h"
#include "props/cp_generators.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// Runs the exchange of case `c` on `group` (group.size() == c.cp_size); returns the first mismatch.
Status Exchange(gpu::RankGroup& group, const CPBatchCase& c) {
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  std::vector<HostTensor> locals;
  CPSharedKVBatchPlan plan0;
  for (int64_t r = 0; r < c.cp_size; ++r) {
    KVSHARD_ASSIGN_OR_RETURN(CPSharedKVBatchPlan plan, ref::BuildBatchPageAlignedInSeqSplitPlan(
                                                           c.extend_lens, c.prefix_lens, c.page_size, c.cp_size, r));
    if (r == 0) plan0 = plan;
    KVSHARD_ASSIGN_OR_RETURN(HostTensor local,
                             ref::SplitTensorByCPBatchPlan(x, plan, ref::SplitMode::kData, SplitKind::kValid));
    locals.push_back(std::move(local));
  }
  KVSHARD_ASSIGN_OR_RETURN(NSAContextParallelMetadata meta, ref::BuildBatchMetadataFromPlan(plan0));
  const int64_t m = meta.max_rank_token(), rb = c.row_bytes, n = c.cp_size;
  std::vector<gpu::DeviceBuffer> bufs;
  std::vector<const void*> local;
  std::vector<int64_t> rows;
  std::vector<void*> send, gathered, out;
  std::vector<const int64_t*> splits;
  std::vector<cudaStream_t> streams;
  for (size_t i = 0; i < group.local_ranks().size(); ++i) {
    const int rank = group.local_ranks()[i];
    KVSHARD_CUDA_CHECK(cudaSetDevice(group.device(static_cast<int>(i))));
    KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer l,
                             gpu::Upload(locals[rank].data.empty() ? std::vector<uint8_t>(rb) : locals[rank].data));
    KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer s, gpu::DeviceBuffer::Allocate(std::max<int64_t>(1, m) * rb));
    KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer g, gpu::DeviceBuffer::Allocate(std::max<int64_t>(1, n * m) * rb));
    KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer o, gpu::DeviceBuffer::Allocate(std::max<int64_t>(1, x.rows) * rb));
    KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer sp, gpu::Upload(plan0.request_split_lists.values));
    local.push_back(l.data());
    rows.push_back(locals[rank].rows);
    send.push_back(s.data());
    gathered.push_back(g.data());
    out.push_back(o.data());
    splits.push_back(sp.as<int64_t>());
    cudaStream_t st;
    KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    streams.push_back(st);
    for (auto* b : {&l, &s, &g, &o, &sp}) bufs.push_back(std::move(*b));
  }
  Status status =
      gpu::CpGatherRerange(group, local, rows, send, gathered, out, splits, plan0.request_split_lists, m, rb, streams);
  for (size_t i = 0; i < streams.size() && status.ok(); ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(group.device(static_cast<int>(i))));
    status = gpu::SyncStream(streams[i]);
    if (!status.ok()) break;
    auto got = gpu::Download<uint8_t>(out[i], x.rows * rb);
    if (!got.ok()) {
      status = got.status();
      break;
    }
    if (*got != x.data) {
      int64_t wrong = 0, first = -1;
      for (int64_t r = 0; r < x.rows; ++r) {
        if (std::memcmp(got->data() + r * rb, x.row(r), rb) != 0 && wrong++ == 0) first = r;
      }
      status = Mismatch("rank ", group.local_ranks()[i], " (", group.Kind(), " N=", n, "): ", wrong, " of ", x.rows,
                        " rows differ; first row ", first);
    }
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    cudaSetDevice(group.device(static_cast<int>(i)));
    cudaStreamDestroy(streams[i]);
  }
  return status;
}

TEST(GpuCpGather, EmulatedRanksRestoreRequestOrder) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("pad + all-gather + fused rerange == the batch (emulated ranks)", [] {
    const CPBatchCase c = *GenCPBatchCase();
    auto group = RC_VALUE(gpu::CreateEmulatedGroup(static_cast<int>(c.cp_size), 0));
    const Status s = Exchange(*group, c);
    if (!s.ok()) RC_FAIL(s.ToString());
  });
  EXPECT_TRUE(ok);
}

TEST(GpuCpGather, NcclTwoGpusRestoreRequestOrder) {
  KVSHARD_REQUIRE_GPUS(2);
  auto group = gpu::CreateNcclGroup(2);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  const bool ok = rc::check("pad + all-gather + fused rerange == the batch (NCCL, 2 GPUs)", [&] {
    CPBatchCase c = *GenCPBatchCase();
    c.cp_size = 2;
    for (int64_t& p : c.prefix_lens) p = p / c.page_size * c.page_size;
    const Status s = Exchange(**group, c);
    if (!s.ok()) RC_FAIL(s.ToString());
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace kvshard::props

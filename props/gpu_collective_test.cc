// Collectives: the emulated group (N = 1..8 on one GPU) and NCCL over every visible GPU gather exactly the
// rank-major blocks, in place and out of place. NCCL cases skip with fewer than 2 GPUs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "gpu/collective.h"
#include "gpu/device.h"
#include "props/gpu_test_data.h"
#include "props/gpu_test_env.h"

namespace kvshard::props {
namespace {

void CheckInPlace(gpu::RankGroup& g, int64_t bytes) {
  const int n = g.size();
  std::vector<gpu::DeviceBuffer> bufs;
  std::vector<void*> ptrs;
  std::vector<cudaStream_t> streams;
  for (size_t i = 0; i < g.local_ranks().size(); ++i) {
    ASSERT_EQ(cudaSetDevice(g.device(i)), cudaSuccess);
    const int rank = g.local_ranks()[i];
    std::vector<uint8_t> host(n * bytes, 0xEE);
    FillRow(host.data() + rank * bytes, bytes, /*layer=*/rank, /*slot=*/1000 + rank);
    auto buf = gpu::Upload(host);
    ASSERT_TRUE(buf.ok()) << g.Kind() << ": " << buf.status().ToString();
    bufs.push_back(std::move(*buf));
    ptrs.push_back(bufs.back().data());
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    streams.push_back(s);
  }
  const Status st = g.AllGatherInPlace(ptrs, bytes, streams);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<uint8_t> want(n * bytes);
  for (int r = 0; r < n; ++r) FillRow(want.data() + r * bytes, bytes, r, 1000 + r);
  for (size_t i = 0; i < ptrs.size(); ++i) {
    ASSERT_EQ(cudaSetDevice(g.device(i)), cudaSuccess);
    const Status synced = gpu::SyncStream(streams[i]);
    ASSERT_TRUE(synced.ok()) << g.Kind() << ": " << synced.ToString();
    auto got = gpu::Download<uint8_t>(ptrs[i], n * bytes);
    ASSERT_TRUE(got.ok()) << g.Kind() << ": " << got.status().ToString();
    const Status cmp = CompareRows(*got, want, bytes, "all-gather rank " + std::to_string(g.local_ranks()[i]));
    EXPECT_TRUE(cmp.ok()) << g.Kind() << ": " << cmp.message();
    cudaStreamDestroy(streams[i]);
  }
}

TEST(GpuCollective, EmulatedAllGatherInPlace) {
  KVSHARD_REQUIRE_GPUS(1);
  for (int n : {1, 2, 3, 4, 8}) {
    for (int64_t bytes : {int64_t{4}, int64_t{1152}, int64_t{1} << 20}) {
      auto g = gpu::CreateEmulatedGroup(n, 0);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      CheckInPlace(**g, bytes);
    }
  }
}

TEST(GpuCollective, NcclAllGatherInPlaceAcrossVisibleGpus) {
  KVSHARD_REQUIRE_GPUS(2);
  const int n = gpu::VisibleDeviceCount();
  auto g = gpu::CreateNcclGroup(n);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (int64_t bytes : {int64_t{4}, int64_t{1152}, int64_t{1} << 20, int64_t{64} << 20}) CheckInPlace(**g, bytes);
}

}  // namespace
}  // namespace kvshard::props

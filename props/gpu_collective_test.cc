// Collectives: the emulated group (N = 1..8 on one GPU) and NCCL over every visible GPU gather exactly the
// rank-major blocks, in place and out of place (multi-GPU NCCL cases skip with fewer than 2 GPUs); a rank that
// never arrives turns into a timeout error naming the op, ranks, bytes and timeout instead of a hang; the NCCL
// loader reports a missing library as Unavailable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

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
  const Status waited = g.Synchronize(streams);
  ASSERT_TRUE(waited.ok()) << g.Kind() << ": " << waited.ToString();
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
  // 9 ranks: 72 block copies, more than one LaunchCopyBlocks launch; odd sizes: the byte-wise path.
  for (int n : {1, 2, 3, 4, 8, 9}) {
    for (int64_t bytes : {int64_t{4}, int64_t{1152}, int64_t{1} << 20, int64_t{1000003}}) {
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

TEST(GpuCollective, NcclSingleRankGroupThroughTheLoader) {
  KVSHARD_REQUIRE_GPUS(1);
  auto nccl = gpu::NcclLibrary();
  ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
  std::cout << "loaded " << *nccl << "\n";
  auto g = gpu::CreateNcclGroup(1, /*timeout_ms=*/60000);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->timeout_ms(), 60000);
  for (int64_t bytes : {int64_t{4}, int64_t{1} << 20}) CheckInPlace(**g, bytes);
  EXPECT_FALSE((*g)->aborted());
}

TEST(GpuCollective, NcclLoaderNamesAMissingLibrary) {
  auto api = gpu::ProbeNcclLibrary("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(api.status().message().find("/nonexistent/libnccl.so.2"), std::string::npos) << api.status().message();
  EXPECT_NE(api.status().message().find("KVSHARD_NCCL_LIBRARY"), std::string::npos) << api.status().message();
  auto not_nccl = gpu::ProbeNcclLibrary("libc.so.6");  // loads, but has no NCCL functions
  ASSERT_FALSE(not_nccl.ok());
  EXPECT_NE(not_nccl.status().message().find("lacks a function"), std::string::npos) << not_nccl.status().message();
}

TEST(GpuCollective, TimeoutFromEnvironment) {
  const char* saved = std::getenv("KVSHARD_COLLECTIVE_TIMEOUT_MS");
  const std::string keep = saved ? saved : "";
  unsetenv("KVSHARD_COLLECTIVE_TIMEOUT_MS");
  EXPECT_EQ(gpu::CollectiveTimeoutMsFromEnv().value(), gpu::kDefaultCollectiveTimeoutMs);
  setenv("KVSHARD_COLLECTIVE_TIMEOUT_MS", "250", 1);
  EXPECT_EQ(gpu::CollectiveTimeoutMsFromEnv().value(), 250);
  for (const char* bad : {"0", "-5", "12ms", "99999999999999999999999"}) {
    setenv("KVSHARD_COLLECTIVE_TIMEOUT_MS", bad, 1);
    auto t = gpu::CollectiveTimeoutMsFromEnv();
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("KVSHARD_COLLECTIVE_TIMEOUT_MS"), std::string::npos);
  }
  if (saved) {
    setenv("KVSHARD_COLLECTIVE_TIMEOUT_MS", keep.c_str(), 1);
  } else {
    unsetenv("KVSHARD_COLLECTIVE_TIMEOUT_MS");
  }
}

// A rank that never arrives: its contribution waits on a flag nobody sets, so the wait really stalls on the
// device; Synchronize must return the timeout error (within the timeout plus slack), abort the group, leave the
// device drained, and fail every later call at once.
TEST(GpuCollective, EmulatedRankThatNeverArrivesTimesOut) {
  KVSHARD_REQUIRE_GPUS(1);
  const int64_t timeout_ms = 300;
  for (int n : {2, 4}) {
    for (int stalled : {0, n - 1}) {
      for (bool in_place : {true, false}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " stalled=" + std::to_string(stalled) +
                     (in_place ? " in place" : " out of place"));
        auto g = gpu::CreateEmulatedGroupWithStalledRank(n, 0, stalled, timeout_ms);
        ASSERT_TRUE(g.ok()) << g.status().ToString();
        const int64_t bytes = 4096;
        std::vector<gpu::DeviceBuffer> bufs;
        std::vector<cudaStream_t> streams(n);
        std::vector<void*> ptrs;
        std::vector<const void*> sends;
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
          auto b = gpu::DeviceBuffer::Allocate(n * bytes);
          ASSERT_TRUE(b.ok());
          ptrs.push_back(b->data());
          sends.push_back(static_cast<const char*>(b->data()) + r * bytes);
          bufs.push_back(std::move(*b));
        }
        std::vector<gpu::DeviceBuffer> recv_bufs;
        std::vector<void*> recv;
        for (int r = 0; r < n; ++r) {
          auto b = gpu::DeviceBuffer::Allocate(n * bytes);
          ASSERT_TRUE(b.ok());
          recv.push_back(b->data());
          recv_bufs.push_back(std::move(*b));
        }
        const Status issued =
            in_place ? (*g)->AllGatherInPlace(ptrs, bytes, streams) : (*g)->AllGather(sends, recv, bytes, streams);
        ASSERT_TRUE(issued.ok()) << issued.ToString();
        // The stall is real: the streams are still busy well after the issue.
        EXPECT_EQ(cudaStreamQuery(streams[stalled]), cudaErrorNotReady);
        const auto t0 = std::chrono::steady_clock::now();
        const Status waited = (*g)->Synchronize(streams);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_FALSE(waited.ok());
        EXPECT_EQ(waited.code(), StatusCode::kUnavailable);
        const std::string& m = waited.message();
        EXPECT_NE(m.find("collective timeout"), std::string::npos) << m;
        EXPECT_NE(m.find(in_place ? "all_gather_in_place" : "all_gather ("), std::string::npos) << m;
        EXPECT_NE(m.find("4096 bytes per rank"), std::string::npos) << m;
        EXPECT_NE(m.find("300 ms"), std::string::npos) << m;
        EXPECT_NE(m.find(std::to_string(stalled)), std::string::npos) << m;
        EXPECT_NE(m.find("aborted"), std::string::npos) << m;
        EXPECT_GE(ms, timeout_ms * 0.99);
        EXPECT_LT(ms, timeout_ms + 5000);
        EXPECT_TRUE((*g)->aborted());
        // The abort released the device: every stream drains.
        for (cudaStream_t s : streams) EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        const Status again = (*g)->AllGatherInPlace(ptrs, bytes, streams);
        EXPECT_EQ(again.code(), StatusCode::kUnavailable) << again.ToString();
        EXPECT_NE(again.message().find("was aborted: collective timeout"), std::string::npos) << again.message();
        EXPECT_EQ((*g)->Synchronize(streams).code(), StatusCode::kUnavailable);
        for (cudaStream_t s : streams) cudaStreamDestroy(s);
      }
    }
  }
}

TEST(GpuCollective, EmulatedHealthyGroupWaitsWithinTheTimeout) {
  KVSHARD_REQUIRE_GPUS(1);
  auto g = gpu::CreateEmulatedGroup(3, 0, /*timeout_ms=*/100);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->timeout_ms(), 100);
  CheckInPlace(**g, 1 << 16);
  EXPECT_FALSE((*g)->aborted());
  EXPECT_EQ(gpu::CreateEmulatedGroupWithStalledRank(3, 0, 3, 100).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvshard::props

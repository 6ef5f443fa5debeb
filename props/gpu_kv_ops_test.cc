// Differential tests of the pool row movers of one rank (gpu/kv_ops.cu): owner-filtered write and the write plans vs
// the reference placement, index_select gather and a plan's page_pos vs host arithmetic; bit-exact. The one-launch
// movers of emulated ranks are in gpu_kv_rank_ops_test.cc. Skip without a GPU.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "cpu_ref/placement.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "props/generators.h"
#include "props/gpu_test_data.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

TEST(GpuKvOps, OwnerFilteredWriteMatchesReference) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("owner-filtered write == reference", [] {
    const PlacementSpec spec = *GenPlacementSpec();
    const int64_t pages_per_rank = *rc::gen::inRange<int64_t>(1, 9);
    const int64_t rank = *rc::gen::inRange<int64_t>(0, spec.shard_size);
    const int64_t row_bytes = *rc::gen::element<int64_t>(1, 3, 8, 16, 48, 1152);
    // Distinct locs inside the pool (duplicates would make the write order-dependent, as in SGLang).
    const int64_t slots = pages_per_rank * spec.logical_page_size();
    auto locs = *rc::gen::unique<std::vector<int64_t>>(rc::gen::inRange<int64_t>(0, slots));
    const auto p = RC_VALUE(ref::Placement::Create(spec));
    const int64_t pool_rows = pages_per_rank * spec.page_size;
    std::vector<uint8_t> want(pool_rows * row_bytes, 0);
    const auto rows = RowsOf(locs, row_bytes, 7);
    for (size_t i = 0; i < locs.size(); ++i) {
      if (p.LocalMask(locs[i], rank)) {
        std::memcpy(want.data() + p.LocalIndex(locs[i]) * row_bytes, rows.data() + i * row_bytes, row_bytes);
      }
    }
    auto d_pool = RC_VALUE(gpu::Upload(std::vector<uint8_t>(pool_rows * row_bytes, 0)));
    auto d_rows = RC_VALUE(gpu::Upload(rows));
    auto d_locs = RC_VALUE(gpu::Upload(locs));
    auto d_bad = RC_VALUE(gpu::Upload(std::vector<int64_t>{0}));
    RC_ASSERT_OK(gpu::LaunchOwnerFilteredWrite(d_pool.data(), pool_rows, d_rows.data(), d_locs.as<int64_t>(),
                                               static_cast<int64_t>(locs.size()), spec, rank, row_bytes,
                                               d_bad.as<int64_t>(), nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    const auto got = RC_VALUE(gpu::Download<uint8_t>(d_pool.data(), want.size()));
    RC_ASSERT_OK(CompareRows(got, want, row_bytes, "pool"));
    RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(d_bad.data(), 1))[0] == 0);

    // The cached write-plan path: owned positions (ascending) and local rows, then a scatter.
    const int64_t n = static_cast<int64_t>(locs.size());
    std::vector<int64_t> want_idx, want_rows;
    for (int64_t i = 0; i < n; ++i) {
      if (p.LocalMask(locs[i], rank)) {
        want_idx.push_back(i);
        want_rows.push_back(p.LocalIndex(locs[i]));
      }
    }
    auto d_owned = RC_VALUE(gpu::DeviceBuffer::Allocate(std::max<int64_t>(1, n) * 8));
    auto d_local = RC_VALUE(gpu::DeviceBuffer::Allocate(std::max<int64_t>(1, n) * 8));
    auto d_count = RC_VALUE(gpu::Upload(std::vector<int64_t>{-1}));
    const size_t temp_bytes = RC_VALUE(gpu::WritePlanTempBytes(n));
    auto d_temp = RC_VALUE(gpu::DeviceBuffer::Allocate(temp_bytes));
    RC_ASSERT_OK(gpu::LaunchBuildWritePlan(d_locs.as<int64_t>(), n, spec, rank, d_owned.as<int64_t>(),
                                           d_local.as<int64_t>(), d_count.as<int64_t>(), d_temp.data(), temp_bytes,
                                           nullptr));
    auto d_pool2 = RC_VALUE(gpu::Upload(std::vector<uint8_t>(pool_rows * row_bytes, 0)));
    RC_ASSERT_OK(gpu::LaunchScatterRows(d_pool2.data(), pool_rows, d_rows.data(), n, d_owned.as<int64_t>(),
                                        d_local.as<int64_t>(), d_count.as<int64_t>(), n, row_bytes, d_bad.as<int64_t>(),
                                        nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    const int64_t count = RC_VALUE(gpu::Download<int64_t>(d_count.data(), 1))[0];
    RC_ASSERT(count == static_cast<int64_t>(want_idx.size()));
    RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(d_owned.data(), count)) == want_idx);
    RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(d_local.data(), count)) == want_rows);
    const auto got2 = RC_VALUE(gpu::Download<uint8_t>(d_pool2.data(), want.size()));
    RC_ASSERT_OK(CompareRows(got2, want, row_bytes, "pool"));
  });
  EXPECT_TRUE(ok);
}

// The write plans of every emulated rank in one launch (LaunchBuildWritePlans) are each rank's plan: owned positions
// ascending and their local rows, for batches of one tile and of several, empty ones, negative locs (padding), and
// more plans than one launch takes.
TEST(GpuKvOps, WritePlansInOneLaunchAreEachRanksPlan) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("write plans, one launch == per rank", [] {
    const PlacementSpec spec = *GenPlacementSpec();
    const int64_t pages_per_rank = *rc::gen::inRange<int64_t>(1, 40);
    const int64_t slots = pages_per_rank * spec.logical_page_size();
    const int64_t n = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 600),
                                      rc::gen::inRange<int64_t>(600, 5000));
    std::vector<int64_t> locs(n);
    for (int64_t& loc : locs) loc = *rc::gen::inRange<int64_t>(-1, slots);
    // Every rank, or (past one launch's 32) every rank several times over.
    const int64_t copies = *rc::gen::element<int64_t>(1, 1, 5);
    std::vector<int64_t> ranks;
    for (int64_t c = 0; c < copies; ++c) {
      for (int64_t r = 0; r < spec.shard_size; ++r) ranks.push_back(r);
    }
    const auto p = RC_VALUE(ref::Placement::Create(spec));
    auto d_locs = RC_VALUE(gpu::Upload(locs.empty() ? std::vector<int64_t>{0} : locs));
    std::vector<gpu::DeviceBuffer> buffers;
    std::vector<gpu::WritePlanOut> plans;
    for (int64_t rank : ranks) {
      buffers.push_back(RC_VALUE(gpu::Upload(std::vector<int64_t>(std::max<int64_t>(1, n), -7))));
      buffers.push_back(RC_VALUE(gpu::Upload(std::vector<int64_t>(std::max<int64_t>(1, n), -7))));
      buffers.push_back(RC_VALUE(gpu::Upload(std::vector<int64_t>{-1})));
      const size_t b = buffers.size();
      plans.push_back({rank, buffers[b - 3].as<int64_t>(), buffers[b - 2].as<int64_t>(), buffers[b - 1].as<int64_t>()});
    }
    RC_ASSERT_OK(gpu::LaunchBuildWritePlans(d_locs.as<int64_t>(), n, spec, plans, nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    for (size_t k = 0; k < plans.size(); ++k) {
      std::vector<int64_t> want_idx, want_rows;
      for (int64_t i = 0; i < n; ++i) {
        if (locs[i] >= 0 && p.LocalMask(locs[i], plans[k].rank)) {
          want_idx.push_back(i);
          want_rows.push_back(p.LocalIndex(locs[i]));
        }
      }
      const int64_t count = RC_VALUE(gpu::Download<int64_t>(plans[k].count, 1))[0];
      RC_ASSERT(count == static_cast<int64_t>(want_idx.size()));
      RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(plans[k].owned_idx, count)) == want_idx);
      RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(plans[k].local_rows, count)) == want_rows);
    }
  });
  EXPECT_TRUE(ok);
}

TEST(GpuKvOps, LaunchBuildWritePlansRefusesWhatItCannotTake) {
  KVSHARD_REQUIRE_GPUS(1);
  const PlacementSpec spec{4, 2};
  EXPECT_EQ(gpu::LaunchBuildWritePlans(nullptr, gpu::kMaxWritePlansLocs + 1, spec, {}, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu::LaunchBuildWritePlans(nullptr, 0, spec, {{4, nullptr, nullptr, nullptr}}, nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(GpuKvOps, GatherRowsAndOutOfRangeIndicesAreCounted) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("index_select gather == host", [] {
    const int64_t in_rows = *rc::gen::inRange<int64_t>(1, 300);
    const int64_t row_bytes = *rc::gen::element<int64_t>(2, 4, 12, 16, 64, 576, 1152);
    auto index = *rc::gen::container<std::vector<int64_t>>(rc::gen::inRange<int64_t>(0, in_rows));
    std::vector<int64_t> slots(in_rows);
    for (int64_t i = 0; i < in_rows; ++i) slots[i] = i;
    const auto in = RowsOf(slots, row_bytes, 1);
    std::vector<uint8_t> want(index.size() * row_bytes);
    for (size_t i = 0; i < index.size(); ++i) {
      std::memcpy(want.data() + i * row_bytes, in.data() + index[i] * row_bytes, row_bytes);
    }
    const bool poison = !index.empty() && *rc::gen::inRange(0, 4) == 0;
    if (poison) index[0] = in_rows;  // out of range: skipped and counted, never written out of bounds
    auto d_in = RC_VALUE(gpu::Upload(in));
    auto d_out = RC_VALUE(gpu::Upload(std::vector<uint8_t>(want.size(), 0)));
    auto d_idx = RC_VALUE(gpu::Upload(index));
    auto d_bad = RC_VALUE(gpu::Upload(std::vector<int64_t>{0}));
    RC_ASSERT_OK(gpu::LaunchGatherRows(d_out.data(), d_in.data(), in_rows, d_idx.as<int64_t>(),
                                       static_cast<int64_t>(index.size()), row_bytes, d_bad.as<int64_t>(), nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    auto got = RC_VALUE(gpu::Download<uint8_t>(d_out.data(), want.size()));
    if (poison) std::fill(want.begin(), want.begin() + row_bytes, 0);
    RC_ASSERT_OK(CompareRows(got, want, row_bytes, "gather"));
    RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(d_bad.data(), 1))[0] == (poison ? 1 : 0));
  });
  EXPECT_TRUE(ok);
}

// A plan's dense page_pos made on the device from its mapped pages: every other page on the trash page, whatever the
// buffer held before (a previous batch's pages); a page outside the table is skipped and counted.
TEST(GpuKvOps, SetPagePosIsTheDensePagePosOfTheMappedPages) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("LaunchSetPagePos == host page_pos", [] {
    const int64_t n_page_pos = *rc::gen::inRange<int64_t>(0, 5000);
    const int32_t trash = *rc::gen::inRange<int32_t>(0, 1 << 20);
    // Distinct pages (a plan's are ascending), each with its scratch page: from (seed, density), none to all.
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const int density = *rc::gen::inRange(0, 9);  // 0: none mapped; 8: every page
    std::mt19937_64 rng(seed);
    std::vector<int32_t> mapped, want(n_page_pos, trash);
    for (int64_t p = 0; p < n_page_pos; ++p) {
      if (static_cast<int>(rng() % 8) >= density) continue;
      const auto scratch = static_cast<int32_t>(rng() % INT32_MAX);
      mapped.push_back(static_cast<int32_t>(p));
      mapped.push_back(scratch);
      want[p] = scratch;
    }
    const bool poison = *rc::gen::inRange(0, 4) == 0;  // one page past the table: skipped and counted
    if (poison) {
      mapped.push_back(static_cast<int32_t>(n_page_pos + *rc::gen::inRange<int64_t>(0, 3)));
      mapped.push_back(7);
    }
    // The buffer holds an earlier batch's values (and one guard entry past the table that must stay).
    std::vector<int32_t> before(n_page_pos + 1);
    for (size_t i = 0; i < before.size(); ++i) before[i] = static_cast<int32_t>(1000 + i);
    auto d_pos = RC_VALUE(gpu::Upload(before));
    auto d_mapped = RC_VALUE(gpu::Upload(mapped.empty() ? std::vector<int32_t>{0} : mapped));
    auto d_bad = RC_VALUE(gpu::Upload(std::vector<int64_t>{0}));
    RC_ASSERT_OK(gpu::LaunchSetPagePos(d_pos.as<int32_t>(), n_page_pos, trash, d_mapped.as<int32_t>(),
                                       static_cast<int64_t>(mapped.size() / 2), d_bad.as<int64_t>(), nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    auto got = RC_VALUE(gpu::Download<int32_t>(d_pos.data(), before.size()));
    want.push_back(before.back());
    for (size_t i = 0; i < want.size(); ++i) {
      if (got[i] != want[i]) {
        RC_FAIL("page_pos[" + std::to_string(i) + "]: got " + std::to_string(got[i]) + ", expected " +
                std::to_string(want[i]));
      }
    }
    RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(d_bad.data(), 1))[0] == (poison ? 1 : 0));
  });
  EXPECT_TRUE(ok);
}

TEST(GpuKvOps, CanImplementRejectsBadSizes) {
  EXPECT_FALSE(gpu::RowOpCanImplement(-1, 8, 1, 1).ok());
  EXPECT_FALSE(gpu::RowOpCanImplement(1, 0, 1, 1).ok());
  EXPECT_FALSE(gpu::RowOpCanImplement(1, int64_t{1} << 21, 1, 1).ok());
  const Status empty_ok = gpu::RowOpCanImplement(0, 8, 0, 0);
  EXPECT_TRUE(empty_ok.ok()) << empty_ok.ToString();
}

}  // namespace
}  // namespace kvshard::props

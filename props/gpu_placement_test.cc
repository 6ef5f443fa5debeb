// GPU-vs-reference differential test of the placement kernels: bit-exact on RapidCheck inputs.
// Skips with the reason when no CUDA device is visible.
#include <type_traits>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/placement.h"
#include "cpu_ref/placement.h"
#include "gpu/placement.h"
#include "props/generators.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// Both backends produce core's PlacementResult, so results compare without conversion.
static_assert(std::is_same_v<decltype(ref::PlaceLocs({}, 0, {})), decltype(gpu::RunPlacement({}, 0, {}))>);
static_assert(std::is_same_v<decltype(gpu::RunPlacement({}, 0, {})), StatusOr<PlacementResult>>);

TEST(GpuPlacement, MatchesReferenceBitExact) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("gpu placement == reference", [] {
    const PlacementSpec spec = *GenPlacementSpec();
    const auto locs = *rc::gen::container<std::vector<int64_t>>(GenLoc(spec, 256));
    const int64_t rank = *rc::gen::inRange<int64_t>(0, spec.shard_size);
    const auto want = RC_VALUE(ref::PlaceLocs(spec, rank, locs));
    const auto got = RC_VALUE(gpu::RunPlacement(spec, rank, locs));
    RC_ASSERT(got.owner == want.owner);
    RC_ASSERT(got.local_index == want.local_index);
    RC_ASSERT(got.local_mask == want.local_mask);
    RC_ASSERT(got.filter_local == want.filter_local);
  });
  EXPECT_TRUE(ok);
}

TEST(GpuPlacement, LargeInputMatchesReference) {
  KVSHARD_REQUIRE_GPUS(1);
  // 4M slots over 8 ranks, ps = 64: one launch, many blocks, int64 slots beyond 2^32.
  const PlacementSpec spec{8, 64};
  std::vector<int64_t> locs(int64_t{1} << 22);
  for (size_t i = 0; i < locs.size(); ++i) locs[i] = (int64_t{1} << 33) + static_cast<int64_t>(i * 7919 % (1 << 24));
  for (int64_t rank : {0, 5}) {
    const auto want_or = ref::PlaceLocs(spec, rank, locs);
    ASSERT_TRUE(want_or.ok()) << want_or.status().ToString();
    const auto& want = *want_or;
    const auto got = gpu::RunPlacement(spec, rank, locs);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->filter_local.size(), want.filter_local.size());
    size_t wrong = 0, first = SIZE_MAX;
    for (size_t i = 0; i < want.filter_local.size(); ++i) {
      if (got->filter_local[i] != want.filter_local[i] && wrong++ == 0) first = i;
    }
    EXPECT_EQ(wrong, 0u) << "first mismatch at " << first << ": got " << got->filter_local[first] << " expected "
                         << want.filter_local[first];
    EXPECT_EQ(got->owner, want.owner);
  }
}

}  // namespace
}  // namespace kvshard::props

// Examples pinning the placement bijection (SGLang page_interleave semantics, spec §1).
#include "cpu_ref/placement.h"

#include <gtest/gtest.h>

namespace kvshard::ref {
namespace {

TEST(PlacementTest, SpecExampleN4Ps16) {
  Placement p = Placement::Create({4, 16}).value();
  // Logical page 5 (slots 80..95) -> rank 1, local page 1.
  EXPECT_EQ(p.Owner(80), 1);
  EXPECT_EQ(p.LocalIndex(80), 16);
  EXPECT_EQ(p.LocalIndex(95), 31);
  // Logical page 22 -> rank 2, local page 5 (spec §3 example's send page).
  EXPECT_EQ(p.Owner(22 * 16 + 3), 2);
  EXPECT_EQ(p.LocalIndex(22 * 16 + 3), 5 * 16 + 3);
  EXPECT_EQ(p.GlobalLoc(2, 5 * 16 + 3), 22 * 16 + 3);
  // Reserved trash pages: slots < N*ps are local page 0 of their owner.
  EXPECT_TRUE(p.IsReserved(63));
  EXPECT_FALSE(p.IsReserved(64));
  EXPECT_EQ(p.LocalIndex(63), 15);
}

TEST(PlacementTest, FilterLocalKeepsOrder) {
  Placement p = Placement::Create({2, 2}).value();
  // Pages: 9->4 (r0), 2->1 (r1), 0->0 (r0), 5->2 (r0), 6->3 (r1).
  std::vector<int64_t> locs = {9, 2, 0, 5, 6};
  EXPECT_EQ(p.FilterLocal(locs, 0), (std::vector<int64_t>{5, 0, 3}));
  EXPECT_EQ(p.FilterLocal(locs, 1), (std::vector<int64_t>{0, 2}));
}

TEST(PlacementTest, RejectsBadInput) {
  EXPECT_EQ(Placement::Create({0, 16}).status().message(), "shard_size: must be in [1, 65536], got 0");
  EXPECT_FALSE(Placement::Create({4, -1}).ok());
  EXPECT_EQ(PlaceLocs({4, 16}, 9, {1}).status().message(), "rank: must be in [0, 4), got 9");
  EXPECT_EQ(PlaceLocs({4, 16}, 0, {1, -3}).status().message(), "locs[1]: must be in [0, 2^48), got -3");
}

}  // namespace
}  // namespace kvshard::ref

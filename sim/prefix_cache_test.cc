// The simulator's prefix cache: matches, grafts, declined grafts, duplicates, locks and LRU eviction order.
#include "sim/prefix_cache.h"

#include <gtest/gtest.h>

namespace kvshard::sim {
namespace {

TEST(PrefixCacheTest, MatchInsertAndDuplicates) {
  PrefixCache c(2);
  EXPECT_EQ(c.MatchPrefix({1, 2, 3}, 3).pages_matched, 0);
  auto ins = c.Insert({1, 2, 3}, {4, 5, 6}, 0);  // owners 0,1,0 from base 0
  ASSERT_TRUE(ins.ok()) << ins.status().ToString();
  EXPECT_EQ(ins->new_pages, 3);
  EXPECT_TRUE(ins->freed.empty());
  const PrefixCache::Match m = c.MatchPrefix({1, 2, 9}, 3);
  EXPECT_EQ(m.pages_matched, 2);
  EXPECT_EQ(m.pages, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(m.rotation_base, 0);
  // A second request with the same prefix on its own pages: the duplicates come back, the new page is grafted.
  auto dup = c.Insert({1, 2, 7}, {8, 9, 10}, 0);
  ASSERT_TRUE(dup.ok());
  EXPECT_FALSE(dup->declined);
  EXPECT_EQ(dup->freed, (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(dup->new_pages, 1);
  EXPECT_EQ(c.cached_pages(), 4);
  EXPECT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants().ToString();
}

TEST(PrefixCacheTest, ForeignBaseIsDeclinedAndEveryPageFreed) {
  PrefixCache c(2);
  ASSERT_TRUE(c.Insert({1, 2}, {4, 5}, 0).ok());
  auto ins = c.Insert({1, 2, 3}, {7, 8, 9}, 1);  // owners 1,0,1 from base 1
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE(ins->declined);
  EXPECT_EQ(ins->freed, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(c.cached_pages(), 2);
  EXPECT_FALSE(c.Insert({5}, {4}, 1).ok());  // page 4 is owned by 0, not cyclic from base 1
}

TEST(PrefixCacheTest, EvictsLeastRecentlyUsedUnlockedLeavesFirst) {
  PrefixCache c(1);
  ASSERT_TRUE(c.Insert({1, 2}, {10, 11}, 0).ok());        // chain A (older)
  ASSERT_TRUE(c.Insert({5, 6}, {20, 21}, 0).ok());        // chain B
  const PrefixCache::Match a = c.MatchPrefix({1, 2}, 2);  // A is now the most recent
  c.Lock(a.node);
  std::vector<int64_t> freed;
  EXPECT_EQ(c.Evict(3, &freed), 2);  // A is locked: only B's leaf, then B's root child
  EXPECT_EQ(freed, (std::vector<int64_t>{21, 20}));
  ASSERT_TRUE(c.Unlock(a.node).ok());
  EXPECT_FALSE(c.Unlock(a.node).ok());
  freed.clear();
  EXPECT_EQ(c.Evict(1, &freed), 1);
  EXPECT_EQ(freed, (std::vector<int64_t>{11}));
  EXPECT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants().ToString();
  EXPECT_EQ(c.cached_pages(), 1);
}

}  // namespace
}  // namespace kvshard::sim

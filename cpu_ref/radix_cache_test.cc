// Radix cache examples: page-aligned matching, grafting under the same base, declining a foreign base,
// duplicate pages freed, locked paths surviving eviction, least-recently-used leaves evicted first.
#include "cpu_ref/radix_cache.h"

#include <numeric>

#include <gtest/gtest.h>

namespace kvshard::ref {
namespace {

using V = std::vector<int64_t>;

V Tokens(int64_t len, int64_t doc = 0) {
  V t(len);
  std::iota(t.begin(), t.end(), doc * 1000);
  return t;
}

V Alloc(PageInterleaveAllocator& a, int64_t prefix, int64_t seq, int64_t* base) {
  ExtendPages out;
  EXPECT_TRUE(a.AllocExtend({{prefix}, {seq}, {*base}, {0}}, &out).value());
  *base = out.rotation_bases[0];
  return out.pages;
}

TEST(RadixCacheTest, MatchIsPageAlignedAndExtendsUnderTheSameBase) {
  auto a = PageInterleaveAllocator::Create({4, 2, 8}).value();
  RadixCache cache(&a);
  int64_t base = kNewChain;
  V pages = Alloc(a, 0, 7, &base);  // 4 pages, last one partial
  ASSERT_EQ(base, 0);
  auto ins = cache.Insert(Tokens(7), pages, base).value();
  EXPECT_FALSE(ins.declined);
  EXPECT_EQ(ins.new_pages, 3);  // 3 full blocks; the partial page stays with the caller
  EXPECT_EQ(cache.cached_pages(), 3);
  ASSERT_TRUE(a.Free({pages[3] * 2}).ok());  // the caller frees the partial tail page
  RadixCache::Match m = cache.MatchPrefix(Tokens(11));
  EXPECT_EQ(m.prefix_len, 6);
  EXPECT_EQ(m.pages, (V{4, 5, 6}));
  EXPECT_EQ(m.rotation_base, 0);
  // Extend the matched chain with its base: pages continue the cyclic run.
  V ext = Alloc(a, 6, 11, &m.rotation_base);
  V all = m.pages;
  all.insert(all.end(), ext.begin(), ext.end());
  ins = cache.Insert(Tokens(11), all, 0).value();
  EXPECT_EQ(ins.new_pages, 2);
  EXPECT_EQ(ins.freed_pages, 0);
  ASSERT_EQ(cache.Chains().size(), 1u);
  EXPECT_EQ(cache.Chains()[0].pages, (V{4, 5, 6, 7, 8}));
  EXPECT_TRUE(cache.CheckInvariants().ok());
}

TEST(RadixCacheTest, ForeignBaseInsertIsDeclinedAndItsPagesFreed) {
  auto a = PageInterleaveAllocator::Create({4, 2, 8}).value();
  RadixCache cache(&a);
  int64_t b1 = 0, b2 = 1;
  V p1 = Alloc(a, 0, 4, &b1);  // same tokens, two chains with different bases
  V p2 = Alloc(a, 0, 8, &b2);
  ASSERT_TRUE(cache.Insert(Tokens(4), p1, b1).ok());
  const V counts_before = a.class_free_page_counts();
  auto ins = cache.Insert(Tokens(8), p2, b2).value();
  EXPECT_TRUE(ins.declined);
  EXPECT_EQ(ins.new_pages, 0);
  EXPECT_EQ(ins.freed_pages, 4);
  EXPECT_EQ(cache.cached_pages(), 2);
  for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(a.class_free_page_counts()[c], counts_before[c] + 1);
  EXPECT_TRUE(cache.CheckInvariants().ok());
}

TEST(RadixCacheTest, SameBaseDuplicatesAreFreed) {
  auto a = PageInterleaveAllocator::Create({2, 1, 8}).value();
  RadixCache cache(&a);
  int64_t b = 0, b2 = 0;
  V p1 = Alloc(a, 0, 2, &b);
  V p2 = Alloc(a, 0, 3, &b2);
  ASSERT_TRUE(cache.Insert(Tokens(2), p1, 0).ok());
  auto ins = cache.Insert(Tokens(3), p2, 0).value();
  EXPECT_FALSE(ins.declined);
  EXPECT_EQ(ins.freed_pages, 2);
  EXPECT_EQ(ins.new_pages, 1);
  EXPECT_EQ(cache.Chains()[0].pages, (V{p1[0], p1[1], p2[2]}));
  EXPECT_FALSE(a.is_allocated(p2[0]));
}

TEST(RadixCacheTest, EvictionSkipsLockedPathsAndFreesLeavesFirst) {
  auto a = PageInterleaveAllocator::Create({2, 1, 8}).value();
  RadixCache cache(&a);
  int64_t b1 = 0, b2 = 1;
  V p1 = Alloc(a, 0, 3, &b1);
  V p2 = Alloc(a, 0, 2, &b2);
  ASSERT_TRUE(cache.Insert(Tokens(3, 1), p1, b1).ok());
  ASSERT_TRUE(cache.Insert(Tokens(2, 2), p2, b2).ok());
  RadixCache::Match m = cache.MatchPrefix(Tokens(3, 1));
  cache.Lock(m.node);
  EXPECT_EQ(cache.Evict(10).value(), 2);  // only doc 2's chain is unlocked
  EXPECT_EQ(cache.cached_pages(), 3);
  ASSERT_TRUE(cache.Unlock(m.node).ok());
  EXPECT_FALSE(cache.Unlock(m.node).ok());
  EXPECT_EQ(cache.Evict(1).value(), 1);  // the leaf (position 2) goes first
  EXPECT_EQ(cache.Chains()[0].pages, (V{p1[0], p1[1]}));
  EXPECT_TRUE(cache.CheckInvariants().ok());
  EXPECT_EQ(a.class_free_page_counts(), (V{7, 7}));
}

TEST(RadixCacheTest, EvictsTheLeastRecentlyUsedLeafFirst) {
  auto a = PageInterleaveAllocator::Create({2, 1, 8}).value();
  RadixCache cache(&a);
  int64_t b1 = 0, b2 = 0;
  V p1 = Alloc(a, 0, 2, &b1);
  V p2 = Alloc(a, 0, 2, &b2);
  ASSERT_TRUE(cache.Insert(Tokens(2, 1), p1, b1).ok());
  ASSERT_TRUE(cache.Insert(Tokens(2, 2), p2, b2).ok());
  EXPECT_EQ(cache.MatchPrefix(Tokens(2, 1)).pages, p1);  // doc 1 becomes the most recently used
  // Doc 2's leaf goes first, then its parent (a leaf now, still older than doc 1's leaf).
  EXPECT_EQ(cache.Evict(2).value(), 2);
  ASSERT_EQ(cache.Chains().size(), 1u);
  EXPECT_EQ(cache.Chains()[0].pages, p1);
  EXPECT_FALSE(a.is_allocated(p2[0]));
  EXPECT_FALSE(a.is_allocated(p2[1]));
  EXPECT_EQ(cache.Evict(1).value(), 1);
  EXPECT_EQ(cache.Chains()[0].pages, (V{p1[0]}));
}

TEST(RadixCacheTest, RejectsNonCyclicOrForeignPages) {
  auto a = PageInterleaveAllocator::Create({2, 1, 8}).value();
  RadixCache cache(&a);
  int64_t b = 0;
  V p = Alloc(a, 0, 2, &b);
  EXPECT_FALSE(cache.Insert(Tokens(2), {p[1], p[0]}, 0).ok());
  EXPECT_FALSE(cache.Insert(Tokens(2), p, 2).ok());
  EXPECT_FALSE(cache.Insert(Tokens(2), {16, 17}, 0).ok());  // not allocated
  EXPECT_EQ(cache.cached_pages(), 0);
}

}  // namespace
}  // namespace kvshard::ref

// Allocator examples: SGLang's worked example (spec §2: N=4, ps=16, 32 pages/rank), defer, need_sort,
// free groups and every input error.
#include "cpu_ref/allocator.h"

#include <numeric>

#include <gtest/gtest.h>

namespace kvshard::ref {
namespace {

using V = std::vector<int64_t>;

PageInterleaveAllocator Make(int64_t n, int64_t ps, int64_t ppr, bool need_sort = false) {
  return PageInterleaveAllocator::Create({n, ps, ppr, need_sort, false}).value();
}

V Slots(int64_t first, int64_t last) {  // [first, last]
  V v(last - first + 1);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(AllocatorTest, FreshClassesAreAscendingAndSkipTrash) {
  auto a = Make(4, 16, 3);
  EXPECT_EQ(a.free_list(0), (V{4, 8, 12}));
  EXPECT_EQ(a.free_list(3), (V{7, 11, 15}));
  EXPECT_EQ(a.class_free_page_counts(), (V{3, 3, 3, 3}));
  EXPECT_EQ(a.available_size(), 4 * 16 * 3);
  EXPECT_EQ(a.aggregate_free_size(), 16 * 12);
  EXPECT_TRUE(a.is_allocated(0));  // reserved trash pages
  EXPECT_FALSE(a.is_allocated(4));
}

TEST(AllocatorTest, SpecWorkedExampleN4Ps16) {
  auto a = Make(4, 16, 32);
  ExtendPages out;
  // A 122-token new chain gets pages [4..11], base resolved to class 0.
  ASSERT_TRUE(a.AllocExtend({{0}, {122}, {kNewChain}, {0}}, &out).value());
  EXPECT_EQ(out.pages, (V{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(out.rotation_bases, (V{0}));
  EXPECT_EQ(a.class_free_page_counts(), (V{30, 30, 30, 30}));
  // Freeing its tail (positions 112..121 = slots of page 11) gives counts [30,30,30,31].
  ASSERT_TRUE(a.Free(Slots(11 * 16, 11 * 16 + 9)).ok());
  EXPECT_EQ(a.class_free_page_counts(), (V{30, 30, 30, 31}));
  EXPECT_EQ(a.free_list(3).front(), 11);  // prepended: the freed page is reused next
  EXPECT_EQ(a.least_full_class(), 3);
  EXPECT_EQ(a.available_size(), 4 * 16 * 30);
  // Extending it from 112 to 244 with base 0 gets [11, 12, ..., 19].
  ASSERT_TRUE(a.AllocExtend({{112}, {244}, {0}, {111 + 0}}, &out).value());
  EXPECT_EQ(out.pages, Slots(11, 19));
  EXPECT_EQ(ExtendSlots({{112}, {244}, {0}, {0}}, out, 16), Slots(11 * 16, 11 * 16 + 131));
}

TEST(AllocatorTest, NullBasesResolveOnSimulatedCounts) {
  auto a = Make(4, 1, 4);
  ExtendPages out;
  // Request 0 (3 pages from class 0) leaves sim counts [3,3,3,4]; request 1's null base resolves to 3.
  ASSERT_TRUE(a.AllocExtend({{0, 0}, {3, 2}, {kNewChain, kNewChain}, {0, 0}}, &out).value());
  EXPECT_EQ(out.rotation_bases, (V{0, 3}));
  EXPECT_EQ(out.pages, (V{4, 5, 6, 7, 8}));
  EXPECT_EQ(out.offsets, (V{0, 3, 5}));
}

TEST(AllocatorTest, WholeBatchDefersWithStateUnchanged) {
  auto a = Make(2, 4, 2);
  ExtendPages out;
  // Request 0 fits, request 1 would exhaust class 0: nothing is allocated.
  EXPECT_FALSE(a.AllocExtend({{0, 0}, {8, 12}, {0, 0}, {0, 0}}, &out).value());
  EXPECT_EQ(a.class_free_page_counts(), (V{2, 2}));
  EXPECT_EQ(a.free_list(0), (V{2, 4}));
  EXPECT_FALSE(a.is_allocated(2));
}

TEST(AllocatorTest, NeedSortReleasesAndMergesSorted) {
  auto a = Make(2, 1, 4, /*need_sort=*/true);
  ExtendPages out;
  ASSERT_TRUE(a.AllocExtend({{0}, {6}, {0}, {0}}, &out).value());
  EXPECT_EQ(out.pages, (V{2, 3, 4, 5, 6, 7}));
  ASSERT_TRUE(a.Free({6, 2}).ok());
  EXPECT_EQ(a.release_list(0), (V{2, 6}));
  EXPECT_EQ(a.free_list(0), (V{8}));
  EXPECT_EQ(a.class_free_page_counts(), (V{3, 1}));
  // Class 0 needs 2 > its free list (1): merge + sort to [2, 6, 8], then positions 0 and 2 pop 2, 6.
  ASSERT_TRUE(a.AllocExtend({{0}, {3}, {0}, {0}}, &out).value());
  EXPECT_EQ(out.pages, (V{2, 9, 6}));
  EXPECT_EQ(a.free_list(0), (V{8}));
  EXPECT_TRUE(a.release_list(0).empty());
}

// SGLang's worked example of the need_sort merge (spec §2, issue 9): a short class merges *every* class's
// release list, not only its own. SGLang's PageInterleavePoolAllocator hands the last batch
// [[4], [5, 3, 7], [8, 6, 10, 11]]; merging only the short class gave [[4], [20, 21, 7], [23, 24, 10, 26]].
TEST(AllocatorTest, NeedSortShortClassMergesEveryClass) {
  auto a = Make(3, 16, 8, /*need_sort=*/true);
  ExtendPages out;
  ASSERT_TRUE(a.AllocExtend({{0}, {121}, {kNewChain}, {0}}, &out).value());
  const V chain = out.pages;
  const int64_t base = out.rotation_bases[0];
  ASSERT_EQ(chain.size(), 8u);
  ASSERT_TRUE(a.Free(Slots(chain[7] * 16, chain[7] * 16 + 8)).ok());  // the tail page (tokens 112..120)
  ASSERT_TRUE(a.AllocExtend({{112}, {133}, {base}, {chain[6] * 16 + 15}}, &out).value());
  V whole(chain.begin(), chain.begin() + 7);
  whole.insert(whole.end(), out.pages.begin(), out.pages.end());
  ASSERT_TRUE(a.FreeGroupBegin().ok());  // free the whole request in a free group
  V locs;
  for (size_t k = 0; k < whole.size(); ++k) {
    for (int64_t off = 0; off < 16 && static_cast<int64_t>(k) * 16 + off < 133; ++off) {
      locs.push_back(whole[k] * 16 + off);
    }
  }
  ASSERT_TRUE(a.Free(locs).ok());
  ASSERT_TRUE(a.FreeGroupEnd().ok());
  ASSERT_TRUE(a.AllocExtend({{0}, {98}, {kNewChain}, {0}}, &out).value());
  ASSERT_TRUE(a.AllocExtend({{0, 0, 0}, {16, 36, 49}, {kNewChain, kNewChain, kNewChain}, {0, 0, 0}}, &out).value());
  const std::vector<V> got = {V(out.pages.begin(), out.pages.begin() + out.offsets[1]),
                              V(out.pages.begin() + out.offsets[1], out.pages.begin() + out.offsets[2]),
                              V(out.pages.begin() + out.offsets[2], out.pages.end())};
  EXPECT_EQ(got, (std::vector<V>{{4}, {5, 3, 7}, {8, 6, 10, 11}}));
  for (int64_t c = 0; c < 3; ++c) EXPECT_TRUE(a.release_list(c).empty()) << "class " << c;
}

// After a request defers the batch, SGLang keeps simulating: a later null base resolves on counts that are
// already short (here to class 0, whose owner then matches last_loc 2), and the batch defers without error.
TEST(AllocatorTest, NullBasesAfterADeferralResolveOnTheSimulatedCounts) {
  auto a = PageInterleaveAllocator::Create({2, 1, 1, false, /*check_last_loc=*/true}).value();
  ExtendPages out;
  auto r = a.AllocExtend({{0, 0, 1}, {5, 1, 2}, {kNewChain, kNewChain, kNewChain}, {0, 0, 2}}, &out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(*r);
  EXPECT_EQ(a.class_free_page_counts(), (V{1, 1}));
}

TEST(AllocatorTest, FreeGroupAppliesConcatenationAtEnd) {
  auto a = Make(2, 2, 4);
  ExtendPages out;
  ASSERT_TRUE(a.AllocExtend({{0}, {16}, {0}, {0}}, &out).value());  // pages 2..9
  ASSERT_TRUE(a.FreeGroupBegin().ok());
  std::vector<int64_t> locs = {18, 19};  // page 9
  ASSERT_TRUE(a.Free(locs).ok());
  locs = {4};                             // the snapshot is queued, not the vector
  ASSERT_TRUE(a.Free({10, 5, 18}).ok());  // pages 5, 2, 9
  EXPECT_EQ(a.class_free_page_counts(), (V{0, 0}));
  ASSERT_TRUE(a.FreeGroupEnd().ok());
  EXPECT_EQ(a.free_list(1), (V{5, 9}));
  EXPECT_EQ(a.free_list(0), (V{2}));
  EXPECT_FALSE(a.FreeGroupEnd().ok());
}

TEST(AllocatorTest, InputErrorsNameTheFieldAndChangeNothing) {
  auto a = Make(4, 16, 8);
  ExtendPages out;
  EXPECT_EQ(a.AllocExtend({{17}, {40}, {0}, {0}}, &out).status().message(),
            "prefix_lens[0]: must be a page-aligned multiple of page_size (16) in [0, 2^48), got 17");
  EXPECT_EQ(a.AllocExtend({{0, 16}, {5, 16}, {0, 0}, {0, 0}}, &out).status().message(),
            "seq_lens[1]: must need at least one new page past prefix_len 16 (page_size 16), got 16");
  EXPECT_EQ(a.AllocExtend({{0}, {5}, {4}, {0}}, &out).status().message(),
            "rotation_bases[0]: must be null or in [0, 4), got 4");
  EXPECT_FALSE(a.AllocExtend({{0}, {5, 6}, {0}, {0}}, &out).ok());
  EXPECT_EQ(a.Free({64}).message(), "locs[0]: page 4 (slot 64) is not allocated (double free or reserved page)");
  EXPECT_EQ(a.Free({3}).message(), "locs[0]: page 0 (slot 3) is not allocated (double free or reserved page)");
  EXPECT_EQ(a.Free({16 * 36}).message(), "locs[0]: slot 576 is outside the pool [0, 576)");
  EXPECT_EQ(a.class_free_page_counts(), (V{8, 8, 8, 8}));
  EXPECT_FALSE(PageInterleaveAllocator::Create({0, 16, 8}).ok());
  EXPECT_FALSE(PageInterleaveAllocator::Create({4, 16, -1}).ok());
}

TEST(AllocatorTest, LastLocOwnerCongruence) {
  auto a = PageInterleaveAllocator::Create({4, 16, 8, false, true}).value();
  ExtendPages out;
  ASSERT_TRUE(a.AllocExtend({{0}, {32}, {2}, {0}}, &out).value());  // pages 6, 7
  // Prefix of 2 pages under base 2 ends on owner 3 (page 7): fine; owner 2 is not.
  EXPECT_TRUE(a.AllocExtend({{32}, {40}, {2}, {7 * 16 + 15}}, &out).ok());
  auto bad = a.AllocExtend({{32}, {40}, {2}, {6 * 16 + 15}}, &out);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cyclic"), std::string::npos);
}

TEST(AllocatorTest, RunAllocScriptPrefixesOpErrors) {
  AllocScript s{4, 16, 32, false, false, {}};
  AllocOp alloc;
  alloc.alloc = {{0}, {122}, {kNewChain}, {0}};
  AllocOp bad_free;
  bad_free.kind = AllocOpKind::kFree;
  bad_free.locs = {5000};
  s.ops = {alloc, bad_free};
  EXPECT_EQ(RunAllocScript(s).status().message(), "ops[1].locs[0]: slot 5000 is outside the pool [0, 2112)");
  s.ops.pop_back();
  auto r = RunAllocScript(s).value();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].pages, (std::vector<V>{{4, 5, 6, 7, 8, 9, 10, 11}}));
  EXPECT_EQ(r[0].available_size, 4 * 16 * 30);
  EXPECT_EQ(r[0].aggregate_free_size, 16 * 120);
}

}  // namespace
}  // namespace kvshard::ref

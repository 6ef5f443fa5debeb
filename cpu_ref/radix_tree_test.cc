// Worked cases of SGLang's radix tree and its request path (the scenario of ../shared/sglang_ref/radix.py's
// self-test, numbers from running it): pipelined batches whose inserts race, a declined tail, a whole key cached
// under another base (not declined), an unsharded insert, whole-node eviction in LRU order.
#include "cpu_ref/radix_requests.h"

#include <gtest/gtest.h>

namespace kvshard::ref {
namespace {

using V = std::vector<int64_t>;

V Range(int64_t from, int64_t to) {
  V v;
  for (int64_t t = from; t < to; ++t) v.push_back(t);
  return v;
}

V Cat(V a, const V& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class RadixRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    allocator_.emplace(PageInterleaveAllocator::Create({2, 2, 16, false, true}).value());
    reqs_.emplace(&*allocator_);
  }
  std::optional<PageInterleaveAllocator> allocator_;
  std::optional<RadixRequests> reqs_;
};

TEST_F(RadixRequestsTest, PipelinedInsertUnderAnotherBaseIsDeclinedAndKeepsItsPages) {
  ASSERT_TRUE(reqs_->Admit("A", Range(100, 110), -1).ok());
  const auto a = reqs_->AllocExtend({"A"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->rotation_bases, V{0});
  EXPECT_EQ(a->pages[0], (V{2, 3, 4, 5, 6}));
  // B is planned before A's insert lands: no prefix hit, a new chain from the least-full class.
  ASSERT_TRUE(reqs_->Admit("B", Cat(Range(100, 104), Range(300, 308)), -1).ok());
  const auto b = reqs_->AllocExtend({"B"});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->rotation_bases, V{1});
  const auto ua = reqs_->CacheUnfinished("A");
  ASSERT_TRUE(ua.ok());
  EXPECT_FALSE(ua->rotation_tail_declined);
  EXPECT_EQ(ua->cache_protected_len, 10);
  const auto ub = reqs_->CacheUnfinished("B");
  ASSERT_TRUE(ub.ok());
  EXPECT_TRUE(ub->rotation_tail_declined);  // B's tail would continue A's base-0 chain from base 1
  EXPECT_EQ(ub->prefix_len, 4);
  EXPECT_EQ(ub->cache_protected_len, 0);
  EXPECT_TRUE(ub->freed.empty());         // no dedup free, no rebind
  EXPECT_EQ(ub->row_pages, b->pages[0]);  // B stays on its own pages
  // Finishing B frees its whole row (declined tail and duplicates), A's finish frees nothing it cached.
  const auto fb = reqs_->CacheFinished("B", 12);
  ASSERT_TRUE(fb.ok());
  EXPECT_TRUE(fb->rotation_tail_declined);
  ASSERT_EQ(fb->freed.size(), 1u);
  EXPECT_EQ(fb->freed[0], (V{7, 8, 9, 10, 11, 12}));
  const auto fa = reqs_->CacheFinished("A", 10);
  ASSERT_TRUE(fa.ok());
  EXPECT_TRUE(fa->freed.empty());
  EXPECT_EQ(reqs_->tree().total_size(), 10);
  EXPECT_EQ(reqs_->tree().evictable_size(), 10);
  EXPECT_TRUE(reqs_->CheckInvariants().ok()) << reqs_->CheckInvariants().message();
}

TEST_F(RadixRequestsTest, AWholeKeyCachedUnderAnotherBaseIsNotDeclined) {
  ASSERT_TRUE(reqs_->Admit("A", Range(0, 6), -1).ok());  // 3 pages: classes 0, 1, 0; B draws the fuller class 1
  ASSERT_TRUE(reqs_->Admit("B", Range(0, 6), -1).ok());
  const auto ab = reqs_->AllocExtend({"A", "B"});
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(ab->rotation_bases, (V{0, 1}));
  ASSERT_TRUE(reqs_->CacheFinished("A", 6).ok());
  const auto fb = reqs_->CacheFinished("B", 6);
  ASSERT_TRUE(fb.ok());
  EXPECT_FALSE(fb->rotation_tail_declined);  // nothing left to graft: SGLang reports no decline
  EXPECT_EQ(fb->prefix_len, 6);
  ASSERT_EQ(fb->freed.size(), 1u);  // the duplicates
  EXPECT_EQ(fb->freed[0], ab->pages[1]);
  EXPECT_TRUE(reqs_->CheckInvariants().ok());
}

TEST(RadixTreeTest, UnshardedInsertNeverDeclinesAndEvictionTakesWholeNodesOldestFirst) {
  auto a = PageInterleaveAllocator::Create({2, 2, 16, false, true}).value();
  ExtendPages pages;
  ASSERT_TRUE(a.AllocExtend({{0, 0}, {8, 4}, {0, 1}, {-1, -1}}, &pages).value());
  auto locs = [&](int64_t from, int64_t to) {
    V v;
    for (int64_t k = from; k < to; ++k) v.push_back(pages.pages[k] * 2);
    V out;
    for (int64_t l : v) out.insert(out.end(), {l, l + 1});
    return out;
  };
  RadixTree tree(&a, 2);
  EXPECT_FALSE(tree.Insert(Range(0, 8), locs(0, 4), 0).rotation_tail_declined);
  // Another base under the same first page: declined; the same without a base (None): grafted.
  EXPECT_TRUE(tree.Insert(Cat(Range(0, 2), Range(50, 52)), locs(4, 6), 1).rotation_tail_declined);
  const RadixTree::InsertResult unsharded =
      tree.Insert(Cat(Range(0, 2), Range(50, 52)), Cat(locs(0, 1), locs(5, 6)), kNewChain);
  EXPECT_FALSE(unsharded.rotation_tail_declined);
  EXPECT_EQ(unsharded.prefix_len, 2);
  EXPECT_EQ(tree.total_size(), 10);
  // The older leaf goes first, whole: [2..8) (3 pages) although 2 tokens were asked for.
  ASSERT_EQ(tree.Evict(2).value(), 6);
  ASSERT_EQ(tree.last_evicted().size(), 1u);
  EXPECT_EQ(tree.last_evicted()[0].size(), 3u);
  EXPECT_EQ(tree.total_size(), 4);
}

}  // namespace
}  // namespace kvshard::ref

// RecyclingResource: live blocks never overlap and keep their bytes, freed ones come back for their own size, and a
// map rebuilt from the same resource takes no new memory once warm.
#include "core/recycling_resource.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace kvshard {
namespace {

struct Live {
  unsigned char* p;
  size_t bytes, align;
  unsigned char fill;  // every byte of the block, from the allocation's index
};

RC_GTEST_PROP(RecyclingResourceProps, LiveBlocksKeepTheirBytesAndFreedOnesComeBackForTheirSize, ()) {
  const std::vector<size_t> sizes = {1, 3, 8, 24, 40, 48, 64, 100};
  const std::vector<size_t> aligns = {1, 8, 16, 32, 64};
  RecyclingResource r;
  std::vector<Live> live;
  const int ops = *rc::gen::inRange(1, 300);
  size_t freed = 0;  // blocks in the resource's free lists, by this test's count
  for (int i = 0; i < ops; ++i) {
    if (!live.empty() && *rc::gen::inRange(0, 3) == 0) {  // free one, then (sometimes) take its size again
      const size_t k = *rc::gen::inRange<size_t>(0, live.size());
      const Live b = live[k];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      r.deallocate(b.p, b.bytes, b.align);
      ++freed;
      if (*rc::gen::arbitrary<bool>()) {
        void* again = r.allocate(b.bytes, b.align);
        RC_ASSERT(reinterpret_cast<uintptr_t>(again) == reinterpret_cast<uintptr_t>(b.p));  // last freed, first reused
        --freed;
        std::memset(again, b.fill, b.bytes);
        live.push_back(b);
      }
    } else {
      const size_t bytes = *rc::gen::elementOf(sizes), align = *rc::gen::elementOf(aligns);
      auto* p = static_cast<unsigned char*>(r.allocate(bytes, align));
      RC_ASSERT(reinterpret_cast<uintptr_t>(p) % align == 0u);
      const auto fill = static_cast<unsigned char>(i * 37 + 1);
      std::memset(p, fill, bytes);
      live.push_back({p, bytes, align, fill});
    }
    for (const Live& b : live) {  // no other block's bytes written over this one
      for (size_t j = 0; j < b.bytes; ++j) RC_ASSERT(b.p[j] == b.fill);
    }
  }
  // Whatever is not reused stays in the free lists; what was reused came from them.
  RC_ASSERT(r.free_blocks() <= freed);
  for (const Live& b : live) r.deallocate(b.p, b.bytes, b.align);
}

TEST(RecyclingResource, AMapRebuiltFromItTakesNoNewBlocksOnceWarm) {
  RecyclingResource r;
  const auto build = [&](int64_t n) {
    std::pmr::map<int64_t, int64_t> m(&r);
    std::pmr::set<int64_t> s(&r);
    for (int64_t k = 0; k < n; ++k) {
      m[k * 7 % 1000] = k;
      s.insert(k * 13 % 1000);
    }
    return m.size() + s.size();
  };
  EXPECT_EQ(build(500), 1000u);
  EXPECT_EQ(r.free_blocks(), 1000u);  // every node freed into it
  EXPECT_EQ(build(300), 600u);
  EXPECT_EQ(r.free_blocks(), 1000u);  // the 600 nodes came from the free lists
  EXPECT_EQ(build(600), 1200u);
  EXPECT_EQ(r.free_blocks(), 1200u);  // 200 more made, all back
}

}  // namespace
}  // namespace kvshard

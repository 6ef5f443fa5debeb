// cpu_fast/'s gather planner against the reference on literal batches (in props/: cpu_fast/ may not depend on
// cpu_ref/): whole bitmap words of consecutive runs (closed form when N divides 64), shared heads,
// scattered cyclic runs, and the fused validation's error order.
#include "cpu_fast/gather_plan.h"

#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "cpu_ref/gather_plan.h"

namespace kvshard::fast {
namespace {

using V = std::vector<int64_t>;

// The spec §3 batch: N=4, ps=16, a base-2 chain with a 7-page prefix.
ExtendBatch SpecBatch() {
  return {4, 16, 32, 4096, 512, {{112, 251, {22, 23, 20, 21, 26, 27, 24, 25, 30, 31, 28, 29, 34, 35, 32, 33}}}};
}

// The spec chain, a consecutive prefix run and a request sharing that run's head, each with fresh chunk pages.
ExtendBatch ThreeRequestBatch() {
  ExtendBatch b = SpecBatch();
  b.requests.push_back({128, 140, {40, 41, 42, 43, 44, 45, 46, 47, 48}});
  b.requests.push_back({64, 65, {40, 41, 42, 43, 49}});
  return b;
}

TEST(FastGatherPlanTest, SpecWorkedExampleEqualsReference) {
  const GatherPlan got = BuildGatherPlan(SpecBatch()).value();
  EXPECT_EQ(got, ref::BuildGatherPlan(SpecBatch()).value());
  EXPECT_EQ(got.ranks[1].send_local_pages, (V{5, 0}));
  EXPECT_EQ(Translate(got, {21 * 16 + 3, 4 * 34 * 16 - 1}).value(),
            ref::Translate(got, {21 * 16 + 3, 4 * 34 * 16 - 1}).value());
}

// Consecutive prefix runs filling whole bitmap words, runs that share heads, scattered cyclic runs and chunk
// pages inside prefix words, for N that divides 64 and N that does not; each build reuses the planner's state.
TEST(FastGatherPlanTest, DenseAndScatteredRunsEqualReference) {
  for (int64_t n : {1, 2, 3, 8, 64}) {
    const int64_t ps = 4, pages_per_rank = 20000 / n + 99, reqs = 12;
    ExtendBatch b{n, ps, pages_per_rank, 0, 0, {}};
    int64_t next = n, block = 0, chunks = 0;  // next free logical page for consecutive runs
    for (int64_t i = 0; i < reqs; ++i) {
      const int64_t k = 50 + 37 * i % 150;
      ExtendRequest r{k * ps, 0, {}};
      if (i % 4 == 3) {  // the previous request's head
        r.pages.assign(b.requests[i - 1].pages.begin(),
                       b.requests[i - 1].pages.begin() + std::min<int64_t>(k, b.requests[i - 1].prefix_len / ps));
        r.prefix_len = static_cast<int64_t>(r.pages.size()) * ps;
      } else if (i % 4 == 2) {  // cyclic, not consecutive: every owner's local page strides by 3
        const int64_t base = next + (n - next % n);
        for (int64_t j = 0; j < k; ++j) r.pages.push_back(base + (j / n) * 3 * n + j % n);
        next = r.pages.back() + 1;
      } else {
        for (int64_t j = 0; j < k; ++j) r.pages.push_back(next + j);
        next += k;
      }
      r.pages.push_back(next++);  // a chunk page inside the run's last word, one further on
      r.pages.push_back(next + 5);
      next += 6;
      r.seq_len = static_cast<int64_t>(r.pages.size()) * ps - 1;
      block += (r.prefix_len / ps + n - 1) / n;
      chunks += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
      b.requests.push_back(r);
    }
    ASSERT_LT(next, n * (pages_per_rank + 1));
    b.max_prefix_tokens = n * block * ps;
    b.chunk_tokens = chunks * ps;
    const GatherPlan want = ref::BuildGatherPlan(b).value();
    GatherPlanner planner;
    GatherPlan p;
    for (int round = 0; round < 2; ++round) {
      ASSERT_TRUE(planner.Build(b, &p).ok()) << "n=" << n;
      EXPECT_EQ(p, want) << "n=" << n;
    }
  }
}

TEST(FastGatherPlanTest, SparseSpansEqualReference) {
  // A few requests scattered over a pool of 2^22 logical pages: the span is tens of thousands of bitmap words
  // for a few hundred written, so the planner walks the written words found from the pages. Request i's prefix
  // starts at a far position of its own (request 3 repeats request 2's head; request 5 strides every owner's
  // local page by 7), each with a chunk page far away; the same planner then builds a dense batch.
  for (int64_t n : {1, 4, 8}) {
    const int64_t ps = 16, pages_per_rank = (int64_t{1} << 22) / n - 2;
    ExtendBatch b{n, ps, pages_per_rank, 0, 0, {}};
    int64_t block = 0, chunks = 0;
    for (int64_t i = 0; i < 8; ++i) {
      const int64_t k = 20 + 13 * i;
      const int64_t base = n * (1 + (i * 479001 + 7919) % (pages_per_rank - 2000));
      ExtendRequest r{k * ps, 0, {}};
      if (i == 3) {
        r.pages.assign(b.requests[2].pages.begin(), b.requests[2].pages.begin() + 10);
        r.prefix_len = 10 * ps;
      } else {
        for (int64_t j = 0; j < k; ++j) r.pages.push_back(i == 5 ? base + (j / n) * 7 * n + j % n : base + j);
      }
      r.pages.push_back(n * (pages_per_rank - 100 * i) + i % n);  // a chunk page near the pool's end
      r.seq_len = static_cast<int64_t>(r.pages.size()) * ps - 3;
      block += (r.prefix_len / ps + n - 1) / n;
      chunks += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
      b.requests.push_back(r);
    }
    b.max_prefix_tokens = n * block * ps;
    b.chunk_tokens = chunks * ps;
    const GatherPlan want = ref::BuildGatherPlan(b).value();
    GatherPlanner planner;
    GatherPlan p;
    for (int round = 0; round < 2; ++round) {
      ASSERT_TRUE(planner.Build(b, &p).ok()) << "n=" << n;
      EXPECT_EQ(p, want) << "n=" << n;
    }
    ExtendBatch dense{n,          ps,     pages_per_rank,
                      n * ps * 4, 2 * ps, {{4 * ps, 4 * ps + 5, {n, n + 1, n + 2, n + 3, n + 4}}}};
    if (n == 1) dense.max_prefix_tokens = 4 * ps;
    ASSERT_TRUE(planner.Build(dense, &p).ok()) << "n=" << n;
    EXPECT_EQ(p, ref::BuildGatherPlan(dense).value()) << "n=" << n;  // no bit of the sparse batch left behind
  }
}

// Every pair of 12 faults (structural, semantic, capacity) on any of 3 requests gives the reference's result
// and error, and the planner stays reusable afterwards.
TEST(FastGatherPlanTest, FusedValidationGivesTheReferenceError) {
  using Fault = std::function<void(ExtendBatch&, size_t)>;
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<Fault> faults = {
      [](ExtendBatch& b, size_t i) { b.requests[i].prefix_len = -16; },
      [](ExtendBatch& b, size_t i) { b.requests[i].seq_len = b.requests[i].prefix_len - 1; },
      [](ExtendBatch& b, size_t i) { b.requests[i].pages.pop_back(); },
      [](ExtendBatch& b, size_t i) { b.requests[i].pages[1] = 500; },    // prefix page too high
      [=](ExtendBatch& b, size_t i) { b.requests[i].pages[1] = kMin; },  // prefix page far too low
      [](ExtendBatch& b, size_t i) { b.requests[i].pages.back() = 3; },  // reserved chunk page
      [](ExtendBatch& b, size_t i) {                                     // a consecutive run past the pool's end
        for (int64_t k = 0; k < b.requests[i].prefix_len / 16; ++k) b.requests[i].pages[k] = 128 + k;
      },
      [](ExtendBatch& b, size_t i) { b.requests[i].prefix_len += 4; },                              // misaligned
      [](ExtendBatch& b, size_t i) { std::swap(b.requests[i].pages[0], b.requests[i].pages[1]); },  // not cyclic
      [](ExtendBatch& b, size_t i) { b.requests[i].pages.back() = b.requests[i].pages[0]; },        // not fresh
      [](ExtendBatch& b, size_t) { b.max_prefix_tokens = 64; },
      [](ExtendBatch& b, size_t) { b.chunk_tokens = 16; },
  };
  GatherPlanner planner;
  GatherPlan p;
  const GatherPlan good = ref::BuildGatherPlan(ThreeRequestBatch()).value();
  for (size_t f = 0; f < faults.size(); ++f) {
    for (size_t g = 0; g < faults.size(); ++g) {
      for (size_t i = 0; i < 3; ++i) {
        for (size_t j = 0; j < 3; ++j) {
          ExtendBatch b = ThreeRequestBatch();
          faults[f](b, i);
          faults[g](b, j);
          const Status got = planner.Build(b, &p);
          const StatusOr<GatherPlan> want = ref::BuildGatherPlan(b);
          EXPECT_EQ(got.code(), want.status().code()) << f << " " << g << " " << i << " " << j;
          EXPECT_EQ(got.message(), want.status().message()) << f << " " << g << " " << i << " " << j;
          if (want.ok()) {  // two faults that cancel (a swap swapped back)
            EXPECT_EQ(p, *want);
          }
          ASSERT_TRUE(planner.Build(ThreeRequestBatch(), &p).ok());
          EXPECT_EQ(p, good);
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvshard::fast

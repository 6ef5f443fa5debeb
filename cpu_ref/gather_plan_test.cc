// Gather-plan examples: SGLang's base-2 chain example (spec §3), shared-prefix dedup, translate, and the
// fail-fast errors ("page-aligned", "cyclic", "capacity", non-fresh chunk pages).
#include "cpu_ref/gather_plan.h"

#include <functional>
#include <limits>
#include <map>
#include <set>

#include <gtest/gtest.h>

namespace kvshard::ref {
namespace {

using V = std::vector<int64_t>;

// The spec §3 chain: base 2, N=4 — position k holds a page of owner (2 + k) % 4.
const V kChain = {22, 23, 20, 21, 26, 27, 24, 25, 30, 31, 28, 29, 34, 35, 32, 33};

ExtendBatch SpecBatch() { return {4, 16, 32, 4096, 512, {{112, 251, kChain}}}; }

TEST(GatherPlanTest, SpecWorkedExampleBase2Chain) {
  GatherPlan p = BuildGatherPlan(SpecBatch()).value();
  EXPECT_EQ(p.block_pages, 2);
  EXPECT_EQ(p.n_prefix_slots, 8);
  EXPECT_EQ(p.chunk_base_page, 256);
  EXPECT_EQ(p.trash_page, 288);
  EXPECT_EQ(p.page_pos_size, 4 * 34);
  // Prefix slots {20:0, 24:1, 21:2, 22:4, 26:5, 23:6, 27:7}; chunk pages 25, 30, 31, ... at 256 + j.
  EXPECT_EQ(p.mapped_pages, (V{20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35}));
  EXPECT_EQ(p.mapped_scratch_pages, (V{0, 2, 4, 6, 1, 256, 5, 7, 259, 260, 257, 258, 263, 264, 261, 262}));
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_EQ(p.ranks[0].send_local_pages, (V{5, 6}));
  EXPECT_EQ(p.ranks[1].send_local_pages, (V{5, 0}));  // trash pad
  EXPECT_EQ(p.ranks[2].send_local_pages, (V{5, 6}));
  EXPECT_EQ(p.ranks[3].send_local_pages, (V{5, 6}));
  ASSERT_EQ(p.ranks[1].send_rows.size(), 32u);
  EXPECT_EQ(p.ranks[1].send_rows[0], 80);
  EXPECT_EQ(p.ranks[1].send_rows[15], 95);
  EXPECT_EQ(p.ranks[1].send_rows[16], 0);
  EXPECT_EQ(p.ranks[1].send_rows[31], 15);
}

TEST(GatherPlanTest, TranslateMapsPlanAndTrash) {
  GatherPlan p = BuildGatherPlan(SpecBatch()).value();
  // Slot 3 of page 21 -> slot 2; slot 0 of chunk page 25 -> chunk base; reserved and unplanned -> trash.
  EXPECT_EQ(Translate(p, {21 * 16 + 3, 25 * 16, 5, 40 * 16 + 7}).value(),
            (V{2 * 16 + 3, 256 * 16, 288 * 16 + 5, 288 * 16 + 7}));
  EXPECT_EQ(Translate(p, {4 * 34 * 16}, "--translate").status().message(),
            "--translate[0]: must be in [0, 2176) (the page_pos range), got 2176");
}

TEST(GatherPlanTest, SharedPrefixPagesLandOnce) {
  // Two requests share the 4-page prefix [22,23,20,21]; the second has 2 more prefix pages.
  ExtendBatch b{4, 16, 32, 4096, 512, {{64, 80, {22, 23, 20, 21, 40}}, {96, 100, {22, 23, 20, 21, 26, 27, 41}}}};
  GatherPlan p = BuildGatherPlan(b).value();
  EXPECT_EQ(p.block_pages, 1 + 2);  // host bound: sum of ceil(K_i / N), not the deduplicated count
  EXPECT_EQ(p.ranks[0].send_local_pages, (V{5, 0, 0}));
  EXPECT_EQ(p.ranks[2].send_local_pages, (V{5, 6, 0}));
  EXPECT_EQ(p.mapped_pages, (V{20, 21, 22, 23, 26, 27, 40, 41}));
  EXPECT_EQ(p.mapped_scratch_pages, (V{0, 3, 6, 9, 7, 10, 256, 257}));
}

TEST(GatherPlanTest, EmptyPrefixBatchHasNoSendBlock) {
  GatherPlan p = BuildGatherPlan({2, 1, 7, 0, 4, {{0, 3, {2, 3, 4}}}}).value();
  EXPECT_EQ(p.block_pages, 0);
  EXPECT_TRUE(p.ranks[0].send_local_pages.empty());
  EXPECT_EQ(p.mapped_scratch_pages, (V{0, 1, 2}));
  EXPECT_EQ(p.trash_page, 4);
}

TEST(GatherPlanTest, FailFastErrors) {
  ExtendBatch b = SpecBatch();
  b.requests[0].prefix_len = 100;
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "requests[0].prefix_len: sharded prefill requires physical-page-aligned prefixes (the radix-tree "
            "match quantum), got prefix_len=100, page_size=16");
  b = SpecBatch();
  std::swap(b.requests[0].pages[2], b.requests[0].pages[3]);
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "requests[0].pages: sharded prefix owners of request 0 are not cyclic — rotation base out of sync "
            "(owners[:16]=[2, 3, 1, 0, 2, 3, 0])");
  b = SpecBatch();
  b.max_prefix_tokens = 64;
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "max_prefix_tokens: prefix (7 pages, padded gather span 128 tokens) exceeds the scratch prefix "
            "capacity (64) — the PrefillAdder scratch reservation should have deferred this batch");
  b = SpecBatch();
  b.chunk_tokens = 128;
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "chunk_tokens: chunk (144 tokens) exceeds the scratch chunk capacity (128)");
  b = SpecBatch();
  b.requests[0].pages[8] = 22;
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "requests[0].pages[8]: chunk page 22 is already in the plan (a prefix page or an earlier chunk page); "
            "chunk pages must be fresh allocations");
  b = SpecBatch();
  b.requests[0].seq_len = 260;
  EXPECT_EQ(BuildGatherPlan(b).status().code(), StatusCode::kInvalidArgument);
}

TEST(GatherPlanTest, PlannerIsReusableAfterErrors) {
  GatherPlanner planner;
  GatherPlan p;
  ExtendBatch bad = SpecBatch();
  bad.chunk_tokens = 16;
  EXPECT_FALSE(planner.Build(bad, &p).ok());
  ASSERT_TRUE(planner.Build(SpecBatch(), &p, /*with_send_rows=*/false).ok());
  EXPECT_EQ(p, [] {
    GatherPlan q = BuildGatherPlan(SpecBatch()).value();
    for (RankSend& r : q.ranks) r.send_rows.clear();
    return q;
  }());
}

// Three requests over N=4, ps=16 (pool pages [4, 132)): the spec chain (a scattered cyclic prefix), a
// consecutive prefix run, and a request sharing that run's head, each with fresh chunk pages.
ExtendBatch ThreeRequestBatch() {
  ExtendBatch b = SpecBatch();
  b.requests.push_back({128, 140, {40, 41, 42, 43, 44, 45, 46, 47, 48}});
  b.requests.push_back({64, 65, {40, 41, 42, 43, 49}});
  return b;
}

// Build fuses the structural checks of ValidateExtendBatch into its first pass; the error must stay the one of
// "ValidateExtendBatch, then the semantic checks": a structural fault anywhere wins over a semantic one
// anywhere, even in an earlier request.
TEST(GatherPlanTest, StructuralFaultWinsOverEarlierSemanticFault) {
  ExtendBatch b = ThreeRequestBatch();
  ASSERT_TRUE(BuildGatherPlan(b).ok());
  std::swap(b.requests[0].pages[2], b.requests[0].pages[3]);  // request 0: not cyclic
  b.requests[2].pages[4] = 132;                               // request 2: chunk page out of range
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "requests[2].pages[4]: page 132 out of pool range [4, 132) (pages < shard_size are reserved)");
  b = ThreeRequestBatch();
  b.requests[0].prefix_len = 100;  // request 0: not page-aligned
  b.requests[0].pages[3] = 2;      // and a reserved prefix page (structural, same request)
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "requests[0].pages[3]: page 2 out of pool range [4, 132) (pages < shard_size are reserved)");
  b = ThreeRequestBatch();
  b.max_prefix_tokens = 64;        // capacity fault
  b.requests[1].pages.pop_back();  // request 1: wrong page count
  EXPECT_EQ(BuildGatherPlan(b).status().message(),
            "requests[1].pages: must list ceil(seq_len/page_size) = 9 pages, got 8");
}

// Every pair of faults (structural or semantic, on any requests) gives exactly the error of "ValidateExtendBatch,
// then the planner", and the planner stays reusable afterwards.
TEST(GatherPlanTest, FusedValidationKeepsTheErrorOrder) {
  using Fault = std::function<void(ExtendBatch&, size_t)>;
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<Fault> faults = {
      [](ExtendBatch& b, size_t i) { b.requests[i].prefix_len = -16; },
      [](ExtendBatch& b, size_t i) { b.requests[i].seq_len = b.requests[i].prefix_len - 1; },
      [](ExtendBatch& b, size_t i) { b.requests[i].pages.pop_back(); },
      [](ExtendBatch& b, size_t i) { b.requests[i].pages[1] = 500; },    // prefix page too high
      [=](ExtendBatch& b, size_t i) { b.requests[i].pages[1] = kMin; },  // prefix page far too low
      [](ExtendBatch& b, size_t i) { b.requests[i].pages.back() = 3; },  // reserved chunk page
      [](ExtendBatch& b, size_t i) {                                     // a consecutive prefix run past the pool's end
        for (int64_t k = 0; k < b.requests[i].prefix_len / 16; ++k) b.requests[i].pages[k] = 128 + k;
      },
      [](ExtendBatch& b, size_t i) { b.requests[i].prefix_len += 4; },                              // misaligned
      [](ExtendBatch& b, size_t i) { std::swap(b.requests[i].pages[0], b.requests[i].pages[1]); },  // not cyclic
      [](ExtendBatch& b, size_t i) { b.requests[i].pages.back() = b.requests[i].pages[0]; },        // chunk not fresh
      [](ExtendBatch& b, size_t) { b.max_prefix_tokens = 64; },                                     // capacity
      [](ExtendBatch& b, size_t) { b.chunk_tokens = 16; },                                          // capacity
  };
  GatherPlanner planner;
  GatherPlan p;
  const GatherPlan good = BuildGatherPlan(ThreeRequestBatch()).value();
  int structural = 0;
  for (size_t f = 0; f < faults.size(); ++f) {
    for (size_t g = 0; g < faults.size(); ++g) {
      for (size_t i = 0; i < 3; ++i) {
        for (size_t j = 0; j < 3; ++j) {
          ExtendBatch b = ThreeRequestBatch();
          faults[f](b, i);
          faults[g](b, j);
          const Status got = planner.Build(b, &p);
          const Status validated = ValidateExtendBatch(b);
          if (!validated.ok()) {
            ++structural;
            EXPECT_EQ(got.code(), validated.code()) << f << " " << g << " " << i << " " << j;
            EXPECT_EQ(got.message(), validated.message()) << f << " " << g << " " << i << " " << j;
          }
          ASSERT_TRUE(planner.Build(ThreeRequestBatch(), &p).ok());
          EXPECT_EQ(p, good);
        }
      }
    }
  }
  EXPECT_GT(structural, 500);
}

// The plan straight from the definition: ascending unique prefix pages take owner-major slots, chunk pages
// take chunk_base_page + j in batch order.
GatherPlan NaivePlan(const ExtendBatch& b) {
  const int64_t n = b.shard_size, ps = b.page_size;
  std::map<int64_t, int64_t> pos;  // page -> scratch page
  std::set<int64_t> prefix;
  int64_t block = 0, next_chunk = b.max_prefix_tokens / ps;
  for (const ExtendRequest& r : b.requests) {
    block += (r.prefix_len / ps + n - 1) / n;
    prefix.insert(r.pages.begin(), r.pages.begin() + r.prefix_len / ps);
  }
  GatherPlan p{n,
               ps,
               block,
               n * block,
               b.max_prefix_tokens / ps,
               (b.max_prefix_tokens + b.chunk_tokens) / ps,
               n * (b.pages_per_rank + 2),
               {},
               {},
               {}};
  for (int64_t r = 0; r < n; ++r) p.ranks.push_back({r, V(block, 0), {}});
  V within(n, 0);
  for (int64_t page : prefix) {
    const int64_t owner = page % n, k = within[owner]++;
    pos[page] = owner * block + k;
    p.ranks[owner].send_local_pages[k] = page / n;
  }
  for (const ExtendRequest& r : b.requests) {
    for (size_t j = r.prefix_len / ps; j < r.pages.size(); ++j) pos[r.pages[j]] = next_chunk++;
  }
  for (const auto& [page, scratch] : pos) {
    p.mapped_pages.push_back(page);
    p.mapped_scratch_pages.push_back(scratch);
  }
  return p;
}

// Consecutive prefix runs filling whole bitmap words (the word-at-a-time paths), runs that share heads,
// scattered cyclic runs and chunk pages inside prefix words, for N that divides 64 and N that does not.
TEST(GatherPlanTest, DenseAndScatteredRunsMatchTheDefinition) {
  for (int64_t n : {1, 2, 3, 8, 64}) {
    const int64_t ps = 4, pages_per_rank = 20000 / n + 99, reqs = 12;
    ExtendBatch b{n, ps, pages_per_rank, 0, 0, {}};
    int64_t next = n;  // next free logical page for consecutive runs
    int64_t block = 0, chunks = 0;
    for (int64_t i = 0; i < reqs; ++i) {
      const int64_t k = 50 + 37 * i % 150;
      ExtendRequest r{k * ps, 0, {}};
      if (i % 4 == 3) {
        r.pages = b.requests[i - 1].pages;  // shares the previous request's head
        r.pages.resize(std::min<int64_t>(k, b.requests[i - 1].prefix_len / ps));
        r.prefix_len = static_cast<int64_t>(r.pages.size()) * ps;
      } else if (i % 4 == 2) {
        // Cyclic but not consecutive: every owner's local page strides by 3.
        const int64_t base = next + (n - next % n);
        for (int64_t j = 0; j < k; ++j) r.pages.push_back(base + (j / n) * 3 * n + j % n);
        next = r.pages.back() + 1;
      } else {
        for (int64_t j = 0; j < k; ++j) r.pages.push_back(next + j);
        next += k;
      }
      // Two chunk pages: one just past the run (inside its last word), one further on.
      r.pages.push_back(next++);
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
    GatherPlanner planner;
    GatherPlan p;
    for (int round = 0; round < 2; ++round) {  // the second build reuses the planner's state
      ASSERT_TRUE(planner.Build(b, &p, /*with_send_rows=*/false).ok()) << "n=" << n;
      EXPECT_EQ(p, NaivePlan(b)) << "n=" << n;
    }
  }
}

}  // namespace
}  // namespace kvshard::ref

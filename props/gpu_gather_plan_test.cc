// Device gather plan vs the reference, bit-exact: every field of GatherPlan on valid batches, the same error
// (same request, same tag) on corrupted ones, and page_pos kept correct across consecutive batches of one
// planner (only the previous batch's entries are reset); batches at, 2x and 16x past the old single-block
// limits. Skips without a GPU.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "cpu_ref/gather_plan.h"
#include "gpu/gather_plan.h"
#include "props/gpu_test_env.h"
#include "props/pool_generators.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// Result of one build as comparable text: the error message, or "ok".
struct Outcome {
  Status status;
  GatherPlan plan;
};

Outcome OnGpu(gpu::DeviceGatherPlanner& planner, const ExtendBatch& b) {
  Outcome o;
  o.status = planner.Upload(b, nullptr);
  if (o.status.ok()) o.status = planner.Launch(0, nullptr);
  if (o.status.ok()) {
    auto p = planner.Download(nullptr);
    o.status = p.status();
    if (p.ok()) o.plan = *p;
  }
  return o;
}

// Corrupts a valid batch in one of the ways SGLang fails fast on (or leaves it valid).
ExtendBatch Corrupt(ExtendBatch b) {
  const int kind = *rc::gen::inRange(0, 5);
  if (b.requests.empty()) return b;
  const size_t i = *rc::gen::inRange<size_t>(0, b.requests.size());
  ExtendRequest& r = b.requests[i];
  const int64_t k = r.prefix_len / b.page_size;
  switch (kind) {
    case 0:  // misaligned prefix
      if (b.page_size > 1 && r.prefix_len > 0) r.prefix_len -= 1;
      break;
    case 1:  // non-cyclic prefix: swap two prefix pages of different owners
      if (k >= 2 && b.shard_size > 1) std::swap(r.pages[0], r.pages[1]);
      break;
    case 2:  // capacity: shrink the prefix region by one logical page
      if (b.max_prefix_tokens > 0) b.max_prefix_tokens -= b.shard_size * b.page_size;
      break;
    case 3:  // a chunk page repeated from the prefix or an earlier chunk page
      if (static_cast<int64_t>(r.pages.size()) > k && !r.pages.empty() && r.pages.size() >= 2) {
        r.pages.back() = r.pages.front();
      }
      break;
    default: break;
  }
  return b;
}

TEST(GpuGatherPlan, MatchesReferenceIncludingErrors) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("device gather plan == reference (plans and errors)", [] {
    const ExtendBatch valid = DrawFullSizeBatch();
    const ExtendBatch batch = Corrupt(valid);
    ExtendBatch geometry = batch;
    geometry.requests.clear();
    auto planner = RC_VALUE(gpu::DeviceGatherPlanner::Create(geometry));
    const bool one_block = *rc::gen::arbitrary<bool>();  // the one-block build, or the grid-wide launches
    RC_CLASSIFY(one_block, "one block");
    planner->set_one_block_work(one_block ? INT64_MAX : 0);
    const bool compact = *rc::gen::arbitrary<bool>();  // page_pos back as the mapped pages, or dense
    RC_CLASSIFY(compact, "mapped pages downloaded");
    planner->set_max_dense_download_bytes(compact ? 0 : INT64_MAX);
    const auto want = ref::BuildGatherPlan(batch);
    const Outcome got = OnGpu(*planner, batch);
    RC_ASSERT(got.status.ok() == want.ok());
    if (!want.ok()) {
      RC_ASSERT(got.status.message() == want.status().message());
      return;
    }
    RC_ASSERT(got.plan == *want);
  });
  EXPECT_TRUE(ok);
}

TEST(GpuGatherPlan, ConsecutiveBatchesOfOnePlanner) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("device planner reuse across batches", [] {
    const ExtendBatch first = DrawFullSizeBatch();
    ExtendBatch geometry = first;
    geometry.requests.clear();
    auto planner = RC_VALUE(gpu::DeviceGatherPlanner::Create(geometry));
    for (int k = 0; k < 3; ++k) {
      // Each build one block or grid-wide: a build resets what the last one mapped, whichever form made it.
      planner->set_one_block_work(*rc::gen::arbitrary<bool>() ? INT64_MAX : 0);
      planner->set_max_dense_download_bytes(*rc::gen::arbitrary<bool>() ? 0 : INT64_MAX);
      // Later batches keep the geometry but draw new requests (a failed build in between must not leak).
      ExtendBatch b = k == 0 ? first : DrawFullSizeBatch();
      b.shard_size = geometry.shard_size;
      b.page_size = geometry.page_size;
      b.pages_per_rank = geometry.pages_per_rank;
      b.max_prefix_tokens = geometry.max_prefix_tokens;
      b.chunk_tokens = geometry.chunk_tokens;
      const auto want = ref::BuildGatherPlan(b);
      const Outcome got = OnGpu(*planner, b);
      RC_ASSERT(got.status.ok() == want.ok());
      if (want.ok()) RC_ASSERT(got.plan == *want);
    }
  });
  EXPECT_TRUE(ok);
}

// Spec §3's worked example: N=4, ps=16, base-2 chain, prefix 112 tokens (7 pages), seq 251.
ExtendBatch SpecExampleBatch() {
  ExtendBatch b;
  b.shard_size = 4;
  b.page_size = 16;
  b.pages_per_rank = 32;
  b.max_prefix_tokens = 4096;
  b.chunk_tokens = 512;
  b.requests.push_back({112, 251, {22, 23, 20, 21, 26, 27, 24, 25, 30, 31, 28, 29, 34, 35, 32, 33}});
  return b;
}

// A stray page_pos entry (off the trash page, not among the build's mapped pages) comes back in the plan whichever
// form Download takes: the mapped pages' count disagrees with the table's, so the dense table comes back after all.
TEST(GpuGatherPlan, DownloadOfMappedPagesShowsAStrayEntry) {
  KVSHARD_REQUIRE_GPUS(1);
  const ExtendBatch b = SpecExampleBatch();
  const auto want = ref::BuildGatherPlan(b);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const int64_t max_dense : {int64_t{0}, INT64_MAX}) {
    auto planner = gpu::DeviceGatherPlanner::Create(b);
    ASSERT_TRUE(planner.ok()) << planner.status().ToString();
    (*planner)->set_max_dense_download_bytes(max_dense);
    const Outcome clean = OnGpu(**planner, b);
    ASSERT_TRUE(clean.status.ok()) << clean.status.ToString();
    EXPECT_EQ(clean.plan, *want) << "max dense bytes " << max_dense;
    // The same batch again, with a page the plan does not map set to scratch page 5 after the build.
    ASSERT_TRUE((*planner)->Upload(b, nullptr).ok());
    ASSERT_TRUE((*planner)->Launch(0, nullptr).ok());
    ASSERT_TRUE(gpu::SyncStream(nullptr).ok());
    const int64_t stray = b.shard_size * (b.pages_per_rank + 2) - 1;
    ASSERT_TRUE(std::find(want->mapped_pages.begin(), want->mapped_pages.end(), stray) == want->mapped_pages.end());
    const int32_t five = 5;
    ASSERT_TRUE(gpu::CopyToDevice(const_cast<int32_t*>((*planner)->page_pos()) + stray, &five, sizeof(five)).ok());
    auto got = (*planner)->Download(nullptr);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    GatherPlan with_stray = *want;
    with_stray.mapped_pages.push_back(stray);
    with_stray.mapped_scratch_pages.push_back(5);
    EXPECT_EQ(*got, with_stray) << "max dense bytes " << max_dense;
  }
}

TEST(GpuGatherPlan, SpecWorkedExample) {
  KVSHARD_REQUIRE_GPUS(1);
  const ExtendBatch b = SpecExampleBatch();
  auto planner = gpu::DeviceGatherPlanner::Create(b);
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  const Outcome got = OnGpu(**planner, b);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.plan.block_pages, 2);
  EXPECT_EQ(got.plan.ranks[0].send_local_pages, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(got.plan.ranks[1].send_local_pages, (std::vector<int64_t>{5, 0}));
  EXPECT_EQ(got.plan.ranks[2].send_local_pages, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(got.plan.ranks[3].send_local_pages, (std::vector<int64_t>{5, 6}));
  const auto want = ref::BuildGatherPlan(b);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_EQ(got.plan, *want);
}

// A valid batch of `reqs` requests of k_pages-page prefixes plus one chunk page each: a third of the requests
// share a prefix of an earlier request's chain (dedup), the rest start fresh cyclic chains at random bases.
ExtendBatch LargeBatch(int64_t n, int64_t ps, int64_t reqs, int64_t k_pages, uint32_t seed) {
  std::mt19937 rng(seed);
  ExtendBatch b;
  b.shard_size = n;
  b.page_size = ps;
  b.pages_per_rank = reqs * (k_pages + 1) / n + k_pages + 2;
  std::vector<int64_t> next_local(n, 1);
  std::vector<std::vector<int64_t>> chains;
  int64_t block_pages = 0;
  for (int64_t i = 0; i < reqs; ++i) {
    ExtendRequest r;
    int64_t base = static_cast<int64_t>(rng() % n), k = k_pages;
    if (!chains.empty() && rng() % 3 == 0) {
      const auto& c = chains[rng() % chains.size()];
      k = static_cast<int64_t>(rng() % (c.size() + 1));
      r.pages.assign(c.begin(), c.begin() + k);
      base = c.empty() ? 0 : c[0] % n;
    } else {
      for (int64_t j = 0; j < k; ++j) r.pages.push_back(next_local[(base + j) % n]++ * n + (base + j) % n);
      chains.push_back(r.pages);
    }
    r.pages.push_back(next_local[(base + k) % n]++ * n + (base + k) % n);  // one fresh chunk page
    r.prefix_len = k * ps;
    r.seq_len = r.prefix_len + 1;
    block_pages += (k + n - 1) / n;
    b.requests.push_back(std::move(r));
  }
  b.max_prefix_tokens = n * ps * block_pages;
  b.chunk_tokens = ps * reqs;
  return b;
}

// The single-block plan refused more than 16,384 prefix page references, 4,096 requests or 1,024 ranks: at
// those limits, 2x and 16x past them the device plan equals the reference.
TEST(GpuGatherPlan, MatchesReferencePastTheOldLimits) {
  KVSHARD_REQUIRE_GPUS(1);
  struct Case {
    int64_t n, ps, reqs, k_pages;
  };
  for (const Case& c :
       {Case{8, 4, 4096, 4}, Case{8, 4, 2048, 8}, Case{8, 2, 8192, 4}, Case{4, 16, 4096, 8}, Case{8, 1, 65536, 4},
        Case{8, 64, 4096, 64}, Case{1024, 2, 64, 32}, Case{2048, 1, 32, 64}, Case{16384, 1, 8, 16}}) {
    const uint32_t seed = static_cast<uint32_t>(c.reqs * 131 + c.n);
    const ExtendBatch b = LargeBatch(c.n, c.ps, c.reqs, c.k_pages, seed);
    const std::string what = StrCat("N=", c.n, " ps=", c.ps, " reqs=", c.reqs, " k_pages=", c.k_pages, " seed=", seed);
    auto want = ref::BuildGatherPlan(b);
    ASSERT_TRUE(want.ok()) << what << ": " << want.status().ToString();
    ExtendBatch geometry = b;
    geometry.requests.clear();
    auto planner = gpu::DeviceGatherPlanner::Create(geometry);
    ASSERT_TRUE(planner.ok()) << what << ": " << planner.status().ToString();
    const Outcome got = OnGpu(**planner, b);
    ASSERT_TRUE(got.status.ok()) << what << ": " << got.status.ToString();
    EXPECT_TRUE(got.plan == *want) << what << ": device plan differs from the reference";
  }
}

}  // namespace
}  // namespace kvshard::props

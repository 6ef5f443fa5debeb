// Device gather plan vs the reference, bit-exact: every field of GatherPlan on valid batches, the same error
// (same request, same tag) on corrupted ones, and page_pos kept correct across consecutive batches of one
// planner (only the previous batch's entries are reset). Skips without a GPU.
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
    default:
      break;
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

TEST(GpuGatherPlan, SpecWorkedExample) {
  KVSHARD_REQUIRE_GPUS(1);
  // Spec §3: N=4, ps=16, base-2 chain, prefix 112 tokens (7 pages), seq 251.
  ExtendBatch b;
  b.shard_size = 4;
  b.page_size = 16;
  b.pages_per_rank = 32;
  b.max_prefix_tokens = 4096;
  b.chunk_tokens = 512;
  b.requests.push_back({112, 251, {22, 23, 20, 21, 26, 27, 24, 25, 30, 31, 28, 29, 34, 35, 32, 33}});
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

TEST(GpuGatherPlan, CanImplementRejectsOversizedBatches) {
  ExtendBatch b;
  b.shard_size = 1;
  b.page_size = 1;
  b.pages_per_rank = 19999;
  b.max_prefix_tokens = 1 << 20;
  b.chunk_tokens = 0;
  ExtendRequest r;
  r.prefix_len = gpu::kMaxDevicePlanPrefixPages + 1;
  r.seq_len = r.prefix_len;
  for (int64_t k = 0; k < r.prefix_len; ++k) r.pages.push_back(1 + k);
  b.requests.push_back(r);
  const Status s = gpu::GatherPlanCanImplement(b);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
}

}  // namespace
}  // namespace kvshard::props

// GPU CP data movement vs the reference, bit-exact, on RapidCheck batches (N in 1..8, ps 2..128, ragged,
// with and without compute padding): batch rerange (and rerange(all_gather(split(x))) == x), split by
// plan (data and position modes, compute and valid kinds), valid-row selection, last-token collection, and
// round-robin split/restore; and the rerange (per call, and from a per-batch table) at, 2x and 16x past its old
// request and cp limits. Skips without a GPU.
#include <algorithm>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/cp_limits.h"
#include "cpu_ref/cp_collect.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "gpu/cp_plan_ops.h"
#include "props/cp_generators.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// Reports the first differing row (count, index, got vs expected ids) as a RapidCheck failure.
void AssertRowsEqual(const std::vector<uint8_t>& got, const HostTensor& want, const char* what) {
  if (got == want.data) return;
  const int64_t rows = want.rows;
  int64_t wrong = 0, first = -1;
  for (int64_t r = 0; r < rows; ++r) {
    if (static_cast<int64_t>(got.size()) < (r + 1) * want.row_bytes ||
        std::memcmp(got.data() + r * want.row_bytes, want.row(r), want.row_bytes) != 0) {
      if (wrong++ == 0) first = r;
    }
  }
  int64_t g = 0, e = 0;
  if (first >= 0 && static_cast<int64_t>(got.size()) >= first * want.row_bytes + 8)
    std::memcpy(&g, got.data() + first * want.row_bytes, 8);
  if (first >= 0) std::memcpy(&e, want.row(first), 8);
  RC_FAIL(StrCat(what, ": ", wrong, " of ", rows, " rows differ (sizes ", got.size(), " vs ", want.data.size(),
                 "); first row ", first, ": got id 0x", std::hex, g, " expected 0x", e));
}

CPSharedKVBatchPlan PlanFor(const CPBatchCase& c, int64_t rank) {
  return RC_VALUE(ref::BuildBatchPageAlignedInSeqSplitPlan(c.extend_lens, c.prefix_lens, c.page_size, c.cp_size, rank));
}

TEST(GpuCpOps, FusedRerangeMatchesReferenceAndRestoresOrder) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("rerange == reference; rerange(all_gather(split(x))) == x", [] {
    const CPBatchCase c = *GenCPBatchCase();
    const HostTensor x = Payload(c.extend_lens, c.row_bytes);
    // What each rank all-gathers: its valid rows for a batch (SGLang's batch path lays rank blocks out by the
    // valid split); for one request SGLang's scalar path all-gathers the communication (compute) rows.
    const bool scalar = c.extend_lens.size() == 1;
    std::vector<HostTensor> locals;
    CPSharedKVBatchPlan plan0;
    for (int64_t r = 0; r < c.cp_size; ++r) {
      const CPSharedKVBatchPlan plan = PlanFor(c, r);
      if (r == 0) plan0 = plan;
      locals.push_back(RC_VALUE(ref::SplitTensorByCPBatchPlan(x, plan, ref::SplitMode::kData,
                                                              scalar ? SplitKind::kCompute : SplitKind::kValid)));
    }
    const auto meta = RC_VALUE(ref::BuildBatchMetadataFromPlan(plan0));
    const int64_t m = meta.max_rank_token();
    const auto gathered = RC_VALUE(ref::AllGatherPadded(locals, m * c.cp_size));
    const auto want = RC_VALUE(scalar ? ref::InSeqAllGatherRerange(gathered, meta)
                                      : ref::BatchInSeqAllGatherRerange(gathered, meta, c.cp_size));
    // Request order restored: the first extend rows are x (the scalar path keeps compute padding rows after them).
    RC_ASSERT(want.rows >= x.rows);
    RC_ASSERT(std::equal(x.data.begin(), x.data.end(), want.data.begin()));
    const Int64Table& lists =
        scalar && plan0.compute_padding_enabled ? plan0.request_compute_split_lists : plan0.request_split_lists;
    // LaunchBatchRerange, and the table built once with the index gather after it (the per-layer shape).
    for (const auto how : {gpu::RerangeRun::kAuto, gpu::RerangeRun::kTableThenGather}) {
      auto got = gpu::RunBatchRerange(gathered.data, c.row_bytes, lists, c.cp_size, m, how);
      if (!got.ok()) RC_FAIL(got.status().ToString());
      AssertRowsEqual(*got, want, how == gpu::RerangeRun::kAuto ? "rerange" : "rerange from a per-batch table");
    }
  });
  EXPECT_TRUE(ok);
}

// A gathered buffer with blocks one row shorter than the largest rank payload (SGLang's
// rank_payload_exceeds_max): the table kernel counts it and the rerange is refused, reading nothing past the
// buffer (rows whose source would fall outside it get index -1 and are never copied).
TEST(GpuCpOps, RerangeRefusesARankPayloadPastItsBlock) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("a rank payload past max_rank_token is counted and refused", [] {
    const CPBatchCase c = *GenCPBatchCase();
    RC_PRE(c.extend_lens.size() >= 2);
    const CPSharedKVBatchPlan plan0 = PlanFor(c, 0);
    // The largest rank payload of the valid splits (max_rank_token may also cover compute padding).
    const Int64Table& splits = plan0.request_split_lists;
    int64_t m = 0;
    for (int64_t r = 0; r < c.cp_size; ++r) {
      int64_t rows = 0;
      for (int64_t q = 0; q < splits.rows(); ++q) rows += splits[q][r] + splits[q][2 * c.cp_size - 1 - r];
      m = std::max(m, rows);
    }
    RC_PRE(m >= 1);
    const std::vector<uint8_t> gathered(static_cast<size_t>(c.cp_size * (m - 1) * c.row_bytes), 0x5a);
    for (const auto how : {gpu::RerangeRun::kAuto, gpu::RerangeRun::kTableThenGather}) {
      auto got = gpu::RunBatchRerange(gathered, c.row_bytes, splits, c.cp_size, m - 1, how);
      RC_ASSERT(!got.ok());
      RC_ASSERT(got.status().message().find("inconsistent metadata") != std::string::npos);
    }
  });
  EXPECT_TRUE(ok);
}

TEST(GpuCpOps, SplitByPlanMatchesReference) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("split by plan == reference (data/position, compute/valid)", [] {
    CPBatchCase c = *GenCPBatchCase();
    const bool position = *rc::gen::arbitrary<bool>();
    if (position) c.row_bytes = 8;
    const SplitKind kind = *rc::gen::element(SplitKind::kCompute, SplitKind::kValid);
    const int64_t rank = *rc::gen::inRange<int64_t>(0, c.cp_size);
    const CPSharedKVBatchPlan plan = PlanFor(c, rank);
    HostTensor x = Payload(c.extend_lens, c.row_bytes);
    if (position) {  // positions: request-local token index + a request offset (prefix)
      int64_t row = 0;
      for (size_t q = 0; q < c.extend_lens.size(); ++q) {
        for (int64_t t = 0; t < c.extend_lens[q]; ++t, ++row) {
          const int64_t pos = c.prefix_lens[q] + t;
          std::memcpy(x.row(row), &pos, 8);
        }
      }
    }
    const auto mode = position ? ref::SplitMode::kPosition : ref::SplitMode::kData;
    auto want = ref::SplitTensorByCPBatchPlan(x, plan, mode, kind);
    auto table = gpu::SplitSegments(plan, kind, x.rows);
    RC_ASSERT(want.ok() == table.ok());
    if (!want.ok()) return;
    auto got =
        gpu::RunSegmentGather(x.data, c.row_bytes, *table, position ? gpu::PadMode::kPosition : gpu::PadMode::kZero);
    if (!got.ok()) RC_FAIL(got.status().ToString());
    AssertRowsEqual(*got, *want, "split");
  });
  EXPECT_TRUE(ok);
}

TEST(GpuCpOps, ValidRowSelectionAndLastTokenMatchReference) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("valid-row selection and last-token collection == reference", [] {
    const CPBatchCase c = *GenCPBatchCase();
    const int64_t rank = *rc::gen::inRange<int64_t>(0, c.cp_size);
    const CPSharedKVBatchPlan plan = PlanFor(c, rank);
    const HostTensor x = Payload(c.extend_lens, c.row_bytes);
    const auto local = RC_VALUE(ref::SplitTensorByCPBatchPlan(x, plan, ref::SplitMode::kData, SplitKind::kCompute));
    const auto want = RC_VALUE(ref::SelectCPLocalValidRowsForCacheWrite(local, plan));
    int64_t compute_rows = 0;
    const auto table = RC_VALUE(gpu::ValidRowSegments(plan, &compute_rows));
    RC_ASSERT(compute_rows == local.rows);
    auto got = gpu::RunSegmentGather(local.data, c.row_bytes, table, gpu::PadMode::kZero);
    if (!got.ok()) RC_FAIL(got.status().ToString());
    AssertRowsEqual(*got, want, "valid rows");
    const auto want_last = RC_VALUE(ref::InSeqLastTokenLocalRows(local, plan));
    auto got_last = gpu::RunCollectLastToken(local.data, c.row_bytes, plan);
    if (!got_last.ok()) RC_FAIL(got_last.status().ToString());
    AssertRowsEqual(*got_last, want_last, "last token rows");
  });
  EXPECT_TRUE(ok);
}

TEST(GpuCpOps, RoundRobinSplitAndRestoreMatchReference) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("round-robin split/restore == reference", [] {
    const int64_t cp = *GenCpSize();
    const int64_t rows_per_rank = *rc::gen::inRange<int64_t>(0, 300);
    const int64_t row_bytes = *rc::gen::element<int64_t>(8, 12, 16, 1152);
    const HostTensor x = Payload({cp * rows_per_rank}, row_bytes);
    std::vector<HostTensor> parts;
    for (int64_t r = 0; r < cp; ++r) {
      auto want = RC_VALUE(ref::RoundRobinSplitData(x, cp, r));
      const auto got = RC_VALUE(gpu::RunRoundRobinSplit(x.data, row_bytes, cp, r));
      AssertRowsEqual(got, want, "round-robin split");
      parts.push_back(std::move(want));
    }
    const auto gathered = RC_VALUE(ref::ConcatRows(parts));
    const auto want = RC_VALUE(ref::RoundRobinRestore(gathered, cp));
    RC_ASSERT(want == x);
    const auto got = RC_VALUE(gpu::RunRoundRobinRestore(gathered.data, row_bytes, cp));
    AssertRowsEqual(got, want, "round-robin restore");
  });
  EXPECT_TRUE(ok);
}

// The rerange of one ragged batch (seeded) against the reference, bit-exact; returns the seed on failure.
void ExpectLargeRerangeMatches(int64_t batch, int64_t cp, int64_t ps, int64_t max_extend, uint32_t seed,
                               int64_t row_bytes = 16) {
  std::mt19937 rng(seed);
  CPBatchCase c;
  c.cp_size = cp;
  c.page_size = ps;
  c.row_bytes = row_bytes;
  for (int64_t q = 0; q < batch; ++q) {
    c.extend_lens.push_back(1 + static_cast<int64_t>(rng() % max_extend));
    c.prefix_lens.push_back(ps * static_cast<int64_t>(rng() % 3));
  }
  const std::string what = StrCat("batch=", batch, " cp=", cp, " ps=", ps, " row_bytes=", row_bytes, " seed=", seed);
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  std::vector<HostTensor> locals;
  CPSharedKVBatchPlan plan0;
  for (int64_t r = 0; r < cp; ++r) {
    auto plan = ref::BuildBatchPageAlignedInSeqSplitPlan(c.extend_lens, c.prefix_lens, ps, cp, r);
    ASSERT_TRUE(plan.ok()) << what << ": " << plan.status().ToString();
    if (r == 0) plan0 = *plan;
    auto local = ref::SplitTensorByCPBatchPlan(x, *plan, ref::SplitMode::kData, SplitKind::kValid);
    ASSERT_TRUE(local.ok()) << what << ": " << local.status().ToString();
    locals.push_back(std::move(*local));
  }
  auto meta = ref::BuildBatchMetadataFromPlan(plan0);
  ASSERT_TRUE(meta.ok()) << what;
  const int64_t m = meta->max_rank_token();
  auto gathered = ref::AllGatherPadded(locals, m * cp);
  ASSERT_TRUE(gathered.ok()) << what;
  auto want = ref::BatchInSeqAllGatherRerange(*gathered, *meta, cp);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().ToString();
  for (const auto how : {gpu::RerangeRun::kAuto, gpu::RerangeRun::kTableThenGather}) {
    const std::string run = StrCat(what, " run=", static_cast<int>(how));
    auto got = gpu::RunBatchRerange(gathered->data, c.row_bytes, plan0.request_split_lists, cp, m, how);
    ASSERT_TRUE(got.ok()) << run << ": " << got.status().ToString();
    EXPECT_TRUE(*got == want->data) << run << ": GPU rerange differs from the reference";
    EXPECT_TRUE(std::equal(x.data.begin(), x.data.end(), got->begin())) << run << ": request order not restored";
  }
}

// The single-launch rerange refused more than 1024 requests and cp > 1024: at those limits, 2x and 16x past
// them the rerange matches the reference (the segment table kernel loops over tiles of 2048 entries). Page size
// >= 2: the batch planner refuses ps = 1 (batch_gt1_page_split_fallback).
TEST(GpuCpOps, RerangeMatchesReferencePastTheOldLimits) {
  KVSHARD_REQUIRE_GPUS(1);
  for (int64_t batch : {1024, 1025, 2048, 16384}) {
    for (int64_t cp : {1, 3, 8}) {
      ExpectLargeRerangeMatches(batch, cp, cp == 3 ? 2 : 16, 40, static_cast<uint32_t>(batch * 10 + cp));
    }
  }
  for (int64_t cp : {1024, 2048, 16384}) ExpectLargeRerangeMatches(2, cp, 2, 4 * cp, static_cast<uint32_t>(cp));
}

// The per-call rerange is one launch while the batch's segment table (batch x 2cp entries) fits in shared memory
// (up to 6,144 segments) and three launches past it: both sides of that line match the reference, as do rows
// longer than one pass of a row group (4,104 bytes: 513 8-byte vectors, 32 threads) and odd rows (1-byte vectors).
TEST(GpuCpOps, PerCallRerangeMatchesReferenceOnBothSidesOfTheSharedMemoryTable) {
  KVSHARD_REQUIRE_GPUS(1);
  for (int64_t row_bytes : {1152, 4104, 4097}) ExpectLargeRerangeMatches(64, 8, 16, 100, 7, row_bytes);
  for (int64_t batch : {384, 385}) ExpectLargeRerangeMatches(batch, 8, 16, 200, static_cast<uint32_t>(batch));
  for (int64_t batch : {3072, 3073}) ExpectLargeRerangeMatches(batch, 1, 16, 40, static_cast<uint32_t>(batch));
  for (int64_t cp : {1536, 1537}) ExpectLargeRerangeMatches(2, cp, 2, 4 * cp, static_cast<uint32_t>(cp));
}

TEST(GpuCpOps, RerangeCanImplementAcceptsWhatTheReferenceAccepts) {
  for (int64_t batch : {1, 1024, 2048, 16384, 1 << 20}) {
    const Status s = gpu::BatchRerangeCanImplement(batch, 8, 1 << 20, 1152);
    EXPECT_TRUE(s.ok()) << batch << ": " << s.ToString();
  }
  EXPECT_TRUE(gpu::BatchRerangeCanImplement(1, kMaxCpSize, 1, 8).ok());
  EXPECT_FALSE(gpu::BatchRerangeCanImplement(0, 8, 1, 8).ok());
  EXPECT_FALSE(gpu::BatchRerangeCanImplement(1, 0, 1, 8).ok());
  EXPECT_FALSE(gpu::BatchRerangeCanImplement(1, kMaxCpSize + 1, 1, 8).ok());
}

}  // namespace
}  // namespace kvshard::props

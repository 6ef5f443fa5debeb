// Differential tests of the pool row movers of ranks emulated on one device (gpu/kv_rank_ops.cu): each one-launch
// mover against the per-rank launches of kv_ops.cu it replaces (packs, pack with the emulated all-gather, a batch's
// start, chunk writes, reads), job by job, bad counts included; bit-exact. Skip without a GPU.
#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/spec.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "props/generators.h"
#include "props/gpu_test_data.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// Every emulated rank's pack in one launch: each job's rows and bad count are LaunchGatherRows's for it, out-of-range
// indices (negative, past in_rows) skipped and counted on that job's counter.
TEST(GpuKvRankOps, GatherRowsRanksIsEachRanksGather) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("gather of every rank, one launch == per rank", [] {
    const int64_t row_bytes = *rc::gen::element<int64_t>(1, 3, 8, 16, 48, 1152);
    const int jobs = *rc::gen::inRange(1, 9);
    const int64_t n = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 300));
    std::vector<gpu::DeviceBuffer> keep;
    std::vector<gpu::GatherRowsJob> launch;
    std::vector<std::vector<uint8_t>> want;
    std::vector<int64_t> want_bad;
    for (int j = 0; j < jobs; ++j) {
      const int64_t in_rows = *rc::gen::inRange<int64_t>(1, 200);
      std::vector<int64_t> index(std::max<int64_t>(1, n));
      for (int64_t& x : index) x = *rc::gen::inRange<int64_t>(-2, in_rows + 3);
      std::vector<int64_t> slots(in_rows);
      for (int64_t i = 0; i < in_rows; ++i) slots[i] = j * 100000 + i;
      const std::vector<uint8_t> before(std::max<int64_t>(1, n) * row_bytes, static_cast<uint8_t>(0x50 + j));
      keep.push_back(RC_VALUE(gpu::Upload(RowsOf(slots, row_bytes, 5))));
      const void* d_in = keep.back().data();
      keep.push_back(RC_VALUE(gpu::Upload(index)));
      const int64_t* d_index = keep.back().as<int64_t>();
      auto d_want = RC_VALUE(gpu::Upload(before));
      auto d_want_bad = RC_VALUE(gpu::Upload(std::vector<int64_t>{0}));
      RC_ASSERT_OK(gpu::LaunchGatherRows(d_want.data(), d_in, in_rows, d_index, n, row_bytes, d_want_bad.as<int64_t>(),
                                         nullptr));
      want.push_back(RC_VALUE(gpu::Download<uint8_t>(d_want.data(), before.size())));
      want_bad.push_back(RC_VALUE(gpu::Download<int64_t>(d_want_bad.data(), 1))[0]);
      keep.push_back(RC_VALUE(gpu::Upload(before)));
      void* d_out = keep.back().data();
      keep.push_back(RC_VALUE(gpu::Upload(std::vector<int64_t>{0})));
      launch.push_back({d_out, d_in, in_rows, d_index, keep.back().as<int64_t>()});
    }
    RC_ASSERT_OK(gpu::LaunchGatherRowsRanks(launch, n, row_bytes, nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    for (int j = 0; j < jobs; ++j) {
      const auto got = RC_VALUE(gpu::Download<uint8_t>(launch[j].out, want[j].size()));
      RC_ASSERT_OK(CompareRows(got, want[j], row_bytes, "gather of every rank"));
      RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(launch[j].bad, 1))[0] == want_bad[j]);
    }
    launch.resize(gpu::kMaxRankJobs + 1, launch[0]);
    RC_ASSERT(gpu::LaunchGatherRowsRanks(launch, n, row_bytes, nullptr).code() == StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(ok);
}

// Every emulated rank's pack and the in-place all-gather after it, in one launch: destination q's block of source r
// is what LaunchGatherRows of r's send rows leaves in it (a row whose index is out of range left as q had it), and
// each source's skipped rows are counted once, not once per destination.
TEST(GpuKvRankOps, PackAllGatherRanksIsEachRanksGatherIntoEveryRank) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("pack + all-gather in one launch == each source's gather into every destination", [] {
    const int64_t row_bytes = *rc::gen::element<int64_t>(1, 3, 8, 16, 48, 1152);
    const int ranks = *rc::gen::inRange(1, 9);
    const int64_t n = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 200));
    const int64_t block = std::max<int64_t>(1, n) * row_bytes;
    std::vector<gpu::DeviceBuffer> keep;
    const auto upload = [&](auto values) -> void* {
      keep.push_back(RC_VALUE(gpu::Upload(values)));
      return keep.back().data();
    };
    std::vector<gpu::PackSource> sources;
    for (int r = 0; r < ranks; ++r) {
      const int64_t in_rows = *rc::gen::inRange<int64_t>(1, 200);
      std::vector<int64_t> index(std::max<int64_t>(1, n));
      for (int64_t& x : index) x = *rc::gen::inRange<int64_t>(-2, in_rows + 3);
      std::vector<int64_t> slots(in_rows);
      for (int64_t i = 0; i < in_rows; ++i) slots[i] = r * 100000 + i;
      sources.push_back({upload(RowsOf(slots, row_bytes, 7)), in_rows, static_cast<const int64_t*>(upload(index)),
                         static_cast<int64_t*>(upload(std::vector<int64_t>{0}))});
    }
    std::vector<void*> outs;
    std::vector<std::vector<uint8_t>> want(ranks);
    std::vector<int64_t> want_bad(ranks);
    for (int q = 0; q < ranks; ++q) {
      std::vector<uint8_t> before(ranks * block);
      for (size_t k = 0; k < before.size(); ++k) before[k] = static_cast<uint8_t>(0x40 + q + 3 * k);
      outs.push_back(upload(before));
      for (int r = 0; r < ranks; ++r) {  // the gather of source r into destination q's block r, as q had it
        auto d_want =
            RC_VALUE(gpu::Upload(std::vector<uint8_t>(before.begin() + r * block, before.begin() + (r + 1) * block)));
        auto d_bad = RC_VALUE(gpu::Upload(std::vector<int64_t>{0}));
        RC_ASSERT_OK(gpu::LaunchGatherRows(d_want.data(), sources[r].in, sources[r].in_rows, sources[r].index, n,
                                           row_bytes, d_bad.as<int64_t>(), nullptr));
        const auto rows = RC_VALUE(gpu::Download<uint8_t>(d_want.data(), static_cast<size_t>(block)));
        want[q].insert(want[q].end(), rows.begin(), rows.end());
        want_bad[r] = RC_VALUE(gpu::Download<int64_t>(d_bad.data(), 1))[0];
      }
    }
    RC_ASSERT_OK(gpu::LaunchPackAllGatherRanks(sources, outs, n, row_bytes, nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    for (int q = 0; q < ranks; ++q) {
      RC_ASSERT_OK(CompareRows(RC_VALUE(gpu::Download<uint8_t>(outs[q], want[q].size())), want[q], row_bytes,
                               "every source's send rows in every destination"));
    }
    for (int r = 0; r < ranks; ++r) RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(sources[r].bad, 1))[0] == want_bad[r]);
    sources.resize(gpu::kMaxRankJobs + 1, sources[0]);
    RC_ASSERT(gpu::LaunchPackAllGatherRanks(sources, outs, n, row_bytes, nullptr).code() ==
              StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(ok);
}

// A batch's start in one launch (LaunchBatchStartRanks): every rank's write plan and up to two layers' packs with their
// emulated all-gathers leave what LaunchBuildWritePlans then LaunchPackAllGatherRanks per layer leave, bad counts
// included: empty batches, no prefix (no rows to pack), one rank, tiles past one block, out-of-range send rows.
TEST(GpuKvRankOps, BatchStartRanksIsThePlansThenEachLayersPack) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("write plans + packs in one launch == their own launches", [] {
    const PlacementSpec spec = *GenPlacementSpec();
    const int ranks = static_cast<int>(spec.shard_size);
    const int64_t row_bytes = *rc::gen::element<int64_t>(1, 4, 16, 48, 1152);
    const int64_t slots = *rc::gen::inRange<int64_t>(1, 40) * spec.logical_page_size();
    const int64_t n = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 300),
                                      rc::gen::inRange<int64_t>(300, 1200));
    const int64_t pack_rows = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 120));
    const int layers = *rc::gen::inRange(0, gpu::kMaxBatchStartPacks + 1);
    std::vector<gpu::DeviceBuffer> keep;
    const auto upload = [&](auto values) -> void* {
      keep.push_back(RC_VALUE(gpu::Upload(values)));
      return keep.back().data();
    };
    std::vector<int64_t> locs(std::max<int64_t>(1, n));
    for (int64_t& loc : locs) loc = *rc::gen::inRange<int64_t>(-1, slots);
    const auto* d_locs = static_cast<const int64_t*>(upload(locs));
    // Two copies of everything written: one for the separate launches (want), one for the fused launch (got).
    std::vector<gpu::WritePlanOut> plans[2];
    std::vector<gpu::PackAllGatherJob> packs[2];
    std::vector<const int64_t*> index(ranks);
    std::vector<int64_t> in_rows(ranks);
    std::vector<const void*> pools(layers * ranks);
    for (int r = 0; r < ranks; ++r) {
      in_rows[r] = *rc::gen::inRange<int64_t>(1, 150);
      std::vector<int64_t> rows(std::max<int64_t>(1, pack_rows));
      for (int64_t& x : rows) x = *rc::gen::inRange<int64_t>(-2, in_rows[r] + 3);
      index[r] = static_cast<const int64_t*>(upload(rows));
      for (int l = 0; l < layers; ++l) {
        std::vector<int64_t> values(in_rows[r]);
        for (int64_t i = 0; i < in_rows[r]; ++i) values[i] = r * 100000 + i;
        pools[l * ranks + r] = upload(RowsOf(values, row_bytes, l));
      }
    }
    for (int copy = 0; copy < 2; ++copy) {
      for (int r = 0; r < ranks; ++r) {
        const size_t room = static_cast<size_t>(std::max<int64_t>(1, n));
        plans[copy].push_back({r, static_cast<int64_t*>(upload(std::vector<int64_t>(room, -7))),
                               static_cast<int64_t*>(upload(std::vector<int64_t>(room, -7))),
                               static_cast<int64_t*>(upload(std::vector<int64_t>{-1}))});
      }
      std::vector<int64_t*> bad(ranks);
      for (int r = 0; r < ranks; ++r) bad[r] = static_cast<int64_t*>(upload(std::vector<int64_t>{0}));
      for (int l = 0; l < layers; ++l) {
        gpu::PackAllGatherJob job;
        for (int r = 0; r < ranks; ++r) {
          job.sources.push_back({pools[l * ranks + r], in_rows[r], index[r], bad[r]});
          std::vector<uint8_t> before(ranks * std::max<int64_t>(1, pack_rows) * row_bytes);
          for (size_t k = 0; k < before.size(); ++k) before[k] = static_cast<uint8_t>(0x40 + r + 5 * l + 3 * k);
          job.outs.push_back(upload(before));
        }
        packs[copy].push_back(std::move(job));
      }
    }
    RC_ASSERT_OK(gpu::LaunchBuildWritePlans(d_locs, n, spec, plans[0], nullptr));
    for (const gpu::PackAllGatherJob& job : packs[0]) {
      RC_ASSERT_OK(gpu::LaunchPackAllGatherRanks(job.sources, job.outs, pack_rows, row_bytes, nullptr));
    }
    RC_ASSERT_OK(gpu::LaunchBatchStartRanks(d_locs, n, spec, plans[1], packs[1], pack_rows, row_bytes, nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    for (int r = 0; r < ranks; ++r) {
      const int64_t count = RC_VALUE(gpu::Download<int64_t>(plans[0][r].count, 1))[0];
      RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(plans[1][r].count, 1))[0] == count);
      RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(plans[1][r].owned_idx, count)) ==
                RC_VALUE(gpu::Download<int64_t>(plans[0][r].owned_idx, count)));
      RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(plans[1][r].local_rows, count)) ==
                RC_VALUE(gpu::Download<int64_t>(plans[0][r].local_rows, count)));
      for (int l = 0; l < layers; ++l) {
        const size_t bytes = static_cast<size_t>(ranks * std::max<int64_t>(1, pack_rows) * row_bytes);
        RC_ASSERT_OK(CompareRows(RC_VALUE(gpu::Download<uint8_t>(packs[1][l].outs[r], bytes)),
                                 RC_VALUE(gpu::Download<uint8_t>(packs[0][l].outs[r], bytes)), row_bytes,
                                 "a layer's packed rows in every destination"));
      }
      if (layers > 0) {
        RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(packs[1][0].sources[r].bad, 1)) ==
                  RC_VALUE(gpu::Download<int64_t>(packs[0][0].sources[r].bad, 1)));
      }
    }
  });
  EXPECT_TRUE(ok);
}

TEST(GpuKvRankOps, LaunchBatchStartRanksRefusesWhatItCannotTake) {
  KVSHARD_REQUIRE_GPUS(1);
  const PlacementSpec spec{4, 2};
  EXPECT_EQ(gpu::LaunchBatchStartRanks(nullptr, gpu::kMaxWritePlansLocs + 1, spec, {}, {}, 0, 8, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu::LaunchBatchStartRanks(nullptr, 0, spec, {{4, nullptr, nullptr, nullptr}}, {}, 0, 8, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      gpu::LaunchBatchStartRanks(nullptr, 0, spec, {}, std::vector<gpu::PackAllGatherJob>(3), 0, 8, nullptr).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu::LaunchBatchStartRanks(nullptr, 0, spec, {}, {}, 0, 0, nullptr).code(), StatusCode::kInvalidArgument);
  gpu::PackAllGatherJob wide;
  wide.sources.resize(gpu::kMaxRankJobs + 1);
  EXPECT_EQ(gpu::LaunchBatchStartRanks(nullptr, 0, spec, {}, {wide}, 1, 8, nullptr).code(),
            StatusCode::kInvalidArgument);
}

// Every emulated rank's write of a layer's chunk in one launch: each job's scratch and pool are what
// LaunchStageChunk then LaunchScatterRows leave for it, and its bad count theirs (locs that translate to nothing or
// past the scratch; plan entries past the rows or the pool; a count past n).
TEST(GpuKvRankOps, WriteChunkRanksIsEachRanksStageThenScatter) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("stage + scatter of every rank, one launch == per rank", [] {
    const int64_t ps = *rc::gen::element<int64_t>(1, 2, 16);
    const int64_t pages = *rc::gen::inRange<int64_t>(1, 10);
    const int64_t scratch_rows = *rc::gen::inRange<int64_t>(1, 10) * ps;
    const int64_t pool_rows = *rc::gen::inRange<int64_t>(1, 200);
    const int64_t row_bytes = *rc::gen::element<int64_t>(1, 3, 8, 16, 48, 1152);
    const int jobs = *rc::gen::inRange(1, 9);
    const int64_t n = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 200));
    std::vector<int64_t> ids(std::max<int64_t>(1, n));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
    auto d_rows = RC_VALUE(gpu::Upload(RowsOf(ids, row_bytes, 9)));
    std::vector<gpu::DeviceBuffer> keep;
    std::vector<gpu::WriteChunkJob> launch;
    std::vector<std::vector<uint8_t>> want_scratch, want_pool;
    std::vector<int64_t> want_bad;
    const auto upload = [&](auto values) -> const void* {
      keep.push_back(RC_VALUE(gpu::Upload(values)));
      return keep.back().data();
    };
    // Every row written at most once (two writes of one row would race, in both shapes), misses skipped and counted.
    std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
    for (int j = 0; j < jobs; ++j) {
      const ChunkWritePlan plan = DrawChunkWritePlan(n, pages, ps, scratch_rows, pool_rows, rng);
      const std::vector<int64_t>&locs = plan.locs, &owned = plan.owned, &local = plan.local;
      const std::vector<int32_t>& page_pos = plan.page_pos;
      const int64_t count = plan.count;
      const std::vector<uint8_t> scratch0(scratch_rows * row_bytes, static_cast<uint8_t>(0x30 + j));
      const std::vector<uint8_t> pool0(pool_rows * row_bytes, static_cast<uint8_t>(0x60 + j));
      gpu::WriteChunkJob job;
      job.rows = d_rows.data();
      job.scratch_rows = scratch_rows;
      job.chunk_locs = static_cast<const int64_t*>(upload(locs));
      job.page_pos = static_cast<const int32_t*>(upload(page_pos));
      job.n_page_pos = pages;
      job.pool_rows = pool_rows;
      job.owned_idx = static_cast<const int64_t*>(upload(owned));
      job.local_rows = static_cast<const int64_t*>(upload(local));
      job.owned_count = static_cast<const int64_t*>(upload(std::vector<int64_t>{count}));
      // The per-rank way, into copies of the same starting memory.
      auto s = RC_VALUE(gpu::Upload(scratch0));
      auto p = RC_VALUE(gpu::Upload(pool0));
      auto bad = RC_VALUE(gpu::Upload(std::vector<int64_t>{0}));
      RC_ASSERT_OK(gpu::LaunchStageChunk(s.data(), scratch_rows, job.rows, job.chunk_locs, n, job.page_pos, pages, ps,
                                         row_bytes, bad.as<int64_t>(), nullptr));
      RC_ASSERT_OK(gpu::LaunchScatterRows(p.data(), pool_rows, job.rows, n, job.owned_idx, job.local_rows,
                                          job.owned_count, n, row_bytes, bad.as<int64_t>(), nullptr));
      want_scratch.push_back(RC_VALUE(gpu::Download<uint8_t>(s.data(), scratch0.size())));
      want_pool.push_back(RC_VALUE(gpu::Download<uint8_t>(p.data(), pool0.size())));
      want_bad.push_back(RC_VALUE(gpu::Download<int64_t>(bad.data(), 1))[0]);
      job.scratch = const_cast<void*>(upload(scratch0));
      job.pool = const_cast<void*>(upload(pool0));
      job.bad = static_cast<int64_t*>(const_cast<void*>(upload(std::vector<int64_t>{0})));
      launch.push_back(job);
    }
    RC_ASSERT_OK(gpu::LaunchWriteChunkRanks(launch, n, ps, row_bytes, nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    for (int j = 0; j < jobs; ++j) {
      RC_ASSERT_OK(CompareRows(RC_VALUE(gpu::Download<uint8_t>(launch[j].scratch, want_scratch[j].size())),
                               want_scratch[j], row_bytes, "staged chunk of every rank"));
      RC_ASSERT_OK(CompareRows(RC_VALUE(gpu::Download<uint8_t>(launch[j].pool, want_pool[j].size())), want_pool[j],
                               row_bytes, "scattered rows of every rank"));
      RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(launch[j].bad, 1))[0] == want_bad[j]);
    }
    launch.resize(gpu::kMaxRankJobs + 1, launch[0]);
    RC_ASSERT(gpu::LaunchWriteChunkRanks(launch, n, ps, row_bytes, nullptr).code() == StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(ok);
}

// Every emulated rank's read of a layer in one launch: each job's rows are what LaunchTranslate then
// LaunchGatherRows give for that rank (its own page_pos and scratch), bit for bit, rows whose translation misses
// (negative locs, pages past page_pos, the trash page's rows past the scratch) left as they were; odd row sizes
// take narrower vectors; more jobs than one launch takes are refused.
TEST(GpuKvRankOps, TranslateGatherRanksIsEachRanksTranslateThenGather) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("translate + gather of every rank, one launch == per rank", [] {
    const int64_t ps = *rc::gen::element<int64_t>(1, 2, 16, 64);
    const int64_t pages = *rc::gen::inRange<int64_t>(1, 12);
    const int64_t scratch_pages = *rc::gen::inRange<int64_t>(1, 10);
    const int64_t row_bytes = *rc::gen::element<int64_t>(1, 3, 8, 16, 48, 1152);
    const int jobs = *rc::gen::inRange(1, 9);
    const int64_t n = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 300));
    std::vector<int64_t> locs(n);
    for (int64_t& loc : locs) loc = *rc::gen::inRange<int64_t>(-2, (pages + 1) * ps);  // past page_pos too
    auto d_locs = RC_VALUE(gpu::Upload(locs.empty() ? std::vector<int64_t>{0} : locs));
    std::vector<gpu::DeviceBuffer> keep;
    std::vector<gpu::TranslateGatherJob> launch;
    std::vector<std::vector<uint8_t>> want;
    for (int j = 0; j < jobs; ++j) {
      std::vector<int32_t> page_pos(pages);
      // Slots up to one page past the scratch: those rows are past in_rows and never read.
      for (int32_t& pos : page_pos) pos = *rc::gen::inRange<int32_t>(0, static_cast<int32_t>(scratch_pages + 1));
      std::vector<int64_t> slots(scratch_pages * ps);
      for (size_t i = 0; i < slots.size(); ++i) slots[i] = j * 100000 + static_cast<int64_t>(i);
      const auto scratch = RowsOf(slots, row_bytes, 3);
      std::vector<uint8_t> before(std::max<int64_t>(1, n) * row_bytes, static_cast<uint8_t>(0xa0 + j));
      keep.push_back(RC_VALUE(gpu::Upload(page_pos)));
      const int32_t* d_pos = keep.back().as<int32_t>();
      keep.push_back(RC_VALUE(gpu::Upload(scratch)));
      const void* d_scratch = keep.back().data();
      // The per-rank way: translate into an index, then the index gather.
      auto d_index = RC_VALUE(gpu::DeviceBuffer::Allocate(std::max<int64_t>(1, n) * sizeof(int64_t)));
      auto d_want = RC_VALUE(gpu::Upload(before));
      RC_ASSERT_OK(gpu::LaunchTranslate(d_index.as<int64_t>(), d_locs.as<int64_t>(), n, d_pos, pages, ps, nullptr));
      RC_ASSERT_OK(gpu::LaunchGatherRows(d_want.data(), d_scratch, scratch_pages * ps, d_index.as<int64_t>(), n,
                                         row_bytes, nullptr, nullptr));
      want.push_back(RC_VALUE(gpu::Download<uint8_t>(d_want.data(), before.size())));
      keep.push_back(RC_VALUE(gpu::Upload(before)));
      launch.push_back({keep.back().data(), d_scratch, scratch_pages * ps, d_pos, pages});
    }
    RC_ASSERT_OK(gpu::LaunchTranslateGatherRanks(launch, d_locs.as<int64_t>(), n, ps, row_bytes, nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    for (int j = 0; j < jobs; ++j) {
      const auto got = RC_VALUE(gpu::Download<uint8_t>(launch[j].out, want[j].size()));
      RC_ASSERT_OK(CompareRows(got, want[j], row_bytes, "translate + gather of every rank"));
    }
    launch.resize(gpu::kMaxRankJobs + 1, launch[0]);
    RC_ASSERT(gpu::LaunchTranslateGatherRanks(launch, d_locs.as<int64_t>(), n, ps, row_bytes, nullptr).code() ==
              StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace kvshard::props

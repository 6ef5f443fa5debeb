// Sharded pool examples: the spec §3 batch read through the scratch slots equals what was written,
// owner-filtered persistence, write-plan caching (per epoch and exact loc list), the layer-ahead order and
// residency-miss errors.
#include "cpu_ref/sharded_pool.h"

#include <gtest/gtest.h>

namespace kvshard::ref {
namespace {

using V = std::vector<int64_t>;

const V kChain = {22, 23, 20, 21, 26, 27, 24, 25, 30, 31, 28, 29, 34, 35, 32, 33};
constexpr ShardedPoolConfig kConfig{4, 16, 32, 4096, 512, 3, 2};

V Slots(const V& pages, int64_t first_pos, int64_t last_pos, int64_t ps) {  // positions [first, last)
  V out;
  for (int64_t pos = first_pos; pos < last_pos; ++pos) out.push_back(pages[pos / ps] * ps + pos % ps);
  return out;
}

TEST(ShardedPoolTest, SpecBatchReadsEqualWrittenRowsOnEveryRank) {
  ShardedPool pool = ShardedPool::Create(kConfig).value();
  UnshardedPool base = UnshardedPool::Create(kConfig).value();
  const V prefix = Slots(kChain, 0, 112, 16), chunk = Slots(kChain, 112, 251, 16);
  for (int64_t l = 0; l < 3; ++l) {  // an earlier batch persisted the prefix
    ASSERT_TRUE(pool.Write(l, prefix, RowValues(l, prefix, 7, 2)).ok());
    ASSERT_TRUE(base.Write(l, prefix, RowValues(l, prefix, 7, 2)).ok());
  }
  ASSERT_TRUE(pool.BeginShardExtend({{112, 251, kChain}}).ok());
  EXPECT_EQ(pool.plan().block_pages, 2);
  EXPECT_EQ(pool.gathers(), 1);  // layer 0 kicked by begin
  V all = prefix;
  all.insert(all.end(), chunk.begin(), chunk.end());
  for (int64_t l = 0; l < 3; ++l) {
    ASSERT_TRUE(pool.Write(l, chunk, RowValues(l, chunk, 8, 2)).ok());
    ASSERT_TRUE(base.Write(l, chunk, RowValues(l, chunk, 8, 2)).ok());
    auto got = pool.Read(l, all).value();
    const auto want = base.Read(l, all).value();
    for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(got[r], want) << "layer " << l << " rank " << r;
  }
  EXPECT_EQ(pool.gathers(), 3);
  EXPECT_EQ(pool.write_plan_builds(), 2);  // prefix locs (epoch 0) and chunk locs (epoch 1), each once
}

TEST(ShardedPoolTest, WritesPersistOnlyOwnedRows) {
  ShardedPool pool = ShardedPool::Create(kConfig).value();
  const V locs = {22 * 16 + 5};  // owner 2, local row 5*16+5
  ASSERT_TRUE(pool.Write(1, locs, RowValues(1, locs, 0, 2)).ok());
  EXPECT_EQ(pool.LocalRow(2, 1, 85), (std::vector<uint32_t>{RowValue(1, locs[0], 0, 0), RowValue(1, locs[0], 0, 1)}));
  for (int64_t r : {0, 1, 3}) EXPECT_EQ(pool.LocalRow(r, 1, 85), (std::vector<uint32_t>{0, 0}));
}

TEST(ShardedPoolTest, EqualLengthLocListsGetTheirOwnWritePlan) {
  ShardedPool pool = ShardedPool::Create(kConfig).value();
  const V a = {22 * 16 + 5, 23 * 16 + 1};  // owners 2 and 3
  const V b = {22 * 16 + 5, 20 * 16 + 7};  // same length and first loc; owner 0 for the second
  ASSERT_TRUE(pool.Write(0, a, RowValues(0, a, 1, 2)).ok());
  ASSERT_TRUE(pool.Write(0, b, RowValues(0, b, 2, 2)).ok());
  EXPECT_EQ(pool.write_plan_builds(), 2);
  EXPECT_EQ(pool.LocalRow(0, 0, 5 * 16 + 7), (std::vector<uint32_t>{RowValue(0, b[1], 2, 0), RowValue(0, b[1], 2, 1)}));
  EXPECT_EQ(pool.LocalRow(3, 0, 5 * 16 + 1), (std::vector<uint32_t>{RowValue(0, a[1], 1, 0), RowValue(0, a[1], 1, 1)}));
  ASSERT_TRUE(pool.Write(1, b, RowValues(1, b, 3, 2)).ok());  // the same list in the same epoch: cached
  EXPECT_EQ(pool.write_plan_builds(), 2);
  ASSERT_TRUE(pool.BeginShardExtend({{0, 16, {40}}}).ok());
  ASSERT_TRUE(pool.Write(1, b, RowValues(1, b, 4, 2)).ok());  // a new epoch rebuilds it
  EXPECT_EQ(pool.write_plan_builds(), 3);
  EXPECT_EQ(pool.LocalRow(0, 1, 5 * 16 + 7), (std::vector<uint32_t>{RowValue(1, b[1], 4, 0), RowValue(1, b[1], 4, 1)}));
}

TEST(ShardedPoolTest, LayerAheadOrderAndResidencyMisses) {
  ShardedPool pool = ShardedPool::Create(kConfig).value();
  EXPECT_EQ(pool.Read(0, {1}).status().message(),
            "sharded pool read outside an active sharded extend batch (begin_shard_extend not called?)");
  ASSERT_TRUE(pool.BeginShardExtend({{112, 251, kChain}}).ok());
  EXPECT_EQ(pool.resident_key(3, 0), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(pool.Read(1, {1}).status().message(), "prefix scratch miss for layer 1 (resident=None, epoch=1)");
  ASSERT_TRUE(pool.Read(0, {1}).ok());
  ASSERT_TRUE(pool.Read(0, {1}).ok());  // re-reading a resident layer does not re-gather
  EXPECT_EQ(pool.gathers(), 2);
  EXPECT_EQ(pool.resident_key(0, 1), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(pool.Read(2, {1}).status().message(), "prefix scratch miss for layer 2 (resident=(0, 1), epoch=1)");
  // A new batch retires residency by the epoch bump alone.
  ASSERT_TRUE(pool.BeginShardExtend({{112, 251, kChain}}).ok());
  EXPECT_EQ(pool.Read(1, {1}).status().message(), "prefix scratch miss for layer 1 (resident=(1, 1), epoch=2)");
  pool.EndShardExtend();
  EXPECT_FALSE(pool.Read(0, {1}).ok());
}

TEST(ShardedPoolTest, PlanErrorsLeaveStateUnchanged) {
  ShardedPool pool = ShardedPool::Create(kConfig).value();
  ASSERT_TRUE(pool.BeginShardExtend({{112, 251, kChain}}).ok());
  V bad = kChain;
  std::swap(bad[0], bad[1]);
  auto s = pool.BeginShardExtend({{112, 251, bad}});
  EXPECT_NE(s.message().find("cyclic"), std::string::npos);
  EXPECT_EQ(pool.epoch(), 1);
  EXPECT_EQ(pool.plan().block_pages, 2);
  EXPECT_FALSE(ShardedPool::Create({4, 16, 32, 100, 512, 3, 2}).ok());
  EXPECT_FALSE(pool.Write(0, {4 * (32 + 1) * 16}, {0, 0}).ok());  // the first slot past the pool
  EXPECT_FALSE(pool.Write(3, {0}, {0, 0}).ok());
  EXPECT_FALSE(pool.Write(0, {0}, {0}).ok());
}

TEST(ShardedPoolTest, NoPrefixBatchNeedsNoGather) {
  ShardedPool pool = ShardedPool::Create(kConfig).value();
  ASSERT_TRUE(pool.BeginShardExtend({{0, 20, {40, 41}}}).ok());
  EXPECT_EQ(pool.gathers(), 0);
  const V chunk = Slots({40, 41}, 0, 20, 16);
  for (int64_t l = 0; l < 3; ++l) {
    ASSERT_TRUE(pool.Write(l, chunk, RowValues(l, chunk, 1, 2)).ok());
    EXPECT_EQ(pool.Read(l, chunk).value()[1], RowValues(l, chunk, 1, 2));
  }
}

// Seed 000's MHA pool: K and V of different widths (plus an extra per-layer tensor), every pair gathered by
// the layer's one gather, every buffer's rows read back equal to the unsharded pool's.
TEST(ShardedPoolTest, MhaPoolOfTwoWidthsPlusExtraGathersEveryPair) {
  ShardedPoolConfig c = kConfig;
  c.buffers = MhaBuffers(12, 5);
  c.buffers.push_back({"index_k_scale", 4});
  ShardedPool pool = ShardedPool::Create(c).value();
  UnshardedPool base = UnshardedPool::Create(c).value();
  const V prefix = Slots(kChain, 0, 112, 16), chunk = Slots(kChain, 112, 251, 16);
  for (int64_t l = 0; l < 3; ++l) {
    ASSERT_TRUE(pool.WriteBuffers(l, prefix, AllBufferRowValues(l, c.buffers, prefix, 7)).ok());
    ASSERT_TRUE(base.WriteBuffers(l, prefix, AllBufferRowValues(l, c.buffers, prefix, 7)).ok());
  }
  ASSERT_TRUE(pool.BeginShardExtend({{112, 251, kChain}}).ok());
  V all = prefix;
  all.insert(all.end(), chunk.begin(), chunk.end());
  for (int64_t l = 0; l < 3; ++l) {
    ASSERT_TRUE(pool.WriteBuffers(l, chunk, AllBufferRowValues(l, c.buffers, chunk, 8)).ok());
    ASSERT_TRUE(base.WriteBuffers(l, chunk, AllBufferRowValues(l, c.buffers, chunk, 8)).ok());
    const auto got = pool.ReadBuffers(l, all).value();
    const BufferRows want = base.ReadBuffers(l, all).value();
    ASSERT_EQ(want[0].size(), all.size() * 12);
    ASSERT_EQ(want[1].size(), all.size() * 5);
    for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(got[r], want) << "layer " << l << " rank " << r;
  }
  EXPECT_EQ(pool.gathers(), 3);
  EXPECT_EQ(pool.pair_gathers(), 9);
  EXPECT_EQ(pool.LocalRowBytes(2, 0, 1, 85), BufferRowValues(0, 1, {22 * 16 + 5}, 7, 5));
  // The K and V rows of one slot differ (the buffer is part of the value), and the word API refuses 3 buffers.
  EXPECT_NE(BufferRowValues(0, 0, {5}, 1, 5), BufferRowValues(0, 1, {5}, 1, 5));
  EXPECT_EQ(pool.Read(0, all).status().message(),
            "rows: a read of words needs one buffer of whole words; this pool has 3 buffers (use the per-buffer form)");
  EXPECT_EQ(pool.WriteBuffers(0, chunk, {{}}).message(), "rows: must hold one row list per buffer (3), got 1");
}

// Seed 000's MLA pool: one latent buffer (here of a width that is not whole words).
TEST(ShardedPoolTest, MlaLatentPoolOfOddWidth) {
  ShardedPoolConfig c = kConfig;
  c.buffers = MlaBuffers(37);
  ShardedPool pool = ShardedPool::Create(c).value();
  ASSERT_TRUE(pool.BeginShardExtend({{0, 20, {40, 41}}}).ok());
  const V chunk = Slots({40, 41}, 0, 20, 16);
  ASSERT_TRUE(pool.WriteBuffers(2, chunk, AllBufferRowValues(2, c.buffers, chunk, 1)).ok());
  EXPECT_EQ(pool.ReadBuffers(2, chunk).value()[3], AllBufferRowValues(2, c.buffers, chunk, 1));
  EXPECT_FALSE(pool.Write(2, chunk, RowValues(2, chunk, 1, 2)).ok());
  // The one-buffer word form is the byte image of buffer 0.
  EXPECT_EQ(BufferRowValues(1, 0, {3, 9}, 4, 8).size(), 16u);
  ShardedPool words = ShardedPool::Create(kConfig).value();
  ASSERT_TRUE(words.Write(1, {3, 9}, RowValues(1, {3, 9}, 4, 2)).ok());
  EXPECT_EQ(words.LocalRowBytes(0, 1, 0, 3), BufferRowValues(1, 0, {3}, 4, 8));
}

TEST(ShardedPoolTest, BufferListsAreValidated) {
  ShardedPoolConfig c = kConfig;
  c.buffers = {{"k", 8}, {"k", 4}};
  EXPECT_EQ(ShardedPool::Create(c).status().message(), "buffers[1].name: duplicate buffer \"k\"");
  c.buffers = {{"k", 0}};
  EXPECT_EQ(ShardedPool::Create(c).status().message(), "buffers[0].row_bytes: must be in [1, 16384], got 0");
  c.buffers = {{"", 4}};
  EXPECT_EQ(UnshardedPool::Create(c).status().message(), "buffers[0].name: must not be empty");
  c.buffers.assign(17, {"x", 4});
  EXPECT_EQ(ShardedPool::Create(c).status().message(), "buffers: must hold 1 to 16 buffers, got 17");
}

// set_kv_buffer_prefix_valid raises NotImplementedError in seed 000 (it would bypass the owner filter).
TEST(ShardedPoolTest, PrefixValidCommitIsRejectedAsSglangRejectsIt) {
  ShardedPool pool = ShardedPool::Create(kConfig).value();
  ASSERT_TRUE(pool.BeginShardExtend({{0, 20, {40, 41}}}).ok());
  const Status s = pool.WritePrefixValid();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "prefix-valid commit is unsupported under logical-page KV sharding (it writes pool rows "
            "directly, bypassing the ownership filter)");
  EXPECT_EQ(pool.epoch(), 1);
  EXPECT_EQ(pool.write_plan_builds(), 0);
}

}  // namespace
}  // namespace kvshard::ref

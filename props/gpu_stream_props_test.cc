// The stream property on the GPU (spec §6): random request streams drive the reference model, and beside the
// reference pool the GPU data path of `replay --backend gpu` (N ranks emulated on one GPU: device planner,
// owner-filtered writes, chunk staging, one all-gather per layer for every buffer) must produce the same plan
// and the same bytes of every buffer on every rank, for one-buffer, MHA (K/V widths), MLA and MLA + extra pools.
// Also: a batch's end on that path reports the rows the device skipped, however it reads the count.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/gpu_pool_path.h"
#include "cpu_ref/sharded_pool.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"
#include "props/stream_driver.h"
#include "props/stream_generators.h"

namespace kvshard::props {
namespace {

replay::PoolGeometry GeometryOf(const StreamConfig& c) {
  const ref::ShardedPoolConfig pc = StreamPoolConfig(c);
  replay::PoolGeometry g;
  g.shard_size = pc.shard_size;
  g.page_size = pc.page_size;
  g.pages_per_rank = pc.pages_per_rank;
  g.max_prefix_tokens = pc.max_prefix_tokens;
  g.chunk_tokens = pc.chunk_tokens;
  g.num_layers = pc.num_layers;
  g.row_words = pc.row_words;
  g.buffers = ref::BuffersOf(pc);
  g.explicit_buffers = !c.buffers.empty();
  return g;
}

TEST(GpuStreamProps, EmulatedGpuPoolEqualsReferenceOnRandomStreams) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("GPU pool == reference pool on random streams (emulated ranks)", [] {
    const StreamConfig c = Full([] { return DrawStreamConfig(3); });
    RC_LOG() << "stream: N=" << c.shard_size << " ps=" << c.page_size << " pages_per_rank=" << c.pages_per_rank
             << " layers=" << c.num_layers << " buffers=" << c.buffers.size() << "\n";
    const std::unique_ptr<replay::PoolDataPath> gpu = RC_VALUE(replay::CreateGpuPoolPath(GeometryOf(c), /*gpus=*/1));
    const std::unique_ptr<StreamDriver> driver = RC_VALUE(StreamDriver::Create(c, gpu.get()));
    const int64_t steps = Full([] { return *rc::gen::inRange<int64_t>(1, 13); });
    for (int64_t s = 0; s < steps; ++s) {
      const std::vector<StreamRequest> step = Full([c] { return DrawStep(c); });
      RC_ASSERT_OK(driver->Step(step));
    }
    RC_TAG(driver->stats().prefix_hits > 0 ? "prefix hit" : "no prefix hit");
    RC_TAG(c.buffers.empty() ? "one-buffer word pool" : StrCat(c.buffers.size(), "-buffer pool"));
    RC_ASSERT(driver->stats().mirror_rows_compared > 0 || driver->stats().batches == 0);
  });
  EXPECT_TRUE(ok);
}

// A batch's end reports the rows the device skipped for out-of-range indices so far, whether it reads the count
// its checked read just before it copied (no device work between them) or copies it itself (a write between): a
// plan with one send row past rank 1's pool makes every pack skip one row.
TEST(GpuPoolPath, AnEndCountsTheSkippedRowsWithOrWithoutACheckRightBeforeIt) {
  KVSHARD_REQUIRE_GPUS(1);
  replay::PoolGeometry g;
  g.shard_size = 2;
  g.page_size = 2;
  g.pages_per_rank = 8;
  g.max_prefix_tokens = 16;
  g.chunk_tokens = 8;
  g.num_layers = 2;
  g.row_words = 1;
  g.payload_seed = 11;
  g.buffers = {{"kv", 4}};
  auto path = replay::CreateGpuPoolPath(g, /*gpus=*/1);
  ASSERT_TRUE(path.ok()) << path.status().message();
  replay::PoolDataPath& p = **path;
  ASSERT_TRUE(p.EndsChecked());
  // Prefix pages 2 and 3 (owners 0 and 1) at scratch pages 0 and 1; chunk pages 4 and 5 at scratch pages 8 and 9.
  GatherPlan plan;
  plan.shard_size = 2;
  plan.page_size = 2;
  plan.block_pages = 1;
  plan.n_prefix_slots = 2;
  plan.chunk_base_page = 8;
  plan.trash_page = 12;
  plan.page_pos_size = 2 * (8 + 2);
  plan.mapped_pages = {2, 3, 4, 5};
  plan.mapped_scratch_pages = {0, 1, 8, 9};
  plan.ranks.resize(2);
  plan.ranks[0].send_rows = {2, 3};
  plan.ranks[1].send_rows = {2, 999};  // past rank 1's pool: skipped and counted by every pack
  const std::vector<int64_t> chunk = {8, 9, 10, 11};
  const std::vector<uint32_t> written(chunk.size(), 1);
  const auto count_of = [](const replay::PoolDataPath::CheckAnswer& a) -> std::string {
    return a.ok() ? (a->has_value() ? "a row differs" : "no difference") : std::string(a.status().message());
  };
  // Batch 1: the end right after layer 1's checked read (packs of layers 0 and 1: 2 rows skipped).
  ASSERT_TRUE(p.Install(ExtendBatch{}, plan, chunk).ok());
  for (int64_t layer = 0; layer < 2; ++layer) {
    ASSERT_TRUE(p.WriteMade(layer, chunk, 1).ok());
    ASSERT_TRUE(p.StartReadChecked(layer, chunk, written).ok());
  }
  ASSERT_TRUE(p.StartEndChecked().ok());
  std::vector<replay::PoolDataPath::CheckAnswer> answers = p.TakeChecked();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(count_of(answers[0]), "no difference");
  EXPECT_EQ(count_of(answers[1]), "no difference");
  EXPECT_EQ(count_of(answers[2]), "invariant: 2 rows skipped on the GPU for out-of-range indices");
  // Batch 2: a write after the last checked read, so the end copies the counter (two more packs: 4 in all).
  ASSERT_TRUE(p.Install(ExtendBatch{}, plan, chunk).ok());
  ASSERT_TRUE(p.WriteMade(0, chunk, 2).ok());
  ASSERT_TRUE(p.StartReadChecked(0, chunk, std::vector<uint32_t>(chunk.size(), 2)).ok());
  ASSERT_TRUE(p.WriteMade(1, chunk, 2).ok());
  ASSERT_TRUE(p.StartEndChecked().ok());
  answers = p.TakeChecked();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(count_of(answers[0]), "no difference");
  EXPECT_EQ(count_of(answers[1]), "invariant: 4 rows skipped on the GPU for out-of-range indices");
}

}  // namespace
}  // namespace kvshard::props

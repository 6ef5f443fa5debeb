// The stream property on the GPU (spec §6): random request streams drive the reference model, and beside the
// reference pool the GPU data path of `replay --backend gpu` (N ranks emulated on one GPU: device planner,
// owner-filtered writes, chunk staging, one all-gather per layer for every buffer) must produce the same plan
// and the same bytes of every buffer on every rank, for one-buffer, MHA (K/V widths), MLA and MLA + extra pools.
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

}  // namespace
}  // namespace kvshard::props

// Model presets, model files and the per-rank memory check (sim/model.h, RankMemoryOf).
#include "sim/model.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/simulator.h"

namespace kvshard::sim {
namespace {

TEST(ModelTest, PresetsShapeTheConfiguration) {
  SimConfig c;
  ApplyModel(FindModelPreset("llama-3-70b").value(), &c);
  EXPECT_EQ(c.model_name, "llama-3-70b");
  EXPECT_EQ(c.cost.layers, 80);
  EXPECT_EQ(c.kv_bytes_per_token_layer, 8 * 128 * 2 * 2);  // GQA: 8 KV heads x 128 dims, K and V, bf16
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_DOUBLE_EQ(c.cost.flops_per_token_layer, 2.0 * 70.6e9 / 80);
  // The default configuration is DeepSeek-V3's.
  SimConfig d;
  SimConfig v3;
  ApplyModel(FindModelPreset("deepseek-v3").value(), &v3);
  EXPECT_EQ(d.cost.layers, v3.cost.layers);
  EXPECT_EQ(d.kv_bytes_per_token_layer, v3.kv_bytes_per_token_layer);
  EXPECT_EQ(d.context_length, v3.context_length);
  EXPECT_EQ(d.weight_bytes, v3.weight_bytes);
  EXPECT_NEAR(d.cost.flops_per_token_layer, v3.cost.flops_per_token_layer, 1e-6 * v3.cost.flops_per_token_layer);
  const Status unknown = FindModelPreset("gpt-5").status();
  EXPECT_EQ(unknown.message().rfind("model: unknown preset \"gpt-5\" (presets: deepseek-v3, kimi-k2,", 0), 0u)
      << unknown.message();
}

TEST(ModelTest, ModelFileNamesTheBadField) {
  const char good[] =
      R"({"name": "tiny", "layers": 4, "kv_bytes_per_token_layer": 256, "weight_bytes": 1000000,
          "active_params": 1e6, "attention_flops_per_pair_layer": 512, "context_length": 4096})";
  std::istringstream in(good);
  const StatusOr<ModelSpec> m = ReadModelSpec(in);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->layers, 4);
  EXPECT_EQ(m->context_length, 4096);
  const std::pair<std::string, std::string> bad[] = {
      {"[1]", "not a JSON object"},
      {R"({"name": "x", "layers": 0})", "layers: must be in [1, 4096], got 0"},
      {R"({"name": "x", "layerz": 1})", "layerz: unknown field"},
      {R"({"layers": 1})", "name: must be a string"},
      {R"({"name": "x", "layers": 4, "kv_bytes_per_token_layer": 256, "weight_bytes": 0, "context_length": 9,
           "active_params": -1, "attention_flops_per_pair_layer": 1})",
       "active_params: must be a number in (0, 1e15)"},
  };
  for (const auto& [text, want] : bad) {
    std::istringstream b(text);
    const Status s = ReadModelSpec(b).status();
    EXPECT_EQ(s.message().rfind(want, 0), 0u) << text << " -> " << s.message();
  }
}

TEST(ModelTest, RankMemoryCountsWeightsPoolAndScratch) {
  SimConfig c;  // DeepSeek-V3 on N = 8: 671 GB of weights, 70,272 B of KV a token over 61 layers
  c.shard_size = 8;
  c.page_size = 64;
  c.hbm_gib = 139;
  const int64_t page_bytes = 64 * 1152 * 61;
  const RankMemory m = RankMemoryOf(c, /*pool_pages_per_rank=*/1000, /*pages_in_use_max=*/400);
  EXPECT_EQ(m.weight_bytes, 671'000'000'000 / 8);
  EXPECT_EQ(m.kv_pool_bytes, 1000 * page_bytes);
  EXPECT_EQ(m.kv_peak_bytes, 400 * page_bytes);
  const ScratchSpec s = NodeScratch(c);
  EXPECT_EQ(m.scratch_bytes, (s.max_prefix_tokens + s.chunk_tokens) * 1152 * 2);
  EXPECT_TRUE(m.fits);
  const int64_t room = static_cast<int64_t>(139 * 1073741824.0) - m.weight_bytes - m.scratch_bytes;
  EXPECT_EQ(m.max_cache_tokens, room / page_bytes * 64 * 8);
  // A pool of exactly the largest fitting cache fits; one page per rank more does not.
  const int64_t pages = m.max_cache_tokens / (64 * 8);
  EXPECT_TRUE(RankMemoryOf(c, pages, 0).fits);
  EXPECT_FALSE(RankMemoryOf(c, pages + 1, 0).fits);
  c.hbm_gib = 0;  // not checked
  EXPECT_EQ(RankMemoryOf(c, 1000, 400).hbm_bytes, 0);
}

}  // namespace
}  // namespace kvshard::sim

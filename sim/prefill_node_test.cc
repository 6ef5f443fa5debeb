// The simulator as SGLang's sharded prefill node: the exactness check against an independent computation of
// SGLang's prefix-cache semantics on the bundled Mooncake trace, insert after prefill (cache_unfinished_req),
// pages held until the KV transfer is done, and the PrefillAdder's budgets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "sim/output_test_util.h"
#include "sim/simulator.h"

namespace kvshard::sim {
namespace {

// SGLang's semantics, written from the definition and sharing no code with the simulator: a trie of page-prefixes
// keyed by what each page holds (the (block id, offset, length) runs of its tokens). A request matches the
// longest cached run of its first input_length - 1 tokens' full pages, then caches all its full pages. Requests
// one at a time (nothing else in flight), an unbounded cache (nothing evicted). Returns (cached tokens, hit
// blocks) summed over the trace.
std::pair<int64_t, int64_t> IndependentHits(const Workload& w, int64_t ps) {
  using PageKey = std::tuple<int64_t, std::vector<std::tuple<int64_t, int64_t, int64_t>>>;  // (parent, runs)
  std::map<PageKey, int64_t> children;
  int64_t next_node = 1, cached_tokens = 0, hit_blocks = 0;
  const int64_t bt = w.block_tokens;
  for (const WorkloadRequest& r : w.requests) {
    const int64_t full_pages = r.input_tokens / ps, match_pages = (r.input_tokens - 1) / ps;
    int64_t node = 0, matched = 0;
    bool matching = true;
    for (int64_t k = 0; k < full_pages; ++k) {
      std::vector<std::tuple<int64_t, int64_t, int64_t>> runs;
      for (int64_t t = k * ps; t < (k + 1) * ps;) {
        const int64_t block = t / bt, offset = t % bt, len = std::min((k + 1) * ps - t, bt - offset);
        runs.emplace_back(r.block_hashes.at(block), offset, len);
        t += len;
      }
      const PageKey key{node, runs};
      const auto it = children.find(key);
      if (it != children.end()) {
        node = it->second;
        if (matching && k < match_pages) ++matched;
      } else {
        matching = false;
        node = children[key] = next_node++;  // cached after the prefill
      }
    }
    cached_tokens += matched * ps;
    hit_blocks += std::min<int64_t>(static_cast<int64_t>(r.block_hashes.size()), matched * ps / bt);
  }
  return {cached_tokens, hit_blocks};
}

TEST(PrefillNodeTest, HitRateEqualsSglangSemanticsOnTheBundledTrace) {
  const Workload w = BundledMooncake();
  ASSERT_EQ(w.requests.size(), 12031u);
  SimConfig c;
  c.shard_size = 1;
  c.page_size = 64;
  c.max_running_requests = 1;  // one request at a time: each batch is one request's chunk
  const StatusOr<SimResult> r = Simulate(w, c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->violations, 0) << r->first_violation;
  const auto [cached_tokens, hit_blocks] = IndependentHits(w, c.page_size);
  EXPECT_EQ(r->cached_tokens, cached_tokens);
  EXPECT_EQ(r->hit_blocks, hit_blocks);
  EXPECT_GT(cached_tokens, 0);
  // The same answer with sharding on (N = 8): the rotation rule never declines a single chain.
  c.shard_size = 8;
  const StatusOr<SimResult> sharded = Simulate(w, c);
  ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
  EXPECT_EQ(sharded->cached_tokens, cached_tokens);
  EXPECT_EQ(sharded->declined_grafts, 0);
}

TEST(PrefillNodeTest, HitRateEqualsSglangSemanticsOnRepeatedPageAlignedPrompts) {
  // Prompts that repeat whole (the bundled trace rarely does): a prompt of whole pages, cached in full, still
  // computes its last page (SGLang matches len - 1 tokens); partial pages never match. Request i of seed s:
  // conversation (i * 7 + s) % 5, its first (i % 4) + 1 blocks, ending on a page or inside one.
  for (int64_t seed = 0; seed < 3; ++seed) {
    std::string text;
    for (int64_t i = 0; i < 200; ++i) {
      const int64_t conv = (i * 7 + seed) % 5, blocks = i % 4 + 1;
      std::string ids;
      for (int64_t b = 0; b < blocks; ++b) ids += StrCat(b ? ", " : "", conv * 100 + b);
      const int64_t len = 512 * blocks - ((i / 4) % 3 == 0 ? 0 : (i / 4) % 3 == 1 ? 64 : 100);
      text += StrCat("{\"timestamp\": ", i * 1000, ", \"input_length\": ", len,
                     ", \"output_length\": 1, \"hash_ids\": [", ids, "]}\n");
    }
    const Workload w = MooncakeWorkload(text);
    for (int64_t n : {1, 4}) {
      SimConfig c;
      c.shard_size = n;
      c.page_size = 64;
      c.max_running_requests = 1;
      const StatusOr<SimResult> r = Simulate(w, c);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const auto [cached_tokens, hit_blocks] = IndependentHits(w, c.page_size);
      EXPECT_EQ(r->cached_tokens, cached_tokens) << "seed " << seed << " N " << n;
      EXPECT_EQ(r->hit_blocks, hit_blocks) << "seed " << seed << " N " << n;
    }
  }
}

TEST(PrefillNodeTest, InsertAfterPrefillLetsAnOverlappingRequestMatch) {
  // The first six requests of the bundled trace arrive together and share block 0 (512 tokens). With
  // 4096-token chunks request 0 runs alone in the first batch and is cached after it (cache_unfinished_req,
  // "so others can match"); request 1, admitted beside request 0's second chunk, matches the 512 shared tokens
  // although request 0 has not finished. Inserting only at the end would give it 0.
  const Workload all = BundledMooncake();
  Workload w = all;
  w.requests.resize(6);
  SimConfig c;
  c.chunked_prefill_size = 4096;
  c.max_prefill_tokens = 4096;
  const Recorded run = RunRecorded(w, c);
  EXPECT_EQ(run.result.violations, 0) << run.result.first_violation;
  ASSERT_EQ(run.record.requests.size(), 6u);
  EXPECT_EQ(run.record.requests[0].cached_tokens, 0);
  EXPECT_EQ(run.record.requests[1].cached_tokens, 512);
  EXPECT_GT(run.result.chunk_inserts, 0);
}

TEST(PrefillNodeTest, PagesAreHeldUntilTheKvTransferIsDone) {
  // One 6,400-token prompt: 100 pages of KV, 6400 * 1152 * 61 / 8 bytes per rank. At 1 Gbit/s the transfer
  // takes that many bits over 1e3 bits per microsecond; the pages stay in use until then.
  const Workload w = MooncakeWorkload(
      "{\"timestamp\": 0, \"input_length\": 6400, \"output_length\": 5, \"hash_ids\": [1, 2, 3, 4, 5, 6, 7, 8, 9, "
      "10, 11, 12, 13]}\n");
  SimConfig c;
  c.kv_transfer_gbps = 1;
  const Recorded run = RunRecorded(w, c);
  ASSERT_EQ(run.record.requests.size(), 1u);
  const RequestRow& row = run.record.requests[0];
  const double transfer_us = 6400.0 * 1152 * 61 / 8 * 8 / 1e3;
  EXPECT_NEAR(row.completed_us - row.prefill_completed_us, transfer_us, 1e-6 * transfer_us);
  EXPECT_NEAR(run.result.transfer_ms.p50, transfer_us / 1e3, 1e-9 * transfer_us);
  EXPECT_NEAR(run.result.ttft_ms.p50, row.prefill_completed_us / 1e3, 1e-9);
  EXPECT_NEAR(run.result.simulated_s * 1e6, row.completed_us, 1e-6 * row.completed_us);
}

TEST(PrefillNodeTest, KvBudgetReservesShardTimesPagePerRequest) {
  // A pool of 4 pages per rank (N = 4, ps = 64: 1,024 tokens): a 600-token prompt charges 600 + 1 + N * ps
  // = 857 < 1,024 and is admitted; a 800-token one charges 1,057 >= 1,024 and is never admitted.
  SimConfig c;
  c.shard_size = 4;
  c.page_size = 64;
  c.cache_tokens = 4 * 64 * 4;
  const StatusOr<SimResult> fits =
      Simulate(MooncakeWorkload("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1, "
                                "2]}\n"),
               c);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  const StatusOr<SimResult> too_big =
      Simulate(MooncakeWorkload("{\"timestamp\": 0, \"input_length\": 800, \"output_length\": 1, \"hash_ids\": [1, "
                                "2]}\n"),
               c);
  ASSERT_FALSE(too_big.ok());
  // The refusal names the budget rule and its numbers (it blamed locked prefixes before, in an empty pool).
  EXPECT_EQ(too_big.status().message(),
            "cache_tokens: request 0 (800 prompt tokens) cannot be admitted: SGLang's add_one_req needs its extend + 1 "
            "output token + the per-request reserve of 256 tokens (1057) below the pool's free and evictable tokens "
            "(1024, 4 pages per rank), and no request is running to free more");
}

TEST(PrefillNodeTest, ChunkBoundariesAreFlooredToThePage) {
  // chunked_prefill_size 1000 with ps 64: every chunk but the last ends on a page (SGLang floors the absolute
  // boundary), so a 2,500-token prompt runs as 960 + 960 + 580.
  SimConfig c;
  c.shard_size = 2;
  c.page_size = 64;
  c.chunked_prefill_size = 1000;
  const Recorded run = RunRecorded(
      MooncakeWorkload("{\"timestamp\": 0, \"input_length\": 2500, \"output_length\": 1, \"hash_ids\": [1, 2, 3, "
                       "4, 5]}\n"),
      c);
  ASSERT_EQ(run.record.batches.size(), 3u);
  EXPECT_EQ(run.record.batches[0].prefill_tokens, 960);
  EXPECT_EQ(run.record.batches[1].prefill_tokens, 960);
  EXPECT_EQ(run.record.batches[2].prefill_tokens, 580);
}

TEST(PrefillNodeTest, OverloadVerdictFollowsTheArrivalRate) {
  // The same twenty requests, spread out and then squeezed into a thousandth of the time.
  const Workload w = UniquePrompts(20, 1000);
  SimConfig c;
  const StatusOr<SimResult> spread = Simulate(w, c);
  ASSERT_TRUE(spread.ok()) << spread.status().ToString();
  EXPECT_FALSE(Overloaded(*spread)) << spread->utilization;
  c.time_scale = 0.001;
  const StatusOr<SimResult> squeezed = Simulate(w, c);
  ASSERT_TRUE(squeezed.ok()) << squeezed.status().ToString();
  EXPECT_TRUE(Overloaded(*squeezed)) << squeezed->utilization;
  EXPECT_GT(squeezed->ttft_ms.p90, spread->ttft_ms.p90);
  EXPECT_GT(squeezed->max_waiting, spread->max_waiting);
}

}  // namespace
}  // namespace kvshard::sim

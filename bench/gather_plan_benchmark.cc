// Gather plan build (begin_shard_extend), fast and reference side by side, for 256 requests x 2,048-token
// prefixes, N=8, ps=64: shared prefix (one cached 32-page prefix) and distinct prefixes (8,192 unique pages).
#include <benchmark/benchmark.h>

#include "cpu_fast/gather_plan.h"
#include "cpu_ref/gather_plan.h"

namespace kvshard {
namespace {

constexpr int64_t kN = 8, kPs = 64, kReqs = 256, kPrefixPages = 2048 / kPs, kChunkPages = 1;

// Each request: a cyclic prefix run (shared or its own) plus one fresh chunk page.
ExtendBatch MakeBatch(bool shared) {
  const int64_t chunk_local_base = 1 + kPrefixPages / kN * (kReqs + 1);        // past every prefix page
  const int64_t pages_per_rank = chunk_local_base + kReqs * kChunkPages / kN;  // past every chunk page
  ExtendBatch b{kN, kPs, pages_per_rank, 0, kReqs * kChunkPages * kPs, {}};
  int64_t next_local = 1;  // local page handed out next, same for every owner
  std::vector<int64_t> shared_prefix;
  for (int64_t k = 0; k < kPrefixPages; ++k) shared_prefix.push_back((next_local + k / kN) * kN + k % kN);
  next_local += kPrefixPages / kN;
  int64_t block = 0;
  for (int64_t i = 0; i < kReqs; ++i) {
    ExtendRequest r{kPrefixPages * kPs, kPrefixPages * kPs + 17, {}};
    if (shared) {
      r.pages = shared_prefix;
    } else {
      for (int64_t k = 0; k < kPrefixPages; ++k) r.pages.push_back((next_local + k / kN) * kN + k % kN);
      next_local += kPrefixPages / kN;
    }
    r.pages.push_back((chunk_local_base + i / kN) * kN + i % kN);  // a fresh chunk page
    block += (kPrefixPages + kN - 1) / kN;
    b.requests.push_back(std::move(r));
  }
  b.max_prefix_tokens = kN * block * kPs;
  return b;
}

template <typename Planner>
void RunGatherPlan(benchmark::State& state) {
  const ExtendBatch batch = MakeBatch(state.range(0) == 1);
  const bool rows = state.range(1) == 1;
  Planner planner;
  GatherPlan plan;
  if (Status s = planner.Build(batch, &plan, rows); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  for (auto _ : state) {
    Status s = planner.Build(batch, &plan, rows);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(plan.mapped_pages.data());
  }
  state.counters["prefix_pages_unique"] = static_cast<double>(plan.mapped_pages.size() - kReqs * kChunkPages);
  state.counters["block_pages"] = static_cast<double>(plan.block_pages);
}

void BM_GatherPlan(benchmark::State& state, bool fast) {
  fast ? RunGatherPlan<fast::GatherPlanner>(state) : RunGatherPlan<ref::GatherPlanner>(state);
}
// Args: {shared prefix?, materialize send_rows for all 8 ranks?}
BENCHMARK_CAPTURE(BM_GatherPlan, fast, true)
    ->ArgNames({"shared", "send_rows"})
    ->ArgsProduct({{1, 0}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GatherPlan, ref, false)
    ->ArgNames({"shared", "send_rows"})
    ->ArgsProduct({{1, 0}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvshard

// alloc_extend of a 256-request batch (N=8, ps=64), fast and reference side by side: extensions of 2,048-token
// chains by 512 tokens (8 pages each) under their rotation bases, and new chains with null bases. Only
// alloc_extend is timed; the pages are freed again outside the timed region.
#include <chrono>

#include <benchmark/benchmark.h>

#include "cpu_fast/allocator.h"
#include "cpu_ref/allocator.h"

namespace kvshard {
namespace {

constexpr int64_t kN = 8, kPs = 64, kReqs = 256;

template <typename Allocator>
void RunAllocExtend(benchmark::State& state) {
  const bool new_chains = state.range(0) == 1;
  auto a = Allocator::Create({kN, kPs, 4096, false, false}).value();
  AllocBatch batch;
  for (int64_t i = 0; i < kReqs; ++i) {
    batch.prefix_lens.push_back(new_chains ? 0 : 2048);
    batch.seq_lens.push_back(new_chains ? 512 : 2048 + 512);
    batch.rotation_bases.push_back(new_chains ? kNewChain : i % kN);
    batch.last_locs.push_back(0);
  }
  ExtendPages out;
  std::vector<int64_t> locs;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto ok = a.AllocExtend(batch, &out);
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(ok);
    if (!ok.ok() || !*ok) {
      state.SkipWithError("batch deferred or rejected");
      return;
    }
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    locs.clear();
    for (int64_t p : out.pages) locs.push_back(p * kPs);
    if (!a.Free(locs).ok()) {
      state.SkipWithError("free failed");
      return;
    }
  }
  state.counters["pages"] = static_cast<double>(out.pages.size());
}

void BM_AllocExtend(benchmark::State& state, bool fast) {
  fast ? RunAllocExtend<fast::PageInterleaveAllocator>(state) : RunAllocExtend<ref::PageInterleaveAllocator>(state);
}
BENCHMARK_CAPTURE(BM_AllocExtend, fast, true)
    ->ArgName("new_chains")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_AllocExtend, ref, false)
    ->ArgName("new_chains")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvshard

// CP batch plan (256 requests, cp=8, ps=64) and host batch rerange (64 requests, against one memcpy of the same
// bytes), each fast path beside the reference on the same ragged batch.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>

#include <benchmark/benchmark.h>

#include "core/host_tensor.h"
#include "cpu_fast/cp_data.h"
#include "cpu_fast/cp_split.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"

namespace kvshard {
namespace {

// Ragged batch: extend lens 1..4096 (some below 2N pages, partial last pages), page-aligned prefixes.
void RaggedBatch(int64_t batch, int64_t page_size, Int64List* extend, Int64List* prefix) {
  std::mt19937_64 rng(42);
  for (int64_t i = 0; i < batch; ++i) {
    extend->push_back(1 + static_cast<int64_t>(rng() % 4096));
    prefix->push_back(page_size * static_cast<int64_t>(rng() % 64));
  }
}

StatusOr<CPSharedKVBatchPlan> Plan(bool fast, const Int64List& extend, const Int64List& prefix, int64_t ps,
                                   int64_t cp) {
  return fast ? fast::BuildBatchPageAlignedInSeqSplitPlan(extend, prefix, ps, cp, 3)
              : ref::BuildBatchPageAlignedInSeqSplitPlan(extend, prefix, ps, cp, 3);
}

// A fresh plan each time.
void BM_BatchPlan(benchmark::State& state, bool fast) {
  const int64_t batch = state.range(0), cp = state.range(1), ps = state.range(2);
  Int64List extend, prefix;
  RaggedBatch(batch, ps, &extend, &prefix);
  for (auto _ : state) {
    StatusOr<CPSharedKVBatchPlan> plan = Plan(fast, extend, prefix, ps, cp);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK_CAPTURE(BM_BatchPlan, fast, true)->Args({256, 8, 64})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BatchPlan, ref, false)->Args({256, 8, 64})->Unit(benchmark::kMicrosecond);

// The planner into a reused plan (a scheduler rebuilding its plan every forward step).
void BM_BatchPlanInto(benchmark::State& state, bool fast) {
  const int64_t batch = state.range(0), cp = state.range(1), ps = state.range(2);
  Int64List extend, prefix;
  RaggedBatch(batch, ps, &extend, &prefix);
  CPSharedKVBatchPlan plan;
  for (auto _ : state) {
    Status s = fast ? fast::BuildBatchPageAlignedInSeqSplitPlanInto(extend, prefix, ps, cp, 3, &plan)
                    : ref::BuildBatchPageAlignedInSeqSplitPlanInto(extend, prefix, ps, cp, 3, &plan);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(plan.request_split_lists.values.data());
  }
}
BENCHMARK_CAPTURE(BM_BatchPlanInto, fast, true)->Args({256, 8, 64})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BatchPlanInto, ref, false)->Args({256, 8, 64})->Unit(benchmark::kMicrosecond);

// A fresh plan plus the (reference) metadata built from it.
void BM_BatchPlanAndMetadata(benchmark::State& state, bool fast) {
  const int64_t batch = state.range(0), cp = state.range(1), ps = state.range(2);
  Int64List extend, prefix;
  RaggedBatch(batch, ps, &extend, &prefix);
  for (auto _ : state) {
    CPSharedKVBatchPlan plan = Plan(fast, extend, prefix, ps, cp).value();
    StatusOr<NSAContextParallelMetadata> m = ref::BuildBatchMetadataFromPlan(plan);
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK_CAPTURE(BM_BatchPlanAndMetadata, fast, true)->Args({256, 8, 64})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BatchPlanAndMetadata, ref, false)->Args({256, 8, 64})->Unit(benchmark::kMicrosecond);

// Rerange setup: 64 requests, cp=8, ps=64, rows of `row_bytes` (1152 = a bf16 576-wide MLA latent row).
struct RerangeCase {
  NSAContextParallelMetadata metadata;
  HostTensor gathered;
  int64_t out_bytes = 0;
};

RerangeCase MakeRerangeCase(int64_t row_bytes) {
  Int64List extend, prefix;
  RaggedBatch(64, 64, &extend, &prefix);
  CPSharedKVBatchPlan plan = ref::BuildBatchPageAlignedInSeqSplitPlan(extend, prefix, 64, 8, 0).value();
  RerangeCase c;
  c.metadata = ref::BuildBatchMetadataFromPlan(plan).value();
  c.gathered = HostTensor::Zeros(c.metadata.total_seq_lens, row_bytes);
  for (size_t i = 0; i < c.gathered.data.size(); ++i) c.gathered.data[i] = static_cast<uint8_t>(i * 31);
  for (int64_t e : extend) c.out_bytes += e * row_bytes;
  return c;
}

Status RerangeInto(bool fast, const RerangeCase& c, HostTensor* out) {
  return fast ? fast::BatchInSeqAllGatherRerangeInto(c.gathered, c.metadata, 8, out)
              : ref::BatchInSeqAllGatherRerangeInto(c.gathered, c.metadata, 8, out);
}

// The rerange into a fresh output each time.
void BM_HostBatchRerange(benchmark::State& state, bool fast) {
  RerangeCase c = MakeRerangeCase(state.range(0));
  for (auto _ : state) {
    StatusOr<HostTensor> out = fast ? fast::BatchInSeqAllGatherRerange(c.gathered, c.metadata, 8)
                                    : ref::BatchInSeqAllGatherRerange(c.gathered, c.metadata, 8);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * c.out_bytes);
}
BENCHMARK_CAPTURE(BM_HostBatchRerange, fast, true)->Arg(1152)->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_HostBatchRerange, ref, false)->Arg(1152)->Arg(128)->Unit(benchmark::kMicrosecond);

// The rerange into a reused output buffer (no page faults on fresh memory). The output is sized and first
// touched before the timed loop, as the memcpy baseline's buffer is: the first call allocates and zero-fills it
// (151 MB of page faults at 1152-byte rows, ~5 reused-buffer iterations' worth), which inside the loop would
// be charged to every repetition.
void BM_HostBatchRerangeInto(benchmark::State& state, bool fast) {
  RerangeCase c = MakeRerangeCase(state.range(0));
  HostTensor out;
  if (!RerangeInto(fast, c, &out).ok()) {
    state.SkipWithError("rerange failed");
    return;
  }
  for (auto _ : state) {
    Status s = RerangeInto(fast, c, &out);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(out.data.data());
  }
  state.SetBytesProcessed(state.iterations() * c.out_bytes);
  // The copy list: how many copies, their median size (p50), and how many start on a 64-byte destination boundary.
  std::vector<fast::RowCopy> copies =
      fast::BatchRerangeCopies(c.metadata.batch_plan->request_split_lists, 8, c.metadata.max_rank_len[0]).value();
  std::vector<int64_t> sizes;
  int64_t aligned = 0;
  for (const fast::RowCopy& r : copies) {
    sizes.push_back(r.rows * c.gathered.row_bytes);
    aligned += reinterpret_cast<uintptr_t>(out.row(r.dst_row)) % 64 == 0;
  }
  std::sort(sizes.begin(), sizes.end());
  state.counters["copies"] = static_cast<double>(copies.size());
  state.counters["copy_bytes_p50"] = static_cast<double>(sizes[sizes.size() / 2]);
  state.counters["dst_64B_aligned"] = static_cast<double>(aligned) / static_cast<double>(copies.size());
}
BENCHMARK_CAPTURE(BM_HostBatchRerangeInto, fast, true)->Arg(1152)->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_HostBatchRerangeInto, ref, false)->Arg(1152)->Arg(128)->Unit(benchmark::kMicrosecond);

// Baseline: one memcpy of the same output bytes (into a fresh buffer, as the rerange allocates its output).
void BM_MemcpySameBytes(benchmark::State& state) {
  RerangeCase c = MakeRerangeCase(state.range(0));
  for (auto _ : state) {
    std::vector<uint8_t> out(static_cast<size_t>(c.out_bytes));
    std::memcpy(out.data(), c.gathered.data.data(), static_cast<size_t>(c.out_bytes));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * c.out_bytes);
}
BENCHMARK(BM_MemcpySameBytes)->Arg(1152)->Arg(128)->Unit(benchmark::kMicrosecond);

// Baseline: one memcpy of the same bytes into a reused buffer.
void BM_MemcpySameBytesInto(benchmark::State& state) {
  RerangeCase c = MakeRerangeCase(state.range(0));
  std::vector<uint8_t> out(static_cast<size_t>(c.out_bytes));
  for (auto _ : state) {
    std::memcpy(out.data(), c.gathered.data.data(), static_cast<size_t>(c.out_bytes));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * c.out_bytes);
}
BENCHMARK(BM_MemcpySameBytesInto)->Arg(1152)->Arg(128)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvshard

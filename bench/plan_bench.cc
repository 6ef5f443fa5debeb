// Device gather-plan build (SGLang's begin_shard_extend) for c.opt.batch requests x 2,048-token prefixes
// (distinct cyclic chains, random bases) plus one chunk page each, N = 8, ps = 64, and its scaling to 1,024 and
// 4,096 requests and 8,192-token prefixes: the time of the plan's launches (page rows already resident, as
// req_to_token is), checked field by field against the reference plan; and the host planner (cpu_fast/, as
// kvshard simulate plans) on the same batch, timed on the GPU host's CPU.
#include <chrono>
#include <random>
#include <string>
#include <utility>

#include <cuda_runtime.h>

#include "bench/ops.h"
#include "core/gather_plan.h"
#include "cpu_fast/gather_plan.h"
#include "cpu_ref/gather_plan.h"
#include "gpu/gather_plan.h"
#include "gpu/timing.h"

namespace kvshard::bench {

namespace {

Status BenchPlanOf(BenchContext& c, int64_t reqs, int64_t prefix_tokens) {
  const int64_t n = 8, ps = 64, k_pages = prefix_tokens / ps;
  ExtendBatch b;
  b.shard_size = n;
  b.page_size = ps;
  // A request puts at most ceil((k_pages + 1) / n) pages on one owner; local page 0 stays unused.
  b.pages_per_rank = reqs * ((k_pages + n) / n) + 1;
  std::vector<int64_t> next_local(n, 1);
  std::mt19937_64 rng(5);
  int64_t block_pages = 0;
  for (int64_t i = 0; i < reqs; ++i) {
    ExtendRequest r;
    const int64_t base = static_cast<int64_t>(rng() % n);
    for (int64_t k = 0; k <= k_pages; ++k) {
      const int64_t owner = (base + k) % n;
      r.pages.push_back(next_local[owner]++ * n + owner);
    }
    r.prefix_len = k_pages * ps;
    r.seq_len = r.prefix_len + ps / 2;
    block_pages += (k_pages + n - 1) / n;
    b.requests.push_back(std::move(r));
  }
  b.max_prefix_tokens = n * ps * block_pages;
  b.chunk_tokens = ps * reqs;
  KVSHARD_CUDA_CHECK(cudaSetDevice(0));
  KVSHARD_ASSIGN_OR_RETURN(auto planner, gpu::DeviceGatherPlanner::Create(b));
  KVSHARD_RETURN_IF_ERROR(planner->Upload(b, nullptr));
  KVSHARD_ASSIGN_OR_RETURN(
      double us, gpu::TimeMeanUs([&] { return planner->Launch(0, nullptr); }, {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(GatherPlan got, planner->Download(nullptr));
  KVSHARD_ASSIGN_OR_RETURN(GatherPlan want, ref::BuildGatherPlan(b));
  BenchRow r;
  r.op = "gather_plan_build";
  r.bytes = reqs * k_pages;
  r.time_us = us;
  r.limit = "-";
  r.wrong = got == want ? 0 : 1;
  const std::string shape = std::to_string(reqs) + " requests x " + std::to_string(prefix_tokens) +
                            "-token prefixes, N=8, ps=64 (size = prefix page refs)";
  r.note = shape + "; 5 launches (flag, CUB scan x2, place, check+expand)";
  c.rows->push_back(r);

  // The host planner without send rows (the simulator's call), mean of iters builds after warmup.
  fast::GatherPlanner host;
  GatherPlan host_plan;
  for (int i = 0; i < c.opt.warmup; ++i) KVSHARD_RETURN_IF_ERROR(host.Build(b, &host_plan, /*with_send_rows=*/false));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < c.opt.iters; ++i) KVSHARD_RETURN_IF_ERROR(host.Build(b, &host_plan, /*with_send_rows=*/false));
  const double host_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / c.opt.iters;
  for (RankSend& rank : want.ranks) rank.send_rows.clear();  // the host build was asked for no send rows
  BenchRow h = r;
  h.op = "host_gather_plan_build";
  h.time_us = host_us;
  h.wrong = host_plan == want ? 0 : 1;
  h.note = shape + "; cpu_fast, no send rows, host CPU";
  c.rows->push_back(h);
  return Status::Ok();
}

}  // namespace

Status BenchPlan(BenchContext& c) {
  KVSHARD_RETURN_IF_ERROR(BenchPlanOf(c, c.opt.batch, 2048));
  for (const auto& [reqs, tokens] : {std::pair<int64_t, int64_t>{1024, 2048}, {4096, 2048}, {4096, 8192}}) {
    if (reqs != c.opt.batch || tokens != 2048) KVSHARD_RETURN_IF_ERROR(BenchPlanOf(c, reqs, tokens));
  }
  return Status::Ok();
}

}  // namespace kvshard::bench

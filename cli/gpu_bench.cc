// GPU benchmarks: device copy and raw NCCL all-gather as limits, then the kvshard kernels and the layer-ahead
// prefix gather against them. Every timed result is checked against host-computed expectations.
#include "cli/gpu_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <functional>
#include <thread>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "cpu_ref/gather_plan.h"
#include "gpu/cp_ops.h"
#include "gpu/collective.h"
#include "gpu/gather_plan.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "gpu/prefix_gather.h"
#include "gpu/timing.h"

namespace kvshard::cli {
namespace {

uint32_t Word(int64_t tag, int64_t row, int64_t w) {
  return static_cast<uint32_t>(tag * 0x01000193u) ^ static_cast<uint32_t>(row * 0x9e3779b1u) ^ static_cast<uint32_t>(w);
}

std::vector<uint8_t> Rows(int64_t n, int64_t row_bytes, int64_t tag) {
  std::vector<uint8_t> out(n * row_bytes);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b + 4 <= row_bytes; b += 4) {
      const uint32_t v = Word(tag, r, b / 4);
      std::memcpy(out.data() + r * row_bytes + b, &v, 4);
    }
  }
  return out;
}

int64_t CountWrongRows(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int64_t row_bytes) {
  if (got.size() != want.size()) return std::max<int64_t>(1, static_cast<int64_t>(want.size()) / row_bytes);
  int64_t wrong = 0;
  for (size_t r = 0; r * row_bytes < got.size(); ++r) {
    wrong += std::memcmp(got.data() + r * row_bytes, want.data() + r * row_bytes, row_bytes) != 0;
  }
  return wrong;
}

BenchRow MakeRow(const std::string& op, int64_t bytes, double us, double moved, const std::string& limit,
                 double limit_busbw, int64_t wrong) {
  BenchRow r;
  r.op = op;
  r.bytes = bytes;
  r.time_us = us;
  r.algbw_gbs = bytes / us / 1e3;
  r.busbw_gbs = moved / us / 1e3;
  r.limit = limit;
  r.pct_limit = limit_busbw > 0 ? 100.0 * r.busbw_gbs / limit_busbw : 0;
  r.wrong = wrong;
  return r;
}

struct Ctx {
  const BenchOptions& opt;
  std::vector<BenchRow>* rows;
  std::map<int64_t, double> copy_busbw;       // by payload bytes
  std::map<int64_t, double> allgather_busbw;  // by per-rank bytes
  int gpus = 1;
};

Status BenchCopy(Ctx& c, int64_t bytes) {
  KVSHARD_CUDA_CHECK(cudaSetDevice(0));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer src, gpu::Upload(Rows(bytes / c.opt.row_bytes, c.opt.row_bytes, 1)));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer dst, gpu::DeviceBuffer::Allocate(src.bytes()));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&]() -> Status {
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, nullptr));
    return Status::Ok();
  }, {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(dst.data(), src.bytes()));
  KVSHARD_ASSIGN_OR_RETURN(auto want, gpu::Download<uint8_t>(src.data(), src.bytes()));
  BenchRow row = MakeRow("copy", src.bytes(), us, 2.0 * src.bytes(), "copy", 0, CountWrongRows(got, want, c.opt.row_bytes));
  row.pct_limit = 100;
  c.copy_busbw[bytes] = row.busbw_gbs;
  c.rows->push_back(row);
  return Status::Ok();
}

Status BenchGatherRows(Ctx& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, n = bytes / rb;
  std::vector<int64_t> index(n);
  std::iota(index.begin(), index.end(), 0);
  std::shuffle(index.begin(), index.end(), std::mt19937_64(7));
  const auto in = Rows(n, rb, 2);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_in, gpu::Upload(in));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(n * rb));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_idx, gpu::Upload(index));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&] {
    return gpu::LaunchGatherRows(d_out.data(), d_in.data(), n, d_idx.as<int64_t>(), n, rb, nullptr, nullptr);
  }, {0}, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(n * rb);
  for (int64_t i = 0; i < n; ++i) std::memcpy(want.data() + i * rb, in.data() + index[i] * rb, rb);
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_out.data(), n * rb));
  c.rows->push_back(MakeRow("gather_rows", n * rb, us, 2.0 * n * rb, "copy", c.copy_busbw[bytes], CountWrongRows(got, want, rb)));
  return Status::Ok();
}

// Owner-filtered write for rank 0 of an 8-rank group: the chunk has 8x the written bytes; moved = owned rows
// read + written (the loc reads are the kernel's overhead).
Status BenchOwnerWrite(Ctx& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, owned = bytes / rb, ranks = 8, ps = 64;
  const PlacementSpec spec{ranks, ps};
  const int64_t n = owned * ranks;
  std::vector<int64_t> locs(n);
  // A fresh chunk of consecutive pages starting past the trash pages.
  for (int64_t i = 0; i < n; ++i) locs[i] = spec.logical_page_size() + i;
  const int64_t pool_rows = (n / spec.logical_page_size() + 2) * ps;
  const auto rows = Rows(n, rb, 3);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_rows, gpu::Upload(rows));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_locs, gpu::Upload(locs));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_pool, gpu::DeviceBuffer::Allocate(pool_rows * rb));
  KVSHARD_CUDA_CHECK(cudaMemset(d_pool.data(), 0, d_pool.bytes()));
  // The write plan is built once per batch (SGLang caches it per (loc tensor, epoch)); each layer's write is
  // then a scatter of the owned rows.
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_owned, gpu::DeviceBuffer::Allocate(n * sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_local, gpu::DeviceBuffer::Allocate(n * sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_count, gpu::DeviceBuffer::Allocate(sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(size_t temp_bytes, gpu::WritePlanTempBytes(n));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_temp, gpu::DeviceBuffer::Allocate(temp_bytes));
  KVSHARD_ASSIGN_OR_RETURN(double us_plan, gpu::TimeMeanUs([&] {
    return gpu::LaunchBuildWritePlan(d_locs.as<int64_t>(), n, spec, 0, d_owned.as<int64_t>(), d_local.as<int64_t>(),
                                     d_count.as<int64_t>(), d_temp.data(), temp_bytes, nullptr);
  }, {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&] {
    return gpu::LaunchScatterRows(d_pool.data(), pool_rows, d_rows.data(), n, d_owned.as<int64_t>(),
                                  d_local.as<int64_t>(), d_count.as<int64_t>(), n, rb, nullptr, nullptr);
  }, {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(double us_fused, gpu::TimeMeanUs([&] {
    return gpu::LaunchOwnerFilteredWrite(d_pool.data(), pool_rows, d_rows.data(), d_locs.as<int64_t>(), n, spec, 0, rb,
                                         nullptr, nullptr);
  }, {0}, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(pool_rows * rb, 0);
  int64_t written = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t loc = locs[i];
    if ((loc % spec.logical_page_size()) / ps != 0) continue;
    const int64_t row = (loc / spec.logical_page_size()) * ps + loc % ps;
    std::memcpy(want.data() + row * rb, rows.data() + i * rb, rb);
    ++written;
  }
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_pool.data(), want.size()));
  const int64_t wrong = CountWrongRows(got, want, rb);
  BenchRow r = MakeRow("owner_write", written * rb, us, 2.0 * written * rb, "copy", c.copy_busbw[bytes], wrong);
  r.note = "N=8 ps=64 rank 0, cached write plan (scatter); plan build " + std::to_string(us_plan) + " us/batch";
  c.rows->push_back(r);
  BenchRow f = MakeRow("owner_write_fused", written * rb, us_fused, 2.0 * written * rb, "copy", c.copy_busbw[bytes], wrong);
  f.note = "same write, owner mask recomputed per row (no plan)";
  c.rows->push_back(f);
  return Status::Ok();
}

// Chunk staging: every chunk row lands at translate(loc) of the scratch chunk region (page_pos maps the
// chunk's pages in batch order, shuffled across requests).
Status BenchStage(Ctx& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, ps = 64, n = bytes / rb;
  const int64_t pages = (n + ps - 1) / ps;
  std::vector<int64_t> page_ids(pages);
  std::iota(page_ids.begin(), page_ids.end(), 8);
  std::shuffle(page_ids.begin(), page_ids.end(), std::mt19937_64(11));
  const int64_t n_page_pos = pages + 8;
  const int64_t trash = pages;  // scratch page of the trash page: chunk region is [0, pages)
  std::vector<int32_t> page_pos(n_page_pos, static_cast<int32_t>(trash));
  for (int64_t j = 0; j < pages; ++j) page_pos[page_ids[j]] = static_cast<int32_t>(j);
  std::vector<int64_t> locs(n);
  for (int64_t i = 0; i < n; ++i) locs[i] = page_ids[i / ps] * ps + i % ps;
  const int64_t scratch_rows = (pages + 1) * ps;
  const auto rows = Rows(n, rb, 4);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_rows, gpu::Upload(rows));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_locs, gpu::Upload(locs));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_pp, gpu::Upload(page_pos));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_scratch, gpu::DeviceBuffer::Allocate(scratch_rows * rb));
  KVSHARD_CUDA_CHECK(cudaMemset(d_scratch.data(), 0, d_scratch.bytes()));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&] {
    return gpu::LaunchStageChunk(d_scratch.data(), scratch_rows, d_rows.data(), d_locs.as<int64_t>(), n,
                                 d_pp.as<int32_t>(), n_page_pos, ps, rb, nullptr, nullptr);
  }, {0}, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(scratch_rows * rb, 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = int64_t{page_pos[locs[i] / ps]} * ps + locs[i] % ps;
    std::memcpy(want.data() + row * rb, rows.data() + i * rb, rb);
  }
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_scratch.data(), want.size()));
  c.rows->push_back(MakeRow("stage_chunk", n * rb, us, 2.0 * n * rb, "copy", c.copy_busbw[bytes], CountWrongRows(got, want, rb)));
  return Status::Ok();
}

Status BenchAllGather(Ctx& c, int64_t bytes) {
  KVSHARD_ASSIGN_OR_RETURN(auto group, gpu::CreateNcclGroup(c.gpus));
  const int n = c.gpus;
  std::vector<gpu::DeviceBuffer> bufs;
  std::vector<void*> ptrs;
  std::vector<cudaStream_t> streams(n);
  std::vector<int> devices;
  for (int i = 0; i < n; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(i));
    devices.push_back(i);
    KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
    std::vector<uint8_t> host(n * bytes, 0);
    auto block = Rows(bytes / c.opt.row_bytes, c.opt.row_bytes, 100 + i);
    std::copy(block.begin(), block.end(), host.begin() + i * bytes);
    KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::Upload(host));
    ptrs.push_back(b.data());
    bufs.push_back(std::move(b));
  }
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&] { return group->AllGatherInPlace(ptrs, bytes, streams); },
                                                      devices, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(n * bytes, 0);
  for (int r = 0; r < n; ++r) {
    auto block = Rows(bytes / c.opt.row_bytes, c.opt.row_bytes, 100 + r);
    std::copy(block.begin(), block.end(), want.begin() + r * bytes);
  }
  int64_t wrong = 0;
  for (int i = 0; i < n; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(i));
    KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(ptrs[i], n * bytes));
    wrong += CountWrongRows(got, want, c.opt.row_bytes);
    cudaStreamDestroy(streams[i]);
  }
  const double total = static_cast<double>(n) * bytes;
  BenchRow r = MakeRow("allgather_nccl", bytes, us, total * (n - 1) / n, "allgather", 0, wrong);
  r.algbw_gbs = total / us / 1e3;
  r.pct_limit = 100;
  r.note = std::to_string(n) + " GPUs, in place, raw ncclAllGather";
  c.allgather_busbw[bytes] = r.busbw_gbs;
  c.rows->push_back(r);
  return Status::Ok();
}

// Runs fn(i) for i < n on n host threads started together (a barrier before and after) and returns the mean
// wall microseconds of one of `iters` iterations (each thread synchronizes its device before the end barrier).
StatusOr<double> ParallelTimeUs(int n, int warmup, int iters, const std::function<Status(int)>& fn,
                                const std::vector<int>& devices) {
  std::vector<Status> status(n);
  std::barrier sync(n);
  std::chrono::steady_clock::time_point t0, t1;
  auto body = [&](int i) {
    Status s;
    if (cudaSetDevice(devices[i]) != cudaSuccess) s = Internal("cudaSetDevice failed");
    for (int k = 0; k < warmup && s.ok(); ++k) s = fn(i);
    if (s.ok() && cudaDeviceSynchronize() != cudaSuccess) s = Internal("warmup sync failed");
    sync.arrive_and_wait();
    if (i == 0) t0 = std::chrono::steady_clock::now();
    sync.arrive_and_wait();
    for (int k = 0; k < iters && s.ok(); ++k) s = fn(i);
    if (s.ok() && cudaDeviceSynchronize() != cudaSuccess) s = Internal("sync failed");
    sync.arrive_and_wait();
    if (i == 0) t1 = std::chrono::steady_clock::now();
    status[i] = s;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
  for (const Status& s : status) KVSHARD_RETURN_IF_ERROR(s);
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

// Layer-ahead prefix gather over c.gpus GPUs, one host thread per rank (as one process per GPU drives it):
// per layer, pack block_pages of local pages into the slot and all-gather in place. Row 1: back-to-back layers
// (no compute) vs the raw all-gather of the same block bytes. Rows 2-3: each layer's read followed by a
// compute stand-in; reports the fraction of the gather time hidden.
Status BenchPrefixGather(Ctx& c, int64_t bytes) {
  const int n = c.gpus;
  const int64_t rb = c.opt.row_bytes, ps = 64;
  const int64_t block_pages = std::max<int64_t>(1, bytes / (rb * ps));
  const int64_t block_rows = block_pages * ps;
  const int64_t block_bytes = block_rows * rb;
  double limit = c.allgather_busbw.count(block_bytes) ? c.allgather_busbw[block_bytes] : 0;
  if (limit == 0) {
    KVSHARD_RETURN_IF_ERROR(BenchAllGather(c, block_bytes));
    limit = c.allgather_busbw[block_bytes];
  }
  KVSHARD_ASSIGN_OR_RETURN(auto comms, gpu::CreateNcclPerRankGroups(n));
  gpu::PrefixGatherShape shape;
  shape.layers = c.opt.layers;
  shape.page_size = ps;
  shape.pool_rows = (block_pages + 1) * ps;
  shape.max_prefix_tokens = n * block_rows;
  shape.chunk_tokens = 0;
  shape.row_bytes = rb;
  shape.n_page_pos = 1;
  std::vector<std::unique_ptr<gpu::LayerAheadGather>> gathers;
  std::vector<std::vector<int64_t>> send(n);
  std::vector<int> devices;
  for (int i = 0; i < n; ++i) {
    devices.push_back(comms[i]->device(0));
    KVSHARD_CUDA_CHECK(cudaSetDevice(devices[i]));
    KVSHARD_ASSIGN_OR_RETURN(auto g, gpu::LayerAheadGather::Create(comms[i].get(), shape));
    // Local pages 1..block_pages in reverse order (a real plan's order is arbitrary), rows expanded.
    for (int64_t p = block_pages; p >= 1; --p) {
      for (int64_t o = 0; o < ps; ++o) send[i].push_back(p * ps + o);
    }
    for (int64_t l = 0; l < shape.layers; ++l) {
      auto pool = Rows(shape.pool_rows, rb, 1000 * (l + 1) + i);
      KVSHARD_RETURN_IF_ERROR(gpu::CopyToDevice(g->pool(0, l), pool.data(), pool.size()));
    }
    gathers.push_back(std::move(g));
  }
  const std::vector<int32_t> page_pos(1, 0);
  auto run_layers = [&](int i, int64_t compute_ns, bool busy) -> Status {
    gpu::LayerAheadGather& g = *gathers[i];
    KVSHARD_RETURN_IF_ERROR(g.BeginExtend(block_pages, page_pos, {send[i]}, {}));
    // Each layer: the part of its compute before attention (projections), the read of its assembled prefix
    // (waits for that layer's gather, kicks the next), then the rest (attention, MLP): half and half.
    for (int64_t l = 0; l < shape.layers; ++l) {
      if (compute_ns > 0) {
        g.TraceBegin(StrCat("pre L", l), g.compute_stream(0));
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(compute_ns / 2, busy, g.compute_stream(0), c.opt.compute_blocks));
        g.TraceEnd(g.compute_stream(0));
      }
      KVSHARD_ASSIGN_OR_RETURN(auto slots, g.AcquireForRead(l));
      if (compute_ns > 0) {
        g.TraceBegin(StrCat("post L", l), g.compute_stream(0));
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(compute_ns - compute_ns / 2, busy, g.compute_stream(0), c.opt.compute_blocks));
        g.TraceEnd(g.compute_stream(0));
      }
    }
    return g.EndExtend();
  };
  KVSHARD_ASSIGN_OR_RETURN(double us_gather, ParallelTimeUs(n, 2, c.opt.iters, [&](int i) { return run_layers(i, 0, false); }, devices));
  // Verify the last layer's slot on every rank: block r = rank r's pool rows of its send list.
  int64_t wrong = 0;
  {
    const int64_t last = shape.layers - 1;
    std::vector<uint8_t> want(n * block_bytes);
    for (int r = 0; r < n; ++r) {
      auto pool = Rows(shape.pool_rows, rb, 1000 * (last + 1) + r);
      for (int64_t j = 0; j < block_rows; ++j) std::memcpy(want.data() + (r * block_rows + j) * rb, pool.data() + send[r][j] * rb, rb);
    }
    // One more batch, every rank on its own thread (the collectives need all ranks), stopping at the last read.
    std::vector<void*> last_slot(n);
    KVSHARD_RETURN_IF_ERROR(ParallelTimeUs(n, 0, 1, [&](int i) -> Status {
      gpu::LayerAheadGather& g = *gathers[i];
      KVSHARD_RETURN_IF_ERROR(g.BeginExtend(block_pages, page_pos, {send[i]}, {}));
      for (int64_t l = 0; l < shape.layers; ++l) {
        KVSHARD_ASSIGN_OR_RETURN(auto slots, g.AcquireForRead(l));
        last_slot[i] = slots[0];
      }
      KVSHARD_RETURN_IF_ERROR(gpu::SyncStream(g.compute_stream(0)));
      return g.EndExtend();
    }, devices).status());
    for (int i = 0; i < n; ++i) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(devices[i]));
      KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(last_slot[i], want.size()));
      wrong += CountWrongRows(got, want, rb);
    }
  }
  const double per_layer = us_gather / shape.layers;
  const double total = static_cast<double>(n) * block_bytes;
  BenchRow r = MakeRow("prefix_gather", block_bytes, per_layer, total * (n - 1) / n, "allgather", limit, wrong);
  r.algbw_gbs = total / per_layer / 1e3;
  r.note = std::to_string(n) + " GPUs (a host thread each), " + std::to_string(shape.layers) +
           " layers back to back (pack + in-place all-gather)";
  c.rows->push_back(r);
  // Overlap: a compute stand-in per layer of 1.25x and 2x the measured per-layer gather time (or --compute-us).
  std::vector<int64_t> compute_lengths;
  if (c.opt.compute_us > 0) {
    compute_lengths.push_back(c.opt.compute_us * 1000);
  } else {
    for (double ratio : {1.25, 2.0}) compute_lengths.push_back(static_cast<int64_t>(per_layer * 1000 * ratio));
  }
  int64_t compute_ns = compute_lengths.front();
  for (int64_t len : compute_lengths)
  for (bool busy : {false, true}) {
    compute_ns = len;
    KVSHARD_ASSIGN_OR_RETURN(double us_compute_only, ParallelTimeUs(n, 1, c.opt.iters, [&](int i) -> Status {
      for (int64_t l = 0; l < shape.layers; ++l) {
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(compute_ns / 2, busy, gathers[i]->compute_stream(0), c.opt.compute_blocks));
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(compute_ns - compute_ns / 2, busy, gathers[i]->compute_stream(0), c.opt.compute_blocks));
      }
      return Status::Ok();
    }, devices));
    KVSHARD_ASSIGN_OR_RETURN(double us_both, ParallelTimeUs(n, 2, c.opt.iters, [&](int i) { return run_layers(i, compute_ns, busy); }, devices));
    const double exposed = std::max(0.0, us_both - us_compute_only);
    BenchRow o;
    o.op = busy ? "prefix_overlap_busy" : "prefix_overlap_sleep";
    o.bytes = block_bytes;
    o.time_us = us_both / shape.layers;
    o.limit = "hidden";
    o.pct_limit = 100.0 * std::max(0.0, 1.0 - exposed / us_gather);
    o.wrong = wrong;
    o.note = std::string("stand-in ") + (busy ? "busy (4 warps/SM spinning)" : "sleeping (1 warp/SM)") + ", max smem carveout, " +
             std::to_string(compute_ns / 1000) + " us/layer = " + std::to_string(compute_ns / 10 / per_layer / 100.0).substr(0, 4) +
             "x gather (half before the read, half after); per batch: compute-only " +
             std::to_string(static_cast<int64_t>(us_compute_only)) + " us, with gather " +
             std::to_string(static_cast<int64_t>(us_both)) + " us, gather-only " +
             std::to_string(static_cast<int64_t>(us_gather)) + " us";
    c.rows->push_back(o);
  }
  if (c.opt.trace) {
    // One traced batch with the sleeping stand-in: rank 0's device timeline.
    gathers[0]->set_trace(true);
    KVSHARD_RETURN_IF_ERROR(ParallelTimeUs(n, 0, 1, [&](int i) { return run_layers(i, compute_ns, false); }, devices).status());
    gathers[0]->set_trace(false);
    KVSHARD_ASSIGN_OR_RETURN(auto spans, gathers[0]->TakeTrace());
    std::string text = "trace (rank 0, us):";
    for (const auto& sp : spans) {
      text += " [" + sp.label + " " + std::to_string(static_cast<int64_t>(sp.start_us)) + "-" +
              std::to_string(static_cast<int64_t>(sp.end_us)) + "]";
    }
    BenchRow t;
    t.op = "prefix_trace";
    t.bytes = block_bytes;
    t.limit = "diag";
    t.wrong = 0;
    t.note = text;
    c.rows->push_back(t);
  }
  {
    // Diagnostic: the same compute stand-in on an extra stream with no dependency on the gather at all, launched
    // just before a gather-only batch. Shows how much the GPU overlaps the two when nothing orders them.
    std::vector<cudaStream_t> side(n);
    for (int i = 0; i < n; ++i) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(devices[i]));
      KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&side[i], cudaStreamNonBlocking));
    }
    KVSHARD_ASSIGN_OR_RETURN(double us_indep, ParallelTimeUs(n, 2, c.opt.iters, [&](int i) -> Status {
      for (int64_t l = 0; l < shape.layers; ++l) KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(compute_ns, false, side[i], c.opt.compute_blocks));
      return run_layers(i, 0, false);
    }, devices));
    BenchRow d;
    d.op = "prefix_overlap_indep";
    d.bytes = block_bytes;
    d.time_us = us_indep / shape.layers;
    d.limit = "diag";
    d.wrong = wrong;
    d.note = "stand-in on an unrelated stream + gather-only batch: " + std::to_string(static_cast<int64_t>(us_indep)) +
             " us per batch (perfect overlap = max of the two)";
    c.rows->push_back(d);
    for (int i = 0; i < n; ++i) cudaStreamDestroy(side[i]);
  }
  for (auto& g : gathers) {
    KVSHARD_ASSIGN_OR_RETURN(int64_t bad, g->BadRows());
    if (bad != 0) return Internal("prefix gather skipped ", bad, " out-of-range rows");
  }
  return Status::Ok();
}

// Device gather-plan build for opt.batch requests x 2,048-token prefixes (distinct cyclic chains, random bases)
// plus one chunk page each, N = 8, ps = 64: the time of the single plan launch (page rows already resident, as
// req_to_token is), checked field by field against the reference plan.
Status BenchPlan(Ctx& c) {
  const int64_t n = 8, ps = 64, k_pages = 2048 / ps, reqs = c.opt.batch;
  ExtendBatch b;
  b.shard_size = n;
  b.page_size = ps;
  b.pool_pages_per_rank = reqs * (k_pages + 1) / n + 16;
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
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&] { return planner->Launch(0, nullptr); }, {0}, c.opt.warmup,
                                                      c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(GatherPlan got, planner->Download(nullptr));
  KVSHARD_ASSIGN_OR_RETURN(GatherPlan want, ref::BuildGatherPlan(b));
  BenchRow r;
  r.op = "gather_plan_build";
  r.bytes = reqs * k_pages;
  r.time_us = us;
  r.limit = "-";
  r.wrong = got == want ? 0 : 1;
  r.note = std::to_string(reqs) + " requests x 2048-token prefixes, N=8, ps=64 (size = prefix page refs); one launch";
  c.rows->push_back(r);
  return Status::Ok();
}

// Fused batch rerange of opt.batch ragged requests (cp = 8, ps = 64) whose gathered rows total `bytes`: one
// launch, vs the device copy of the same bytes; also the per-segment-copy rerange (SGLang's torch path, one
// cudaMemcpyAsync per non-empty segment) for comparison. Checked against the original request-order rows.
Status BenchRerange(Ctx& c, int64_t bytes) {
  const int64_t rb = c.opt.row_bytes, cp = 8, ps = 64, reqs = c.opt.batch;
  const int64_t rows = bytes / rb;
  std::mt19937_64 rng(3);
  Int64List extend(reqs), prefix(reqs, 0);
  std::vector<double> w(reqs);
  double wsum = 0;
  for (auto& v : w) wsum += (v = 0.25 + (rng() % 1000) / 1000.0);
  int64_t assigned = 0;
  for (int64_t q = 0; q < reqs; ++q) {
    extend[q] = std::max<int64_t>(1, static_cast<int64_t>(rows * w[q] / wsum));
    assigned += extend[q];
  }
  extend[reqs - 1] += std::max<int64_t>(0, rows - assigned);
  KVSHARD_ASSIGN_OR_RETURN(CPSharedKVBatchPlan plan0, ref::BuildBatchPageAlignedInSeqSplitPlan(extend, prefix, ps, cp, 0));
  KVSHARD_ASSIGN_OR_RETURN(NSAContextParallelMetadata meta, ref::BuildBatchMetadataFromPlan(plan0));
  const int64_t m = meta.max_rank_token();
  int64_t total = 0;
  for (int64_t e : extend) total += e;
  // The gathered buffer, built from the rerange's own source-row map of the reference (row i -> src[i]).
  KVSHARD_ASSIGN_OR_RETURN(Int64List src, ref::BatchRerangeSourceRows(plan0.request_split_lists, cp, m));
  const auto x = Rows(total, rb, 9);
  std::vector<uint8_t> gathered(cp * m * rb, 0);
  for (int64_t i = 0; i < total; ++i) std::memcpy(gathered.data() + src[i] * rb, x.data() + i * rb, rb);
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_in, gpu::Upload(gathered));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(total * rb));
  KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_split, gpu::Upload(plan0.request_split_lists.values));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&] {
    return gpu::LaunchBatchRerange(d_out.data(), d_in.data(), d_split.as<int64_t>(), reqs, cp, m, total, rb, nullptr, nullptr);
  }, {0}, c.opt.warmup, c.opt.iters));
  KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_out.data(), total * rb));
  BenchRow r = MakeRow("rerange_fused", total * rb, us, 2.0 * total * rb, "copy", c.copy_busbw[bytes], CountWrongRows(got, x, rb));
  r.note = std::to_string(reqs) + " requests, cp=8, ps=64, one launch";
  c.rows->push_back(r);
  KVSHARD_ASSIGN_OR_RETURN(std::vector<ref::RowCopy> copies, ref::BatchRerangeCopies(plan0.request_split_lists, cp, m));
  KVSHARD_CUDA_CHECK(cudaMemset(d_out.data(), 0, total * rb));
  KVSHARD_ASSIGN_OR_RETURN(double us_seg, gpu::TimeMeanUs([&]() -> Status {
    for (const ref::RowCopy& rc : copies) {
      KVSHARD_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(d_out.data()) + rc.dst_row * rb,
                                         static_cast<const char*>(d_in.data()) + rc.src_row * rb, rc.rows * rb,
                                         cudaMemcpyDeviceToDevice, nullptr));
    }
    return Status::Ok();
  }, {0}, 2, std::max(2, c.opt.iters / 4)));
  KVSHARD_ASSIGN_OR_RETURN(got, gpu::Download<uint8_t>(d_out.data(), total * rb));
  BenchRow s2 = MakeRow("rerange_per_segment", total * rb, us_seg, 2.0 * total * rb, "copy", c.copy_busbw[bytes],
                        CountWrongRows(got, x, rb));
  s2.note = std::to_string(copies.size()) + " cudaMemcpyAsync (SGLang torch path shape)";
  c.rows->push_back(s2);
  return Status::Ok();
}

bool Wants(const BenchOptions& opt, const std::string& op) {
  return std::find(opt.ops.begin(), opt.ops.end(), "all") != opt.ops.end() ||
         std::find(opt.ops.begin(), opt.ops.end(), op) != opt.ops.end();
}

}  // namespace

Status RunGpuBench(const BenchOptions& opt, std::vector<BenchRow>* rows, std::string* device) {
  std::string why;
  const int visible = gpu::VisibleDeviceCount(&why);
  if (visible == 0) return Unavailable("bench: no CUDA device visible (", why, ")");
  Ctx c{opt, rows};
  c.gpus = opt.gpus > 0 ? opt.gpus : visible;
  if (c.gpus > visible) return InvalidArgument("--gpus: ", c.gpus, " requested, ", visible, " visible");
  *device = std::to_string(c.gpus) + " x " + gpu::DeviceDescription(0);
  if (Wants(opt, "plan")) KVSHARD_RETURN_IF_ERROR(BenchPlan(c));
  for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= opt.factor) {
    const int64_t b = bytes / opt.row_bytes * opt.row_bytes;
    if (b == 0) continue;
    KVSHARD_RETURN_IF_ERROR(BenchCopy(c, b));
    if (Wants(opt, "gather_rows")) KVSHARD_RETURN_IF_ERROR(BenchGatherRows(c, b));
    if (Wants(opt, "owner_write")) KVSHARD_RETURN_IF_ERROR(BenchOwnerWrite(c, b));
    if (Wants(opt, "stage_chunk")) KVSHARD_RETURN_IF_ERROR(BenchStage(c, b));
    if (Wants(opt, "rerange")) KVSHARD_RETURN_IF_ERROR(BenchRerange(c, b));
    if (Wants(opt, "allgather") && c.gpus > 1) KVSHARD_RETURN_IF_ERROR(BenchAllGather(c, b));
    if (Wants(opt, "prefix_gather") && c.gpus > 1) KVSHARD_RETURN_IF_ERROR(BenchPrefixGather(c, b));
  }
  return Status::Ok();
}

}  // namespace kvshard::cli

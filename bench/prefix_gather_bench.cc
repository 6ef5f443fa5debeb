// Layer-ahead prefix gather over c.gpus GPUs, one host thread per rank (as one process per GPU drives it): per
// layer, pack block_pages of local pages into the slot and all-gather in place. Rows: back-to-back layers vs
// the raw all-gather of the same block bytes, then the share of the gather a compute stand-in hides.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/ops.h"
#include "bench/owned_stream.h"
#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/prefix_gather.h"

namespace kvshard::bench {
namespace {

// Every rank's pipeline. `comms` is declared first so each LayerAheadGather is destroyed before the
// communicator it uses, on every return path.
struct PrefixRig {
  std::vector<std::unique_ptr<gpu::RankGroup>> comms;
  std::vector<std::unique_ptr<gpu::LayerAheadGather>> gathers;
  std::vector<std::vector<int64_t>> send;  // per rank: its send rows
  std::vector<int> devices;
  gpu::PrefixGatherShape shape;
  int64_t block_pages = 0;
  int64_t block_rows = 0;
  std::vector<int32_t> page_pos = std::vector<int32_t>(1, 0);
  int compute_blocks = 0;
};

// Creates one single-rank communicator and pipeline per GPU; layer l's pool of rank i holds PatternRows tagged
// 1000 * (l + 1) + i.
Status SetUp(const BenchContext& c, int64_t block_pages, PrefixRig& rig) {
  const int n = c.gpus;
  const int64_t rb = c.opt.row_bytes, ps = 64;
  rig.block_pages = block_pages;
  rig.block_rows = block_pages * ps;
  rig.compute_blocks = c.opt.compute_blocks;
  KVSHARD_ASSIGN_OR_RETURN(rig.comms, gpu::CreateNcclPerRankGroups(n, c.opt.collective_timeout_ms));
  rig.shape.layers = c.opt.layers;
  rig.shape.page_size = ps;
  rig.shape.pool_rows = (block_pages + 1) * ps;
  rig.shape.max_prefix_tokens = n * rig.block_rows;
  rig.shape.chunk_tokens = 0;
  rig.shape.row_bytes = rb;
  rig.shape.n_page_pos = 1;
  rig.send.assign(n, {});
  for (int i = 0; i < n; ++i) {
    rig.devices.push_back(rig.comms[i]->device(0));
    KVSHARD_CUDA_CHECK(cudaSetDevice(rig.devices[i]));
    KVSHARD_ASSIGN_OR_RETURN(auto g, gpu::LayerAheadGather::Create(rig.comms[i].get(), rig.shape));
    // Local pages 1..block_pages in reverse order (a real plan's order is arbitrary), rows expanded.
    for (int64_t p = block_pages; p >= 1; --p) {
      for (int64_t o = 0; o < ps; ++o) rig.send[i].push_back(p * ps + o);
    }
    for (int64_t l = 0; l < rig.shape.layers; ++l) {
      auto pool = PatternRows(rig.shape.pool_rows, rb, 1000 * (l + 1) + i);
      KVSHARD_RETURN_IF_ERROR(gpu::CopyToDevice(g->pool(0, l), pool.data(), pool.size()));
    }
    rig.gathers.push_back(std::move(g));
  }
  return Status::Ok();
}

// One batch on rank i. Each layer: the part of its compute before attention (projections), the read of its
// assembled prefix (waits for that layer's gather, kicks the next), then the rest (attention, MLP): half and
// half. No compute when compute_ns is 0.
Status RunLayers(PrefixRig& rig, int i, int64_t compute_ns, bool busy) {
  gpu::LayerAheadGather& g = *rig.gathers[i];
  KVSHARD_RETURN_IF_ERROR(g.BeginExtend(rig.block_pages, rig.page_pos, {rig.send[i]}, {}));
  for (int64_t l = 0; l < rig.shape.layers; ++l) {
    if (compute_ns > 0) {
      g.TraceBegin(StrCat("pre L", l), g.compute_stream(0));
      KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(compute_ns / 2, busy, g.compute_stream(0), rig.compute_blocks));
      g.TraceEnd(g.compute_stream(0));
    }
    KVSHARD_ASSIGN_OR_RETURN(auto slots, g.AcquireForRead(l));
    if (compute_ns > 0) {
      g.TraceBegin(StrCat("post L", l), g.compute_stream(0));
      KVSHARD_RETURN_IF_ERROR(
          gpu::LaunchComputeStandIn(compute_ns - compute_ns / 2, busy, g.compute_stream(0), rig.compute_blocks));
      g.TraceEnd(g.compute_stream(0));
    }
  }
  return g.EndExtend();
}

// Runs one more batch (every rank on its own thread: the collectives need all ranks) up to the last read and
// returns the wrong rows of the last layer's slot on every rank: block r = rank r's pool rows of its send list.
StatusOr<int64_t> VerifyLastLayer(const BenchContext& c, PrefixRig& rig) {
  const int n = c.gpus;
  const int64_t rb = c.opt.row_bytes, last = rig.shape.layers - 1;
  std::vector<uint8_t> want(n * rig.block_rows * rb);
  for (int r = 0; r < n; ++r) {
    auto pool = PatternRows(rig.shape.pool_rows, rb, 1000 * (last + 1) + r);
    for (int64_t j = 0; j < rig.block_rows; ++j) {
      std::memcpy(want.data() + (r * rig.block_rows + j) * rb, pool.data() + rig.send[r][j] * rb, rb);
    }
  }
  std::vector<void*> last_slot(n);
  KVSHARD_RETURN_IF_ERROR(ParallelTimeUs(
                              n, 0, 1,
                              [&](int i) -> Status {
                                gpu::LayerAheadGather& g = *rig.gathers[i];
                                KVSHARD_RETURN_IF_ERROR(
                                    g.BeginExtend(rig.block_pages, rig.page_pos, {rig.send[i]}, {}));
                                for (int64_t l = 0; l < rig.shape.layers; ++l) {
                                  KVSHARD_ASSIGN_OR_RETURN(auto slots, g.AcquireForRead(l));
                                  last_slot[i] = slots[0];
                                }
                                KVSHARD_RETURN_IF_ERROR(gpu::SyncStream(g.compute_stream(0)));
                                return g.EndExtend();
                              },
                              rig.devices)
                              .status());
  int64_t wrong = 0;
  for (int i = 0; i < n; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(rig.devices[i]));
    KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(last_slot[i], want.size()));
    wrong += CountWrongRows(got, want, rb);
  }
  return wrong;
}

// Rank 0's device timeline of one batch with the sleeping stand-in of compute_ns per layer.
Status AddTraceRow(BenchContext& c, PrefixRig& rig, int64_t block_bytes, int64_t compute_ns) {
  rig.gathers[0]->set_trace(true);
  KVSHARD_RETURN_IF_ERROR(ParallelTimeUs(
                              c.gpus, 0, 1, [&](int i) { return RunLayers(rig, i, compute_ns, false); }, rig.devices)
                              .status());
  rig.gathers[0]->set_trace(false);
  KVSHARD_ASSIGN_OR_RETURN(auto spans, rig.gathers[0]->TakeTrace());
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
  return Status::Ok();
}

// Diagnostic: the same compute stand-in on an extra stream with no dependency on the gather at all, launched
// just before a gather-only batch. Shows how much the GPU overlaps the two when nothing orders them.
Status AddIndependentRow(BenchContext& c, PrefixRig& rig, int64_t block_bytes, int64_t compute_ns, int64_t wrong) {
  KVSHARD_ASSIGN_OR_RETURN(std::vector<OwnedStream> side, CreateStreams(rig.devices));
  KVSHARD_ASSIGN_OR_RETURN(double us_indep, ParallelTimeUs(
                                                c.gpus, 2, c.opt.iters,
                                                [&](int i) -> Status {
                                                  for (int64_t l = 0; l < rig.shape.layers; ++l) {
                                                    KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(
                                                        compute_ns, false, side[i].get(), c.opt.compute_blocks));
                                                  }
                                                  return RunLayers(rig, i, 0, false);
                                                },
                                                rig.devices));
  BenchRow d;
  d.op = "prefix_overlap_indep";
  d.bytes = block_bytes;
  d.time_us = us_indep / rig.shape.layers;
  d.limit = "diag";
  d.wrong = wrong;
  d.note = "stand-in on an unrelated stream + gather-only batch: " + std::to_string(static_cast<int64_t>(us_indep)) +
           " us per batch (perfect overlap = max of the two)";
  c.rows->push_back(d);
  return Status::Ok();
}

}  // namespace

Status BenchPrefixGather(BenchContext& c, int64_t bytes) {
  const int n = c.gpus;
  const int64_t rb = c.opt.row_bytes, ps = 64;
  const int64_t block_pages = std::max<int64_t>(1, bytes / (rb * ps));
  const int64_t block_bytes = block_pages * ps * rb;
  double limit = c.allgather_busbw.count(block_bytes) ? c.allgather_busbw[block_bytes] : 0;
  if (limit == 0) {
    KVSHARD_RETURN_IF_ERROR(BenchAllGather(c, block_bytes));
    limit = c.allgather_busbw[block_bytes];
  }
  PrefixRig rig;
  KVSHARD_RETURN_IF_ERROR(SetUp(c, block_pages, rig));
  const int64_t layers = rig.shape.layers;
  KVSHARD_ASSIGN_OR_RETURN(double us_gather,
                           ParallelTimeUs(
                               n, 2, c.opt.iters, [&](int i) { return RunLayers(rig, i, 0, false); }, rig.devices));
  KVSHARD_ASSIGN_OR_RETURN(const int64_t wrong, VerifyLastLayer(c, rig));
  const double per_layer = us_gather / layers;
  const double total = static_cast<double>(n) * block_bytes;
  BenchRow r = MakeRow("prefix_gather", block_bytes, per_layer, total * (n - 1) / n, "allgather", limit, wrong);
  r.algbw_gbs = total / per_layer / 1e3;
  r.note = std::to_string(n) + " GPUs (a host thread each), " + std::to_string(layers) +
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
  for (int64_t len : compute_lengths) {
    for (bool busy : {false, true}) {
      compute_ns = len;
      KVSHARD_ASSIGN_OR_RETURN(double us_compute_only,
                               ParallelTimeUs(
                                   n, 1, c.opt.iters,
                                   [&](int i) -> Status {
                                     cudaStream_t stream = rig.gathers[i]->compute_stream(0);
                                     for (int64_t l = 0; l < layers; ++l) {
                                       KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(compute_ns / 2, busy, stream,
                                                                                         c.opt.compute_blocks));
                                       KVSHARD_RETURN_IF_ERROR(gpu::LaunchComputeStandIn(
                                           compute_ns - compute_ns / 2, busy, stream, c.opt.compute_blocks));
                                     }
                                     return Status::Ok();
                                   },
                                   rig.devices));
      KVSHARD_ASSIGN_OR_RETURN(
          double us_both,
          ParallelTimeUs(
              n, 2, c.opt.iters, [&](int i) { return RunLayers(rig, i, compute_ns, busy); }, rig.devices));
      const double exposed = std::max(0.0, us_both - us_compute_only);
      BenchRow o;
      o.op = busy ? "prefix_overlap_busy" : "prefix_overlap_sleep";
      o.bytes = block_bytes;
      o.time_us = us_both / layers;
      o.limit = "hidden";
      o.pct_limit = 100.0 * std::max(0.0, 1.0 - exposed / us_gather);
      o.wrong = wrong;
      o.note = std::string("stand-in ") + (busy ? "busy (4 warps/SM spinning)" : "sleeping (1 warp/SM)") +
               ", max smem carveout, " + std::to_string(compute_ns / 1000) +
               " us/layer = " + std::to_string(compute_ns / 10 / per_layer / 100.0).substr(0, 4) +
               "x gather (half before the read, half after); per batch: compute-only " +
               std::to_string(static_cast<int64_t>(us_compute_only)) + " us, with gather " +
               std::to_string(static_cast<int64_t>(us_both)) + " us, gather-only " +
               std::to_string(static_cast<int64_t>(us_gather)) + " us";
      c.rows->push_back(o);
    }
  }
  if (c.opt.trace) KVSHARD_RETURN_IF_ERROR(AddTraceRow(c, rig, block_bytes, compute_ns));
  KVSHARD_RETURN_IF_ERROR(AddIndependentRow(c, rig, block_bytes, compute_ns, wrong));
  for (auto& g : rig.gathers) {
    KVSHARD_ASSIGN_OR_RETURN(int64_t bad, g->BadRows());
    if (bad != 0) return Internal("prefix gather skipped ", bad, " out-of-range rows");
  }
  return Status::Ok();
}

}  // namespace kvshard::bench

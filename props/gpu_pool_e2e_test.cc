// End to end on N ranks (emulated on one GPU for N = 1..8, NCCL across 2 GPUs): the reference allocator drives
// a stream of extend batches; the device gather plan must equal the reference plan; every layer's KV rows
// (values encode layer, slot and the round that wrote them) are written through the owner filter and chunk
// staging, the layer-ahead gather assembles the prefix, and every prefix and chunk row read through translate
// must equal what an unsharded pool holds, with every rank on streams of its own or (replay's) all on one stream.
// Multi-buffer pools (seed 000's MHA K/V of different widths, MLA latent, MLA + indexer tensors; values also encode
// the buffer) gather every pair in one all-gather per layer. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <iostream>
#include <map>
#include <random>
#include <set>
#include <span>

#include "cpu_ref/allocator.h"
#include "cpu_ref/gather_plan.h"
#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/gather_plan.h"
#include "gpu/kv_ops.h"
#include "gpu/prefix_gather.h"
#include "props/gpu_test_data.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

constexpr int64_t kLayers = 3;

struct Req {
  int64_t base = kNewChain;
  int64_t seq_len = 0;
  std::vector<int64_t> pages;  // position-pages
};

// The value key of (layer, buffer): buffer 0 keeps the one-buffer values.
int64_t Key(int64_t layer, size_t buffer) { return layer + 1000 * static_cast<int64_t>(buffer); }

std::vector<uint8_t> RowsFor(const std::vector<int64_t>& locs, int64_t key, int64_t round, int64_t row_bytes) {
  std::vector<uint8_t> out(locs.size() * row_bytes);
  for (size_t i = 0; i < locs.size(); ++i) FillRow(out.data() + i * row_bytes, row_bytes, key, locs[i] * 16 + round);
  return out;
}

// Runs `rounds` extend batches of `reqs` requests on group `comm`; returns the first mismatch as a status.
// With `early_second_write`, layer 1's chunk is written before layer 0 is read (a trace may order its records so; on
// one stream layer 1's prefix is packed at the batch's start, before either write). With `mapped_page_pos`, the plan
// is installed by its mapped pages (BeginExtendMapped, replay's form), else with its dense page_pos.
Status RunStream(gpu::RankGroup& comm, int64_t ps, int64_t pages_per_rank, int64_t reqs, int64_t rounds,
                 const std::vector<int64_t>& widths, uint64_t seed, bool one_stream = false,
                 bool early_second_write = false, bool mapped_page_pos = false) {
  const int64_t n = comm.size();
  std::mt19937_64 rng(seed);
  ref::AllocatorConfig ac;
  ac.shard_size = n;
  ac.page_size = ps;
  ac.pages_per_rank = pages_per_rank;
  KVSHARD_ASSIGN_OR_RETURN(ref::PageInterleaveAllocator alloc, ref::PageInterleaveAllocator::Create(ac));
  ExtendBatch geometry;
  geometry.shard_size = n;
  geometry.page_size = ps;
  geometry.pages_per_rank = pages_per_rank;
  geometry.max_prefix_tokens = n * ps * (pages_per_rank + reqs);
  geometry.chunk_tokens = ps * n * pages_per_rank;
  gpu::PrefixGatherShape shape;
  shape.layers = kLayers;
  shape.page_size = ps;
  shape.pool_rows = (pages_per_rank + 1) * ps;
  shape.max_prefix_tokens = geometry.max_prefix_tokens;
  shape.chunk_tokens = geometry.chunk_tokens;
  shape.row_bytes = widths[0];
  if (widths.size() > 1) shape.buffer_row_bytes = widths;
  shape.n_page_pos = n * (pages_per_rank + 2);
  shape.one_stream = one_stream;
  if (mapped_page_pos) shape.max_dense_page_pos_bytes = 0;  // these small tables go up as their mapped pages too
  KVSHARD_ASSIGN_OR_RETURN(auto gather, gpu::LayerAheadGather::Create(&comm, shape));
  KVSHARD_CUDA_CHECK(cudaSetDevice(comm.device(0)));
  KVSHARD_ASSIGN_OR_RETURN(auto planner, gpu::DeviceGatherPlanner::Create(geometry));
  std::map<int64_t, int64_t> written_round;  // loc -> round whose chunk wrote it
  std::vector<Req> live(reqs);
  for (int64_t round = 0; round < rounds; ++round) {
    // Next extend of every request: from its page-aligned prefix (the partial tail page is freed first).
    AllocBatch ab;
    std::vector<int64_t> prefix(reqs);
    for (int64_t i = 0; i < reqs; ++i) {
      Req& r = live[i];
      prefix[i] = (r.seq_len / ps) * ps;
      if (r.seq_len % ps) {
        KVSHARD_RETURN_IF_ERROR(alloc.Free({r.pages.back() * ps}));
        r.pages.pop_back();
      }
      const int64_t seq = prefix[i] + 1 + static_cast<int64_t>(rng() % (2 * n * ps));
      ab.prefix_lens.push_back(prefix[i]);
      ab.seq_lens.push_back(seq);
      ab.rotation_bases.push_back(r.base);
      ab.last_locs.push_back(0);
    }
    ref::ExtendPages got;
    KVSHARD_ASSIGN_OR_RETURN(bool ok, alloc.AllocExtend(ab, &got));
    if (!ok) break;  // deferred: the pool is full
    ExtendBatch batch = geometry;
    std::vector<int64_t> chunk_locs;
    for (int64_t i = 0; i < reqs; ++i) {
      Req& r = live[i];
      r.base = got.rotation_bases[i];
      r.seq_len = ab.seq_lens[i];
      r.pages.insert(r.pages.end(), got.pages.begin() + got.offsets[i], got.pages.begin() + got.offsets[i + 1]);
      batch.requests.push_back({prefix[i], r.seq_len, r.pages});
      for (int64_t pos = prefix[i]; pos < r.seq_len; ++pos) chunk_locs.push_back(r.pages[pos / ps] * ps + pos % ps);
    }
    const std::set<int64_t> chunk_set(chunk_locs.begin(), chunk_locs.end());
    KVSHARD_ASSIGN_OR_RETURN(GatherPlan want_plan, ref::BuildGatherPlan(batch));
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm.device(0)));
    KVSHARD_RETURN_IF_ERROR(planner->Upload(batch, nullptr));
    KVSHARD_RETURN_IF_ERROR(planner->Launch(0, nullptr));
    KVSHARD_ASSIGN_OR_RETURN(GatherPlan got_plan, planner->Download(nullptr));
    if (!(got_plan == want_plan)) return Mismatch("round ", round, ": device gather plan differs from the reference");
    // Install the plan on every rank.
    std::vector<std::vector<int64_t>> send;
    for (int rank : comm.local_ranks()) send.push_back(want_plan.ranks[rank].send_rows);
    if (mapped_page_pos) {
      KVSHARD_RETURN_IF_ERROR(gather->BeginExtendMapped(
          want_plan.block_pages, {want_plan.trash_page, want_plan.mapped_pages, want_plan.mapped_scratch_pages},
          std::vector<std::span<const int64_t>>(send.begin(), send.end()), chunk_locs));
    } else {
      std::vector<int32_t> page_pos;
      for (int64_t p : ref::DensePagePos(want_plan)) page_pos.push_back(static_cast<int32_t>(p));
      KVSHARD_RETURN_IF_ERROR(gather->BeginExtend(want_plan.block_pages, page_pos, send, chunk_locs));
    }
    // Reads: every prefix slot and every chunk slot of the batch.
    std::vector<int64_t> read_locs;
    for (const ExtendRequest& r : batch.requests) {
      for (int64_t pos = 0; pos < r.seq_len; ++pos) read_locs.push_back(r.pages[pos / ps] * ps + pos % ps);
    }
    KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> rows_idx, ref::Translate(want_plan, read_locs));
    if (want_plan.block_pages > 0) {  // layer 1 is not resident before layer 0's read, packed early or not
      const StatusOr<std::vector<void*>> miss = gather->AcquireForRead(1);
      if (miss.ok() || miss.status().message().find("prefix scratch miss for layer 1") == std::string::npos) {
        return Mismatch("round ", round, ": reading layer 1 first: want a scratch miss, got ",
                        miss.ok() ? "its slots" : miss.status().ToString());
      }
    }
    std::vector<gpu::DeviceBuffer> chunk_rows;  // every layer's written rows, kept until the round's end
    const auto write = [&](int64_t l) -> Status {
      std::vector<std::vector<const void*>> ptrs(comm.local_ranks().size());
      for (int i = 0; i < static_cast<int>(comm.local_ranks().size()); ++i) {
        KVSHARD_CUDA_CHECK(cudaSetDevice(comm.device(i)));
        for (size_t b = 0; b < widths.size(); ++b) {
          KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d, gpu::Upload(RowsFor(chunk_locs, Key(l, b), round, widths[b])));
          ptrs[i].push_back(d.data());
          chunk_rows.push_back(std::move(d));
        }
      }
      if (widths.size() == 1) {  // the one-buffer API
        std::vector<const void*> one;
        for (const auto& p : ptrs) one.push_back(p[0]);
        return gather->WriteLayer(l, one);
      }
      return gather->WriteLayerBuffers(l, ptrs);
    };
    const auto read = [&](int64_t l) -> Status {
      std::vector<std::vector<void*>> slots;
      if (widths.size() == 1) {  // the one-buffer API
        KVSHARD_ASSIGN_OR_RETURN(std::vector<void*> first, gather->AcquireForRead(l));
        for (void* p : first) slots.push_back({p});
      } else {
        KVSHARD_ASSIGN_OR_RETURN(slots, gather->AcquireBuffersForRead(l));
      }
      for (size_t b = 0; b < widths.size(); ++b) {
        const int64_t row_bytes = widths[b];
        std::vector<uint8_t> want(read_locs.size() * row_bytes);
        for (size_t k = 0; k < read_locs.size(); ++k) {
          const int64_t loc = read_locs[k];
          const int64_t wr = chunk_set.count(loc) ? round : written_round.at(loc);
          FillRow(want.data() + k * row_bytes, row_bytes, Key(l, b), loc * 16 + wr);
        }
        for (int i = 0; i < static_cast<int>(comm.local_ranks().size()); ++i) {
          KVSHARD_CUDA_CHECK(cudaSetDevice(comm.device(i)));
          KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_locs, gpu::Upload(read_locs));
          KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_rows, gpu::DeviceBuffer::Allocate(read_locs.size() * 8));
          KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(want.size()));
          const int64_t m = static_cast<int64_t>(read_locs.size());
          cudaStream_t s = gather->compute_stream(i);
          KVSHARD_RETURN_IF_ERROR(gpu::LaunchTranslate(d_rows.as<int64_t>(), d_locs.as<int64_t>(), m,
                                                       gather->page_pos(i), shape.n_page_pos, ps, s));
          KVSHARD_RETURN_IF_ERROR(gpu::LaunchGatherRows(d_out.data(), slots[i][b], shape.scratch_rows(),
                                                        d_rows.as<int64_t>(), m, row_bytes, nullptr, s));
          KVSHARD_RETURN_IF_ERROR(gpu::SyncStream(s));
          KVSHARD_ASSIGN_OR_RETURN(auto got_rows, gpu::Download<int64_t>(d_rows.data(), m));
          if (got_rows != rows_idx)
            return Mismatch("round ", round, " rank ", comm.local_ranks()[i], ": GPU translate differs");
          KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(d_out.data(), want.size()));
          const Status cmp = CompareRows(
              got, want, row_bytes,
              StrCat("round ", round, " layer ", l, " buffer ", b, " of ", widths.size(), " rank ",
                     comm.local_ranks()[i], " sharded read vs unsharded (", comm.Kind(), " N=", n, " ps=", ps, ")"));
          KVSHARD_RETURN_IF_ERROR(cmp);
        }
      }
      return Status::Ok();
    };
    for (int64_t l = 0; l < kLayers; ++l) {
      if (early_second_write && l == 0) {
        KVSHARD_RETURN_IF_ERROR(write(0));
        KVSHARD_RETURN_IF_ERROR(write(1));
      } else if (!(early_second_write && l == 1)) {
        KVSHARD_RETURN_IF_ERROR(write(l));
      }
      KVSHARD_RETURN_IF_ERROR(read(l));
    }
    KVSHARD_RETURN_IF_ERROR(gather->EndExtend());
    for (int64_t loc : chunk_locs) written_round[loc] = round;
    KVSHARD_ASSIGN_OR_RETURN(int64_t bad, gather->BadRows());
    if (bad) return Mismatch("round ", round, ": ", bad, " rows skipped for out-of-range indices");
  }
  return Status::Ok();
}

TEST(GpuPoolE2E, EmulatedRanksMatchUnshardedReads) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("sharded == unsharded reads (emulated ranks)", [] {
    const int n = *rc::gen::element(1, 2, 3, 4, 8);
    const int64_t ps = *rc::gen::element<int64_t>(1, 2, 16, 64);
    const int64_t reqs = *rc::gen::inRange<int64_t>(1, 5);
    const int64_t row_bytes = *rc::gen::element<int64_t>(4, 64, 1152);
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const bool one_stream = *rc::gen::arbitrary<bool>();  // replay's: every rank on one stream
    const bool early = *rc::gen::arbitrary<bool>();       // layer 1 written before layer 0 is read
    const bool mapped = *rc::gen::arbitrary<bool>();      // page_pos by its mapped pages (replay's form)
    RC_CLASSIFY(one_stream, "one stream");
    RC_CLASSIFY(early, "layer 1 written before layer 0's read");
    RC_CLASSIFY(mapped, "page_pos by mapped pages");
    auto comm = RC_VALUE(gpu::CreateEmulatedGroup(n, 0));
    const Status s = RunStream(*comm, ps, /*pages_per_rank=*/6 * reqs + 4, reqs, /*rounds=*/4, {row_bytes}, seed,
                               one_stream, early, mapped);
    if (!s.ok()) {
      std::cerr << "N=" << n << " ps=" << ps << " reqs=" << reqs << " row_bytes=" << row_bytes << " seed=" << seed
                << " one_stream=" << one_stream << " early=" << early << " mapped=" << mapped << ": " << s.ToString()
                << "\n";
      RC_FAIL(s.ToString());
    }
  });
  EXPECT_TRUE(ok);
}

// A case RapidCheck once shrank to (kept as a regression test).
TEST(GpuPoolE2E, RegressionSingleRankThreeRequests) {
  KVSHARD_REQUIRE_GPUS(1);
  auto comm = gpu::CreateEmulatedGroup(1, 0);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  const Status s = RunStream(**comm, 64, 6 * 3 + 4, 3, 4, {1152}, 174416332352403395ull);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(GpuPoolE2E, NcclTwoGpusMatchUnshardedReads) {
  KVSHARD_REQUIRE_GPUS(2);
  auto comm = gpu::CreateNcclGroup(2);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const int64_t ps = seed % 2 ? 16 : 64;
    const Status s = RunStream(**comm, ps, 40, 1 + seed % 4, 4, {1152}, seed);
    ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s.ToString();
    // MHA K/V of different widths plus an extra tensor: one all-gather per layer over NCCL.
    const Status multi = RunStream(**comm, ps, 40, 1 + seed % 4, 4, {1024, 512, 132}, seed);
    ASSERT_TRUE(multi.ok()) << "seed " << seed << " (3 buffers): " << multi.ToString();
  }
}

// Seed 000's pools with several (pool buffer, scratch tensor) pairs per layer: MHA K and V of different widths,
// MLA's latent with an indexer's K and scale rows, odd widths; N = 1..8 emulated ranks.
TEST(GpuPoolE2E, EmulatedMultiBufferPoolsMatchUnshardedReads) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("multi-buffer sharded == unsharded reads (emulated ranks)", [] {
    const int n = *rc::gen::element(1, 2, 3, 4, 8);
    const int64_t ps = *rc::gen::element<int64_t>(1, 2, 16, 64);
    const int64_t reqs = *rc::gen::inRange<int64_t>(1, 5);
    static const std::vector<std::vector<int64_t>> kWidths = {
        {1024, 512}, {256, 256}, {576, 132, 4}, {8, 5}, {37, 1, 3, 64}};
    const std::vector<int64_t>& widths = kWidths[*rc::gen::inRange<size_t>(0, kWidths.size())];
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const bool one_stream = *rc::gen::arbitrary<bool>();
    const bool mapped = *rc::gen::arbitrary<bool>();
    RC_CLASSIFY(one_stream, "one stream");
    RC_CLASSIFY(mapped, "page_pos by mapped pages");
    auto comm = RC_VALUE(gpu::CreateEmulatedGroup(n, 0));
    const Status s = RunStream(*comm, ps, 6 * reqs + 4, reqs, 4, widths, seed, one_stream, false, mapped);
    if (!s.ok()) {
      std::cerr << "N=" << n << " ps=" << ps << " reqs=" << reqs << " widths=" << rc::toString(widths)
                << " seed=" << seed << " one_stream=" << one_stream << " mapped=" << mapped << ": " << s.ToString()
                << "\n";
      RC_FAIL(s.ToString());
    }
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace kvshard::props

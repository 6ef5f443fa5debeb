// Replay's payload rows on the device (gpu/payload_rows.h) against the host's (replay::PayloadRows, PayloadRowsOf):
// made rows are the host's bytes, and a check finds exactly the host's first difference (rank, then buffer, then
// byte) or none; one buffer of whole words and several buffers of odd widths, generation 0 (zero bytes). The fused
// forms replay uses are pinned against the host too: a chunk write of rows made where they are written is the rows
// made then written, and a check of rows where they lie in each rank's scratch slots finds the host's first
// difference of the rows translate would gather; generations from a list or from replay's table of every slot's last
// write (LaunchMarkGenerations), the differing row's published with it. Skips without a GPU.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/pool_replay.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "gpu/payload_rows.h"
#include "props/gpu_test_data.h"
#include "props/gpu_test_env.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// A payload geometry: one buffer of row_words words (the trace's word form) or 2-4 buffers of drawn widths.
replay::PoolGeometry DrawGeometry() {
  replay::PoolGeometry g;
  g.payload_seed = *rc::gen::arbitrary<uint64_t>();
  if (*rc::gen::arbitrary<bool>()) {
    g.row_words = *rc::gen::element<int64_t>(1, 3, 4, 64);
    g.buffers = {{"kv", 4 * g.row_words}};
  } else {
    g.explicit_buffers = true;
    const int buffers = *rc::gen::inRange(2, 5);
    for (int b = 0; b < buffers; ++b) {
      g.buffers.push_back({"b" + std::to_string(b), *rc::gen::element<int64_t>(1, 3, 5, 8, 37, 132, 576)});
    }
  }
  return g;
}

gpu::PayloadLayout LayoutOf(const replay::PoolGeometry& g, int64_t layer) {
  gpu::PayloadLayout l;
  l.seed = g.payload_seed;
  l.layer = layer;
  for (const ref::PoolBuffer& b : g.buffers) l.widths.push_back(b.row_bytes);
  return l;
}

// One rank's block as the device lays it out: every buffer's rows in turn.
std::vector<uint8_t> Block(const ref::BufferRows& rows) {
  std::vector<uint8_t> out;
  for (const std::vector<uint8_t>& b : rows) out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST(GpuPayload, MadeRowsAreTheHostsPayloadRows) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("device payload rows == PayloadRows", [] {
    const replay::PoolGeometry g = DrawGeometry();
    const int64_t layer = *rc::gen::inRange<int64_t>(0, 80);
    const int64_t generation = *rc::gen::inRange<int64_t>(1, 1 << 30);
    const auto locs =
        *rc::gen::container<std::vector<int64_t>>(rc::gen::inRange<int64_t>(0, 100000));  // duplicates too
    const int64_t n = static_cast<int64_t>(locs.size());
    const std::vector<uint8_t> want = Block(replay::PayloadRows(g, layer, locs, generation));
    auto d_locs = RC_VALUE(gpu::Upload(locs));
    auto d_out = RC_VALUE(gpu::DeviceBuffer::Allocate(want.size()));
    RC_ASSERT_OK(
        gpu::LaunchMakePayloadRows(d_out.data(), d_locs.as<int64_t>(), n, generation, LayoutOf(g, layer), nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    RC_ASSERT(RC_VALUE(gpu::Download<uint8_t>(d_out.data(), want.size())) == want);
  });
  EXPECT_TRUE(ok);
}

TEST(GpuPayload, CheckFindsTheFirstDifferenceOrNone) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("device check == host's first difference", [] {
    const replay::PoolGeometry g = DrawGeometry();
    const int64_t layer = *rc::gen::inRange<int64_t>(0, 8);
    const auto locs = *rc::gen::nonEmpty(rc::gen::container<std::vector<int64_t>>(rc::gen::inRange<int64_t>(0, 5000)));
    const int64_t n = static_cast<int64_t>(locs.size());
    // The generations as a list, or (replay's kept form) a table of every slot that the check looks locs up in.
    const bool table = *rc::gen::arbitrary<bool>();
    RC_CLASSIFY(table, "generations from a table");
    std::vector<uint32_t> gens, slot_gens(5000);
    for (uint32_t& g : slot_gens) g = *rc::gen::element<uint32_t>(0, 1, 2, 77, 4000000000u);
    for (int64_t i = 0; i < n; ++i) {
      gens.push_back(table ? slot_gens[locs[i]] : *rc::gen::element<uint32_t>(0, 1, 2, 77, 4000000000u));
    }
    const int ranks = *rc::gen::inRange(1, 9);
    const std::vector<uint8_t> one =
        Block(replay::PayloadRowsOf(g, layer, locs, [&](size_t i) { return static_cast<int64_t>(gens[i]); }));
    std::vector<uint8_t> rows;
    for (int r = 0; r < ranks; ++r) rows.insert(rows.end(), one.begin(), one.end());
    const int flips = *rc::gen::inRange(0, 4);
    for (int f = 0; f < flips; ++f) rows[*rc::gen::inRange<size_t>(0, rows.size())] ^= 1 << *rc::gen::inRange(0, 8);
    // The host's first difference: rank, then buffer, then byte of that buffer's rows.
    unsigned long long want = UINT64_MAX;
    const int64_t buffers = static_cast<int64_t>(g.buffers.size());
    for (int r = 0; r < ranks && want == UINT64_MAX; ++r) {
      size_t offset = static_cast<size_t>(r) * one.size();
      for (int64_t b = 0; b < buffers && want == UINT64_MAX; ++b) {
        const size_t bytes = static_cast<size_t>(n * g.buffers[b].row_bytes);
        for (size_t i = 0; i < bytes; ++i) {
          if (rows[offset + i] != one[offset - static_cast<size_t>(r) * one.size() + i]) {
            want = static_cast<unsigned long long>(r * buffers + b) << 40 | i;
            break;
          }
        }
        offset += bytes;
      }
    }
    RC_CLASSIFY(want == UINT64_MAX, "no difference");
    auto d_rows = RC_VALUE(gpu::Upload(rows));
    auto d_locs = RC_VALUE(gpu::Upload(locs));
    auto d_gens = RC_VALUE(gpu::Upload(gens));
    auto d_key = RC_VALUE(gpu::Upload(std::vector<unsigned long long>{UINT64_MAX}));
    // Published (the deferred checks' form): the last block copies the key and the differing row; written over
    // with a pattern first, so a row left unwritten shows.
    const bool publish = *rc::gen::arbitrary<bool>();
    RC_CLASSIFY(publish, "published");
    int64_t widest = 0;
    for (const ref::PoolBuffer& b : g.buffers) widest = std::max(widest, b.row_bytes);
    auto d_done = RC_VALUE(gpu::Upload(std::vector<unsigned>{0}));
    auto d_out_key = RC_VALUE(gpu::Upload(std::vector<unsigned long long>{12345}));
    auto d_out_row = RC_VALUE(gpu::Upload(std::vector<uint8_t>(static_cast<size_t>(widest), 0xa5)));
    auto d_out_gen = RC_VALUE(gpu::Upload(std::vector<uint32_t>{12345}));
    gpu::PayloadCheckOut out{d_done.as<unsigned>(), d_out_key.as<unsigned long long>(), d_out_row.as<uint8_t>()};
    out.generation = d_out_gen.as<uint32_t>();
    auto d_table = RC_VALUE(gpu::Upload(slot_gens));
    gpu::PayloadLayout layout = LayoutOf(g, layer);
    if (table) {
      layout.generation_table = d_table.as<uint32_t>();
      layout.table_slots = static_cast<int64_t>(slot_gens.size());
    }
    RC_ASSERT_OK(gpu::LaunchCheckPayloadRows(d_rows.data(), ranks, d_locs.as<int64_t>(),
                                             table ? nullptr : d_gens.as<uint32_t>(), n, layout,
                                             d_key.as<unsigned long long>(), nullptr, publish ? &out : nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    const unsigned long long got = RC_VALUE(gpu::Download<unsigned long long>(d_key.data(), 1))[0];
    RC_ASSERT(got == want);
    if (want != UINT64_MAX) {
      const gpu::PayloadKey k = gpu::DecodePayloadKey(got, buffers);
      RC_ASSERT(k.rank * buffers + k.buffer == static_cast<int64_t>(want >> 40));
      RC_ASSERT(k.byte == static_cast<int64_t>(want & ((1ull << 40) - 1)));
    }
    if (publish) {
      RC_ASSERT(RC_VALUE(gpu::Download<unsigned long long>(d_out_key.data(), 1))[0] == want);
      if (want != UINT64_MAX) {
        const gpu::PayloadKey k = gpu::DecodePayloadKey(want, buffers);
        const int64_t width = g.buffers[k.buffer].row_bytes;
        size_t at = static_cast<size_t>(k.rank) * one.size();  // the row as read: rank, buffer, row
        for (int64_t b = 0; b < k.buffer; ++b) at += static_cast<size_t>(n * g.buffers[b].row_bytes);
        at += static_cast<size_t>(k.byte / width * width);
        const std::vector<uint8_t> row(rows.begin() + at, rows.begin() + at + width);
        RC_ASSERT(RC_VALUE(gpu::Download<uint8_t>(d_out_row.data(), static_cast<size_t>(width))) == row);
        // The generation the differing row was checked against, from the list or the table.
        RC_ASSERT(RC_VALUE(gpu::Download<uint32_t>(d_out_gen.data(), 1))[0] == gens[k.byte / width]);
      } else {
        RC_ASSERT(RC_VALUE(gpu::Download<uint32_t>(d_out_gen.data(), 1))[0] == 12345u);  // left as it was
      }
    }
  });
  EXPECT_TRUE(ok);
}

// The made rows' chunk write (LaunchWriteChunkRanks with `made`, replay's writes) against the rows made by
// LaunchMakePayloadRows and written from memory: the same staged scratch, scattered pool and bad counts, for every
// buffer of a drawn geometry, 1-8 jobs, misses among the chunk locs, the scratch pages and the pool rows; and the
// slots marked in a generation table where asked (job 0's locs inside the table, nothing else).
TEST(GpuPayload, MadeChunkWriteIsTheRowsMadeThenWritten) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("made chunk write == make then write", [] {
    const replay::PoolGeometry g = DrawGeometry();
    const int64_t layer = *rc::gen::inRange<int64_t>(0, 80);
    const int64_t generation = *rc::gen::inRange<int64_t>(1, 1 << 30);
    const int64_t ps = *rc::gen::element<int64_t>(1, 2, 16);
    const int64_t pages = *rc::gen::inRange<int64_t>(1, 10);
    const int64_t scratch_rows = *rc::gen::inRange<int64_t>(1, 10) * ps;
    const int64_t pool_rows = *rc::gen::inRange<int64_t>(1, 200);
    const int jobs = *rc::gen::inRange(1, 9);
    const int64_t n = *rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 120));
    std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
    std::vector<gpu::DeviceBuffer> keep;
    const auto upload = [&](auto values) -> void* {
      keep.push_back(RC_VALUE(gpu::Upload(values)));
      return keep.back().data();
    };
    // Each job's plan: every scratch row and pool row written at most once, misses skipped and counted.
    struct Plan {
      const int64_t* locs;
      const int32_t* page_pos;
      const int64_t* owned;
      const int64_t* local;
      const int64_t* count;
    };
    std::vector<Plan> plans;
    for (int j = 0; j < jobs; ++j) {
      const ChunkWritePlan p = DrawChunkWritePlan(n, pages, ps, scratch_rows, pool_rows, rng);
      plans.push_back({static_cast<const int64_t*>(upload(p.locs)), static_cast<const int32_t*>(upload(p.page_pos)),
                       static_cast<const int64_t*>(upload(p.owned)), static_cast<const int64_t*>(upload(p.local)),
                       static_cast<const int64_t*>(upload(std::vector<int64_t>{p.count}))});
    }
    const gpu::PayloadLayout layout = LayoutOf(g, layer);
    int64_t row_sum = 0;
    for (int64_t w : layout.widths) row_sum += w;
    int64_t offset = 0;
    for (size_t b = 0; b < layout.widths.size(); ++b) {
      const int64_t width = layout.widths[b];
      const std::vector<uint8_t> scratch0(scratch_rows * width, static_cast<uint8_t>(0x30 + b));
      const std::vector<uint8_t> pool0(pool_rows * width, static_cast<uint8_t>(0x60 + b));
      std::vector<gpu::WriteChunkJob> made_jobs, want_jobs;
      for (int j = 0; j < jobs; ++j) {
        // The rows made from this job's chunk locs, all buffers' blocks in turn; buffer b's start at offset * n.
        auto* rows = static_cast<uint8_t*>(upload(std::vector<uint8_t>(std::max<int64_t>(1, n * row_sum))));
        RC_ASSERT_OK(gpu::LaunchMakePayloadRows(rows, plans[j].locs, n, generation, layout, nullptr));
        gpu::WriteChunkJob job{
            nullptr,        upload(scratch0),  scratch_rows,
            plans[j].locs,  plans[j].page_pos, pages,
            upload(pool0),  pool_rows,         plans[j].owned,
            plans[j].local, plans[j].count,    static_cast<int64_t*>(upload(std::vector<int64_t>{0}))};
        made_jobs.push_back(job);
        job.rows = rows + offset * n;
        job.scratch = upload(scratch0);
        job.pool = upload(pool0);
        job.bad = static_cast<int64_t*>(upload(std::vector<int64_t>{0}));
        want_jobs.push_back(job);
      }
      RC_ASSERT_OK(gpu::LaunchWriteChunkRanks(want_jobs, n, ps, width, nullptr));
      gpu::ChunkPayload made{g.payload_seed, layer, generation, offset};
      // Half the time the write also marks job 0's slots in a generation table (some locs past its end).
      const bool mark = *rc::gen::arbitrary<bool>();
      const int64_t mark_slots = pages * ps - *rc::gen::inRange<int64_t>(0, ps + 1);
      std::vector<uint32_t> table(static_cast<size_t>(std::max<int64_t>(0, mark_slots)) + 1);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint32_t>(3 * i + 1);
      auto* d_table = static_cast<uint32_t*>(upload(table));
      if (mark) {
        made.mark = d_table;
        made.mark_slots = mark_slots;
      }
      RC_ASSERT_OK(gpu::LaunchWriteChunkRanks(made_jobs, n, ps, width, nullptr, &made));
      RC_ASSERT_OK(gpu::SyncStream(nullptr));
      std::vector<uint32_t> want_table = table;
      if (mark && n > 0) {
        const std::vector<int64_t> locs = RC_VALUE(gpu::Download<int64_t>(plans[0].locs, static_cast<size_t>(n)));
        for (int64_t loc : locs) {
          if (loc >= 0 && loc < mark_slots) want_table[loc] = static_cast<uint32_t>(generation);
        }
      }
      RC_ASSERT(RC_VALUE(gpu::Download<uint32_t>(d_table, table.size())) == want_table);
      for (int j = 0; j < jobs; ++j) {
        RC_ASSERT(RC_VALUE(gpu::Download<uint8_t>(made_jobs[j].scratch, scratch0.size())) ==
                  RC_VALUE(gpu::Download<uint8_t>(want_jobs[j].scratch, scratch0.size())));
        RC_ASSERT(RC_VALUE(gpu::Download<uint8_t>(made_jobs[j].pool, pool0.size())) ==
                  RC_VALUE(gpu::Download<uint8_t>(want_jobs[j].pool, pool0.size())));
        RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(made_jobs[j].bad, 1)) ==
                  RC_VALUE(gpu::Download<int64_t>(want_jobs[j].bad, 1)));
      }
      offset += width;
    }
  });
  EXPECT_TRUE(ok);
}

// The check of rows where they are (LaunchCheckPayloadSlots, replay's checked reads) against the host: each rank's
// rows are what translate would gather from its slots (page_pos[loc / ps] * ps + loc % ps); a loc translating outside
// the slot differs at every byte; the key is the host's first difference by rank, buffer and byte, and the published
// row that row as read (zero bytes where it cannot be read).
TEST(GpuPayload, CheckOfRowsInTheirSlotsFindsTheHostsFirstDifference) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("in-slot check == host's first difference", [] {
    const replay::PoolGeometry g = DrawGeometry();
    const int64_t buffers = static_cast<int64_t>(g.buffers.size());
    const int64_t layer = *rc::gen::inRange<int64_t>(0, 8);
    const int64_t ps = *rc::gen::element<int64_t>(1, 2, 16);
    const int64_t pages = *rc::gen::inRange<int64_t>(1, 12);
    const int64_t slot_rows = *rc::gen::inRange<int64_t>(1, 12) * ps;
    const int ranks = *rc::gen::inRange(1, static_cast<int>(std::min<int64_t>(9, gpu::kMaxCheckedSlots / buffers + 1)));
    const bool misses = *rc::gen::arbitrary<bool>();
    RC_CLASSIFY(misses, "locs outside the slot");
    std::vector<int64_t> locs;
    const int64_t n = *rc::gen::inRange<int64_t>(0, 150);
    for (int64_t i = 0; i < n; ++i) {
      const int kind = misses ? *rc::gen::inRange(0, 8) : 7;
      locs.push_back(kind == 0   ? -1
                     : kind == 1 ? pages * ps + *rc::gen::inRange<int64_t>(0, 5)
                                 : *rc::gen::inRange<int64_t>(0, pages * ps));
    }
    // A list, or a table of pages * ps + 2 slots (a miss past it is generation 0, one inside it its entry).
    const bool table = *rc::gen::arbitrary<bool>();
    RC_CLASSIFY(table, "generations from a table");
    std::vector<uint32_t> gens, slot_gens(static_cast<size_t>(pages * ps + 2));
    for (uint32_t& x : slot_gens) x = *rc::gen::element<uint32_t>(0, 1, 2, 77, 4000000000u);
    for (int64_t i = 0; i < n; ++i) {
      const bool in_table = locs[i] >= 0 && locs[i] < static_cast<int64_t>(slot_gens.size());
      gens.push_back(!table     ? *rc::gen::element<uint32_t>(0, 1, 2, 77, 4000000000u)
                     : in_table ? slot_gens[locs[i]]
                                : 0u);
    }
    const ref::BufferRows want_rows =
        replay::PayloadRowsOf(g, layer, locs, [&](size_t i) { return static_cast<int64_t>(gens[i]); });
    // Per rank: a page_pos (pages past the slot when misses are drawn), slots holding the expected rows where they
    // translate (a later loc of the same row wins), then a few flipped bytes.
    std::vector<gpu::DeviceBuffer> keep;
    std::vector<gpu::PayloadSlots> at(ranks);
    std::vector<std::vector<int32_t>> page_pos(ranks);
    std::vector<std::vector<std::vector<uint8_t>>> slots(ranks);
    const auto row_of = [&](int r, int64_t loc) -> int64_t {
      if (loc < 0 || loc / ps >= pages) return -1;
      const int64_t row = int64_t{page_pos[r][loc / ps]} * ps + loc % ps;
      return row < slot_rows ? row : -1;
    };
    for (int r = 0; r < ranks; ++r) {
      for (int64_t k = 0; k < pages; ++k) {
        page_pos[r].push_back(*rc::gen::inRange<int32_t>(0, static_cast<int32_t>(slot_rows / ps + (misses ? 2 : 0))));
      }
      for (int64_t b = 0; b < buffers; ++b) {
        const int64_t width = g.buffers[b].row_bytes;
        std::vector<uint8_t> slot(slot_rows * width);
        for (uint8_t& x : slot) x = *rc::gen::arbitrary<uint8_t>();
        for (int64_t i = 0; i < n; ++i) {
          const int64_t row = row_of(r, locs[i]);
          if (row >= 0) std::copy_n(want_rows[b].begin() + i * width, width, slot.begin() + row * width);
        }
        const int flips = *rc::gen::inRange(0, 3);
        for (int f = 0; f < flips; ++f) slot[*rc::gen::inRange<size_t>(0, slot.size())] ^= 1 << *rc::gen::inRange(0, 8);
        slots[r].push_back(slot);
        keep.push_back(RC_VALUE(gpu::Upload(slot)));
        at[r].buffers.push_back(keep.back().data());
      }
      keep.push_back(RC_VALUE(gpu::Upload(page_pos[r])));
      at[r].page_pos = keep.back().as<int32_t>();
    }
    // The host's first difference: rank, then buffer, then byte of that buffer's rows (row i at i * width).
    unsigned long long want = UINT64_MAX;
    for (int r = 0; r < ranks && want == UINT64_MAX; ++r) {
      for (int64_t b = 0; b < buffers && want == UINT64_MAX; ++b) {
        const int64_t width = g.buffers[b].row_bytes;
        for (int64_t i = 0; i < n && want == UINT64_MAX; ++i) {
          const int64_t row = row_of(r, locs[i]);
          for (int64_t p = 0; p < width; ++p) {
            if (row < 0 || slots[r][b][row * width + p] != want_rows[b][i * width + p]) {
              want = static_cast<unsigned long long>(r * buffers + b) << 40 |
                     static_cast<unsigned long long>(i * width + p);
              break;
            }
          }
        }
      }
    }
    RC_CLASSIFY(want == UINT64_MAX, "no difference");
    auto d_locs = RC_VALUE(gpu::Upload(locs.empty() ? std::vector<int64_t>{0} : locs));
    auto d_gens = RC_VALUE(gpu::Upload(gens.empty() ? std::vector<uint32_t>{0} : gens));
    auto d_key = RC_VALUE(gpu::Upload(std::vector<unsigned long long>{UINT64_MAX}));
    int64_t widest = 0;
    for (const ref::PoolBuffer& b : g.buffers) widest = std::max(widest, b.row_bytes);
    auto d_done = RC_VALUE(gpu::Upload(std::vector<unsigned>{0}));
    auto d_out_key = RC_VALUE(gpu::Upload(std::vector<unsigned long long>{12345}));
    auto d_out_row = RC_VALUE(gpu::Upload(std::vector<uint8_t>(static_cast<size_t>(widest), 0xa5)));
    // A counter copied by the last block (replay's skipped rows, read by the batch's end).
    const int64_t counter = *rc::gen::inRange<int64_t>(0, 1000);
    auto d_counts = RC_VALUE(gpu::Upload(std::vector<int64_t>{counter, -1}));
    auto d_out_gen = RC_VALUE(gpu::Upload(std::vector<uint32_t>{12345}));
    const gpu::PayloadCheckOut out{d_done.as<unsigned>(),      d_out_key.as<unsigned long long>(),
                                   d_out_row.as<uint8_t>(),    d_counts.as<int64_t>(),
                                   d_counts.as<int64_t>() + 1, d_out_gen.as<uint32_t>()};
    auto d_table = RC_VALUE(gpu::Upload(slot_gens));
    gpu::PayloadLayout layout = LayoutOf(g, layer);
    if (table) {
      layout.generation_table = d_table.as<uint32_t>();
      layout.table_slots = static_cast<int64_t>(slot_gens.size());
    }
    RC_ASSERT_OK(gpu::LaunchCheckPayloadSlots(at, slot_rows, pages, ps, d_locs.as<int64_t>(),
                                              table ? nullptr : d_gens.as<uint32_t>(), n, layout,
                                              d_key.as<unsigned long long>(), nullptr, &out));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    if (n > 0) RC_ASSERT(RC_VALUE(gpu::Download<unsigned long long>(d_key.data(), 1))[0] == want);
    RC_ASSERT(RC_VALUE(gpu::Download<int64_t>(d_counts.data(), 2))[1] == (n > 0 ? counter : -1));
    RC_ASSERT(RC_VALUE(gpu::Download<unsigned long long>(d_out_key.data(), 1))[0] == want);
    if (want != UINT64_MAX) {
      const gpu::PayloadKey k = gpu::DecodePayloadKey(want, buffers);
      const int64_t width = g.buffers[k.buffer].row_bytes, i = k.byte / width;
      const int64_t row = row_of(static_cast<int>(k.rank), locs[i]);
      const std::vector<uint8_t> want_row =
          row < 0 ? std::vector<uint8_t>(width, 0)
                  : std::vector<uint8_t>(slots[k.rank][k.buffer].begin() + row * width,
                                         slots[k.rank][k.buffer].begin() + (row + 1) * width);
      RC_ASSERT(RC_VALUE(gpu::Download<uint8_t>(d_out_row.data(), static_cast<size_t>(width))) == want_row);
      RC_ASSERT(RC_VALUE(gpu::Download<uint32_t>(d_out_gen.data(), 1))[0] == gens[i]);
    }
    // More (rank, buffer) tensors than one launch takes are refused.
    std::vector<gpu::PayloadSlots> many(gpu::kMaxCheckedRanks + 1, at[0]);
    RC_ASSERT(gpu::LaunchCheckPayloadSlots(many, slot_rows, pages, ps, d_locs.as<int64_t>(), d_gens.as<uint32_t>(), n,
                                           LayoutOf(g, layer), d_key.as<unsigned long long>(), nullptr, &out)
                  .code() == StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(ok);
}

// A write's slots marked in a layer's generation table: every loc in the table takes the generation, a loc outside it
// (negative, past the end) is skipped, every other entry is left; duplicate locs too.
TEST(GpuPayload, MarkGenerationsSetsTheWrittenSlotsOnly) {
  KVSHARD_REQUIRE_GPUS(1);
  const bool ok = rc::check("LaunchMarkGenerations == host marking", [] {
    const int64_t slots = *rc::gen::inRange<int64_t>(0, 3000);
    const auto locs = *rc::gen::container<std::vector<int64_t>>(rc::gen::inRange<int64_t>(-3, slots + 3));
    const uint32_t generation = *rc::gen::element<uint32_t>(1, 2, 77, 4000000000u, UINT32_MAX);
    std::vector<uint32_t> table(static_cast<size_t>(slots) + 1);  // one guard entry past the table
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint32_t>(7 * i);
    std::vector<uint32_t> want = table;
    for (int64_t loc : locs) {
      if (loc >= 0 && loc < slots) want[loc] = generation;
    }
    auto d_table = RC_VALUE(gpu::Upload(table));
    auto d_locs = RC_VALUE(gpu::Upload(locs.empty() ? std::vector<int64_t>{0} : locs));
    RC_ASSERT_OK(gpu::LaunchMarkGenerations(d_table.as<uint32_t>(), slots, d_locs.as<int64_t>(),
                                            static_cast<int64_t>(locs.size()), generation, nullptr));
    RC_ASSERT_OK(gpu::SyncStream(nullptr));
    RC_ASSERT(RC_VALUE(gpu::Download<uint32_t>(d_table.data(), table.size())) == want);
  });
  EXPECT_TRUE(ok);
}

// A published check of no rows launches nothing and publishes "no difference".
TEST(GpuPayload, PublishedCheckOfNoRowsFindsNone) {
  KVSHARD_REQUIRE_GPUS(1);
  auto d_key = gpu::Upload(std::vector<unsigned long long>{UINT64_MAX, 7, 0});
  ASSERT_TRUE(d_key.ok()) << d_key.status().message();
  auto* words = d_key->as<unsigned long long>();
  const gpu::PayloadCheckOut out{reinterpret_cast<unsigned*>(words + 2), words + 1,
                                 reinterpret_cast<uint8_t*>(words + 2)};
  gpu::PayloadLayout layout;
  layout.widths = {16};
  ASSERT_TRUE(gpu::LaunchCheckPayloadRows(nullptr, 1, nullptr, nullptr, 0, layout, words, nullptr, &out).ok());
  ASSERT_TRUE(gpu::SyncStream(nullptr).ok());
  auto got = gpu::Download<unsigned long long>(d_key->data(), 3);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[1], UINT64_MAX);
}

}  // namespace
}  // namespace kvshard::props

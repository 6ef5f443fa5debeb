// Replay's payload rows on the device (gpu/payload_rows.h) against the host's (replay::PayloadRows, PayloadRowsOf):
// made rows are the host's bytes, and a check finds exactly the host's first difference (rank, then buffer, then
// byte) or none; one buffer of whole words and several buffers of odd widths, generation 0 (zero bytes). Skips
// without a GPU.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/pool_replay.h"
#include "gpu/device.h"
#include "gpu/payload_rows.h"
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
    std::vector<uint32_t> gens;
    for (int64_t i = 0; i < n; ++i) gens.push_back(*rc::gen::element<uint32_t>(0, 1, 2, 77, 4000000000u));
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
    const gpu::PayloadCheckOut out{d_done.as<unsigned>(), d_out_key.as<unsigned long long>(), d_out_row.as<uint8_t>()};
    RC_ASSERT_OK(gpu::LaunchCheckPayloadRows(d_rows.data(), ranks, d_locs.as<int64_t>(), d_gens.as<uint32_t>(), n,
                                             LayoutOf(g, layer), d_key.as<unsigned long long>(), nullptr,
                                             publish ? &out : nullptr));
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
      }
    }
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

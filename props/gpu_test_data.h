// Deterministic test payloads: row values encode (layer, slot) so a misplaced row is visible, generated from
// (seed, index) so CPU and GPU see identical inputs (nccl-tests style).
#ifndef KVSHARD_PROPS_GPU_TEST_DATA_H_
#define KVSHARD_PROPS_GPU_TEST_DATA_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/status.h"

namespace kvshard::props {

// Word w of the row of (layer, slot): layer in the top 16 bits, slot in the middle, word index at the bottom.
inline uint32_t RowWord(int64_t layer, int64_t slot, int64_t w) {
  return static_cast<uint32_t>((layer & 0xff) << 24) ^ static_cast<uint32_t>((slot & 0xffff) << 8) ^
         static_cast<uint32_t>(w & 0xff) ^ static_cast<uint32_t>((slot >> 16) * 0x9e3779b1u);
}

// Fills `row_bytes` bytes at dst with the row of (layer, slot).
inline void FillRow(uint8_t* dst, int64_t row_bytes, int64_t layer, int64_t slot) {
  for (int64_t b = 0; b < row_bytes; b += 4) {
    const uint32_t v = RowWord(layer, slot, b / 4);
    std::memcpy(dst + b, &v, static_cast<size_t>(std::min<int64_t>(4, row_bytes - b)));
  }
}

// The rows of (layer, slot) for each of `slots`, row-major, `row_bytes` each.
inline std::vector<uint8_t> RowsOf(const std::vector<int64_t>& slots, int64_t row_bytes, int64_t layer) {
  std::vector<uint8_t> out(slots.size() * row_bytes);
  for (size_t i = 0; i < slots.size(); ++i) FillRow(out.data() + i * row_bytes, row_bytes, layer, slots[i]);
  return out;
}

// Compares two row-major buffers; on mismatch returns "N rows differ; first row i: got 0x.. expected 0x..".
inline Status CompareRows(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int64_t row_bytes,
                          const std::string& what) {
  if (got.size() != want.size()) return Mismatch(what, ": size ", got.size(), " vs expected ", want.size());
  const int64_t rows = row_bytes ? static_cast<int64_t>(got.size()) / row_bytes : 0;
  int64_t wrong = 0, first = -1;
  for (int64_t r = 0; r < rows; ++r) {
    if (std::memcmp(got.data() + r * row_bytes, want.data() + r * row_bytes, row_bytes) != 0) {
      if (wrong++ == 0) first = r;
    }
  }
  if (wrong == 0) return Status::Ok();
  uint32_t g = 0, e = 0;
  std::memcpy(&g, got.data() + first * row_bytes, std::min<int64_t>(4, row_bytes));
  std::memcpy(&e, want.data() + first * row_bytes, std::min<int64_t>(4, row_bytes));
  return Mismatch(what, ": ", wrong, " of ", rows, " rows differ; first row ", first, ": got word0 0x", std::hex, g,
                  " expected 0x", e);
}

}  // namespace kvshard::props

// One rank's chunk write for the chunk-write properties: n chunk locs (at least one entry), a page_pos over `pages`
// pages of ps slots into a scratch of scratch_rows rows, and owner-scatter entries (owned, local) with their count.
// Every valid slot, scratch page and pool row is drawn without replacement (two writes of one row would race); the
// rest are misses (-1, a page past page_pos, a scratch page or pool row past the end), skipped and counted; owned
// entries past n and a count past n test that only n are read.
struct ChunkWritePlan {
  std::vector<int64_t> locs, owned, local;
  std::vector<int32_t> page_pos;
  int64_t count = 0;
};
inline ChunkWritePlan DrawChunkWritePlan(int64_t n, int64_t pages, int64_t ps, int64_t scratch_rows, int64_t pool_rows,
                                         std::mt19937_64& rng) {
  const auto distinct = [&](int64_t size) {
    std::vector<int64_t> v(size);
    for (int64_t i = 0; i < size; ++i) v[i] = i;
    std::shuffle(v.begin(), v.end(), rng);
    return v;
  };
  ChunkWritePlan plan;
  plan.locs.resize(std::max<int64_t>(1, n));
  plan.owned.resize(plan.locs.size());
  plan.local.resize(plan.locs.size());
  const std::vector<int64_t> slots = distinct(pages * ps), rows_left = distinct(pool_rows);
  size_t next_slot = 0, next_row = 0;
  for (int64_t& loc : plan.locs) {
    const int kind = *rc::gen::inRange(0, 5);
    loc = kind == 0 ? -1 : kind == 1 ? pages * ps : next_slot < slots.size() ? slots[next_slot++] : -1;
  }
  for (int64_t& x : plan.owned) x = *rc::gen::inRange<int64_t>(-1, n + 2);
  for (int64_t& x : plan.local) {
    const int kind = *rc::gen::inRange(0, 5);
    x = kind == 0 ? -1 : kind == 1 ? pool_rows : next_row < rows_left.size() ? rows_left[next_row++] : -1;
  }
  plan.count = *rc::gen::inRange<int64_t>(0, n + 3);
  const std::vector<int64_t> scratch_pages = distinct(pages + scratch_rows / ps);  // some past the scratch
  for (int64_t k = 0; k < pages; ++k) plan.page_pos.push_back(static_cast<int32_t>(scratch_pages[k]));
  return plan;
}

#endif  // KVSHARD_PROPS_GPU_TEST_DATA_H_

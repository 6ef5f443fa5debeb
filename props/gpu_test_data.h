// Deterministic test payloads: row values encode (layer, slot) so a misplaced row is visible, generated from
// (seed, index) so CPU and GPU see identical inputs (nccl-tests style).
#ifndef KVSHARD_PROPS_GPU_TEST_DATA_H_
#define KVSHARD_PROPS_GPU_TEST_DATA_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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

#endif  // KVSHARD_PROPS_GPU_TEST_DATA_H_

// The texts of read_diff_text.h.
#include "replay/read_diff_text.h"

#include "core/status.h"

namespace kvshard::replay {

std::string RowDiffText(const PoolGeometry& g, const std::vector<int64_t>& locs, size_t b, size_t i,
                        std::span<const uint8_t> got_row, std::span<const uint8_t> want_row) {
  const size_t width = static_cast<size_t>(g.buffers[b].row_bytes), row = i / width, j = i % width;
  if (!g.explicit_buffers) {  // words, as before buffers existed
    const size_t word = j / 4;
    uint32_t x = 0, y = 0;
    for (int k = 3; k >= 0; --k) {
      x = x << 8 | got_row[word * 4 + k];
      y = y << 8 | want_row[word * 4 + k];
    }
    return StrCat("locs[", row, "] (slot ", locs[row], ") word ", word, ": got ", x, ", expected ", y);
  }
  return StrCat("locs[", row, "] (slot ", locs[row], ") buffer ", g.buffers[b].name, " byte ", j, ": got ",
                static_cast<int>(got_row[j]), ", expected ", static_cast<int>(want_row[j]));
}

std::string FirstRowDiff(const ref::BufferRows& got, const ref::BufferRows& want, const PoolGeometry& g,
                         const std::vector<int64_t>& locs) {
  for (size_t b = 0; b < want.size(); ++b) {
    if (got[b] == want[b]) continue;
    size_t i = 0;
    while (got[b][i] == want[b][i]) ++i;
    const size_t width = static_cast<size_t>(g.buffers[b].row_bytes), at = i / width * width;
    return RowDiffText(g, locs, b, i, std::span<const uint8_t>(got[b]).subspan(at, width),
                       std::span<const uint8_t>(want[b]).subspan(at, width));
  }
  return "";
}

std::string SharedReadDiffers(int64_t layer, size_t rank, const std::string& where) {
  return StrCat("invariant: layer ", layer, " rank ", rank, ": the sharded read differs from the unsharded pool at ",
                where, " (the prefix gather or the chunk staging of this layer is wrong or stale)");
}

}  // namespace kvshard::replay

// PayloadRows against its definition: byte j of a slot's concatenated buffers is byte j % 4 (low first) of
// PayloadWord(seed, layer, slot, generation, j / 4), for buffers whose widths are not multiples of 4.
#include "replay/pool_replay.h"

#include <gtest/gtest.h>

namespace kvshard::replay {
namespace {

TEST(PayloadRowsTest, EveryByteIsItsPayloadWordsByte) {
  PoolGeometry g;
  g.payload_seed = 0x9e3779b97f4a7c15u;
  g.buffers = {{"k", 6}, {"v", 3}, {"x", 8}};
  const std::vector<int64_t> locs = {0, 7, 7, 1234567, 3};
  for (int64_t layer : {0, 5}) {
    for (int64_t generation : {0, 2}) {
      const ref::BufferRows rows = PayloadRows(g, layer, locs, generation);
      ASSERT_EQ(rows.size(), g.buffers.size());
      int64_t offset = 0, mismatches = 0;
      for (size_t b = 0; b < g.buffers.size(); ++b) {
        const int64_t width = g.buffers[b].row_bytes;
        ASSERT_EQ(rows[b].size(), locs.size() * static_cast<size_t>(width));
        for (size_t i = 0; i < locs.size(); ++i) {
          for (int64_t j = 0; j < width; ++j) {
            const uint32_t w = PayloadWord(g.payload_seed, layer, locs[i], generation, (offset + j) / 4);
            const uint8_t want = static_cast<uint8_t>(w >> (8 * ((offset + j) % 4)));
            const uint8_t got = rows[b][i * width + j];
            if (got != want && mismatches++ == 0) {
              ADD_FAILURE() << "buffer " << b << " row " << i << " byte " << j << ": got " << int{got} << ", expected "
                            << int{want};
            }
          }
        }
        offset += width;
      }
      EXPECT_EQ(mismatches, 0) << "layer " << layer << " generation " << generation;
    }
  }
  // Another generation, layer or slot gives another row.
  EXPECT_NE(PayloadRows(g, 0, {1}, 0)[0], PayloadRows(g, 0, {1}, 1)[0]);
  EXPECT_NE(PayloadRows(g, 0, {1}, 0)[0], PayloadRows(g, 1, {1}, 0)[0]);
  EXPECT_NE(PayloadRows(g, 0, {1}, 0)[0], PayloadRows(g, 0, {2}, 0)[0]);
}

}  // namespace
}  // namespace kvshard::replay

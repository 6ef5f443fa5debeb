// PayloadRows against its definition: byte j of a slot's concatenated buffers is byte j % 4 (low first) of
// PayloadWord(seed, layer, slot, generation, j / 4), for buffers whose widths are not multiples of 4. SlotRuns
// against a slot-by-slot reading of the same lists.
#include "replay/pool_replay.h"

#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

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

// A write's slots: runs of consecutive slots from anywhere around the pool (across page ends, starting below 0 or
// ending past the pool), single slots far outside it, repeats.
rc::Gen<std::vector<int64_t>> WriteSlots(int64_t slots) {
  const auto run = rc::gen::apply(
      [](int64_t first, int64_t len) {
        std::vector<int64_t> r;
        for (int64_t k = 0; k < len; ++k) r.push_back(first + k);
        return r;
      },
      rc::gen::inRange<int64_t>(-3, slots + 3), rc::gen::inRange<int64_t>(1, 40));
  const auto far = rc::gen::map(
      rc::gen::element(std::numeric_limits<int64_t>::min(), int64_t{-1}, slots, std::numeric_limits<int64_t>::max()),
      [](int64_t v) { return std::vector<int64_t>{v}; });
  return rc::gen::map(rc::gen::container<std::vector<std::vector<int64_t>>>(
                          rc::gen::weightedOneOf<std::vector<int64_t>>({{12, run}, {1, far}})),
                      [](const std::vector<std::vector<int64_t>>& parts) {
                        std::vector<int64_t> locs;
                        for (const std::vector<int64_t>& p : parts) locs.insert(locs.end(), p.begin(), p.end());
                        return locs;
                      });
}

RC_GTEST_PROP(SlotRunsProps, RunsAreTheMaximalSamePageStretchesAndTheFirstBadSlotIsNamed, ()) {
  const int64_t page_size = *rc::gen::inRange<int64_t>(1, 9);
  const int64_t slots = page_size * *rc::gen::inRange<int64_t>(1, 9);
  const std::vector<int64_t> locs = *WriteSlots(slots);
  std::vector<SlotRun> runs = {{7, 7}};  // what a reused list held before
  const int64_t bad = SlotRuns(locs, page_size, slots, &runs);
  int64_t want_bad = -1;
  for (size_t i = 0; i < locs.size() && want_bad < 0; ++i) {
    if (locs[i] < 0 || locs[i] >= slots) want_bad = static_cast<int64_t>(i);
  }
  RC_ASSERT(bad == want_bad);
  if (bad >= 0) return;
  std::vector<int64_t> expanded;
  for (size_t r = 0; r < runs.size(); ++r) {
    const SlotRun& run = runs[r];
    RC_ASSERT(run.len >= 1);
    RC_ASSERT(run.first / page_size == (run.first + run.len - 1) / page_size);  // one page
    if (r > 0) {  // maximal: a run does not continue the one before on its page
      const SlotRun& before = runs[r - 1];
      RC_ASSERT(!(run.first == before.first + before.len && run.first % page_size != 0));
    }
    for (int64_t k = 0; k < run.len; ++k) expanded.push_back(run.first + k);
  }
  RC_ASSERT(expanded == locs);
}

}  // namespace
}  // namespace kvshard::replay

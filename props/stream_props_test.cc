// End-to-end properties on random request streams (spec §6): sharded reads of prefix and chunk rows equal
// the unsharded baseline for every layer, rank and buffer (one-buffer, MHA K/V, MLA, MLA + extras); every cached prefix stays cyclic; pages are conserved.
// (The pool's and the radix cache's own properties live in pool_props_test.cc and radix_props_test.cc.)
#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/rounds.h"
#include "props/stream_driver.h"

namespace kvshard::props {
namespace {

StreamConfig DrawStreamConfig(int64_t max_docs) {
  StreamConfig c;
  c.shard_size = DrawShardSize();
  c.page_size = *rc::gen::element<int64_t>(1, 1, 2, 3, 4, 8);
  c.pages_per_rank = *rc::gen::inRange<int64_t>(1, 16);  // small pools: exhausted classes, evictions, defers
  c.num_layers = *rc::gen::inRange<int64_t>(1, 5);
  c.row_words = *rc::gen::inRange<int64_t>(1, 3);
  c.buffers = DrawPoolBuffers();
  c.max_batch = *rc::gen::inRange<int64_t>(1, 5);
  c.max_len = *rc::gen::inRange<int64_t>(1, 4 * c.shard_size * c.page_size + 2);
  c.need_sort = *rc::gen::arbitrary<bool>();
  const int64_t docs = *rc::gen::inRange<int64_t>(1, max_docs + 1);
  c.shared.push_back(c.max_len);
  for (int64_t d = 1; d < docs; ++d) c.shared.push_back(*rc::gen::inRange<int64_t>(0, c.max_len + 1));
  return c;
}

std::vector<StreamRequest> DrawStep(const StreamConfig& c) {
  std::vector<StreamRequest> step(*rc::gen::inRange<int64_t>(1, c.max_batch + 1));
  for (StreamRequest& r : step) {
    r.doc = *rc::gen::inRange<int64_t>(0, static_cast<int64_t>(c.shared.size()));
    r.len = *rc::gen::inRange<int64_t>(1, c.max_len + 1);
  }
  return step;
}

// Draws at full size (f is re-run while shrinking, so it must capture by value): RapidCheck scales ranges
// with a size that starts at 0, which would make most streams trivial; the edges (N = 1, ps = 1, one
// request, one step) are still drawn by the full-range choices.
template <typename F>
auto Full(F f) {
  return *rc::gen::resize(100, rc::gen::exec(f));
}

void RunStream(int64_t max_docs, int64_t max_steps) {
  const StreamConfig c = Full([max_docs] { return DrawStreamConfig(max_docs); });
  RC_LOG() << "stream: N=" << c.shard_size << " ps=" << c.page_size << " pages_per_rank=" << c.pages_per_rank
           << " layers=" << c.num_layers << " buffers=" << c.buffers.size() << " need_sort=" << c.need_sort << " shared=" << rc::toString(c.shared)
           << "\n";
  const std::unique_ptr<StreamDriver> driver = RC_VALUE(StreamDriver::Create(c));
  const int64_t steps = Full([max_steps] { return *rc::gen::inRange<int64_t>(1, max_steps + 1); });
  for (int64_t s = 0; s < steps; ++s) {
    const std::vector<StreamRequest> step = Full([c] { return DrawStep(c); });
    RC_LOG() << "step " << s << ":";
    for (const StreamRequest& r : step) RC_LOG() << " (doc " << r.doc << ", len " << r.len << ")";
    RC_LOG() << "\n";
    RC_ASSERT_OK(driver->Step(step));
    RC_ASSERT_OK(driver->CheckInvariants());
  }
  RC_TAG(driver->stats().prefix_hits > 0 ? "prefix hit" : "no prefix hit");
  RC_TAG(driver->stats().deferred + driver->stats().evicted_pages > 0 ? "pool exhausted" : "pool roomy");
  RC_TAG(driver->stats().declined > 0 ? "insert declined" : "no insert declined");
  RC_TAG(c.buffers.empty() ? "one-buffer word pool" : StrCat(c.buffers.size(), "-buffer pool"));
}

// 3 rounds x RC_PARAMS max_success streams each.
TEST(StreamProps, ShardedReadsEqualUnshardedOnRandomStreams) {
  CheckRounds("StreamProps.ShardedReadsEqualUnshardedOnRandomStreams", 3, [] { RunStream(4, 24); });
}

// Many requests of a few documents per step: same-token chains under different bases race to the cache,
// so the graft-declined rule is exercised constantly.
TEST(StreamProps, CachedPrefixesStayCyclicUnderInsertRaces) {
  CheckRounds("StreamProps.CachedPrefixesStayCyclicUnderInsertRaces", 3, [] { RunStream(2, 32); });
}

}  // namespace
}  // namespace kvshard::props

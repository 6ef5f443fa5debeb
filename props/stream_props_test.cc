// End-to-end properties on random request streams (spec §6): sharded reads of prefix and chunk rows equal
// the unsharded baseline for every layer, rank and buffer (one-buffer, MHA K/V, MLA, MLA + extras); every cached prefix
// stays cyclic; pages are conserved. (The pool's and the radix cache's own properties live in pool_props_test.cc and
// radix_props_test.cc.)
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
#include "props/stream_generators.h"

namespace kvshard::props {
namespace {

void RunStream(int64_t max_docs, int64_t max_steps) {
  const StreamConfig c = Full([max_docs] { return DrawStreamConfig(max_docs); });
  RC_LOG() << "stream: N=" << c.shard_size << " ps=" << c.page_size << " pages_per_rank=" << c.pages_per_rank
           << " layers=" << c.num_layers << " buffers=" << c.buffers.size() << " need_sort=" << c.need_sort
           << " shared=" << rc::toString(c.shared) << "\n";
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

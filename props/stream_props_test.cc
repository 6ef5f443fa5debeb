// End-to-end properties on random request streams (spec §6): sharded reads of prefix and chunk rows equal
// the unsharded baseline for every layer and rank; every cached prefix stays cyclic; pages are conserved.
// Plus the layer-ahead residency protocol and owner-filtered writes of the sharded pool.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "cpu_ref/radix_cache.h"
#include "cpu_ref/sharded_pool.h"
#include "props/pool_generators.h"
#include "props/rounds.h"
#include "props/stream_driver.h"

namespace kvshard::props {
namespace {

using V = std::vector<int64_t>;

StreamConfig DrawStreamConfig(int64_t max_docs) {
  StreamConfig c;
  c.shard_size = DrawShardSize();
  c.page_size = *rc::gen::element<int64_t>(1, 1, 2, 3, 4, 8);
  c.pages_per_rank = *rc::gen::inRange<int64_t>(1, 16);  // small pools: exhausted classes, evictions, defers
  c.num_layers = *rc::gen::inRange<int64_t>(1, 5);
  c.row_words = *rc::gen::inRange<int64_t>(1, 3);
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

// Draws at full size (f is re-run while shrinking, so it must capture by value): RapidCheck scales ranges with a size that starts at 0, which would make most streams
// trivial; the edges (N = 1, ps = 1, one request, one step) are still drawn by the full-range choices.
template <typename F>
auto Full(F f) {
  return *rc::gen::resize(100, rc::gen::exec(f));
}

void RunStream(int64_t max_docs, int64_t max_steps) {
  const StreamConfig c = Full([max_docs] { return DrawStreamConfig(max_docs); });
  RC_LOG() << "stream: N=" << c.shard_size << " ps=" << c.page_size << " pages_per_rank=" << c.pages_per_rank
           << " layers=" << c.num_layers << " need_sort=" << c.need_sort << " shared=" << rc::toString(c.shared)
           << "\n";
  StreamDriver driver(c);
  const int64_t steps = Full([max_steps] { return *rc::gen::inRange<int64_t>(1, max_steps + 1); });
  for (int64_t s = 0; s < steps; ++s) {
    const std::vector<StreamRequest> step = Full([c] { return DrawStep(c); });
    RC_LOG() << "step " << s << ":";
    for (const StreamRequest& r : step) RC_LOG() << " (doc " << r.doc << ", len " << r.len << ")";
    RC_LOG() << "\n";
    const Status st = driver.Step(step);
    if (!st.ok()) RC_LOG() << "-> " << st.ToString() << "\n";
    RC_ASSERT(st.ok());
    const Status inv = driver.CheckInvariants();
    if (!inv.ok()) RC_LOG() << "-> " << inv.ToString() << "\n";
    RC_ASSERT(inv.ok());
  }
  RC_TAG(driver.stats().prefix_hits > 0 ? "prefix hit" : "no prefix hit");
  RC_TAG(driver.stats().deferred + driver.stats().evicted_pages > 0 ? "pool exhausted" : "pool roomy");
  RC_TAG(driver.stats().declined > 0 ? "insert declined" : "no insert declined");
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

// The graft rule in isolation: two chains of the same tokens; inserting the second is declined iff its
// base differs from the first's, and only then are all its pages freed.
RC_GTEST_PROP(RadixProps, InsertDeclinedIffMatchedChainHasAnotherBase, ()) {
  const int64_t n = DrawShardSize(), ps = DrawPageSize();
  auto a = ref::PageInterleaveAllocator::Create({n, ps, 16}).value();
  ref::RadixCache cache(&a);
  const int64_t len1 = *rc::gen::inRange<int64_t>(1, 4 * n * ps), len2 = *rc::gen::inRange<int64_t>(1, 4 * n * ps);
  V tokens(std::max(len1, len2));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i);
  const int64_t b1 = *rc::gen::inRange<int64_t>(0, n), b2 = *rc::gen::inRange<int64_t>(0, n);
  ref::ExtendPages out;
  RC_ASSERT(a.AllocExtend({{0, 0}, {len1, len2}, {b1, b2}, {0, 0}}, &out).value());
  const V p1(out.pages.begin(), out.pages.begin() + out.offsets[1]), p2(out.pages.begin() + out.offsets[1], out.pages.end());
  RC_ASSERT(cache.Insert(V(tokens.begin(), tokens.begin() + len1), p1, b1).ok());
  const int64_t full1 = len1 / ps, full2 = len2 / ps;
  auto ins = cache.Insert(V(tokens.begin(), tokens.begin() + len2), p2, b2);
  RC_ASSERT(ins.ok());
  const bool overlap = full1 > 0 && full2 > 0;
  RC_ASSERT(ins->declined == (overlap && b1 != b2));
  RC_ASSERT(ins->freed_pages == (ins->declined ? full2 : std::min(full1, full2)));
  RC_ASSERT(cache.cached_pages() == (ins->declined ? full1 : std::max(full1, full2)));
  RC_ASSERT(cache.CheckInvariants().ok());
}

// The layer-ahead protocol: reading layer l needs slot l % 2 to hold (l, epoch); it kicks layer l + 1.
RC_GTEST_PROP(PoolProps, ResidencyMissesExactlyWhenLayerAheadOrderIsBroken, ()) {
  const ExtendBatch b = DrawFullSizeBatch();
  const int64_t layers = *rc::gen::inRange<int64_t>(1, 6);
  ref::ShardedPool pool = ref::ShardedPool::Create({b.shard_size, b.page_size, b.pool_pages_per_rank,
                                                     b.max_prefix_tokens, b.chunk_tokens, layers, 1})
                              .value();
  RC_ASSERT(pool.BeginShardExtend(b.requests).ok());
  const bool has_prefix = pool.plan().block_pages > 0;
  std::pair<int64_t, int64_t> model[2] = {{has_prefix ? 0 : -1, has_prefix ? 1 : -1}, {-1, -1}};
  const auto reads = *rc::gen::container<V>(rc::gen::inRange<int64_t>(0, layers));
  for (int64_t l : reads) {
    const bool resident = !has_prefix || model[l % 2] == std::pair<int64_t, int64_t>{l, 1};
    auto got = pool.Read(l, {0});
    RC_ASSERT(got.ok() == resident);
    if (!resident) {
      RC_ASSERT(got.status().message().find("prefix scratch miss for layer") != std::string::npos);
      continue;
    }
    if (l + 1 < layers) model[(l + 1) % 2] = {l + 1, 1};
    RC_ASSERT(pool.resident_key(b.shard_size - 1, (l + 1) % 2) == (l + 1 < layers ? model[(l + 1) % 2]
                                                                               : pool.resident_key(0, (l + 1) % 2)));
  }
}

// Owner-filtered writes: the owner's local row holds the row, every other rank's row is untouched; the
// owner filter is computed once per (locs, epoch).
RC_GTEST_PROP(PoolProps, WritesPersistOnlyOwnedRowsWithCachedWritePlan, ()) {
  const int64_t n = DrawShardSize(), ps = DrawPageSize(), ppr = *rc::gen::inRange<int64_t>(1, 9);
  const int64_t layers = *rc::gen::inRange<int64_t>(1, 4);
  ref::ShardedPool pool = ref::ShardedPool::Create({n, ps, ppr, 0, 0, layers, 1}).value();
  auto locs = *rc::gen::container<V>(rc::gen::inRange<int64_t>(0, n * ppr * ps));
  std::sort(locs.begin(), locs.end());
  locs.erase(std::unique(locs.begin(), locs.end()), locs.end());
  for (int64_t l = 0; l < layers; ++l) RC_ASSERT(pool.Write(l, locs, ref::RowValues(l, locs, 3, 1)).ok());
  RC_ASSERT(pool.write_plan_builds() == 1);
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t loc : locs) {
      const int64_t owner = (loc % (n * ps)) / ps, row = (loc / (n * ps)) * ps + loc % ps;
      RC_ASSERT(pool.LocalRow(owner, l, row)[0] == ref::RowValue(l, loc, 3, 0));
      for (int64_t r = 0; r < n; ++r) {
        if (r == owner) continue;
        const int64_t other = (row / ps) * n * ps + r * ps + row % ps;  // the loc rank r stores at `row`
        const bool written = std::binary_search(locs.begin(), locs.end(), other);
        RC_ASSERT(pool.LocalRow(r, l, row)[0] == (written ? ref::RowValue(l, other, 3, 0) : 0u));
      }
    }
  }
}

}  // namespace
}  // namespace kvshard::props

// Range-bound properties (spec §1-3): the sharded pool's locs and layers, the allocator's free slots, rotation
// bases and pages_per_rank, an extend batch's pages_per_rank, translate's locs, extend pages and the scratch
// capacities, each exactly at the bound
// and up to N*ps beyond it: in range works; out of range is an error naming the field, leaving the state unchanged.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/alloc_script.h"
#include "core/gather_plan.h"
#include "core/pool_json.h"
#include "cpu_ref/allocator.h"
#include "cpu_ref/gather_plan.h"
#include "cpu_ref/sharded_pool.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

using ref::ExtendPages;
using ref::PageInterleaveAllocator;
using ref::ShardedPool;
using ref::ShardedPoolConfig;
using V = std::vector<int64_t>;

// Observable state as named integer lists, so a difference is reported by name.
using State = std::vector<std::pair<std::string, V>>;

// "" when equal, else the first field that differs and where.
std::string FirstDifference(const State& before, const State& after) {
  if (before.size() != after.size()) return "the observed field sets differ";
  for (size_t f = 0; f < before.size(); ++f) {
    const V& a = before[f].second;
    const V& b = after[f].second;
    if (before[f].first != after[f].first) return "field order differs at " + before[f].first;
    if (a == b) continue;
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return StrCat(before[f].first, " changed at [", i, "]: ", i < a.size() ? std::to_string(a[i]) : "end", " -> ",
                  i < b.size() ? std::to_string(b[i]) : "end", " (sizes ", a.size(), " -> ", b.size(), ")");
  }
  return "";
}

// Fails unless `s` is an error whose message starts with "<field>:" and mentions `bound_text` (the violated range).
void AssertNamedError(const Status& s, const std::string& field, const std::string& bound_text) {
  RC_ASSERT(!s.ok());
  RC_LOG() << "error: " << s.ToString() << "\n";
  RC_ASSERT(s.message().rfind(field + ":", 0) == 0);
  RC_ASSERT(s.message().find(bound_text) != std::string::npos);
}

// "[lo, hi)" as the range messages print it.
std::string Range(int64_t lo, int64_t hi) { return StrCat("[", lo, ", ", hi, ")"); }

// An offset k in [0, N*ps] past a bound, biased to its ends (k = 0 is the bound itself).
int64_t DrawBeyond(int64_t n, int64_t ps) {
  return *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::just<int64_t>(0)},
                                           {1, rc::gen::just<int64_t>(1)},
                                           {1, rc::gen::just<int64_t>(n * ps)},
                                           {3, rc::gen::inRange<int64_t>(0, n * ps + 1)}});
}

// A value outside [lo, hi): hi + k mostly, sometimes lo - 1 - k.
int64_t DrawOutside(int64_t lo, int64_t hi, int64_t n, int64_t ps) {
  const int64_t k = DrawBeyond(n, ps);
  return *rc::gen::inRange(0, 8) == 0 ? lo - 1 - k : hi + k;
}

// `valid` with `bad` inserted at a random index; *index receives it.
V WithBadAt(V valid, int64_t bad, size_t* index) {
  *index = *rc::gen::inRange<size_t>(0, valid.size() + 1);
  valid.insert(valid.begin() + static_cast<int64_t>(*index), bad);
  return valid;
}

// Up to three values drawn from [lo, hi).
V DrawValid(int64_t lo, int64_t hi) {
  return *rc::gen::container<V>(*rc::gen::inRange<size_t>(0, 4), rc::gen::inRange<int64_t>(lo, hi));
}

// Token slots of a batch's prefix pages and of its chunk (the extend's rows).
void BatchLocs(const ExtendBatch& b, V* prefix, V* chunk) {
  const int64_t ps = b.page_size;
  for (const ExtendRequest& r : b.requests) {
    for (int64_t off = 0; off < r.seq_len; ++off) {
      (off < r.prefix_len ? prefix : chunk)->push_back(r.pages[off / ps] * ps + off % ps);
    }
  }
}

ShardedPoolConfig PoolConfigOf(const ExtendBatch& b, int64_t layers, int64_t row_words) {
  return {b.shard_size, b.page_size, b.pages_per_rank, b.max_prefix_tokens, b.chunk_tokens, layers, row_words};
}

// Everything a ShardedPool shows: persisted rows, residency keys, counters, the plan, and what reading each
// resident layer returns (on a copy: a read prefetches).
State ObservePool(const ShardedPool& pool, const ShardedPoolConfig& c) {
  State st;
  V rows, keys;
  for (int64_t r = 0; r < c.shard_size; ++r) {
    for (int64_t l = 0; l < c.num_layers; ++l) {
      for (int64_t i = 0; i < (c.pages_per_rank + 1) * c.page_size; ++i) {
        for (uint32_t w : pool.LocalRow(r, l, i)) rows.push_back(w);
      }
    }
    for (int64_t s = 0; s < 2; ++s) {
      keys.push_back(pool.resident_key(r, s).first);
      keys.push_back(pool.resident_key(r, s).second);
    }
  }
  st.emplace_back("pool rows", rows);
  st.emplace_back("resident keys", keys);
  st.emplace_back("epoch", V{pool.epoch()});
  st.emplace_back("active", V{pool.active()});
  st.emplace_back("write_plan_builds", V{pool.write_plan_builds()});
  st.emplace_back("gathers", V{pool.gathers()});
  st.emplace_back("plan", V{});
  for (char ch : GatherPlanToJson(pool.plan()).dump()) st.back().second.push_back(ch);
  V all_locs(c.shard_size * (c.pages_per_rank + 1) * c.page_size);
  for (size_t i = 0; i < all_locs.size(); ++i) all_locs[i] = static_cast<int64_t>(i);
  for (int64_t s = 0; s < 2; ++s) {
    const auto [layer, epoch] = pool.resident_key(0, s);
    V got;
    if (pool.active() && layer >= 0 && epoch == pool.epoch()) {
      ShardedPool copy = pool;
      for (const std::vector<uint32_t>& rank_rows : RC_VALUE(copy.Read(layer, all_locs))) {
        got.insert(got.end(), rank_rows.begin(), rank_rows.end());
      }
    }
    st.emplace_back("scratch slot " + std::to_string(s) + " as read", got);
  }
  return st;
}

// The sharded pool's locs are bounded by N*(pages_per_rank+1)*ps and its layers by num_layers: the last slot of
// the last layer is written and read; a loc or layer at the bound or up to N*ps beyond it (or negative) fails
// Write and Read naming locs[i] / layer, and the pool's whole observable state is unchanged.
KVSHARD_PROP(BoundsProps, ShardedPoolLocsAndLayersAtAndBeyondTheBound, ()) {
  const ExtendBatch b = DrawFullSizeBatch();
  RC_LOG() << "batch: " << ExtendBatchToJson(b).dump() << "\n";
  const ShardedPoolConfig c = PoolConfigOf(b, *rc::gen::inRange<int64_t>(1, 4), *rc::gen::inRange<int64_t>(1, 3));
  const int64_t n = c.shard_size, ps = c.page_size, layers = c.num_layers, w = c.row_words;
  const int64_t limit = n * (c.pages_per_rank + 1) * ps;
  ShardedPool pool = RC_VALUE(ShardedPool::Create(c));
  // History: persist the prefix rows of every layer, begin the batch, stage and read layers in layer-ahead order.
  V prefix, chunk;
  BatchLocs(b, &prefix, &chunk);
  for (int64_t l = 0; l < layers; ++l) RC_ASSERT_OK(pool.Write(l, prefix, ref::RowValues(l, prefix, 1, w)));
  RC_ASSERT_OK(pool.BeginShardExtend(b.requests));
  const int64_t reads = *rc::gen::inRange<int64_t>(0, layers + 1);
  for (int64_t l = 0; l < reads; ++l) {
    RC_ASSERT_OK(pool.Write(l, chunk, ref::RowValues(l, chunk, 2, w)));
    V locs = prefix;
    locs.insert(locs.end(), chunk.begin(), chunk.end());
    RC_VALUE(pool.Read(l, locs));
  }
  const int64_t readable = std::min(reads, layers - 1);  // the layer whose slot the last prefetch filled
  const State before = ObservePool(pool, c);
  // Out of range: a bad loc at a random index among valid ones, then a bad layer.
  size_t i = 0;
  const V bad_locs = WithBadAt(DrawValid(0, limit), DrawOutside(0, limit, n, ps), &i);
  const V good_locs = DrawValid(0, limit);
  const int64_t bad_layer = DrawOutside(0, layers, n, ps);
  RC_LOG() << "bad locs " << rc::toString(bad_locs) << ", bad layer " << bad_layer << " with locs "
           << rc::toString(good_locs) << ", readable layer " << readable << "\n";
  AssertNamedError(pool.Write(*rc::gen::inRange<int64_t>(0, layers), bad_locs, ref::RowValues(0, bad_locs, 4, w)),
                   StrCat("locs[", i, "]"), Range(0, limit));
  RC_ASSERT(FirstDifference(before, ObservePool(pool, c)) == "");
  AssertNamedError(pool.Read(readable, bad_locs).status(), StrCat("locs[", i, "]"), Range(0, limit));
  RC_ASSERT(FirstDifference(before, ObservePool(pool, c)) == "");
  AssertNamedError(pool.Write(bad_layer, good_locs, ref::RowValues(0, good_locs, 4, w)), "layer", Range(0, layers));
  RC_ASSERT(FirstDifference(before, ObservePool(pool, c)) == "");
  AssertNamedError(pool.Read(bad_layer, good_locs).status(), "layer", Range(0, layers));
  RC_ASSERT(FirstDifference(before, ObservePool(pool, c)) == "");
  // In range: the last slot (rank N-1's last local row) of the last layer is written and read back.
  const std::vector<uint32_t> row = ref::RowValues(layers - 1, {limit - 1}, 5, w);
  RC_ASSERT_OK(pool.Write(layers - 1, {limit - 1}, row));
  RC_ASSERT(pool.LocalRow(n - 1, layers - 1, (c.pages_per_rank + 1) * ps - 1) == row);
  const std::vector<std::vector<uint32_t>> got = RC_VALUE(pool.Read(readable, {limit - 1}));
  RC_ASSERT(static_cast<int64_t>(got.size()) == n);
  if (readable == layers - 1) {  // staged at translate(limit - 1) of this layer's slot on every rank
    for (const std::vector<uint32_t>& rank_row : got) RC_ASSERT(rank_row == row);
  }
}

// Everything an allocator shows: free and release lists, allocation bits, sizes, the open group, and the lists
// after closing the group (on a copy), which reveal its queued frees.
State ObserveAllocator(const PageInterleaveAllocator& a) {
  State st;
  const int64_t n = a.config().shard_size;
  for (int64_t c = 0; c < n; ++c) {
    st.emplace_back("free_list(" + std::to_string(c) + ")", a.free_list(c));
    st.emplace_back("release_list(" + std::to_string(c) + ")", a.release_list(c));
  }
  V allocated;
  for (int64_t p = 0; p < a.num_logical_pages(); ++p) allocated.push_back(a.is_allocated(p));
  st.emplace_back("allocated", allocated);
  st.emplace_back("class_free_page_counts", a.class_free_page_counts());
  st.emplace_back("sizes", V{a.available_size(), a.aggregate_free_size(), a.least_full_class(), a.in_free_group()});
  if (a.in_free_group()) {
    PageInterleaveAllocator closed = a;
    RC_ASSERT_OK(closed.FreeGroupEnd());
    for (auto& [name, values] : ObserveAllocator(closed)) st.emplace_back("after group end: " + name, values);
  }
  return st;
}

// Free's slots are bounded by num_logical_pages*ps: the last slot frees; a slot at the bound or up to N*ps beyond
// (or negative), among valid slots, fails the whole call naming locs[i]. Rotation bases are bounded by N: N-1
// allocates (or defers) from class N-1; N + k fails naming rotation_bases[i]. State unchanged on every error,
// inside a free group too (a rejected free queues nothing).
KVSHARD_PROP(BoundsProps, AllocatorFreeSlotsAndRotationBasesAtAndBeyondTheBound, ()) {
  const int64_t n = DrawShardSize(), ps = DrawPageSize(), pages_per_rank = *rc::gen::inRange<int64_t>(1, 6);
  const bool need_sort = *rc::gen::arbitrary<bool>();
  PageInterleaveAllocator a = RC_VALUE(PageInterleaveAllocator::Create({n, ps, pages_per_rank, need_sort, false}));
  const int64_t bound = a.num_logical_pages() * ps, last_page = a.num_logical_pages() - 1;
  RC_ASSERT(bound == n * (pages_per_rank + 1) * ps);
  // Allocate every page (one new chain), then free a random subset other than the last page, maybe in an open group.
  ExtendPages pages;
  RC_ASSERT(RC_VALUE(a.AllocExtend({{0}, {n * pages_per_rank * ps}, {kNewChain}, {0}}, &pages)));
  RC_ASSERT(a.is_allocated(last_page));
  const bool group = *rc::gen::arbitrary<bool>();
  std::set<int64_t> freed;
  V still_allocated;  // one slot of each page that stays allocated (and is not queued)
  for (int64_t p = n; p < last_page; ++p) {
    if (*rc::gen::inRange(0, 3) == 0) {
      freed.insert(p);
    } else {
      still_allocated.push_back(p * ps + *rc::gen::inRange<int64_t>(0, ps));
    }
  }
  if (group) RC_ASSERT_OK(a.FreeGroupBegin());
  for (int64_t p : freed) RC_ASSERT_OK(a.Free({p * ps + *rc::gen::inRange<int64_t>(0, ps)}));
  RC_LOG() << "N=" << n << " ps=" << ps << " pages_per_rank=" << pages_per_rank << " need_sort=" << need_sort
           << " group_open=" << group << " freed pages: " << rc::toString(freed) << "\n";
  const State before = ObserveAllocator(a);
  // Free: a bad slot among valid ones rejects the whole call.
  V valid;
  for (int64_t k = *rc::gen::inRange(0, 4); k > 0 && !still_allocated.empty(); --k) {
    valid.push_back(still_allocated[*rc::gen::inRange<size_t>(0, still_allocated.size())]);
  }
  size_t i = 0;
  const V bad = WithBadAt(valid, DrawOutside(0, bound, n, ps), &i);
  RC_LOG() << "free " << rc::toString(bad) << " (bound " << bound << ")\n";
  AssertNamedError(a.Free(bad), StrCat("locs[", i, "]"), Range(0, bound));
  RC_ASSERT(FirstDifference(before, ObserveAllocator(a)) == "");
  // Rotation bases: one request with a base N + k (or negative, not null) among requests with valid bases.
  AllocBatch batch;
  const size_t reqs = *rc::gen::inRange<size_t>(1, 4), bad_req = *rc::gen::inRange<size_t>(0, reqs);
  for (size_t q = 0; q < reqs; ++q) {
    batch.prefix_lens.push_back(0);
    batch.seq_lens.push_back(*rc::gen::inRange<int64_t>(1, 2 * ps + 1));
    batch.rotation_bases.push_back(q == bad_req
                                       ? *rc::gen::inRange(0, 8) == 0 ? -2 - DrawBeyond(n, ps) : n + DrawBeyond(n, ps)
                                       : *rc::gen::inRange<int64_t>(-1, n));
    batch.last_locs.push_back(0);
  }
  RC_LOG() << "alloc_extend rotation_bases " << rc::toString(batch.rotation_bases) << "\n";
  AssertNamedError(a.AllocExtend(batch, &pages).status(), StrCat("rotation_bases[", bad_req, "]"), Range(0, n));
  RC_ASSERT(FirstDifference(before, ObserveAllocator(a)) == "");
  // In range: base N-1 draws its first page from class N-1 (or the batch defers, state unchanged).
  const bool allocated = RC_VALUE(a.AllocExtend({{0}, {ps}, {n - 1}, {0}}, &pages));
  if (allocated) {
    RC_ASSERT(pages.pages.size() == 1u && pages.pages[0] % n == n - 1);
  } else {
    RC_ASSERT(FirstDifference(before, ObserveAllocator(a)) == "");
  }
  // In range: the pool's last slot frees its page (the last page of class N-1).
  RC_ASSERT_OK(a.Free({bound - 1}));
  if (group) RC_ASSERT_OK(a.FreeGroupEnd());
  RC_ASSERT(!a.is_allocated(last_page));
  const V head = need_sort ? a.release_list(n - 1) : a.free_list(n - 1);
  RC_ASSERT(std::find(head.begin(), head.end(), last_page) != head.end());
}

// pages_per_rank is bounded by 2^24 / N (N*(pages_per_rank+1) logical pages): one below the limit creates an
// allocator of exactly that many pages; at the limit, up to N*ps beyond it or negative is an error naming it.
KVSHARD_PROP(BoundsProps, AllocatorPagesPerRankAtItsLimit, ()) {
  const int64_t n = *rc::gen::weightedOneOf<int64_t>(
      {{3, rc::gen::element<int64_t>(1, 2, 3, 8, 1 << 16)}, {1, rc::gen::inRange<int64_t>(1, (1 << 16) + 1)}});
  const int64_t ps = DrawPageSize(), limit = kMaxPoolLogicalPages / n;
  const int64_t bad = DrawOutside(0, limit, n, ps);
  RC_LOG() << "N=" << n << " pages_per_rank=" << bad << " (limit " << limit << ")\n";
  AssertNamedError(PageInterleaveAllocator::Create({n, ps, bad, false, false}).status(), "pages_per_rank",
                   Range(0, limit));
  // Creating 2^24 logical pages takes about half a second: one case in 200 builds it (drawn at full size, so
  // RapidCheck's small early sizes do not favour it).
  const bool build = *rc::gen::resize(100, rc::gen::inRange(0, 200)) == 0;
  RC_CLASSIFY(build, "created at limit - 1");
  if (build) {
    const PageInterleaveAllocator a = RC_VALUE(PageInterleaveAllocator::Create({n, ps, limit - 1, false, false}));
    RC_ASSERT(a.num_logical_pages() == n * limit);
    RC_ASSERT(a.class_free_page_counts() == V(n, limit - 1));
  }
}

// An extend batch's pages_per_rank is bounded by 2^24 / N - 1 (page_pos has N*(pages_per_rank+2) entries): one
// below the limit validates and plans a chunk on the last allocatable page N*(pages_per_rank+1) - 1; at the limit,
// up to N*ps beyond it or negative fails ValidateExtendBatch and the planner naming pages_per_rank.
KVSHARD_PROP(BoundsProps, ExtendBatchPagesPerRankAtItsLimit, ()) {
  const int64_t n = *rc::gen::weightedOneOf<int64_t>(
      {{3, rc::gen::element<int64_t>(1, 2, 3, 8, 1 << 16)}, {1, rc::gen::inRange<int64_t>(1, (1 << 16) + 1)}});
  const int64_t ps = DrawPageSize(), limit = kMaxPoolLogicalPages / n - 1;
  ExtendBatch b{n, ps, limit - 1, 0, ps, {{0, ps, {n * limit - 1}}}};
  ref::GatherPlanner planner;
  GatherPlan plan;
  RC_ASSERT_OK(ValidateExtendBatch(b));
  RC_ASSERT_OK(planner.Build(b, &plan));
  RC_ASSERT(plan.page_pos_size == n * (limit + 1) && plan.page_pos_size <= kMaxPoolLogicalPages);
  RC_ASSERT(plan.mapped_pages == V{n * limit - 1});
  b.pages_per_rank = DrawOutside(0, limit, n, ps);
  b.requests.clear();
  RC_LOG() << "N=" << n << " pages_per_rank=" << b.pages_per_rank << " (limit " << limit << ")\n";
  AssertNamedError(ValidateExtendBatch(b), "pages_per_rank", Range(0, limit));
  GatherPlan out = plan;
  AssertNamedError(planner.Build(b, &out), "pages_per_rank", Range(0, limit));
  RC_ASSERT(out == plan);
}

// Translate's locs are bounded by page_pos_size*ps: the last slot translates to the trash page; a loc at the bound
// or up to N*ps beyond (or negative) is an error naming the caller's field. Extend pages are bounded by
// [N, N*(pages_per_rank+1)): a page at N*(pages_per_rank+1) + k (or below N) fails ValidateExtendBatch and the
// planner naming requests[i].pages[j]; the planner's output and later plans are unchanged.
KVSHARD_PROP(BoundsProps, TranslateLocsAndExtendPagesAtAndBeyondTheBound, ()) {
  const ExtendBatch b = DrawFullSizeBatch();
  RC_LOG() << "batch: " << ExtendBatchToJson(b).dump() << "\n";
  const int64_t n = b.shard_size, ps = b.page_size, hi = n * (b.pages_per_rank + 1);
  ref::GatherPlanner planner;
  GatherPlan plan;
  RC_ASSERT_OK(planner.Build(b, &plan));
  const GatherPlan fresh = RC_VALUE(ref::BuildGatherPlan(b));
  RC_ASSERT(plan == fresh);
  // Translate at and beyond page_pos_size * ps.
  const int64_t bound = plan.page_pos_size * ps;
  const V last = RC_VALUE(ref::Translate(plan, {bound - 1}, "out_cache_loc"));
  RC_ASSERT(last == V{plan.trash_page * ps + ps - 1});  // the last page_pos page is never mapped
  size_t i = 0;
  const V bad_locs = WithBadAt(DrawValid(0, bound), DrawOutside(0, bound, n, ps), &i);
  RC_LOG() << "translate " << rc::toString(bad_locs) << " (bound " << bound << ")\n";
  AssertNamedError(ref::Translate(plan, bad_locs, "out_cache_loc").status(), StrCat("out_cache_loc[", i, "]"),
                   Range(0, bound));
  RC_ASSERT(plan == fresh);
  // A page of some request replaced by one outside [N, N*(pages_per_rank+1)).
  V with_pages;
  for (size_t q = 0; q < b.requests.size(); ++q) {
    if (!b.requests[q].pages.empty()) with_pages.push_back(static_cast<int64_t>(q));
  }
  RC_CLASSIFY(with_pages.empty(), "no pages to corrupt");
  if (!with_pages.empty()) {
    ExtendBatch bad = b;
    const int64_t q = *rc::gen::elementOf(with_pages);
    const size_t j = *rc::gen::inRange<size_t>(0, bad.requests[q].pages.size());
    RC_CLASSIFY(static_cast<int64_t>(j) < bad.requests[q].prefix_len / ps, "prefix page");
    bad.requests[q].pages[j] = DrawOutside(n, hi, n, ps);
    RC_LOG() << "requests[" << q << "].pages[" << j << "] = " << bad.requests[q].pages[j] << "\n";
    const std::string field = StrCat("requests[", q, "].pages[", j, "]");
    const Status validated = ValidateExtendBatch(bad);
    AssertNamedError(validated, field, Range(n, hi));
    GatherPlan out = plan;
    const Status built = planner.Build(bad, &out);
    AssertNamedError(built, field, Range(n, hi));
    RC_ASSERT(built.message() == validated.message());
    RC_ASSERT(out == fresh);
    GatherPlan again;
    RC_ASSERT_OK(planner.Build(b, &again));
    RC_ASSERT(again == fresh);
  }
  // The last pool page N*(pages_per_rank+1) - 1 as a chunk page of one more request, when the batch does not use it.
  bool used = false;
  int64_t chunk_pages = 0;
  for (const ExtendRequest& r : b.requests) {
    used |= std::count(r.pages.begin(), r.pages.end(), hi - 1) > 0;
    chunk_pages += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
  }
  RC_CLASSIFY(used, "last pool page already in the batch");
  if (!used) {
    ExtendBatch edge = b;
    edge.requests.push_back({0, *rc::gen::inRange<int64_t>(1, ps + 1), {hi - 1}});
    edge.chunk_tokens += ps;
    GatherPlan edge_plan;
    RC_ASSERT_OK(planner.Build(edge, &edge_plan));
    const V pos = ref::DensePagePos(edge_plan);
    RC_ASSERT(pos[hi - 1] == edge_plan.chunk_base_page + chunk_pages);  // the batch's last chunk page
  }
}

// The scratch capacities bound the batch: a batch needing exactly max_prefix_tokens (N*ps*block_pages) and
// chunk_tokens (ps*chunk pages) plans and begins on a pool of exactly that size; one page more of either is an
// error naming the capacity, and neither the planner nor the pool changes.
KVSHARD_PROP(BoundsProps, ScratchCapacityExactlyAtTheBoundAndOnePageOver, ()) {
  ExtendBatch b = DrawFullSizeBatch();
  const int64_t n = b.shard_size, ps = b.page_size, hi = n * (b.pages_per_rank + 1);
  int64_t block_pages = 0, chunk_pages = 0;
  std::set<int64_t> used;
  for (const ExtendRequest& r : b.requests) {
    block_pages += (r.prefix_len / ps + n - 1) / n;
    chunk_pages += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
    used.insert(r.pages.begin(), r.pages.end());
  }
  b.max_prefix_tokens = n * ps * block_pages;
  b.chunk_tokens = ps * chunk_pages;
  RC_LOG() << "batch: " << ExtendBatchToJson(b).dump() << "\n";
  ref::GatherPlanner planner;
  GatherPlan plan;
  RC_ASSERT_OK(planner.Build(b, &plan));
  RC_ASSERT(plan.n_prefix_slots * ps == b.max_prefix_tokens);
  const GatherPlan fresh = plan;
  // The planner: one logical page (N*ps) less prefix capacity, one page (ps) less chunk capacity.
  for (const bool prefix_side : {true, false}) {
    if ((prefix_side ? block_pages : chunk_pages) == 0) continue;
    ExtendBatch over = b;
    (prefix_side ? over.max_prefix_tokens : over.chunk_tokens) -= prefix_side ? n * ps : ps;
    GatherPlan out = plan;
    AssertNamedError(planner.Build(over, &out), prefix_side ? "max_prefix_tokens" : "chunk_tokens",
                     StrCat("capacity (", prefix_side ? over.max_prefix_tokens : over.chunk_tokens, ")"));
    RC_ASSERT(out == fresh);
    GatherPlan again;
    RC_ASSERT_OK(planner.Build(b, &again));
    RC_ASSERT(again == fresh);
  }
  // The pool: sized exactly for the batch, it begins it; a batch one page over is refused without a trace.
  const ShardedPoolConfig c = PoolConfigOf(b, *rc::gen::inRange<int64_t>(1, 3), 1);
  ShardedPool pool = RC_VALUE(ShardedPool::Create(c));
  RC_ASSERT_OK(pool.BeginShardExtend(b.requests));
  V prefix, chunk;
  BatchLocs(b, &prefix, &chunk);
  RC_ASSERT_OK(pool.Write(0, chunk, ref::RowValues(0, chunk, 1, 1)));
  const State before = ObservePool(pool, c);
  int64_t spare = -1;  // a pool page the batch does not use
  for (int64_t p = n; p < hi && spare < 0; ++p) spare = used.count(p) ? -1 : p;
  RC_CLASSIFY(spare < 0, "no spare page");
  if (spare < 0) return;
  std::vector<ExtendRequest> more_chunk = b.requests, more_prefix = b.requests;
  more_chunk.push_back({0, *rc::gen::inRange<int64_t>(1, ps + 1), {spare}});
  more_prefix.push_back({ps, ps, {spare}});  // one more prefix page: one more block page per rank
  AssertNamedError(pool.BeginShardExtend(more_chunk), "chunk_tokens", StrCat("capacity (", c.chunk_tokens, ")"));
  RC_ASSERT(FirstDifference(before, ObservePool(pool, c)) == "");
  AssertNamedError(pool.BeginShardExtend(more_prefix), "max_prefix_tokens",
                   StrCat("capacity (", c.max_prefix_tokens, ")"));
  RC_ASSERT(FirstDifference(before, ObservePool(pool, c)) == "");
}

}  // namespace
}  // namespace kvshard::props

// cpu_fast/'s gather planner against the reference's (cpu_ref/), bit for bit: on random valid and edge batches (N = 1
// to 64, one request, empty prefixes, partial pages, capacity exactly at the bound) the same plans, on corrupted ones
// the same error (code and message); DensePagePos and Translate against the plan they read.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/pool_json.h"
#include "core/spec.h"
#include "cpu_fast/gather_plan.h"
#include "cpu_ref/gather_plan.h"
#include "props/fast_vs_ref_testing.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// The first difference between two lists, "name[i]: x vs y" (or the sizes), or "".
std::string ListDiff(const std::string& name, const V& a, const V& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) return StrCat(name, "[", i, "]: ", a[i], " vs ", b[i]);
  }
  return a.size() == b.size() ? "" : StrCat(name, ": ", a.size(), " vs ", b.size(), " entries");
}

// The first difference between two gather plans (fast vs ref), or "".
std::string GatherPlanDiff(const GatherPlan& a, const GatherPlan& b) {
  const V scalars_a = {a.shard_size,      a.page_size,  a.block_pages,   a.n_prefix_slots,
                       a.chunk_base_page, a.trash_page, a.page_pos_size, static_cast<int64_t>(a.ranks.size())};
  const V scalars_b = {b.shard_size,      b.page_size,  b.block_pages,   b.n_prefix_slots,
                       b.chunk_base_page, b.trash_page, b.page_pos_size, static_cast<int64_t>(b.ranks.size())};
  std::string d = ListDiff("(N, ps, block_pages, n_prefix_slots, chunk_base_page, trash_page, page_pos_size, ranks)",
                           scalars_a, scalars_b);
  if (d.empty()) d = ListDiff("mapped_pages", a.mapped_pages, b.mapped_pages);
  if (d.empty()) d = ListDiff("mapped_scratch_pages", a.mapped_scratch_pages, b.mapped_scratch_pages);
  for (size_t r = 0; d.empty() && r < a.ranks.size(); ++r) {
    d = ListDiff(StrCat("ranks[", r, "].send_local_pages"), a.ranks[r].send_local_pages, b.ranks[r].send_local_pages);
    if (d.empty()) d = ListDiff(StrCat("ranks[", r, "].send_rows"), a.ranks[r].send_rows, b.ranks[r].send_rows);
    if (d.empty() && a.ranks[r].rank != b.ranks[r].rank) d = StrCat("ranks[", r, "].rank");
  }
  return d;
}

void LogBatch(const char* what, const ExtendBatch& b) {
  RC_LOG() << what << ": " << ExtendBatchToJson(b).dump() << "\n";
}

// A batch as a fresh pool hands pages out: chains are runs of ascending logical pages, consecutive or with gaps of
// whole owner cycles (cyclic by construction), long enough to fill whole bitmap words, overlapping each other
// (prefix pages shared across chains); requests take heads of chains (shared cached prompts, often repeating the
// previous request's head) plus fresh chunk pages; N up to 64, not only powers of two; capacities at the bound or
// above it.
ExtendBatch DrawRunBatch() {
  ExtendBatch b;
  b.shard_size = *rc::gen::element<int64_t>(1, 2, 3, 4, 6, 8, 16, 64);
  b.page_size = *rc::gen::element<int64_t>(1, 2, 3, 16);
  const int64_t n = b.shard_size, ps = b.page_size;
  b.pages_per_rank = 1 + *rc::gen::inRange<int64_t>(64, 1100) / n;
  const int64_t lo = n, hi = n * (b.pages_per_rank + 1);  // allocatable logical pages
  std::vector<V> chains(*rc::gen::inRange<int64_t>(1, 4));
  for (V& chain : chains) {
    const int64_t len = *rc::gen::weightedOneOf<int64_t>(
        {{1, rc::gen::inRange<int64_t>(0, 8)}, {3, rc::gen::inRange<int64_t>(0, std::min<int64_t>(300, hi - lo) + 1)}});
    const bool gaps = *rc::gen::weightedOneOf<bool>({{3, rc::gen::just(false)}, {1, rc::gen::just(true)}});
    int64_t page = *rc::gen::inRange<int64_t>(lo, hi - len + 1);
    for (int64_t k = 0; k < len && page < hi; ++k) {
      chain.push_back(page);
      page += 1 + (gaps ? n * *rc::gen::element<int64_t>(0, 0, 0, 1, 2) : 0);
    }
  }
  std::vector<size_t> heads;
  for (size_t i = 0, reqs = *rc::gen::inRange<size_t>(1, 7); i < reqs; ++i) {
    const V& chain = chains[*rc::gen::inRange<size_t>(0, chains.size())];
    heads.push_back(*rc::gen::weightedOneOf<size_t>(
        {{2, rc::gen::just(chain.size())}, {3, rc::gen::inRange<size_t>(0, chain.size() + 1)}}));
    b.requests.push_back({static_cast<int64_t>(heads.back()) * ps, 0, V(chain.begin(), chain.begin() + heads.back())});
  }
  std::set<int64_t> used;  // prefix pages, then chunk pages as they are drawn
  for (const ExtendRequest& r : b.requests) used.insert(r.pages.begin(), r.pages.end());
  int64_t block_pages = 0, chunk_pages = 0;
  for (ExtendRequest& r : b.requests) {
    const int64_t chunks = *rc::gen::inRange<int64_t>(0, 4);
    for (int64_t j = 0; j < chunks && static_cast<int64_t>(used.size()) < hi - lo; ++j) {
      int64_t page = *rc::gen::inRange<int64_t>(lo, hi);
      while (used.count(page)) page = page + 1 < hi ? page + 1 : lo;  // the next free page
      used.insert(page);
      r.pages.push_back(page);
    }
    const int64_t got = static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
    r.seq_len = r.prefix_len + got * ps - (got ? *rc::gen::inRange<int64_t>(0, ps) : 0);
    block_pages += (r.prefix_len / ps + n - 1) / n;
    chunk_pages += got;
  }
  b.max_prefix_tokens = n * ps * (block_pages + *rc::gen::element<int64_t>(0, 0, 1, 3));
  b.chunk_tokens = ps * (chunk_pages + *rc::gen::element<int64_t>(0, 0, 1, 3));
  return b;
}

// A valid batch: DrawValidBatch (shuffled cyclic chains, pool_generators.h) or DrawRunBatch.
ExtendBatch DrawAnyValidBatch() { return *rc::gen::inRange(0, 3) == 0 ? DrawValidBatch() : DrawRunBatch(); }

// Tags the edges a batch reaches (printed with the case counts).
void TagEdges(const ExtendBatch& b) {
  const int64_t n = b.shard_size, ps = b.page_size;
  int64_t block_pages = 0, chunk_pages = 0;
  bool empty_prefix = false, partial_page = false;
  std::set<int64_t> prefix;
  for (const ExtendRequest& r : b.requests) {
    block_pages += (r.prefix_len / ps + n - 1) / n;
    chunk_pages += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
    empty_prefix |= r.prefix_len == 0;
    partial_page |= r.seq_len % ps != 0;
    prefix.insert(r.pages.begin(), r.pages.begin() + r.prefix_len / ps);
  }
  bool full_word = false;  // 64 prefix pages filling one bitmap word (the fast planner's closed form when N | 64)
  for (int64_t p : prefix) {
    full_word |= p % 64 == 0 && std::distance(prefix.lower_bound(p), prefix.upper_bound(p + 63)) == 64;
  }
  RC_CLASSIFY(n == 1, "N=1");
  RC_CLASSIFY(b.requests.size() == 1, "one request");
  RC_CLASSIFY(empty_prefix && partial_page, "an empty prefix and a partial page");
  RC_CLASSIFY((n * ps * block_pages == b.max_prefix_tokens && block_pages > 0) ||
                  (ps * chunk_pages == b.chunk_tokens && chunk_pages > 0),
              "capacity exactly at the bound");
  RC_CLASSIFY(full_word, "a full bitmap word of prefix pages");
}

// Corrupts `b` with one fault (structural, semantic, capacity or geometry); a few kinds can leave it valid.
void Corrupt(ExtendBatch* b) {
  if (b->shard_size < 1 || b->page_size < 1) return;  // an earlier fault broke the geometry
  const int64_t n = b->shard_size, ps = b->page_size, hi = n * (b->pages_per_rank + 1);
  const int kind = DrawKind(13);
  if (kind == 10) {  // geometry
    switch (DrawKind(5)) {
      case 0: b->shard_size = Pick({0, -1}); break;
      case 1: b->page_size = 0; break;
      case 2: b->pages_per_rank = Pick({-1, kMaxPoolLogicalPages - 1}); break;
      case 3: b->max_prefix_tokens += ps; break;
      default: b->chunk_tokens += ps > 1 ? 1 : -1 - b->chunk_tokens; break;
    }
    return;
  }
  int64_t block_pages = 0, chunk_pages = 0;  // the capacities the batch needs
  for (const ExtendRequest& r : b->requests) {
    block_pages += (r.prefix_len / ps + n - 1) / n;
    chunk_pages += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
  }
  if (kind == 11) b->max_prefix_tokens = std::max<int64_t>(0, n * ps * (block_pages - 1));  // one page under
  if (kind == 12) b->chunk_tokens = std::max<int64_t>(0, ps * (chunk_pages - 1));
  if (kind >= 11 || b->requests.empty()) return;
  ExtendRequest& r = b->requests[*rc::gen::inRange<size_t>(0, b->requests.size())];
  const int64_t size = static_cast<int64_t>(r.pages.size());
  const int64_t k = std::clamp<int64_t>(r.prefix_len / ps, 0, size);  // prefix pages present (after earlier faults)
  switch (kind) {
    case 0: r.prefix_len = Pick({-ps, kMaxSlot}); break;
    case 1: r.prefix_len += ps > 1 ? *rc::gen::inRange<int64_t>(1, ps) : 0; break;  // misaligned
    case 2: r.seq_len = Pick({r.prefix_len - 1, kMaxSlot}); break;
    case 3:  // one page too many or too few
      if (*rc::gen::arbitrary<bool>() || size == 0) {
        r.pages.push_back(hi - 1);
      } else {
        r.pages.pop_back();
      }
      break;
    case 4:  // a page out of range: reserved, past the pool, far off
      if (size) {
        r.pages[*rc::gen::inRange<int64_t>(0, size)] =
            Pick({n - 1, 0, hi, -1, std::numeric_limits<int64_t>::min(), int64_t{1} << 40});
      }
      break;
    case 5:  // a consecutive prefix run ending past the pool
      for (int64_t j = 0; j < k; ++j) r.pages[j] = hi - k + 1 + j;
      break;
    case 6:  // two prefix pages swapped (not cyclic unless their owners match)
      if (k >= 2) std::swap(r.pages[*rc::gen::inRange<int64_t>(0, k)], r.pages[*rc::gen::inRange<int64_t>(0, k)]);
      break;
    case 7:  // a prefix page moved to the next owner (or out of the pool)
      if (k >= 1 && n > 1) r.pages[*rc::gen::inRange<int64_t>(0, k)] += 1;
      break;
    default:  // a chunk page that is not fresh: a prefix page or an earlier page of the batch
      if (size > k && size >= 2) r.pages[*rc::gen::inRange<int64_t>(std::max<int64_t>(k, 1), size)] = r.pages[0];
      break;
  }
}

KVSHARD_PROP(FastVsRefProps, GatherPlanEqualsReferenceOnValidBatches, ()) {
  const ExtendBatch first = DrawAnyValidBatch(), second = DrawAnyValidBatch();
  LogBatch("first", first);
  LogBatch("second", second);
  TagEdges(first);
  const bool rows = *rc::gen::arbitrary<bool>();
  fast::GatherPlanner fast_planner;  // one planner for both batches: its bitmaps are reused
  ref::GatherPlanner ref_planner;
  for (const ExtendBatch* b : {&first, &second}) {
    GatherPlan fast_plan, ref_plan;
    RC_ASSERT_OK(ref_planner.Build(*b, &ref_plan, rows));
    RC_ASSERT_OK(fast_planner.Build(*b, &fast_plan, rows));
    RC_ASSERT(GatherPlanDiff(fast_plan, ref_plan) == "");
    RC_ASSERT(fast_plan == ref_plan);
  }
}

// What a gather-plan error is about (for the case distribution).
std::string ErrorKind(const Status& s) {
  const std::string& m = s.message();
  if (s.ok()) return "still valid";
  if (m.find("page-aligned") != std::string::npos) return "page-aligned";
  if (m.find("cyclic") != std::string::npos) return "cyclic";
  if (m.find("exceeds the scratch") != std::string::npos) return "capacity";
  if (m.find("fresh") != std::string::npos) return "chunk page not fresh";
  return m.rfind("requests[", 0) == 0 ? "structural (request)" : "structural (geometry)";
}

KVSHARD_PROP(FastVsRefProps, GatherPlanErrorsEqualReference, ()) {
  ExtendBatch bad = DrawAnyValidBatch();
  const int faults = *rc::gen::weightedOneOf<int>({{4, rc::gen::just(1)}, {1, rc::gen::inRange(2, 4)}});
  for (int f = 0; f < faults; ++f) Corrupt(&bad);
  LogBatch("batch", bad);
  fast::GatherPlanner fast_planner;
  GatherPlan fast_plan;
  if (*rc::gen::arbitrary<bool>()) RC_ASSERT_OK(fast_planner.Build(DrawAnyValidBatch(), &fast_plan));  // reused
  const StatusOr<GatherPlan> want = ref::BuildGatherPlan(bad);
  RC_TAG(ErrorKind(want.status()));
  AssertSameStatus(fast_planner.Build(bad, &fast_plan), want.status());
  if (want.ok()) RC_ASSERT(GatherPlanDiff(fast_plan, *want) == "");
  // After an error the planner builds the next batch exactly as the reference.
  const ExtendBatch next = DrawAnyValidBatch();
  LogBatch("next", next);
  RC_ASSERT_OK(fast_planner.Build(next, &fast_plan));
  RC_ASSERT(GatherPlanDiff(fast_plan, RC_VALUE(ref::BuildGatherPlan(next))) == "");
}

// DensePagePos and Translate are one function each since both planners re-export core/gather_plan.h's, so instead
// of fast vs ref they are checked against the plan they read: page_pos[l] = l's scratch page if l is mapped, else
// the trash page; translate(loc) = page_pos[loc // ps] * ps + loc % ps, the first loc outside [0, page_pos_size
// * ps) refused naming it.
KVSHARD_PROP(FastVsRefProps, TranslateAndDensePagePosFollowThePlan, ()) {
  const ExtendBatch b = DrawAnyValidBatch();
  LogBatch("batch", b);
  const GatherPlan plan = RC_VALUE(ref::BuildGatherPlan(b));
  std::map<int64_t, int64_t> mapped;
  for (size_t i = 0; i < plan.mapped_pages.size(); ++i) mapped[plan.mapped_pages[i]] = plan.mapped_scratch_pages[i];
  const auto page_pos = [&](int64_t l) { return mapped.contains(l) ? mapped.at(l) : plan.trash_page; };
  const V pos = fast::DensePagePos(plan);
  RC_ASSERT(static_cast<int64_t>(pos.size()) == plan.page_pos_size);
  for (int64_t l = 0; l < plan.page_pos_size; ++l) RC_ASSERT(pos[l] == page_pos(l));
  const int64_t ps = b.page_size, limit = plan.page_pos_size * ps;
  const V locs = *rc::gen::container<V>(rc::gen::inRange<int64_t>(-ps, limit + ps));
  const StatusOr<V> rows = ref::Translate(plan, locs, "locs");
  const auto bad = std::find_if(locs.begin(), locs.end(), [&](int64_t loc) { return loc < 0 || loc >= limit; });
  RC_TAG(bad == locs.end() ? "in range" : "a loc out of range");
  if (bad != locs.end()) {
    RC_ASSERT(rows.status().ToString() == InvalidArgument("locs[", bad - locs.begin(), "]: must be in [0, ", limit,
                                                          ") (the page_pos range), got ", *bad)
                                              .ToString());
    return;
  }
  RC_ASSERT(rows.ok());
  for (size_t i = 0; i < locs.size(); ++i) RC_ASSERT((*rows)[i] == page_pos(locs[i] / ps) * ps + locs[i] % ps);
}

}  // namespace
}  // namespace kvshard::props

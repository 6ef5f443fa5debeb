// Differential properties of cpu_fast/ against the reference cpu_ref/, as the GPU backend is tested: on random
// valid, edge (N = 1, one request, empty prefixes, partial pages, capacity exactly at the bound) and corrupted
// inputs, the fast gather planner, CP batch planner and batch rerange return the reference's plans and outputs
// bit for bit, or its error (same code, same message); driven by random op sequences, the fast allocator answers
// every call as the reference does and keeps the same class lists. Calls are qualified, fast:: or ref::: the argument
// types (HostTensor, plans, specs) live in namespace kvshard, so argument-dependent lookup finds neither.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/cp_limits.h"
#include "core/cp_plan_json.h"
#include "core/host_tensor.h"
#include "core/pool_json.h"
#include "core/spec.h"
#include "cpu_fast/allocator.h"
#include "cpu_fast/cp_data.h"
#include "cpu_fast/cp_split.h"
#include "cpu_fast/gather_plan.h"
#include "cpu_ref/allocator.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "cpu_ref/gather_plan.h"
#include "props/cp_generators.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

using V = std::vector<int64_t>;

// A fault kind in [0, kinds), uniform at every size (rc::gen::inRange scales with the size, from 0).
int DrawKind(int kinds) { return *rc::gen::resize(100, rc::gen::inRange(0, kinds)); }

// One of `values`, uniform at every size.
int64_t Pick(const std::vector<int64_t>& values) { return values[DrawKind(static_cast<int>(values.size()))]; }

// A CP batch case of several requests (the batch rerange's domain), or of one a quarter of the time.
CPBatchCase DrawRerangeCase() {
  const auto several = [](const CPBatchCase& c) { return c.extend_lens.size() > 1; };
  return *rc::gen::weightedOneOf<CPBatchCase>(
      {{1, GenCPBatchCase()}, {3, rc::gen::suchThat(GenCPBatchCase(), several)}});
}

// A CP error's label for the case distribution: its fail-fast tag (and rerange reason), or the field it names.
std::string CpErrorLabel(const Status& s) {
  const std::string& m = s.message();
  if (s.ok()) return "ok";
  const std::string fail_fast = "[CP_SHARED_KV_FAIL_FAST][";
  if (m.rfind(fail_fast, 0) != 0) {  // the field, request index dropped
    const std::string field = m.substr(0, m.find(':'));
    return field.substr(0, field.find('['));
  }
  const size_t tag_end = m.find(']', fail_fast.size()), reason = m.find("reason=");
  return m.substr(fail_fast.size(), tag_end - fail_fast.size()) +
         (reason == std::string::npos ? "" : " " + m.substr(reason, m.find(' ', reason) - reason));
}

// Both succeeded, or both failed with the same code and message.
void AssertSameStatus(const Status& fast, const Status& ref) { RC_ASSERT(fast.ToString() == ref.ToString()); }

// ---------------------------------------------------------------------------------------------------------------
// Gather plan.

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

// ---------------------------------------------------------------------------------------------------------------
// CP batch plan.

// The first field in which two plans differ, or "" (every stored field, then the JSON of every field).
std::string PlanDiff(const CPSharedKVBatchPlan& a, const CPSharedKVBatchPlan& b) {
#define KVSHARD_FIELD(f) \
  if (!(a.f == b.f)) return #f
  KVSHARD_FIELD(batch_size);
  KVSHARD_FIELD(page_size);
  KVSHARD_FIELD(cp_size);
  KVSHARD_FIELD(cp_rank);
  KVSHARD_FIELD(request_token_offsets);
  KVSHARD_FIELD(request_padded_token_offsets);
  KVSHARD_FIELD(request_page_offsets);
  KVSHARD_FIELD(request_extend_lens);
  KVSHARD_FIELD(request_prefix_lens);
  KVSHARD_FIELD(request_padded_pages);
  KVSHARD_FIELD(request_padded_tokens);
  KVSHARD_FIELD(request_padding_tokens);
  KVSHARD_FIELD(request_split_lists);
  KVSHARD_FIELD(request_zigzag_indices);
  KVSHARD_FIELD(request_segment_page_starts);
  KVSHARD_FIELD(request_segment_page_ends);
  KVSHARD_FIELD(request_rank_local_tokens);
  KVSHARD_FIELD(request_rank_local_offsets);
  KVSHARD_FIELD(request_kv_len_prev);
  KVSHARD_FIELD(request_kv_len_next);
  KVSHARD_FIELD(request_actual_seq_q_prev);
  KVSHARD_FIELD(request_actual_seq_q_next);
  KVSHARD_FIELD(request_last_token_owner);
  KVSHARD_FIELD(request_last_token_local_offset);
  KVSHARD_FIELD(output_collect_mode);
  KVSHARD_FIELD(flat_zigzag_index);
  KVSHARD_FIELD(flat_segment_request_ids);
  KVSHARD_FIELD(flat_segment_offsets);
  KVSHARD_FIELD(compute_padding_enabled);
  KVSHARD_FIELD(request_valid_actual_seq_q_prev);
  KVSHARD_FIELD(request_valid_actual_seq_q_next);
  KVSHARD_FIELD(request_valid_query_row_spans);
  KVSHARD_FIELD(request_compute_split_lists);
  KVSHARD_FIELD(request_compute_segment_page_starts);
  KVSHARD_FIELD(request_compute_segment_page_ends);
  KVSHARD_FIELD(request_compute_padded_pages);
  KVSHARD_FIELD(request_compute_padded_tokens);
  KVSHARD_FIELD(request_compute_padding_tokens);
  KVSHARD_FIELD(request_compute_padded_token_offsets);
  KVSHARD_FIELD(request_compute_rank_local_tokens);
  KVSHARD_FIELD(request_compute_rank_local_offsets);
#undef KVSHARD_FIELD
  return ToJson(a).dump() == ToJson(b).dump() ? "" : "json";
}

// The CP planner's arguments (a CPBatchCase's lists and geometry, possibly corrupted).
struct PlanArgs {
  Int64List extend_lens;
  Int64List prefix_lens;
  int64_t page_size = 2;
  int64_t cp_size = 1;
};

void LogArgs(const PlanArgs& a) {
  RC_LOG() << "cp_size=" << a.cp_size << " page_size=" << a.page_size << " extend_lens=" << rc::toString(a.extend_lens)
           << " prefix_lens=" << rc::toString(a.prefix_lens) << "\n";
}

// Fast and reference plans of rank `rank` agree (fresh and into a reused plan), or fail alike.
void AssertSamePlans(const PlanArgs& a, int64_t rank, CPSharedKVBatchPlan* reused) {
  const StatusOr<CPSharedKVBatchPlan> want =
      ref::BuildBatchPageAlignedInSeqSplitPlan(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank);
  const StatusOr<CPSharedKVBatchPlan> got =
      fast::BuildBatchPageAlignedInSeqSplitPlan(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank);
  AssertSameStatus(got.status(), want.status());
  const Status into =
      fast::BuildBatchPageAlignedInSeqSplitPlanInto(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank, reused);
  AssertSameStatus(into, want.status());
  if (!want.ok()) return;
  RC_ASSERT(PlanDiff(*got, *want) == "");
  RC_ASSERT(PlanDiff(*reused, *want) == "");
}

KVSHARD_PROP(FastVsRefProps, BatchPlanEqualsReferenceOnEveryRank, ()) {
  const CPBatchCase c = *GenCPBatchCase(/*min_ps=*/1);
  const PlanArgs a{c.extend_lens, c.prefix_lens, c.page_size, c.cp_size};
  LogArgs(a);
  RC_CLASSIFY(c.cp_size == 1, "N=1");
  RC_CLASSIFY(c.extend_lens.size() == 1, "one request");
  RC_CLASSIFY(c.page_size == 1, "ps=1 (fallback error)");
  // The reused plan starts as another batch's plan, so stale storage of every size is overwritten.
  const CPBatchCase other = *GenCPBatchCase();
  CPSharedKVBatchPlan reused;
  (void)ref::BuildBatchPageAlignedInSeqSplitPlanInto(other.extend_lens, other.prefix_lens, other.page_size,
                                                     other.cp_size, 0, &reused);
  for (int64_t rank = 0; rank < c.cp_size; ++rank) AssertSamePlans(a, rank, &reused);
}

KVSHARD_PROP(FastVsRefProps, BatchPlanErrorsEqualReference, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  PlanArgs a{c.extend_lens, c.prefix_lens, c.page_size, c.cp_size};
  int64_t rank = *rc::gen::inRange<int64_t>(0, c.cp_size);
  const size_t q = *rc::gen::inRange<size_t>(0, a.extend_lens.size());
  const int64_t big = kMaxCpTokens;
  const int kind = DrawKind(10);
  if (kind == 0) a.prefix_lens.push_back(0);  // lengths differ
  if (kind == 1) a.cp_size = Pick({0, -1, kMaxCpSize + 1});
  if (kind == 2) rank = Pick({-1, a.cp_size});
  if (kind == 3) a.page_size = Pick({0, -3, 1, kMaxCpPageSize + 1});
  if (kind == 4) a.extend_lens[q] = Pick({0, -5, big + 1});
  if (kind == 5) {  // negative, misaligned, or aligned beyond 2^48
    a.prefix_lens[q] = Pick({-a.page_size, a.prefix_lens[q] + 1, (big / a.page_size + 1) * a.page_size});
  }
  if (kind == 6) {  // a batch total beyond 2^48
    a.extend_lens[q] = big / 2 + 1;
    a.extend_lens.push_back(big / 2 + 1);
    a.prefix_lens.push_back(0);
  }
  if (kind == 7) {  // batch_size * 2 * cp_size beyond 2^24
    a.cp_size = kMaxCpSize;
    rank = 0;
    a.extend_lens.assign(129, 1);
    a.prefix_lens.assign(129, 0);
  }
  if (kind == 8) {  // an empty batch: a valid, empty plan
    a.extend_lens.clear();
    a.prefix_lens.clear();
  }
  LogArgs(a);
  RC_TAG(CpErrorLabel(
      ref::BuildBatchPageAlignedInSeqSplitPlan(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank).status()));
  CPSharedKVBatchPlan reused;
  AssertSamePlans(a, rank, &reused);
}

// ---------------------------------------------------------------------------------------------------------------
// Batch rerange.

// The gathered buffer of every rank's rows for `m`, plus `extra` rows, with a byte pattern.
HostTensor Gathered(const NSAContextParallelMetadata& m, int64_t row_bytes, int64_t extra) {
  HostTensor g = HostTensor::Zeros(m.total_seq_lens + extra, row_bytes);
  for (size_t i = 0; i < g.data.size(); ++i) g.data[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
  return g;
}

// The copy lists, source rows and reranged tensors (fresh and into a reused buffer) agree, or fail alike.
void AssertSameRerange(const HostTensor& gathered, const NSAContextParallelMetadata& m, int64_t cp_size) {
  const StatusOr<HostTensor> want = ref::BatchInSeqAllGatherRerange(gathered, m, cp_size);
  const StatusOr<HostTensor> got = fast::BatchInSeqAllGatherRerange(gathered, m, cp_size);
  RC_TAG(CpErrorLabel(want.status()));
  AssertSameStatus(got.status(), want.status());
  const int which = *rc::gen::inRange(0, 3);  // empty, the input's shape, another shape
  HostTensor reused = which == 0 ? HostTensor{} : which == 1 ? gathered : HostTensor::Zeros(3, 8);
  AssertSameStatus(fast::BatchInSeqAllGatherRerangeInto(gathered, m, cp_size, &reused), want.status());
  if (!want.ok()) return;
  RC_ASSERT(*got == *want);
  RC_ASSERT(reused == *want);
}

// BatchRerangeCopies and BatchRerangeSourceRows agree (lists and errors).
void AssertSameCopies(const Int64Table& splits, int64_t cp_size, int64_t max_rank_token) {
  const auto want = ref::BatchRerangeCopies(splits, cp_size, max_rank_token);
  const auto got = fast::BatchRerangeCopies(splits, cp_size, max_rank_token);
  RC_TAG("copies: " + CpErrorLabel(want.status()));
  AssertSameStatus(got.status(), want.status());
  if (want.ok()) {
    RC_ASSERT(got->size() == want->size());
    for (size_t i = 0; i < want->size(); ++i) {
      RC_ASSERT((*got)[i] == (fast::RowCopy{(*want)[i].src_row, (*want)[i].dst_row, (*want)[i].rows}));
    }
  }
  const StatusOr<Int64List> want_rows = ref::BatchRerangeSourceRows(splits, cp_size, max_rank_token);
  const StatusOr<Int64List> got_rows = fast::BatchRerangeSourceRows(splits, cp_size, max_rank_token);
  AssertSameStatus(got_rows.status(), want_rows.status());
  if (want_rows.ok()) RC_ASSERT(*got_rows == *want_rows);
}

KVSHARD_PROP(FastVsRefProps, RerangeEqualsReference, ()) {
  const CPBatchCase c = DrawRerangeCase();
  showValue(c, RC_LOG());
  RC_LOG() << "\n";
  RC_CLASSIFY(c.cp_size == 1, "N=1");
  RC_CLASSIFY(c.extend_lens.size() == 1, "one request (not_batch error)");
  const NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, 0)));
  RC_CLASSIFY(m.batch_plan->compute_padding_enabled, "compute padding");
  const HostTensor gathered = Gathered(m, c.row_bytes, *rc::gen::element<int64_t>(0, 0, 1, 5));
  AssertSameCopies(m.batch_plan->request_split_lists, c.cp_size, m.max_rank_token());
  AssertSameRerange(gathered, m, c.cp_size);
}

KVSHARD_PROP(FastVsRefProps, RerangeErrorsEqualReference, ()) {
  const CPBatchCase c =
      *rc::gen::suchThat(GenCPBatchCase(), [](const CPBatchCase& x) { return x.extend_lens.size() > 1; });
  showValue(c, RC_LOG());
  NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, 0)));
  HostTensor gathered = Gathered(m, c.row_bytes, 0);
  CPSharedKVBatchPlan plan = *m.batch_plan;
  int64_t cp_size = c.cp_size;
  const int kind = DrawKind(12);
  RC_LOG() << " fault=" << kind << "\n";
  switch (kind) {
    case 0: m.batch_size = Pick({0, 1, -1}); break;
    case 1: m.batch_plan = nullptr; break;
    case 2: m.max_rank_len.resize(*rc::gen::inRange<size_t>(0, m.max_rank_len.size() + 1)); break;
    case 3: m.max_rank_len[0] = Pick({-1, m.max_rank_len[0] - 1, kMaxCpTokens + 1}); break;
    case 4: cp_size = Pick({0, -1, cp_size + 1, kMaxCpSize + 1}); break;
    case 5:  // one row short
      gathered.rows -= 1;
      gathered.data.resize(gathered.data.size() - gathered.row_bytes);
      break;
    case 6: gathered.row_bytes = 0; break;
    case 7: gathered.data.push_back(0); break;
    case 8: plan.request_split_lists.values[0] = Pick({-1, kMaxCpTokens + 1}); break;
    case 9: plan.request_split_lists.width += 2; break;
    case 10:
      m.batch_plan = nullptr;
      m.batch_size = 5;
      break;
    default: break;
  }
  if (kind >= 8 && kind <= 9) m.batch_plan = std::make_shared<const CPSharedKVBatchPlan>(plan);
  AssertSameRerange(gathered, m, cp_size);
}

KVSHARD_PROP(FastVsRefProps, RerangeCopiesEqualReferenceOnArbitraryTables, ()) {
  Int64Table splits;
  const int64_t cp_size = Pick({1, 2, 3, 1, 2, 3, -1, 0, kMaxCpSize + 1});
  splits.width = DrawKind(4) == 0 ? *rc::gen::inRange<int64_t>(0, 7) : 2 * std::max<int64_t>(cp_size, 1) % 7;
  splits.values = *rc::gen::container<Int64List>(
      static_cast<size_t>(splits.width * *rc::gen::inRange<int64_t>(0, 5)),
      rc::gen::weightedOneOf<int64_t>(
          {{8, rc::gen::inRange<int64_t>(0, 6)}, {1, rc::gen::element<int64_t>(-1, kMaxCpTokens + 1)}}));
  const int64_t max_rank_token = *rc::gen::resize(100, rc::gen::inRange<int64_t>(-1, 25));
  RC_LOG() << "width=" << splits.width << " values=" << rc::toString(splits.values) << " cp_size=" << cp_size
           << " max_rank_token=" << max_rank_token << "\n";
  AssertSameCopies(splits, cp_size, max_rank_token);
}

// ---------------------------------------------------------------------------------------------------------------
// Allocator.

// A live chain of the op sequence: its pages in position order, tokens and rotation base (-1: allocated by
// classes, never extended).
struct LiveChain {
  V pages;
  int64_t len = 0;
  int64_t base = -1;
};

// The two allocators driven by the same ops, the chains the reference handed out, and what the ops reached.
struct AllocPair {
  ref::PageInterleaveAllocator ref;
  fast::PageInterleaveAllocator fast;
  std::vector<LiveChain> chains;
  bool deferred = false, error = false;
};

// Every observable of the two allocators is equal: class lists, counts, sizes, least-full class, allocated pages.
void AssertSameAllocatorState(const AllocPair& a) {
  RC_ASSERT(a.fast.class_free_page_counts() == a.ref.class_free_page_counts());
  for (int64_t c = 0; c < a.ref.config().shard_size; ++c) {
    RC_ASSERT(a.fast.free_list(c) == a.ref.free_list(c));
    RC_ASSERT(a.fast.release_list(c) == a.ref.release_list(c));
  }
  RC_ASSERT(a.fast.available_size() == a.ref.available_size());
  RC_ASSERT(a.fast.aggregate_free_size() == a.ref.aggregate_free_size());
  RC_ASSERT(a.fast.least_full_class() == a.ref.least_full_class());
  RC_ASSERT(a.fast.in_free_group() == a.ref.in_free_group());
  RC_ASSERT(a.fast.num_logical_pages() == a.ref.num_logical_pages());
  for (int64_t p = -1; p <= a.ref.num_logical_pages(); ++p) RC_ASSERT(a.fast.is_allocated(p) == a.ref.is_allocated(p));
}

// Both answered the same: the same error, or the same commit/defer and, on a commit, the same pages and bases.
void AssertSameAlloc(const StatusOr<bool>& fast, const ExtendPages& fast_out, const StatusOr<bool>& ref,
                     const ExtendPages& ref_out) {
  AssertSameStatus(fast.status(), ref.status());
  if (!ref.ok()) return;
  RC_ASSERT(*fast == *ref);
  if (!*ref) return;
  RC_ASSERT(fast_out.pages == ref_out.pages);
  RC_ASSERT(fast_out.offsets == ref_out.offsets);
  RC_ASSERT(fast_out.rotation_bases == ref_out.rotation_bases);
}

// Slots [from, to) of a chain.
V LiveChainSlots(const LiveChain& c, int64_t from, int64_t to, int64_t ps) {
  V s;
  for (int64_t pos = from; pos < to; ++pos) s.push_back(c.pages[pos / ps] * ps + pos % ps);
  return s;
}

// Records a committed batch's new chains and extensions (`extends[i]`: the chain request i extends, or -1).
void RecordCommit(AllocPair* a, const AllocBatch& b, const V& extends, const ExtendPages& out, bool by_classes) {
  const int64_t ps = a->ref.config().page_size;
  for (size_t i = 0; i + 1 < out.offsets.size(); ++i) {
    const V pages(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
    // A faulted prefix (a page past the chain's end) still commits: the chain then holds fewer pages than its
    // seq_len spans, so its length is kept to the positions its pages cover.
    const auto covered = [&](const V& p) { return std::min(b.seq_lens[i], static_cast<int64_t>(p.size()) * ps); };
    if (extends[i] < 0) {
      a->chains.push_back({pages, covered(pages), by_classes ? -1 : out.rotation_bases[i]});
    } else {
      LiveChain& c = a->chains[extends[i]];
      c.pages.insert(c.pages.end(), pages.begin(), pages.end());
      c.len = covered(c.pages);
    }
  }
}

// A batch of 0-4 requests: new chains (null or given base; partial pages; sometimes more than a class holds) and
// extensions of distinct live page-aligned chains, with one fault a fifth of the time.
AllocBatch DrawAllocBatch(const AllocPair& a, V* extends) {
  const AllocatorConfig& cfg = a.ref.config();
  const int64_t n = cfg.shard_size, ps = cfg.page_size, big = n * ps * (cfg.pages_per_rank + 2);
  AllocBatch b;
  V aligned;
  for (size_t i = 0; i < a.chains.size(); ++i) {
    if (a.chains[i].base >= 0 && a.chains[i].len % ps == 0) aligned.push_back(static_cast<int64_t>(i));
  }
  const int64_t reqs = *rc::gen::resize(100, rc::gen::inRange<int64_t>(0, 5));
  for (int64_t i = 0; i < reqs; ++i) {
    const int64_t extra =
        DrawKind(6) == 0 ? *rc::gen::inRange<int64_t>(1, big + 2) : *rc::gen::inRange<int64_t>(1, 2 * ps * n + 2);
    if (!aligned.empty() && DrawKind(3) == 0) {
      const size_t pick = *rc::gen::inRange<size_t>(0, aligned.size());
      const LiveChain& c = a.chains[aligned[pick]];
      extends->push_back(aligned[pick]);
      aligned.erase(aligned.begin() + pick);
      b.prefix_lens.push_back(c.len);
      b.seq_lens.push_back(c.len + extra);
      b.rotation_bases.push_back(c.base);
      b.last_locs.push_back(c.len ? c.pages.back() * ps + ps - 1 : 0);
    } else {
      extends->push_back(-1);
      b.prefix_lens.push_back(0);
      b.seq_lens.push_back(extra);
      b.rotation_bases.push_back(DrawKind(3) == 0 ? *rc::gen::inRange<int64_t>(0, n) : kNewChain);
      b.last_locs.push_back(0);
    }
  }
  if (reqs == 0 || DrawKind(5) != 0) return b;
  const size_t i = *rc::gen::inRange<size_t>(0, static_cast<size_t>(reqs));
  switch (DrawKind(8)) {
    case 0: b.prefix_lens[i] += Pick({1, ps, -ps}); break;           // misaligned, a page past, or negative
    case 1: b.seq_lens[i] = b.prefix_lens[i] - Pick({0, 1}); break;  // no new page
    case 2: b.rotation_bases[i] = Pick({-2, n, n + 5}); break;
    case 3: b.last_locs[i] += Pick({ps, -b.last_locs[i] - 1}); break;   // wrong owner (N > 1) or negative
    case 4: b.last_locs.pop_back(); break;                              // mismatched lengths
    case 5: b.seq_lens[i] = Pick({kMaxSlot - 1, kMaxSlot, -1}); break;  // huge (defers), or out of range
    case 6: b.prefix_lens[i] = kMaxSlot; break;
    default: b.seq_lens.push_back(1); break;
  }
  return b;
}

void StepAllocExtend(AllocPair* a) {
  V extends;
  const AllocBatch b = DrawAllocBatch(*a, &extends);
  RC_LOG() << "alloc_extend prefix_lens=" << rc::toString(b.prefix_lens) << " seq_lens=" << rc::toString(b.seq_lens)
           << " bases=" << rc::toString(b.rotation_bases) << " last_locs=" << rc::toString(b.last_locs) << "\n";
  ExtendPages fast_out, ref_out;
  const StatusOr<bool> ref = a->ref.AllocExtend(b, &ref_out), fast = a->fast.AllocExtend(b, &fast_out);
  a->deferred |= ref.ok() && !*ref;
  a->error |= !ref.ok();
  AssertSameAlloc(fast, fast_out, ref, ref_out);
  if (ref.ok() && *ref) RecordCommit(a, b, extends, ref_out, false);
}

// Owner-plan mode: new chains whose pages name their classes (sometimes a bad class or a wrong count).
void StepAllocByClasses(AllocPair* a) {
  V extends;
  AllocBatch b = DrawAllocBatch(*a, &extends);
  const int64_t n = a->ref.config().shard_size, ps = a->ref.config().page_size;
  std::vector<V> classes;
  for (size_t i = 0; i < b.seq_lens.size(); ++i) {
    const int64_t prefix = i < b.prefix_lens.size() ? b.prefix_lens[i] : 0;  // a corrupted batch may be shorter
    const int64_t pages = std::clamp<int64_t>(PositionPages(b.seq_lens[i], ps) - prefix / ps, 0, 1024);
    classes.push_back(*rc::gen::container<V>(static_cast<size_t>(pages), rc::gen::inRange<int64_t>(0, n)));
  }
  if (!classes.empty() && DrawKind(5) == 0) {
    V& bad = classes[*rc::gen::inRange<size_t>(0, classes.size())];
    if (bad.empty() || DrawKind(2) == 0) {
      bad.push_back(0);  // one class too many
    } else {
      bad[0] = Pick({-1, n});
    }
  }
  RC_LOG() << "alloc_extend_by_classes seq_lens=" << rc::toString(b.seq_lens) << " classes=" << rc::toString(classes)
           << "\n";
  ExtendPages fast_out, ref_out;
  const StatusOr<bool> ref = a->ref.AllocExtendByClasses(b, classes, &ref_out);
  const StatusOr<bool> fast = a->fast.AllocExtendByClasses(b, classes, &fast_out);
  a->deferred |= ref.ok() && !*ref;
  a->error |= !ref.ok();
  AssertSameAlloc(fast, fast_out, ref, ref_out);
  if (ref.ok() && *ref) RecordCommit(a, b, extends, ref_out, true);
}

// The locs of a free: a live chain (whole, shuffled with a repeat; or its last page, whose tail may be partial),
// which leaves the chains; or a bad slot (outside the pool, a reserved page, a page not allocated).
V DrawFreeLocs(AllocPair* a) {
  const int64_t ps = a->ref.config().page_size, slots = a->ref.num_logical_pages() * ps;
  if (a->chains.empty() || DrawKind(6) == 0) {
    return {Pick({-1, slots, 0, ps * a->ref.config().shard_size, slots - 1})};
  }
  const size_t k = *rc::gen::inRange<size_t>(0, a->chains.size());
  LiveChain& c = a->chains[k];
  const bool tail = *rc::gen::arbitrary<bool>();
  V locs = LiveChainSlots(c, tail ? ((c.len - 1) / ps) * ps : 0, c.len, ps);
  if (!locs.empty()) locs.push_back(locs[*rc::gen::inRange<size_t>(0, locs.size())]);
  std::reverse(locs.begin(), locs.end());
  if (tail && c.pages.size() > 1) {
    c.pages.pop_back();
    c.len = static_cast<int64_t>(c.pages.size()) * ps;
  } else {
    a->chains.erase(a->chains.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return locs;
}

void StepFree(AllocPair* a) {
  const V locs = DrawFreeLocs(a);
  RC_LOG() << "free " << rc::toString(locs) << "\n";
  const Status ref = a->ref.Free(locs);
  a->error |= !ref.ok();
  AssertSameStatus(a->fast.Free(locs), ref);
}

// A whole free group of 0-3 frees, or an open/close of a group (errors when already open / none open).
void StepFreeGroup(AllocPair* a) {
  if (DrawKind(3) == 0) {
    const bool begin = *rc::gen::arbitrary<bool>();
    RC_LOG() << (begin ? "free_group_begin" : "free_group_end") << "\n";
    const Status ref = begin ? a->ref.FreeGroupBegin() : a->ref.FreeGroupEnd();
    a->error |= !ref.ok();
    AssertSameStatus(begin ? a->fast.FreeGroupBegin() : a->fast.FreeGroupEnd(), ref);
    return;
  }
  std::vector<V> frees;
  const int64_t k = *rc::gen::inRange<int64_t>(0, 4);
  for (int64_t f = 0; f < k; ++f) frees.push_back(DrawFreeLocs(a));
  RC_LOG() << "free_group " << rc::toString(frees) << "\n";
  const Status ref = a->ref.FreeGroup(frees);
  a->error |= !ref.ok();
  AssertSameStatus(a->fast.FreeGroup(frees), ref);
}

KVSHARD_PROP(FastVsRefProps, AllocatorEqualsReferenceOnEveryStep, ()) {
  AllocatorConfig cfg;
  cfg.shard_size = Pick({1, 1, 2, 3, 4, 8});
  cfg.page_size = Pick({1, 1, 2, 3, 16});
  cfg.pages_per_rank = *rc::gen::resize(100, rc::gen::inRange<int64_t>(0, 17));
  cfg.need_sort = *rc::gen::arbitrary<bool>();
  cfg.check_last_loc = *rc::gen::arbitrary<bool>();
  RC_LOG() << "N=" << cfg.shard_size << " ps=" << cfg.page_size << " pages_per_rank=" << cfg.pages_per_rank
           << " need_sort=" << cfg.need_sort << " check_last_loc=" << cfg.check_last_loc << "\n";
  AllocPair a{
      RC_VALUE(ref::PageInterleaveAllocator::Create(cfg)), RC_VALUE(fast::PageInterleaveAllocator::Create(cfg)), {}};
  AssertSameAllocatorState(a);
  const int64_t steps = *rc::gen::inRange<int64_t>(1, 40);
  for (int64_t s = 0; s < steps; ++s) {
    switch (DrawKind(6)) {
      case 0:
      case 1: StepAllocExtend(&a); break;
      case 2: StepAllocByClasses(&a); break;
      case 3:
      case 4: StepFree(&a); break;
      default: StepFreeGroup(&a); break;
    }
    AssertSameAllocatorState(a);
  }
  RC_TAG(cfg.shard_size == 1 ? "N = 1" : "N > 1", cfg.need_sort ? "need_sort" : "no sort",
         a.deferred ? "a batch deferred" : "no deferral", a.error ? "an error" : "no error");
}

KVSHARD_PROP(FastVsRefProps, AllocatorCreateErrorsEqualReference, ()) {
  // pages_per_rank at the bound N * (pages_per_rank + 1) <= 2^24 only where it is refused: a pool at the bound
  // holds 2^24 pages (bounds_props_test.cc builds one).
  const int64_t n = Pick({-1, 0, 1, 8, kMaxShardSize + 1});
  const AllocatorConfig cfg{n, Pick({-1, 0, 1, 64}),
                            Pick({-1, 0, 5, n > 0 ? kMaxPoolLogicalPages / n : kMaxPoolLogicalPages}), false, false};
  AssertSameStatus(fast::PageInterleaveAllocator::Create(cfg).status(),
                   ref::PageInterleaveAllocator::Create(cfg).status());
}

}  // namespace
}  // namespace kvshard::props

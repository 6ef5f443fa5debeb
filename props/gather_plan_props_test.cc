// Properties of the gather plan (spec §3, §6) on generated valid batches: every field as spec §3's formulas
// give it, block_pages >= every rank's owned count (pad never negative), translate injective over the plan and
// everything else -> trash, send rows of all ranks reassembling exactly the prefix pages, shared prefix pages landing
// once, and the fail-fast errors.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/pool_json.h"
#include "cpu_ref/gather_plan.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

using ref::BuildGatherPlan;
using V = std::vector<int64_t>;

// Logs the batch as JSON: printed with the shrunk counterexample when a property fails.
void LogBatch(const ExtendBatch& b) { RC_LOG() << "batch: " << ExtendBatchToJson(b).dump() << "\n"; }

V PrefixPages(const ExtendBatch& b) {
  std::set<int64_t> s;
  for (const ExtendRequest& r : b.requests) s.insert(r.pages.begin(), r.pages.begin() + r.prefix_len / b.page_size);
  return V(s.begin(), s.end());
}

// Spec §3 field by field, each from its own formula rather than by building a plan: the scalars; page_pos maps
// each prefix page to owner * block_pages + (the owner's prefix pages with a smaller local page), the j-th chunk
// page (batch order) to chunk_base_page + j, nothing else; rank r sends its prefix pages' local pages ascending,
// padded with local page 0 to block_pages, as rows p*ps + [0, ps).
KVSHARD_PROP(GatherPlanProps, EveryFieldFollowsTheSpecFormulas, ()) {
  const ExtendBatch b = DrawValidBatch();
  LogBatch(b);
  const GatherPlan plan = RC_VALUE(BuildGatherPlan(b));
  const int64_t n = b.shard_size, ps = b.page_size;
  int64_t block_pages = 0;
  V chunk;
  for (const ExtendRequest& r : b.requests) {
    block_pages += (r.prefix_len / ps + n - 1) / n;
    chunk.insert(chunk.end(), r.pages.begin() + r.prefix_len / ps, r.pages.end());
  }
  RC_ASSERT(plan.shard_size == n);
  RC_ASSERT(plan.page_size == ps);
  RC_ASSERT(plan.block_pages == block_pages);
  RC_ASSERT(plan.n_prefix_slots == n * block_pages);
  RC_ASSERT(plan.chunk_base_page == b.max_prefix_tokens / ps);
  RC_ASSERT(plan.trash_page == (b.max_prefix_tokens + b.chunk_tokens) / ps);
  RC_ASSERT(plan.page_pos_size == n * (b.pages_per_rank + 2));
  const V prefix = PrefixPages(b);  // sorted unique
  std::map<int64_t, int64_t> page_pos;
  for (int64_t l : prefix) {
    const auto before = std::count_if(prefix.begin(), prefix.end(), [&](int64_t m) { return m % n == l % n && m < l; });
    page_pos[l] = (l % n) * block_pages + before;
  }
  for (size_t j = 0; j < chunk.size(); ++j) page_pos[chunk[j]] = plan.chunk_base_page + static_cast<int64_t>(j);
  V mapped, scratch;
  for (const auto& [page, pos] : page_pos) mapped.push_back(page), scratch.push_back(pos);
  RC_ASSERT(plan.mapped_pages == mapped);
  RC_ASSERT(plan.mapped_scratch_pages == scratch);
  RC_ASSERT(static_cast<int64_t>(plan.ranks.size()) == n);
  for (int64_t r = 0; r < n; ++r) {
    V send, rows;
    for (int64_t l : prefix) {
      if (l % n == r) send.push_back(l / n);
    }
    send.resize(block_pages, 0);
    for (int64_t p : send) {
      for (int64_t k = 0; k < ps; ++k) rows.push_back(p * ps + k);
    }
    RC_ASSERT(plan.ranks[r].rank == r);
    RC_ASSERT(plan.ranks[r].send_local_pages == send);
    RC_ASSERT(plan.ranks[r].send_rows == rows);
  }
}

KVSHARD_PROP(GatherPlanProps, BlockPagesCoversEveryRanksOwnedCount, ()) {
  const ExtendBatch b = DrawValidBatch();
  LogBatch(b);
  const GatherPlan plan = RC_VALUE(BuildGatherPlan(b));
  V owned(b.shard_size, 0);
  for (int64_t p : PrefixPages(b)) ++owned[p % b.shard_size];
  for (int64_t r = 0; r < b.shard_size; ++r) {
    RC_ASSERT(plan.block_pages >= owned[r]);  // the all-gather pad block_pages - owned is never negative
    RC_ASSERT(static_cast<int64_t>(plan.ranks[r].send_local_pages.size()) == plan.block_pages);
    RC_ASSERT(static_cast<int64_t>(plan.ranks[r].send_rows.size()) == plan.block_pages * b.page_size);
  }
  RC_ASSERT(plan.n_prefix_slots * b.page_size <= b.max_prefix_tokens);
}

KVSHARD_PROP(GatherPlanProps, TranslateInjectiveOverPlanElseTrash, ()) {
  const ExtendBatch b = DrawValidBatch();
  LogBatch(b);
  const GatherPlan plan = RC_VALUE(BuildGatherPlan(b));
  const int64_t ps = b.page_size;
  std::set<int64_t> planned;
  for (const ExtendRequest& r : b.requests) planned.insert(r.pages.begin(), r.pages.end());
  V locs(plan.page_pos_size * ps);
  std::iota(locs.begin(), locs.end(), 0);
  const V rows = RC_VALUE(ref::Translate(plan, locs));
  std::set<int64_t> seen;
  for (int64_t loc : locs) {
    const int64_t row = rows[loc];
    if (planned.count(loc / ps)) {
      RC_ASSERT(seen.insert(row).second);  // injective over the plan
      RC_ASSERT(row < plan.trash_page * ps);
      RC_ASSERT(row % ps == loc % ps);
    } else {
      RC_ASSERT(row == plan.trash_page * ps + loc % ps);  // everything else -> trash
    }
  }
  // Chunk pages sit in batch order at chunk_base_page + j.
  int64_t j = 0;
  for (const ExtendRequest& r : b.requests) {
    for (size_t k = r.prefix_len / ps; k < r.pages.size(); ++k, ++j) {
      RC_ASSERT(rows[r.pages[k] * ps] == (plan.chunk_base_page + j) * ps);
    }
  }
}

KVSHARD_PROP(GatherPlanProps, SendRowsReassembleExactlyThePrefixPages, ()) {
  const ExtendBatch b = DrawValidBatch();
  LogBatch(b);
  const GatherPlan plan = RC_VALUE(BuildGatherPlan(b));
  const int64_t n = b.shard_size, ps = b.page_size;
  // Simulate the all-gather of page ids: scratch slot r*block + w receives rank r's w-th send page.
  std::map<int64_t, int64_t> slot_of;  // logical page -> slot it arrives in
  for (int64_t r = 0; r < n; ++r) {
    const RankSend& s = plan.ranks[r];
    for (int64_t w = 0; w < plan.block_pages; ++w) {
      RC_ASSERT(s.send_rows[w * ps] == s.send_local_pages[w] * ps);
      if (s.send_local_pages[w] == 0) continue;  // trash pad
      RC_ASSERT(slot_of.emplace(s.send_local_pages[w] * n + r, r * plan.block_pages + w).second);
    }
  }
  const V prefix = PrefixPages(b);
  RC_ASSERT(slot_of.size() == prefix.size());
  const V dense = ref::DensePagePos(plan);
  for (int64_t p : prefix) {
    RC_ASSERT(slot_of.count(p) == 1);
    RC_ASSERT(dense[p] == slot_of[p]);  // the page lands where translate looks for it
  }
}

KVSHARD_PROP(GatherPlanProps, SharedPrefixPagesLandOnce, ()) {
  ExtendBatch b = DrawValidBatch();
  // Duplicate a random request (same prefix, fresh chunk dropped): its prefix pages must not take slots.
  const size_t i = *rc::gen::inRange<size_t>(0, b.requests.size());
  ExtendRequest dup = b.requests[i];
  dup.pages.resize(dup.prefix_len / b.page_size);
  dup.seq_len = dup.prefix_len;
  const int64_t k = dup.prefix_len / b.page_size;
  b.requests.push_back(dup);
  b.max_prefix_tokens += b.shard_size * b.page_size * ((k + b.shard_size - 1) / b.shard_size);
  LogBatch(b);
  const GatherPlan plan = RC_VALUE(BuildGatherPlan(b));
  int64_t real = 0;
  for (const RankSend& s : plan.ranks) {
    for (int64_t p : s.send_local_pages) real += p != 0;
  }
  RC_ASSERT(real == static_cast<int64_t>(PrefixPages(b).size()));
  std::set<int64_t> slots;
  for (size_t j = 0; j < plan.mapped_pages.size(); ++j) RC_ASSERT(slots.insert(plan.mapped_scratch_pages[j]).second);
}

KVSHARD_PROP(GatherPlanProps, NonCyclicPrefixFailsNamingCyclic, ()) {
  ExtendBatch b = DrawFullSizeBatch();
  // Swap two prefix positions of one request; the plan must fail naming "cyclic" iff owners stop being
  // one cyclic run (N = 2 with two pages stays cyclic).
  std::vector<size_t> candidates;
  for (size_t i = 0; i < b.requests.size(); ++i) {
    if (b.requests[i].prefix_len / b.page_size >= 2) candidates.push_back(i);
  }
  RC_PRE(!candidates.empty());
  ExtendRequest& r = b.requests[*rc::gen::elementOf(candidates)];
  const int64_t n = b.shard_size, k = r.prefix_len / b.page_size;
  const int64_t x = *rc::gen::inRange<int64_t>(0, k - 1);
  const int64_t y = *rc::gen::inRange<int64_t>(x + 1, k);
  std::swap(r.pages[x], r.pages[y]);
  bool cyclic = true;
  for (int64_t j = 1; j < k; ++j) cyclic &= r.pages[j] % n == (r.pages[0] + j) % n;
  LogBatch(b);
  auto plan = BuildGatherPlan(b);
  RC_LOG() << "status: " << plan.status().ToString() << "\n";
  RC_ASSERT(plan.ok() == cyclic);
  if (!cyclic) RC_ASSERT(plan.status().message().find("cyclic") != std::string::npos);
}

KVSHARD_PROP(GatherPlanProps, CapacityAndAlignmentErrorsAreTagged, ()) {
  ExtendBatch b = DrawFullSizeBatch();
  const int64_t ps = b.page_size, lps = b.shard_size * ps;
  int64_t block = 0, chunk = 0;
  std::vector<size_t> with_prefix;
  for (size_t i = 0; i < b.requests.size(); ++i) {
    const ExtendRequest& r = b.requests[i];
    block += (r.prefix_len / ps + b.shard_size - 1) / b.shard_size;
    chunk += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
    if (r.prefix_len > 0) with_prefix.push_back(i);
  }
  std::vector<int> options;
  if (block > 0) options.push_back(0);
  if (chunk > 0) options.push_back(1);
  if (ps > 1 && !with_prefix.empty()) options.push_back(2);
  RC_PRE(!options.empty());
  const int which = *rc::gen::elementOf(options);
  const char* tag = "capacity";
  if (which == 0) {
    b.max_prefix_tokens = *rc::gen::inRange<int64_t>(0, block) * lps;
  } else if (which == 1) {
    b.chunk_tokens = *rc::gen::inRange<int64_t>(0, chunk) * ps;
  } else {
    b.requests[*rc::gen::elementOf(with_prefix)].prefix_len -= *rc::gen::inRange<int64_t>(1, ps);
    tag = "page-aligned";
  }
  LogBatch(b);
  auto plan = BuildGatherPlan(b);
  RC_ASSERT(!plan.ok());
  RC_ASSERT(plan.status().message().find(tag) != std::string::npos);
}

KVSHARD_PROP(GatherPlanProps, BatchJsonRoundTripsAndReaderRejectsCorruption, ()) {
  const ExtendBatch b = DrawValidBatch();
  Json j = ExtendBatchToJson(b);
  RC_ASSERT(RC_VALUE(ExtendBatchFromJson(j)) == b);
  // Corrupt one field: drop it, retype it, negate it or overflow it. The reader must fail, naming it.
  const std::string key =
      *rc::gen::element<std::string>("shard_size", "page_size", "pages_per_rank", "max_prefix_tokens", "chunk_tokens",
                                     "prefix_len", "seq_len", "pages");
  const bool top = j.contains(key);
  Json& obj = top ? j : j["requests"][*rc::gen::inRange<size_t>(0, b.requests.size())];
  const int how = *rc::gen::inRange(0, 4);
  if (how == 0) {
    obj.erase(key);
  } else if (how == 1) {
    obj[key] = "12";
  } else if (how == 2) {
    obj[key] = key == "pages" ? Json::array({-1}) : Json(-1);
  } else {
    obj[key] = key == "pages" ? Json::array({uint64_t{1} << 63}) : Json(uint64_t{1} << 63);
  }
  auto r = ExtendBatchFromJson(j);
  RC_ASSERT(!r.ok());
  RC_ASSERT(r.status().message().find(key) != std::string::npos);
}

// DensePagePosCache over a run of plans of one pool (rewriting only what the last plan mapped, or everything when
// the trash page moved) and over pools of other sizes is DensePagePos of each plan.
KVSHARD_PROP(GatherPlanProps, DensePagePosCacheIsDensePagePosOfEachPlan, ()) {
  DensePagePosCache cache;
  const int pools = *rc::gen::inRange(1, 4);
  for (int pool = 0; pool < pools; ++pool) {
    const ExtendBatch first = DrawValidBatch();
    const int64_t n = first.shard_size, ps = first.page_size;
    const int plans = *rc::gen::inRange(1, 6);
    for (int k = 0; k < plans; ++k) {
      ExtendBatch b = first;  // the same pool, other requests (and sometimes other capacities: another trash page)
      if (k > 0) {
        DrawnRequests d = DrawRequests(n, ps, b.pages_per_rank);
        b.requests = std::move(d.requests);
        b.max_prefix_tokens = n * ps * (d.block_pages + *rc::gen::inRange<int64_t>(0, 2));
        b.chunk_tokens = ps * (d.chunk_pages + *rc::gen::inRange<int64_t>(0, 2));
      }
      LogBatch(b);
      const GatherPlan plan = RC_VALUE(BuildGatherPlan(b));
      RC_ASSERT(cache.Update(plan) == ref::DensePagePos(plan));
      RC_ASSERT(cache.pos() == ref::DensePagePos(plan));
    }
  }
}

}  // namespace
}  // namespace kvshard::props

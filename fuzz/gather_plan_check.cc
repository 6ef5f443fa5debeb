// The gather-plan oracle: ref vs fast, then the plan's invariants.
#include "fuzz/gather_plan_check.h"

#include <unordered_map>
#include <unordered_set>

#include "cpu_fast/gather_plan.h"
#include "cpu_ref/gather_plan.h"
#include "fuzz/fuzz_util.h"

namespace kvshard::fuzz {
namespace {

void CheckInvariants(const ExtendBatch& batch, const GatherPlan& p) {
  const int64_t n = batch.shard_size, ps = batch.page_size;
  FUZZ_ASSERT(p.shard_size == n && p.page_size == ps, "geometry echoed");
  FUZZ_ASSERT(static_cast<int64_t>(p.ranks.size()) == n, "one RankSend per rank");
  FUZZ_ASSERT(p.n_prefix_slots == n * p.block_pages, "n_prefix_slots");
  FUZZ_ASSERT(p.n_prefix_slots <= p.chunk_base_page && p.chunk_base_page <= p.trash_page, "scratch regions ordered");
  FUZZ_ASSERT(p.mapped_pages.size() == p.mapped_scratch_pages.size(), "page_pos pairs");
  std::unordered_map<int64_t, int64_t> pos;
  std::unordered_set<int64_t> scratch;
  for (size_t i = 0; i < p.mapped_pages.size(); ++i) {
    FUZZ_ASSERT(i == 0 || p.mapped_pages[i - 1] < p.mapped_pages[i], "mapped_pages ascending at ", i);
    FUZZ_ASSERT(p.mapped_pages[i] >= 0 && p.mapped_pages[i] < p.page_pos_size, "mapped page in page_pos range");
    const int64_t s = p.mapped_scratch_pages[i];
    FUZZ_ASSERT(s >= 0 && s < p.trash_page, "scratch page ", s, " below the trash page ", p.trash_page);
    FUZZ_ASSERT(scratch.insert(s).second, "scratch page ", s, " holds two logical pages");
    pos[p.mapped_pages[i]] = s;
  }
  for (int64_t r = 0; r < n; ++r) {
    const RankSend& send = p.ranks[r];
    FUZZ_ASSERT(send.rank == r && static_cast<int64_t>(send.send_local_pages.size()) == p.block_pages, "rank ", r,
                " sends block_pages pages");
    FUZZ_ASSERT(send.send_rows.size() == send.send_local_pages.size() * static_cast<size_t>(ps), "send_rows size");
    for (size_t w = 0; w < send.send_local_pages.size(); ++w) {
      for (int64_t k = 0; k < ps; ++k) {
        FUZZ_ASSERT(send.send_rows[w * ps + k] == send.send_local_pages[w] * ps + k, "send_rows expand pages");
      }
    }
  }
  int64_t chunk_pages = 0;
  for (size_t q = 0; q < batch.requests.size(); ++q) {
    const ExtendRequest& req = batch.requests[q];
    const size_t prefix_pages = static_cast<size_t>(req.prefix_len / ps);
    for (size_t j = 0; j < req.pages.size(); ++j) {
      const int64_t page = req.pages[j];
      const auto it = pos.find(page);
      FUZZ_ASSERT(it != pos.end(), "requests[", q, "].pages[", j, "] = ", page, " is not mapped");
      if (j < prefix_pages) {
        // A prefix page sits in its owner's all-gather block, at the slot where the owner sends it.
        const int64_t owner = page % n, slot = it->second - owner * p.block_pages;
        FUZZ_ASSERT(slot >= 0 && slot < p.block_pages, "prefix page ", page, " outside rank ", owner, "'s block");
        FUZZ_ASSERT(p.ranks[owner].send_local_pages[slot] == page / n, "prefix page ", page, " not sent by its owner");
      } else {
        FUZZ_ASSERT(it->second == p.chunk_base_page + chunk_pages, "chunk page ", page, " not at its chunk slot");
        ++chunk_pages;
      }
    }
  }
}

}  // namespace

bool CheckGatherPlan(const ExtendBatch& batch, const std::vector<int64_t>& locs) {
  const StatusOr<GatherPlan> want = ref::BuildGatherPlan(batch);
  fast::GatherPlanner planner;
  GatherPlan got;
  const Status status = planner.Build(batch, &got);
  FUZZ_ASSERT(status.code() == want.status().code() && status.message() == want.status().message(),
              "fast planner status '", status.ToString(), "' != reference '", want.status().ToString(), "'");
  if (!want.ok()) return false;
  FUZZ_ASSERT(got == *want, "fast plan differs from the reference plan");
  // A second build with the same planner (its bitmaps reused) gives the same plan.
  GatherPlan again;
  FUZZ_ASSERT(planner.Build(batch, &again).ok() && again == got, "fast planner reuse changed the plan");
  CheckInvariants(batch, *want);
  const StatusOr<std::vector<int64_t>> rows = ref::Translate(*want, locs);
  const StatusOr<std::vector<int64_t>> fast_rows = fast::Translate(got, locs);
  FUZZ_ASSERT(rows.status().message() == fast_rows.status().message(), "translate errors differ");
  if (rows.ok()) FUZZ_ASSERT(*rows == *fast_rows, "translate rows differ");
  return true;
}

}  // namespace kvshard::fuzz

// Admission of extend batches: the allocator call of either mode, eviction and retries, the error for a batch
// that never fits; and per batch the gather plan (or its owner-major stand-in) and the direct-write owner check.
#include <utility>
#include <vector>

#include "sim/cp_owners.h"
#include "sim/simulation.h"

namespace kvshard::sim::internal {

int64_t NewPages(const std::vector<std::pair<Req*, int64_t>>& batch, int64_t ps) {
  int64_t need = 0;
  for (const auto& [r, chunk] : batch) need += (r->done + chunk + ps - 1) / ps - r->done / ps;
  return need;
}

StatusOr<bool> Simulation::TryAlloc(const std::vector<std::pair<Req*, int64_t>>& batch, const AllocBatch& ab,
                                    ExtendPages* out) {
  if (!owners_) return alloc_->AllocExtend(ab, out);
  Int64List extend, prefix;
  for (const auto& [r, chunk] : batch) {
    extend.push_back(chunk);
    prefix.push_back(r->done);
  }
  KVSHARD_ASSIGN_OR_RETURN(
      const std::vector<Int64List> classes,
      OwnerPageClasses(extend, prefix, c_.page_size, c_.cp_size, c_.shard_size, alloc_->class_free_page_counts()));
  return alloc_->AllocExtendByClasses(ab, classes, out);
}

StatusOr<bool> Simulation::EvictFor(int64_t need) {
  std::vector<int64_t> freed;
  r_.evicted_pages += cache_.Evict(need * c_.shard_size, &freed);
  if (c_.observer) c_.observer->OnEvict(need * c_.shard_size, freed, cache_.cached_pages());
  if (freed.empty()) return false;
  std::vector<int64_t> locs;  // the evicted pages go back to the allocator (not a free of the simulator's own)
  for (int64_t p : freed) locs.push_back(p * c_.page_size);
  KVSHARD_RETURN_IF_ERROR(alloc_->Free(locs));
  return true;
}

StatusOr<bool> Simulation::Allocate(const std::vector<std::pair<Req*, int64_t>>& batch, ExtendPages* out) {
  const int64_t ps = c_.page_size;
  AllocBatch ab;
  for (const auto& [r, chunk] : batch) {
    ab.prefix_lens.push_back(r->done);
    ab.seq_lens.push_back(r->done + chunk);
    ab.rotation_bases.push_back(owners_ ? 0 : r->base);  // owner-plan chains have no rotation: base 0
    ab.last_locs.push_back(r->pages.empty() ? 0 : r->pages.back() * ps + ps - 1);
  }
  std::vector<int64_t> ids;
  if (c_.observer) {
    for (const auto& [r, chunk] : batch) ids.push_back(r->id);
  }
  KVSHARD_ASSIGN_OR_RETURN(bool ok, TryAlloc(batch, ab, out));
  if (c_.observer) c_.observer->OnAlloc(ids, ab, ok, *out, *alloc_);
  if (ok) return true;
  KVSHARD_ASSIGN_OR_RETURN(const bool freed, EvictFor(NewPages(batch, ps)));
  if (!freed) return false;
  KVSHARD_ASSIGN_OR_RETURN(ok, TryAlloc(batch, ab, out));
  if (c_.observer) c_.observer->OnAlloc(ids, ab, ok, *out, *alloc_);
  return ok;
}

StatusOr<bool> Simulation::EvictUntilAdmitted(const std::vector<std::pair<Req*, int64_t>>& batch, ExtendPages* out) {
  while (true) {
    KVSHARD_ASSIGN_OR_RETURN(const bool freed, EvictFor(NewPages(batch, c_.page_size)));
    if (!freed) return false;
    KVSHARD_ASSIGN_OR_RETURN(const bool ok, Allocate(batch, out));
    if (ok) return true;
  }
}

Status Simulation::NotAdmitted(const std::vector<std::pair<Req*, int64_t>>& batch) {
  const Req& r = *batch[0].first;
  if (owners_) {
    StatusOr<std::vector<Int64List>> classes = OwnerPageClasses({batch[0].second}, {r.done}, c_.page_size, c_.cp_size,
                                                                c_.shard_size, alloc_->class_free_page_counts());
    const Int64List counts = alloc_->class_free_page_counts();
    Int64List need(counts.size(), 0);
    if (classes.ok()) {
      for (int64_t k : (*classes)[0]) ++need[k];
    }
    int64_t free_pages = 0;
    for (int64_t x : counts) free_pages += x;
    for (size_t k = 0; k < counts.size(); ++k) {
      if (need[k] > counts[k]) {
        return InvalidArgument("cache_tokens: request ", r.id, " (", r.w->input_tokens,
                               " prompt tokens) cannot "
                               "be admitted: alloc_mode owners draws each page from its CP compute owner's class, "
                               "and class ",
                               k, " needs ", need[k], " pages but has ", counts[k], " free (", free_pages,
                               " free in the pool, ", r_.pool_pages_per_rank,
                               " per rank); nothing is "
                               "left to evict and no request is running to free pages");
      }
    }
  }
  return InvalidArgument("cache_tokens: request ", r.id, " (", r.w->input_tokens,
                         " prompt tokens) cannot be admitted: the allocator has no room for the batch's ",
                         NewPages(batch, c_.page_size), " new pages after evicting for them (",
                         alloc_->aggregate_free_size() / c_.page_size, " pages free, ", r_.pool_pages_per_rank,
                         " per rank; SGLang's alloc_extend raises here), and no request is running to free pages");
}

Status Simulation::NotFormed(Req& r) {
  const std::string what =
      StrCat("cache_tokens: request ", r.id, " (", r.w->input_tokens, " prompt tokens) cannot be admitted: ");
  switch (head_stop_.kind) {
    case HeadStop::kKvBudget:
      return InvalidArgument(what,
                             "SGLang's add_one_req needs its extend + 1 output token + the per-request reserve of ",
                             c_.shard_size * c_.page_size, " tokens (", head_stop_.need,
                             ") below the pool's free and evictable tokens (", head_stop_.available, ", ",
                             r_.pool_pages_per_rank, " pages per rank), and no request is running to free more");
    case HeadStop::kScratch:
      return InvalidArgument(what,
                             "its prefix and extend do not fit the sharded assembly scratch even in an empty batch "
                             "(SGLang's _kv_shard_reserve_scratch), and no request is running");
    case HeadStop::kNone: break;
  }
  return NotAdmitted({{&r, r.w->input_tokens}});
}

void Simulation::PlanGather(ExtendBatch& eb, int64_t prefix_pages, int64_t chunk_pages, BatchWork* work) {
  const int64_t n = c_.shard_size, ps = c_.page_size;
  eb.max_prefix_tokens = n * ps * std::max<int64_t>(1, prefix_pages);
  eb.chunk_tokens = ps * chunk_pages;
  if (owners_ && !PrefixOwnersCyclic(eb)) {  // SGLang's begin_shard_extend rejects it; model the owner-major gather
    ++r_.gather_plan_rejections;
    int64_t distinct = 0;
    const int64_t block_pages = OwnerMajorBlockPages(eb, &distinct);
    work->prefix_pages = distinct;
    work->gathered_bytes_layer = n * block_pages * ps * c_.kv_bytes_per_token_layer;
    return;
  }
  if (Status s = planner_.Build(eb, &plan_, /*with_send_rows=*/false); !s.ok()) {
    Violation(StrCat("gather plan: ", s.message()));
  }
  work->prefix_pages = static_cast<int64_t>(plan_.mapped_pages.size()) - chunk_pages;
  work->gathered_bytes_layer = n * plan_.block_pages * ps * c_.kv_bytes_per_token_layer;
}

void Simulation::CheckDirectWrites(const std::vector<std::pair<Req*, int64_t>>& batch, const ExtendPages& out) {
  std::vector<Int64List> extent(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    extent[i].assign(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
  }
  StatusOr<DirectWriteCheck> dw = sim::CheckDirectWrites(cp_plan_, extent);
  if (!dw.ok()) {
    Violation(StrCat("direct-write owner check: ", dw.status().message()));
    return;
  }
  r_.direct_write_pages += dw->pages;
  r_.owner_mismatch_pages += dw->mismatch_pages;
  r_.direct_write_failed_ranks += dw->failed_ranks;
  r_.direct_write_failed_batches += dw->failed_ranks > 0 ? 1 : 0;
  if (owners_ && dw->mismatch_pages > 0) {
    Violation(StrCat("owner-plan allocation: ", dw->mismatch_pages, " pages fail the direct-write owner check"));
  }
}

}  // namespace kvshard::sim::internal

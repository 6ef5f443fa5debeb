// Reference begin_shard_extend, step by step as spec §3 states it: validate, check each prefix, block_pages =
// sum of ceil(K_i/N), sorted unique prefix pages in owner-major order take slot owner * block_pages + rank within
// the owner, chunk pages take chunk_base_page + j in batch order, each rank sends its pages padded with trash.
#include "cpu_ref/gather_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <string>

#include "core/cyclic_owners.h"

namespace kvshard::ref {
namespace {

// Prefix pages of a request: row[0:prefix_len:ps] // ps, i.e. its first prefix_len / ps pages.
std::span<const int64_t> PrefixPages(const ExtendRequest& r, int64_t ps) {
  return std::span<const int64_t>(r.pages).first(static_cast<size_t>(r.prefix_len / ps));
}

// Request i's prefix is page-aligned and its owners are cyclic: owner(page k) = (owner(page 0) + k) % N.
Status CheckPrefix(const ExtendBatch& b, size_t i) {
  const ExtendRequest& r = b.requests[i];
  if (r.prefix_len % b.page_size != 0) {
    return MisalignedPrefixError(i, r.prefix_len, b.page_size);
  }
  const std::span<const int64_t> prefix = PrefixPages(r, b.page_size);
  const int64_t n = b.shard_size;
  if (!prefix.empty() && FirstNonCyclicPage(prefix, prefix[0] % n, n) >= 0) return NonCyclicPrefixError(i, prefix, n);
  return Status::Ok();
}

// block_pages = sum over requests of ceil(K_i / N): the host bound on every rank's prefix pages.
int64_t BlockPages(const ExtendBatch& b) {
  int64_t block_pages = 0;
  for (const ExtendRequest& r : b.requests) {
    block_pages += (r.prefix_len / b.page_size + b.shard_size - 1) / b.shard_size;
  }
  return block_pages;
}

// The batch's prefix pages, sorted unique, in owner-major order: by key (l % N) * stride + l // N, where
// stride = pages_per_rank + 2, SGLang's _local_page_stride (so each owner's pages come in local-page order).
std::vector<int64_t> OwnerMajorPrefixPages(const ExtendBatch& b, std::pmr::memory_resource* nodes) {
  std::pmr::set<int64_t> unique(nodes);
  for (const ExtendRequest& r : b.requests) {
    for (int64_t page : PrefixPages(r, b.page_size)) unique.insert(page);
  }
  const int64_t n = b.shard_size, stride = b.pages_per_rank + 2;
  const auto key = [&](int64_t l) { return (l % n) * stride + l / n; };
  std::vector<int64_t> pages(unique.begin(), unique.end());
  std::sort(pages.begin(), pages.end(), [&](int64_t x, int64_t y) { return key(x) < key(y); });
  return pages;
}

// The scratch regions must hold the padded gather span (N * block_pages pages) and every chunk page.
Status CheckCapacity(const ExtendBatch& b, int64_t block_pages, int64_t n_prefix_pages) {
  const int64_t ps = b.page_size, prefix_tokens = b.shard_size * block_pages * ps;
  if (prefix_tokens > b.max_prefix_tokens) {
    return PrefixCapacityError(n_prefix_pages, prefix_tokens, b.max_prefix_tokens);
  }
  int64_t chunk_pages = 0;
  for (const ExtendRequest& r : b.requests) chunk_pages += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
  if (chunk_pages * ps > b.chunk_tokens) {
    return ChunkCapacityError(chunk_pages * ps, b.chunk_tokens);
  }
  return Status::Ok();
}

// Each prefix page (owner-major order) goes to slot owner * block_pages + its rank within its owner, and is
// rank owner's next send page (local page l // N); send pages start as block_pages trash pages (local page 0).
void PlacePrefixPages(const std::vector<int64_t>& owner_major, GatherPlan* plan,
                      std::pmr::map<int64_t, int64_t>* page_pos) {
  const int64_t n = plan->shard_size, block_pages = plan->block_pages;
  for (int64_t r = 0; r < n; ++r) plan->ranks.push_back({r, std::vector<int64_t>(block_pages, 0), {}});
  std::vector<int64_t> within(n, 0);  // pages placed per owner
  for (int64_t page : owner_major) {
    const int64_t owner = page % n, k = within[owner]++;
    KVSHARD_CHECK(k < block_pages);  // block_pages bounds every rank's count (spec §6)
    (*page_pos)[page] = owner * block_pages + k;
    plan->ranks[owner].send_local_pages[k] = page / n;
  }
}

// The j-th chunk page of the batch (in request order) goes to chunk_base_page + j; it must be fresh: neither a
// prefix page nor an earlier chunk page.
Status PlaceChunkPages(const ExtendBatch& b, int64_t chunk_base_page, std::pmr::map<int64_t, int64_t>* page_pos) {
  int64_t next = chunk_base_page;
  for (size_t i = 0; i < b.requests.size(); ++i) {
    const ExtendRequest& r = b.requests[i];
    for (size_t j = static_cast<size_t>(r.prefix_len / b.page_size); j < r.pages.size(); ++j) {
      if (page_pos->contains(r.pages[j])) {
        return StaleChunkPageError(i, j, r.pages[j]);
      }
      (*page_pos)[r.pages[j]] = next++;
    }
  }
  return Status::Ok();
}

// Local pages expanded to rows p * ps + [0, ps).
std::vector<int64_t> PageRows(const std::vector<int64_t>& pages, int64_t ps) {
  std::vector<int64_t> rows;
  for (int64_t p : pages) {
    for (int64_t k = 0; k < ps; ++k) rows.push_back(p * ps + k);
  }
  return rows;
}

}  // namespace

Status GatherPlanner::Build(const ExtendBatch& batch, GatherPlan* plan, bool with_send_rows) {
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatch(batch));
  for (size_t i = 0; i < batch.requests.size(); ++i) KVSHARD_RETURN_IF_ERROR(CheckPrefix(batch, i));
  const int64_t n = batch.shard_size, ps = batch.page_size, block_pages = BlockPages(batch);
  const std::vector<int64_t> prefix = OwnerMajorPrefixPages(batch, nodes_.get());
  KVSHARD_RETURN_IF_ERROR(CheckCapacity(batch, block_pages, static_cast<int64_t>(prefix.size())));
  GatherPlan p;
  p.shard_size = n;
  p.page_size = ps;
  p.block_pages = block_pages;
  p.n_prefix_slots = n * block_pages;
  p.chunk_base_page = batch.max_prefix_tokens / ps;
  p.trash_page = (batch.max_prefix_tokens + batch.chunk_tokens) / ps;
  p.page_pos_size = n * (batch.pages_per_rank + 2);
  std::pmr::map<int64_t, int64_t> page_pos(nodes_.get());  // logical page -> absolute scratch page; absent: trash
  PlacePrefixPages(prefix, &p, &page_pos);
  KVSHARD_RETURN_IF_ERROR(PlaceChunkPages(batch, p.chunk_base_page, &page_pos));
  for (const auto& [page, scratch_page] : page_pos) {
    p.mapped_pages.push_back(page);
    p.mapped_scratch_pages.push_back(scratch_page);
  }
  if (with_send_rows) {
    for (RankSend& r : p.ranks) r.send_rows = PageRows(r.send_local_pages, ps);
  }
  *plan = std::move(p);
  return Status::Ok();
}

StatusOr<GatherPlan> BuildGatherPlan(const ExtendBatch& batch) {
  thread_local GatherPlanner planner;  // its nodes kept for the thread's next plan (a reader's next record)
  GatherPlan plan;
  KVSHARD_RETURN_IF_ERROR(planner.Build(batch, &plan));
  return plan;
}

}  // namespace kvshard::ref

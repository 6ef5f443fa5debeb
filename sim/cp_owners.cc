// Owner-plan classes, the direct-write owner check of a batch and the non-cyclic gather size.
#include "sim/cp_owners.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/cyclic_owners.h"
#include "cpu_ref/cp_shared_kv.h"

namespace kvshard::sim {

StatusOr<std::vector<Int64List>> OwnerPageClasses(const Int64List& extend_lens, const Int64List& prefix_lens,
                                                  int64_t page_size, int64_t cp_size, int64_t shard_size,
                                                  Int64List free_counts) {
  if (cp_size < 1 || shard_size % cp_size != 0) {
    return InvalidArgument("alloc_mode: owners needs cp_size (", cp_size, ") to divide shard_size (", shard_size,
                           "): a page's CP owner (page % cp) must follow from its allocator class "
                           "(page % N)");
  }
  const int64_t groups = shard_size / cp_size;
  std::vector<Int64List> classes;
  classes.reserve(extend_lens.size());
  for (size_t q = 0; q < extend_lens.size(); ++q) {
    const std::optional<Int64List> owners =
        ref::BuildInSeqPageComputeOwners(extend_lens[q], prefix_lens[q], page_size, cp_size);
    if (!owners) {
      return InvalidArgument("batch_gt1_page_owner_plan_unavailable: request ", q, " extend_len=", extend_lens[q],
                             " prefix_len=", prefix_lens[q]);
    }
    Int64List& out = classes.emplace_back();
    out.reserve(owners->size());
    for (int64_t o : *owners) {
      int64_t best = o;
      for (int64_t g = 1; g < groups; ++g) {
        if (free_counts[o + g * cp_size] > free_counts[best]) best = o + g * cp_size;
      }
      --free_counts[best];
      out.push_back(best);
    }
  }
  return classes;
}

StatusOr<DirectWriteCheck> CheckDirectWrites(const CPSharedKVBatchPlan& plan,
                                             const std::vector<Int64List>& extent_pages) {
  KVSHARD_ASSIGN_OR_RETURN(const std::vector<ref::DirectWriteOwnerMismatch> mismatches,
                           ref::FindDirectWriteOwnerMismatches(plan, extent_pages));
  DirectWriteCheck check;
  for (size_t q = 0; q < plan.request_extend_lens.size(); ++q) {
    check.pages += (plan.request_extend_lens[q] + plan.page_size - 1) / plan.page_size;
  }
  check.mismatch_pages = static_cast<int64_t>(mismatches.size());
  std::set<int64_t> ranks;
  for (const ref::DirectWriteOwnerMismatch& m : mismatches) ranks.insert(m.compute_owner);
  check.failed_ranks = static_cast<int64_t>(ranks.size());
  return check;
}

bool PrefixOwnersCyclic(const ExtendBatch& b) {
  const int64_t n = b.shard_size;
  for (const ExtendRequest& r : b.requests) {
    const std::span<const int64_t> prefix(r.pages.data(), static_cast<size_t>(r.prefix_len / b.page_size));
    if (!prefix.empty() && FirstNonCyclicPage(prefix, prefix[0] % n, n) >= 0) return false;
  }
  return true;
}

int64_t OwnerMajorBlockPages(const ExtendBatch& b, int64_t* distinct_pages) {
  std::set<int64_t> unique;
  for (const ExtendRequest& r : b.requests) {
    unique.insert(r.pages.begin(), r.pages.begin() + r.prefix_len / b.page_size);
  }
  Int64List per_rank(static_cast<size_t>(b.shard_size), 0);
  for (int64_t page : unique) ++per_rank[page % b.shard_size];
  *distinct_pages = static_cast<int64_t>(unique.size());
  return per_rank.empty() ? 0 : *std::max_element(per_rank.begin(), per_rank.end());
}

}  // namespace kvshard::sim

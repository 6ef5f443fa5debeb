// kvshard simulate's CP shared-KV accounting (docs/simulate.md, "CP shared-KV direct writes"): the owner-plan
// allocation classes of an extend batch, the pages whose direct write would fail the owner check, and the gather
// a batch with non-cyclic prefix owners would need. A kvshard model over cpu_ref/cp_shared_kv.h, not SGLang.
#ifndef KVSHARD_SIM_CP_OWNERS_H_
#define KVSHARD_SIM_CP_OWNERS_H_

#include <cstdint>
#include <vector>

#include "core/cp_plan.h"
#include "core/gather_plan.h"
#include "core/status.h"

namespace kvshard::sim {

// Owner-plan mode's allocator class for every new page of a batch (request q: ceil(extend_lens[q] / ps) pages):
// the CP compute owner o of the page (BuildInSeqPageComputeOwners) when N == cp; when N = k * cp, the class among
// o, o + cp, ..., o + (k-1) * cp with the most free pages left after the batch's earlier pages (ties: lowest), so
// page % cp == o either way. `free_counts` are the allocator's class counts. N % cp != 0 is InvalidArgument.
StatusOr<std::vector<Int64List>> OwnerPageClasses(const Int64List& extend_lens, const Int64List& prefix_lens,
                                                  int64_t page_size, int64_t cp_size, int64_t shard_size,
                                                  Int64List free_counts);

// One batch's direct-write owner check on every CP rank.
struct DirectWriteCheck {
  int64_t pages = 0;           // extent pages checked (every request's ceil(extend / ps))
  int64_t mismatch_pages = 0;  // pages whose logical page % cp differs from their compute owner
  int64_t failed_ranks = 0;    // ranks whose direct write fails (local_loc_owner_mismatch)
};

// FindDirectWriteOwnerMismatches of the batch's extent pages, counted.
StatusOr<DirectWriteCheck> CheckDirectWrites(const CPSharedKVBatchPlan& plan,
                                             const std::vector<Int64List>& extent_pages);

// True iff every request's prefix pages have cyclic owners (page k % N == (page 0 + k) % N), which SGLang's
// begin_shard_extend requires ("... are not cyclic — rotation base out of sync").
bool PrefixOwnersCyclic(const ExtendBatch& batch);

// The gather of a batch whose prefix owners need not be cyclic (kvshard model): each rank sends the batch's
// distinct prefix pages it owns padded to the most any rank owns, so block_pages = that maximum. Sets
// *distinct_pages to the distinct prefix pages.
int64_t OwnerMajorBlockPages(const ExtendBatch& batch, int64_t* distinct_pages);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_CP_OWNERS_H_

// Reference CP shared-KV direct writes (seed 003 nsa/utils.py): this rank's logical and physical out_cache_loc
// (get_cp_shared_kv_local_[physical_]out_cache_loc), the flat page compute-owner plan and the shared-KV layout.
// CpSharedKVLayout and BuildInSeqPageComputeOwners are DERIVED (not in the seeds; docs/split-plans.md says how).
#ifndef KVSHARD_CPU_REF_CP_SHARED_KV_H_
#define KVSHARD_CPU_REF_CP_SHARED_KV_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cp_plan.h"
#include "core/status.h"
#include "cpu_ref/cp_helpers.h"

namespace kvshard::ref {

// DERIVED from SGLang's published shared-KV layout: logical page p = loc // ps lives on rank p % N as local page
// p // N; its physical row is local_page * ps + loc % ps. Negative locs are padding and map to themselves.
struct CpSharedKVLayout {
  int64_t cp_size = 1;
  int64_t cp_rank = 0;
  int64_t page_size = 1;

  // Rank owning loc's page (loc >= 0).
  int64_t OwnerOf(int64_t loc) const { return (loc / page_size) % cp_size; }
  // owned_by_this_rank for one loc (loc >= 0).
  bool OwnedByThisRank(int64_t loc) const { return OwnerOf(loc) == cp_rank; }
  // logical_locs_to_physical for one loc.
  int64_t LogicalLocToPhysical(int64_t loc) const {
    return loc < 0 ? loc : (loc / page_size / cp_size) * page_size + loc % page_size;
  }
};

// OK iff the layout's cp_size, cp_rank and page_size are in range (messages name cp_shared_kv_layout.<field>).
Status ValidateCpSharedKVLayout(const CpSharedKVLayout& layout);

// The forward-batch fields the direct-write path reads and the two per-batch caches it fills (None = nullopt).
struct CpSharedKVForwardBatch {
  bool uses_cp_shared_kv = false;
  CpServerArgs server_args;                                   // nsa_prefill_cp_mode (in-seq-split required)
  std::optional<NSAContextParallelMetadata> nsa_cp_metadata;  // batch_plan set for the batch path
  std::optional<CpSharedKVLayout> cp_shared_kv_layout;
  std::optional<Int64List> out_cache_loc;                    // logical locs, one per flattened batch row
  std::optional<int64_t> extend_num_tokens;                  // static padded rows (trailing padding allowed)
  std::optional<Int64List> cp_local_out_cache_loc;           // cache: set only on success
  std::optional<Int64List> cp_local_physical_out_cache_loc;  // cache: set only on success
  std::vector<std::string> direct_write_fallbacks;           // "[CP_SHARED_KV_FALLBACK][direct_write] reason=..."
};

// SGLang get_cp_shared_kv_batch_plan: metadata.batch_plan (nullptr on the bs = 1 path).
const CPSharedKVBatchPlan* GetCpSharedKVBatchPlan(const CpSharedKVForwardBatch& batch);

// SGLang get_cp_shared_kv_local_out_cache_loc: None for a non-shared-KV batch; else out_cache_loc reconciled with
// the plan (trailing static padding dropped iff split_tokens < len <= extend_num_tokens), split by the valid plan
// (batch) or split_list/zigzag_index (bs = 1), with every loc > 0 owned by this rank. Errors
// "[CP_SHARED_KV_FAIL_FAST][direct_write] reason=<tag> ..." with tags missing_metadata, missing_layout,
// missing_out_cache_loc, not_page_aligned, not_in_seq_split, batch_split_out_cache_len_mismatch,
// split_out_cache_len_mismatch, local_loc_owner_mismatch; on error *batch is unchanged.
StatusOr<std::optional<Int64List>> GetCpSharedKVLocalOutCacheLoc(CpSharedKVForwardBatch* batch);

// SGLang get_cp_shared_kv_local_physical_out_cache_loc: the local logical locs mapped through the layout (cached).
// None for a non-shared-KV batch, or (with a fallback record) when the layout is missing behind a cached result.
StatusOr<std::optional<Int64List>> GetCpSharedKVLocalPhysicalOutCacheLoc(CpSharedKVForwardBatch* batch);

// DERIVED SGLang build_in_seq_page_compute_owners: the rank computing each page of the page-aligned extent
// (ceil(extend/ps) pages dealt to the 2N segments as the split plans deal them; segment s -> s for s < N, else
// 2N-1-s). None when the inputs admit no page-aligned plan (negative lengths, ps or N < 1, misaligned prefix).
std::optional<Int64List> BuildInSeqPageComputeOwners(int64_t extend_len, int64_t extend_prefix_len, int64_t page_size,
                                                     int64_t cp_size);

// SGLang build_flat_page_owner_plan: the owners of every request's extent pages, concatenated in request order.
// Tag batch_gt1_page_owner_plan_unavailable for a request without owners.
StatusOr<Int64List> BuildFlatPageOwnerPlan(const CPSharedKVBatchPlan& plan);

// out_cache_loc of a batch whose request q's extent page j is logical page extend_pages[q][j]: token t of request
// q at extend_pages[q][t / ps] * ps + t % ps. Errors name the request whose page list is too short.
StatusOr<Int64List> OutCacheLocFromPages(const Int64List& extend_lens, const std::vector<Int64List>& extend_pages,
                                         int64_t page_size);

// A page whose direct write fails: its allocated logical page lives on another rank than its compute owner.
struct DirectWriteOwnerMismatch {
  int64_t request = 0;        // q
  int64_t page = 0;           // j, index within the request's extent
  int64_t logical_page = 0;   // extend_pages[q][j]
  int64_t compute_owner = 0;  // the rank writing it (BuildInSeqPageComputeOwners)
  int64_t page_owner = 0;     // logical_page % N (the layout's owner)
  bool operator==(const DirectWriteOwnerMismatch&) const = default;
};

// Every extent page of `plan` whose logical page % N differs from its compute owner, in request/page order: the
// direct write of rank r fails (local_loc_owner_mismatch) iff some entry has compute_owner == r.
StatusOr<std::vector<DirectWriteOwnerMismatch>> FindDirectWriteOwnerMismatches(
    const CPSharedKVBatchPlan& plan, const std::vector<Int64List>& extend_pages);

// The owner classes the rotated (page-interleave) allocator gives request extent pages: page j of a request with
// rotation base b and prefix_len tokens goes to class (b + prefix_len/ps + j) % N.
Int64List CyclicPageClasses(int64_t rotation_base, int64_t prefix_len, int64_t page_size, int64_t cp_size,
                            int64_t pages);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_CP_SHARED_KV_H_

// Reference CP shared-KV direct writes: SGLang's checks in SGLang's order, the split delegated to the reference
// SplitTensorByCPBatchPlan (batch) or the split_list/zigzag_index rebuild (bs = 1), the caches written last.
#include "cpu_ref/cp_shared_kv.h"

#include "core/cp_limits.h"
#include "core/host_tensor.h"
#include "cpu_ref/cp_data.h"

namespace kvshard::ref {
namespace {

template <typename... Args>
Status DirectWriteError(const char* reason, const Args&... args) {
  return InvalidArgument("[CP_SHARED_KV_FAIL_FAST][direct_write] reason=", reason, " ", args...);
}

std::string OptText(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "None"; }

// cp_split_and_rebuild_1d on the bs = 1 path: split by split_list, concatenate segments zigzag_index.
StatusOr<Int64List> SplitScalar(const Int64List& locs, const NSAContextParallelMetadata& m) {
  Int64List offsets;
  int64_t cursor = 0;
  for (int64_t len : m.split_list) {
    if (len < 0) return InvalidArgument("nsa_cp_metadata.split_list: negative segment length ", len);
    offsets.push_back(cursor);
    cursor += len;
  }
  Int64List out;
  for (int64_t s : m.zigzag_index) {
    if (s < 0 || s >= static_cast<int64_t>(m.split_list.size())) {
      return InvalidArgument("nsa_cp_metadata.zigzag_index: segment ", s, " not in [0, ", m.split_list.size(), ")");
    }
    out.insert(out.end(), locs.begin() + offsets[s], locs.begin() + offsets[s] + m.split_list[s]);
  }
  return out;
}

// The token count the plan describes and the mismatch tag that goes with it.
struct SplitTokens {
  int64_t tokens = 0;
  const char* mismatch_reason = "";
};

StatusOr<SplitTokens> PlanSplitTokens(const CPSharedKVBatchPlan* plan, const NSAContextParallelMetadata& m) {
  const Int64List& lens = plan != nullptr ? plan->request_extend_lens : m.split_list;
  int64_t tokens = 0;
  for (int64_t x : lens) {
    if (x < 0 || x > kMaxCpTokens || tokens > kMaxCpTokens) {
      return InvalidArgument(plan != nullptr ? "batch_plan.request_extend_lens" : "nsa_cp_metadata.split_list",
                             ": length ", x, " out of range");
    }
    tokens += x;
  }
  return SplitTokens{tokens, plan != nullptr ? "batch_split_out_cache_len_mismatch" : "split_out_cache_len_mismatch"};
}

}  // namespace

Status ValidateCpSharedKVLayout(const CpSharedKVLayout& l) {
  if (!ValidateCpSize(l.cp_size).ok())
    return InvalidArgument("cp_shared_kv_layout.cp_size: ", l.cp_size, " out of range");
  if (l.cp_rank < 0 || l.cp_rank >= l.cp_size) {
    return InvalidArgument("cp_shared_kv_layout.cp_rank: ", l.cp_rank, " not in [0, ", l.cp_size, ")");
  }
  if (!ValidatePageSize(l.page_size).ok()) {
    return InvalidArgument("cp_shared_kv_layout.page_size: ", l.page_size, " out of range");
  }
  return Status::Ok();
}

const CPSharedKVBatchPlan* GetCpSharedKVBatchPlan(const CpSharedKVForwardBatch& batch) {
  if (!batch.nsa_cp_metadata) return nullptr;
  return batch.nsa_cp_metadata->batch_plan.get();
}

namespace {

// The direct-write preconditions, in SGLang's order: metadata, layout and out_cache_loc present, a page-aligned
// in-seq split.
Status CheckDirectWriteInputs(const CpSharedKVForwardBatch& batch) {
  if (!batch.nsa_cp_metadata) return DirectWriteError("missing_metadata", "nsa_cp_metadata is missing");
  if (!batch.cp_shared_kv_layout) return DirectWriteError("missing_layout", "cp_shared_kv_layout is missing");
  if (!batch.out_cache_loc) return DirectWriteError("missing_out_cache_loc", "out_cache_loc is missing");
  const NSAContextParallelMetadata& m = *batch.nsa_cp_metadata;
  if (!m.info.page_aligned) {
    return DirectWriteError("not_page_aligned", "metadata is not page-aligned: page_size=", m.info.page_size,
                            " extend_prefix_len=", m.info.extend_prefix_len);
  }
  if (!IsNsaPrefillCpInSeqSplit(batch.server_args)) {
    return DirectWriteError("not_in_seq_split", "nsa_prefill_cp_mode is not in-seq-split");
  }
  return Status::Ok();
}

// out_cache_loc with as many tokens as the split: trailing static padding rows (up to extend_num_tokens) are cut,
// never written; any other length mismatch fails.
StatusOr<Int64List> OutCacheLocOfSplit(const CpSharedKVForwardBatch& batch, const SplitTokens& split) {
  Int64List locs = *batch.out_cache_loc;
  const int64_t out_tokens = static_cast<int64_t>(locs.size());
  if (split.tokens != out_tokens) {
    const std::optional<int64_t>& static_padded = batch.extend_num_tokens;
    if (!static_padded || out_tokens <= split.tokens || out_tokens > *static_padded) {
      return DirectWriteError(split.mismatch_reason, "split_list tokens=", split.tokens,
                              " out_cache_loc tokens=", out_tokens, " static_padded=", OptText(static_padded));
    }
    locs.resize(static_cast<size_t>(split.tokens));
  }
  return locs;
}

// This rank's rows of `locs`: the plan's valid split (batch), or the split_list/zigzag_index rebuild (bs = 1).
StatusOr<Int64List> LocalLocs(const Int64List& locs, const CPSharedKVBatchPlan* plan,
                              const NSAContextParallelMetadata& m) {
  if (plan == nullptr) return SplitScalar(locs, m);
  KVSHARD_ASSIGN_OR_RETURN(const HostTensor t, SplitTensorByCPBatchPlan(HostTensor::FromInt64s(locs), *plan,
                                                                        SplitMode::k1d, SplitKind::kValid));
  return t.Int64s();
}

// Every written local loc (> 0) is owned by this rank under the layout (checked only when there is one).
Status CheckLocalOwners(const Int64List& local, const CpSharedKVLayout& layout) {
  if (local.empty()) return Status::Ok();
  KVSHARD_RETURN_IF_ERROR(ValidateCpSharedKVLayout(layout));
  for (int64_t loc : local) {
    if (loc > 0 && !layout.OwnedByThisRank(loc)) {
      return DirectWriteError("local_loc_owner_mismatch",
                              "local out_cache_loc contains pages not owned by this rank: cp_rank=", layout.cp_rank,
                              " cp_size=", layout.cp_size, " page_size=", layout.page_size);
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::optional<Int64List>> GetCpSharedKVLocalOutCacheLoc(CpSharedKVForwardBatch* batch) {
  if (batch->cp_local_out_cache_loc) return batch->cp_local_out_cache_loc;
  if (!batch->uses_cp_shared_kv) return std::optional<Int64List>();
  KVSHARD_RETURN_IF_ERROR(CheckDirectWriteInputs(*batch));
  const NSAContextParallelMetadata& m = *batch->nsa_cp_metadata;
  const CPSharedKVBatchPlan* plan = GetCpSharedKVBatchPlan(*batch);
  if (plan == nullptr && m.batch_size > 1) {
    return FailFast("batch_gt1_missing_split_metadata",
                    "CP shared-KV batch split requires per-request split metadata.");
  }
  KVSHARD_ASSIGN_OR_RETURN(const SplitTokens split, PlanSplitTokens(plan, m));
  KVSHARD_ASSIGN_OR_RETURN(const Int64List locs, OutCacheLocOfSplit(*batch, split));
  KVSHARD_ASSIGN_OR_RETURN(const Int64List local, LocalLocs(locs, plan, m));
  KVSHARD_RETURN_IF_ERROR(CheckLocalOwners(local, *batch->cp_shared_kv_layout));
  batch->cp_local_out_cache_loc = local;
  return batch->cp_local_out_cache_loc;
}

StatusOr<std::optional<Int64List>> GetCpSharedKVLocalPhysicalOutCacheLoc(CpSharedKVForwardBatch* batch) {
  if (batch->cp_local_physical_out_cache_loc) return batch->cp_local_physical_out_cache_loc;
  if (batch->cp_local_out_cache_loc && batch->cp_shared_kv_layout) {
    KVSHARD_RETURN_IF_ERROR(ValidateCpSharedKVLayout(*batch->cp_shared_kv_layout));  // before any cache changes
  }
  KVSHARD_ASSIGN_OR_RETURN(const std::optional<Int64List> local, GetCpSharedKVLocalOutCacheLoc(batch));
  if (!local) return std::optional<Int64List>();
  if (local->empty()) {
    batch->cp_local_physical_out_cache_loc = local;
    return local;
  }
  if (!batch->cp_shared_kv_layout) {
    batch->direct_write_fallbacks.push_back(
        "[CP_SHARED_KV_FALLBACK][direct_write] reason=missing_layout cp_shared_kv_layout is missing while building "
        "physical out_cache_loc");
    return std::optional<Int64List>();
  }
  const CpSharedKVLayout& layout = *batch->cp_shared_kv_layout;
  Int64List physical;
  physical.reserve(local->size());
  for (int64_t loc : *local) physical.push_back(layout.LogicalLocToPhysical(loc));
  batch->cp_local_physical_out_cache_loc = physical;
  return batch->cp_local_physical_out_cache_loc;
}

std::optional<Int64List> BuildInSeqPageComputeOwners(int64_t extend_len, int64_t extend_prefix_len, int64_t page_size,
                                                     int64_t cp_size) {
  if (extend_len < 0 || extend_len > kMaxCpTokens || extend_prefix_len < 0 || page_size < 1 ||
      page_size > kMaxCpPageSize || cp_size < 1 || cp_size > kMaxCpSize || extend_prefix_len % page_size != 0) {
    return std::nullopt;
  }
  const int64_t pages = (extend_len + page_size - 1) / page_size;
  const int64_t segments = 2 * cp_size;
  Int64List owners;
  owners.reserve(static_cast<size_t>(pages));
  for (int64_t s = 0; s < segments; ++s) {
    const int64_t units = pages / segments + (s < pages % segments ? 1 : 0);
    owners.insert(owners.end(), static_cast<size_t>(units), s < cp_size ? s : segments - 1 - s);
  }
  return owners;
}

StatusOr<Int64List> BuildFlatPageOwnerPlan(const CPSharedKVBatchPlan& plan) {
  if (plan.request_extend_lens.size() != plan.request_prefix_lens.size()) {
    return InvalidArgument("batch_plan.request_prefix_lens: ", plan.request_prefix_lens.size(),
                           " entries, request_extend_lens has ", plan.request_extend_lens.size());
  }
  Int64List owners;
  for (size_t q = 0; q < plan.request_extend_lens.size(); ++q) {
    const int64_t extend = plan.request_extend_lens[q], prefix = plan.request_prefix_lens[q];
    const std::optional<Int64List> request_owners =
        BuildInSeqPageComputeOwners(extend, prefix, plan.page_size, plan.cp_size);
    if (!request_owners) {
      return FailFast("batch_gt1_page_owner_plan_unavailable", "req_id=", q, " extend_len=", extend,
                      " prefix_len=", prefix, " page_size=", plan.page_size, " cp_size=", plan.cp_size);
    }
    owners.insert(owners.end(), request_owners->begin(), request_owners->end());
  }
  return owners;
}

StatusOr<Int64List> OutCacheLocFromPages(const Int64List& extend_lens, const std::vector<Int64List>& extend_pages,
                                         int64_t page_size) {
  KVSHARD_RETURN_IF_ERROR(ValidatePageSize(page_size));
  if (extend_pages.size() != extend_lens.size()) {
    return InvalidArgument("extend_pages: ", extend_pages.size(), " requests, extend_lens has ", extend_lens.size());
  }
  Int64List locs;
  for (size_t q = 0; q < extend_lens.size(); ++q) {
    const int64_t pages = (extend_lens[q] + page_size - 1) / page_size;
    if (extend_lens[q] < 0 || static_cast<int64_t>(extend_pages[q].size()) < pages) {
      return InvalidArgument("extend_pages[", q, "]: ", extend_pages[q].size(), " pages for extend ", extend_lens[q]);
    }
    for (int64_t t = 0; t < extend_lens[q]; ++t)
      locs.push_back(extend_pages[q][t / page_size] * page_size + t % page_size);
  }
  return locs;
}

StatusOr<std::vector<DirectWriteOwnerMismatch>> FindDirectWriteOwnerMismatches(
    const CPSharedKVBatchPlan& plan, const std::vector<Int64List>& extend_pages) {
  if (extend_pages.size() != plan.request_extend_lens.size()) {
    return InvalidArgument("extend_pages: ", extend_pages.size(), " requests, the plan has ",
                           plan.request_extend_lens.size());
  }
  std::vector<DirectWriteOwnerMismatch> out;
  for (size_t q = 0; q < extend_pages.size(); ++q) {
    const std::optional<Int64List> owners = BuildInSeqPageComputeOwners(
        plan.request_extend_lens[q], plan.request_prefix_lens[q], plan.page_size, plan.cp_size);
    if (!owners) {
      return FailFast("batch_gt1_page_owner_plan_unavailable", "req_id=", q,
                      " extend_len=", plan.request_extend_lens[q], " prefix_len=", plan.request_prefix_lens[q],
                      " page_size=", plan.page_size, " cp_size=", plan.cp_size);
    }
    if (extend_pages[q].size() < owners->size()) {
      return InvalidArgument("extend_pages[", q, "]: ", extend_pages[q].size(), " pages, the extent has ",
                             owners->size());
    }
    for (size_t j = 0; j < owners->size(); ++j) {
      const int64_t page = extend_pages[q][j];
      if (page < 0) return InvalidArgument("extend_pages[", q, "][", j, "]: negative page ", page);
      const int64_t page_owner = page % plan.cp_size;
      if (page_owner != (*owners)[j]) {
        out.push_back({static_cast<int64_t>(q), static_cast<int64_t>(j), page, (*owners)[j], page_owner});
      }
    }
  }
  return out;
}

Int64List CyclicPageClasses(int64_t rotation_base, int64_t prefix_len, int64_t page_size, int64_t cp_size,
                            int64_t pages) {
  Int64List classes;
  for (int64_t j = 0; j < pages; ++j) classes.push_back((rotation_base + prefix_len / page_size + j) % cp_size);
  return classes;
}

}  // namespace kvshard::ref

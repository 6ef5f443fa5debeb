// The CP shared-KV and seed 003 helper results, computed by the reference (cpu_ref/cp_shared_kv.h, cp_helpers.h).
#include "replay/cp_results.h"

#include "core/host_tensor.h"
#include "cpu_ref/cp_shared_kv.h"

namespace kvshard::replay {

StatusOr<Json> PageOwnersJson(const InSeqSplit& split) {
  const CPSharedKVBatchPlan& p = split.plan;
  KVSHARD_ASSIGN_OR_RETURN(const Int64List flat, ref::BuildFlatPageOwnerPlan(p));
  std::vector<Int64List> owners;
  size_t k = 0;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const size_t n = static_cast<size_t>(p.request_padded_pages[q]);
    owners.emplace_back(flat.begin() + k, flat.begin() + k + n);
    k += n;
  }
  return Json{{"cp_size", p.cp_size},
              {"cp_rank", p.cp_rank},
              {"page_size", p.page_size},
              {"page_owner_plan", flat},
              {"request_page_compute_owners", owners}};
}

StatusOr<Json> DirectWriteJson(const InSeqSplit& split, const Int64List& out_cache_loc,
                               std::optional<int64_t> extend_num_tokens, const char* field) {
  ref::CpSharedKVForwardBatch b;
  b.uses_cp_shared_kv = true;
  b.nsa_cp_metadata = split.metadata;
  b.cp_shared_kv_layout = ref::CpSharedKVLayout{split.plan.cp_size, split.plan.cp_rank, split.plan.page_size};
  b.out_cache_loc = out_cache_loc;
  b.extend_num_tokens = extend_num_tokens;
  StatusOr<std::optional<Int64List>> physical = ref::GetCpSharedKVLocalPhysicalOutCacheLoc(&b);
  if (!physical.ok()) {
    const std::string message = physical.status().message();
    if (message.find("reason=local_loc_owner_mismatch") != std::string::npos) {
      // Say which loc: the first of this rank's split locs on a page another rank owns.
      ref::CpSharedKVForwardBatch probe = b;
      probe.cp_shared_kv_layout = ref::CpSharedKVLayout{1, 0, split.plan.page_size};  // owns everything
      const Int64List local = **ref::GetCpSharedKVLocalOutCacheLoc(&probe);
      for (int64_t loc : local) {
        if (loc > 0 && !b.cp_shared_kv_layout->OwnedByThisRank(loc)) {
          return InvalidArgument(field, ": ", message, " (first foreign loc ", loc, ": page ",
                                 loc / split.plan.page_size, " is owned by rank ", b.cp_shared_kv_layout->OwnerOf(loc),
                                 ")");
        }
      }
    }
    return InvalidArgument(field, ": ", message);
  }
  return Json{{"cp_local_out_cache_loc", b.cp_local_out_cache_loc.value()},
              {"cp_local_physical_out_cache_loc", physical->value()}};
}

StatusOr<Json> CpSeqIdxJson(const Int64List& cp_chunks_len, const Int64List& seqs_len) {
  KVSHARD_ASSIGN_OR_RETURN(const auto chunks, ref::CalculateCpSeqIdx(cp_chunks_len, seqs_len));
  Json out = Json::array();
  for (const std::vector<ref::CpSeqSpan>& chunk : chunks) {
    Json spans = Json::array();
    for (const ref::CpSeqSpan& s : chunk) spans.push_back(Json::array({s.seq_idx, s.start, s.end}));
    out.push_back(std::move(spans));
  }
  return Json{{"cp_seq_idx", std::move(out)}};
}

StatusOr<Json> CanCpSplitJson(int64_t seq_len, int64_t cp_size, bool use_nsa, const ref::CpForwardState& batch,
                              const ref::CpServerArgs& args) {
  KVSHARD_ASSIGN_OR_RETURN(const bool can, ref::CanCpSplit(seq_len, cp_size, use_nsa, batch, args));
  return Json{{"can_cp_split", can}};
}

StatusOr<Json> CpLocalPairJson(const Int64List& rows, int64_t prev_len, int64_t next_len) {
  KVSHARD_ASSIGN_OR_RETURN(const auto pair,
                           ref::SplitInSeqCpLocalPair(HostTensor::FromInt64s(rows), prev_len, next_len, "rows"));
  return Json{{"prev", pair.first.Int64s()}, {"next", pair.second.Int64s()}};
}

}  // namespace kvshard::replay

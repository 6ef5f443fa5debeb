// Reference last-token collection after CP prefill (seed 003 cp_collect_last_token_hidden): each rank
// contributes the rows it owns, the all-gather of those rows is indexed by owner. Batch, bs=1, round-robin.
#ifndef KVSHARD_CPU_REF_CP_COLLECT_H_
#define KVSHARD_CPU_REF_CP_COLLECT_H_

#include <cstdint>
#include <vector>

#include "core/cp_plan.h"
#include "core/status.h"
#include "cpu_ref/cp_data.h"

namespace kvshard::ref {

// One rank's contribution for a batch plan built for that rank (SGLang _in_seq_collect_last_token_batch
// before the all-gather): B rows, request q's last hidden row when this rank owns it, else zeros. Reads row
// rank_offset + request_last_token_local_offset, rank_offset from the compute rank-local offsets when
// compute padding is enabled, else the valid ones. Tags batch_gt1_missing_last_token_metadata,
// batch_gt1_invalid_last_token_owner, batch_gt1_last_token_oob.
StatusOr<HostTensor> InSeqLastTokenLocalRows(const HostTensor& hidden, const CPSharedKVBatchPlan& plan);

// Rows of `owners` picked out of the rank-major all-gather of every rank's B local rows (index owner*B+q).
StatusOr<HostTensor> GatherLastTokens(const std::vector<HostTensor>& rank_local_rows, const Int64List& owners);

// The whole batch collection: rank_hidden[r] and rank_plans[r] are rank r's local hidden rows and plan.
StatusOr<HostTensor> InSeqCollectLastTokenBatch(const std::vector<HostTensor>& rank_hidden,
                                                const std::vector<CPSharedKVBatchPlan>& rank_plans);

// The bs=1 scalar collection (no batch plan): owner/offset located in metadata.split_list for
// actual_token_count tokens; a rank that is not the owner (or is too short) contributes zeros.
StatusOr<HostTensor> InSeqCollectLastTokenScalar(const std::vector<HostTensor>& rank_hidden,
                                                 const Int64List& split_list, int64_t actual_token_count);

// Round-robin collection: request q's last token is global row g on rank g % N at local row g // N.
// Tags batch_gt1_empty_extend, batch_gt1_last_token_oob.
StatusOr<HostTensor> RoundRobinCollectLastToken(const std::vector<HostTensor>& rank_hidden,
                                                const Int64List& extend_lens);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_CP_COLLECT_H_

// The executors of the stateless trace records (internal to //replay:replayer): each runs one record, its
// fields' shapes already checked by the op table, and returns what the matching command prints with --json.
#ifndef KVSHARD_REPLAY_RECORDS_H_
#define KVSHARD_REPLAY_RECORDS_H_

#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "replay/backend.h"
#include "replay/op_table.h"

namespace kvshard::replay {

// Plan records (replay/plan_records.cc): place, split, rerange, gather_plan.
StatusOr<Json> RunPlace(const Json& rec);
StatusOr<FieldAnswer> RunSplit(const Json& rec, const Json* only, Impl impl);
StatusOr<FieldAnswer> RunRerange(const Json& rec, Impl impl);
StatusOr<FieldAnswer> RunGatherPlan(const Json& rec, const Json* only, Impl impl);

// CP records (replay/cp_records.cc): page_owners, cp_direct_write, cp_seq_idx, can_cp_split, cp_local_pair.
StatusOr<Json> RunPageOwners(const Json& rec, Impl impl);
StatusOr<Json> RunCpDirectWrite(const Json& rec, Impl impl);
StatusOr<Json> RunCpSeqIdx(const Json& rec);
StatusOr<Json> RunCanCpSplit(const Json& rec);
StatusOr<Json> RunCpLocalPair(const Json& rec);

// Seed 003's data and NSA helper records (replay/cp_records.cc): compute_nsa_seqlens, cal_padded_tokens,
// pad_nsa_cache_seqlens, cp_round_robin_split, cp_split_rows, cp_pad_request, cp_valid_rows, cp_last_tokens,
// cp_prepare_metadata.
StatusOr<Json> RunNsaSeqlens(const Json& rec);
StatusOr<Json> RunCalPaddedTokens(const Json& rec);
StatusOr<Json> RunPadNsaCacheSeqlens(const Json& rec);
StatusOr<Json> RunRoundRobinRows(const Json& rec);
StatusOr<Json> RunSplitRows(const Json& rec, Impl impl);
StatusOr<Json> RunPadRequest(const Json& rec);
StatusOr<Json> RunValidRows(const Json& rec, Impl impl);
StatusOr<Json> RunLastTokens(const Json& rec, Impl impl);
StatusOr<Json> RunPrepareMetadata(const Json& rec);

// The sizes of the records whose answer a length can make large (replay/record_sizes.cc; ReplayOp::size).
Status SizeSplit(const Json& rec, const MemoryBudget& budget);
Status SizeRerange(const Json& rec, const MemoryBudget& budget);
Status SizeGatherPlan(const Json& rec, const MemoryBudget& budget);
Status SizePageOwners(const Json& rec, const MemoryBudget& budget);
Status SizeCpDirectWrite(const Json& rec, const MemoryBudget& budget);
Status SizeCpSplitPlan(const Json& rec, const MemoryBudget& budget);  // cp_split_rows, cp_valid_rows
Status SizeLastTokens(const Json& rec, const MemoryBudget& budget);
Status SizePadRequest(const Json& rec, const MemoryBudget& budget);

// Their op-table fields: the NSA padding records' (global_num_tokens_cpu required or not, nsa_cache_seqlens or
// not) and a CP data record's batch (as page_owners) followed by `more`.
std::vector<FieldShape> NsaPaddingFields(bool tokens_required, bool seqlens);
std::vector<FieldShape> CpBatchFields(std::vector<FieldShape> more);
// A mode or split_kind of cp_split_rows, cp_pad_request or cp_last_tokens outside its choices (malformed).
Status CheckCpChoices(std::string_view name, const Json& rec);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_RECORDS_H_

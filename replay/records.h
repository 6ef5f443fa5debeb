// The executors of the stateless trace records (internal to //replay:replayer): each runs one record, its
// fields' shapes already checked by the op table, and returns what the matching command prints with --json.
#ifndef KVSHARD_REPLAY_RECORDS_H_
#define KVSHARD_REPLAY_RECORDS_H_

#include "core/json.h"
#include "core/status.h"
#include "replay/backend.h"

namespace kvshard::replay {

// Plan records (replay/plan_records.cc): place, split, rerange, gather_plan.
StatusOr<Json> RunPlace(const Json& rec);
StatusOr<Json> RunSplit(const Json& rec, const Json* only, Impl impl);
StatusOr<Json> RunRerange(const Json& rec, Impl impl);
StatusOr<Json> RunGatherPlan(const Json& rec, Impl impl);

// CP records (replay/cp_records.cc): page_owners, cp_direct_write, cp_seq_idx, can_cp_split, cp_local_pair.
StatusOr<Json> RunPageOwners(const Json& rec, Impl impl);
StatusOr<Json> RunCpDirectWrite(const Json& rec, Impl impl);
StatusOr<Json> RunCpSeqIdx(const Json& rec);
StatusOr<Json> RunCanCpSplit(const Json& rec);
StatusOr<Json> RunCpLocalPair(const Json& rec);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_RECORDS_H_

// CP model limits, SGLang's fail-fast error format and the CP argument checks, shared by the reference
// (cpu_ref/), the fast paths (cpu_fast/) and the GPU code, so every layer rejects the same inputs with the
// same messages.
#ifndef KVSHARD_CORE_CP_LIMITS_H_
#define KVSHARD_CORE_CP_LIMITS_H_

#include <cstdint>

#include "core/cp_plan.h"
#include "core/status.h"

namespace kvshard {

// Largest accepted cp_size (SGLang has no limit; the limits keep every derived int64 exact).
inline constexpr int64_t kMaxCpSize = int64_t{1} << 16;
// Largest accepted CP page size.
inline constexpr int64_t kMaxCpPageSize = int64_t{1} << 20;
// Largest accepted token count: any length and any batch total.
inline constexpr int64_t kMaxCpTokens = int64_t{1} << 48;
// Largest accepted segment count, batch_size * 2 * cp_size.
inline constexpr int64_t kMaxCpSegments = int64_t{1} << 24;

// "[CP_SHARED_KV_FAIL_FAST][<tag>] <details>" as an InvalidArgument (SGLang's RuntimeError text).
template <typename... Args>
Status FailFast(const char* tag, const Args&... args) {
  return InvalidArgument("[CP_SHARED_KV_FAIL_FAST][", tag, "] ", args...);
}

// FailFast("batch_gt1_full_rerange_unsupported", "reason=<reason> <details>"): the batch rerange's refusals.
template <typename... Args>
Status RerangeFailFast(const char* reason, const Args&... args) {
  return FailFast("batch_gt1_full_rerange_unsupported", "reason=", reason, " ", args...);
}

// OK iff 1 <= cp_size <= kMaxCpSize (the message names cp_size).
Status ValidateCpSize(int64_t cp_size);
// OK iff 0 <= cp_rank < cp_size (the message names cp_rank).
Status ValidateCpRank(int64_t cp_rank, int64_t cp_size);
// OK iff 1 <= page_size <= kMaxCpPageSize (the message names page_size).
Status ValidatePageSize(int64_t page_size);

// The batch rerange's split checks, in SGLang's order (cp_size, 2N entries per request in [0, 2^48], a non-negative
// max_rank_token that bounds every rank's rows; tag batch_gt1_full_rerange_unsupported), and the rank-major tables
// the last check reads.
StatusOr<RerangeTables> CheckedRerangeTables(const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token);

// The batch rerange's input checks on metadata `m`, in SGLang's order, for a gathered tensor of `gathered_rows` rows
// (its shape checked before): returns max_rank_token (max_rank_len[0]).
StatusOr<int64_t> CheckBatchRerangeInput(int64_t gathered_rows, const NSAContextParallelMetadata& m, int64_t cp_size);

}  // namespace kvshard

#endif  // KVSHARD_CORE_CP_LIMITS_H_

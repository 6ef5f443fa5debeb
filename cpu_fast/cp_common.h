// Model limits, the fail-fast error format and the argument checks the fast CP paths share; the same values
// and messages as cpu_ref/cp_split.h (cpu_fast depends on core/ only, so they are restated here).
#ifndef KVSHARD_CPU_FAST_CP_COMMON_H_
#define KVSHARD_CPU_FAST_CP_COMMON_H_

#include <cstdint>

#include "core/status.h"

namespace kvshard::fast {

// Model limits keeping every derived int64 exact (ref::kMaxCp*).
inline constexpr int64_t kMaxCpSize = int64_t{1} << 16;
inline constexpr int64_t kMaxCpPageSize = int64_t{1} << 20;
inline constexpr int64_t kMaxCpTokens = int64_t{1} << 48;    // any length and any batch total
inline constexpr int64_t kMaxCpSegments = int64_t{1} << 24;  // batch_size * 2 * cp_size

// "[CP_SHARED_KV_FAIL_FAST][<tag>] <details>" as an InvalidArgument (SGLang's RuntimeError text).
template <typename... Args>
Status FailFast(const char* tag, const Args&... args) {
  return InvalidArgument("[CP_SHARED_KV_FAIL_FAST][", tag, "] ", args...);
}

// OK iff 1 <= cp_size <= kMaxCpSize (message names cp_size).
Status ValidateCpSize(int64_t cp_size);
// OK iff 0 <= cp_rank < cp_size.
Status ValidateCpRank(int64_t cp_rank, int64_t cp_size);
// OK iff 1 <= page_size <= kMaxCpPageSize.
Status ValidatePageSize(int64_t page_size);

}  // namespace kvshard::fast

#endif  // KVSHARD_CPU_FAST_CP_COMMON_H_

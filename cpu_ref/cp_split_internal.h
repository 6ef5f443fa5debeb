// Shared helpers of the reference CP planners (cp_split.cc, cp_metadata.cc): prefix sums and Python floor
// division.
#ifndef KVSHARD_CPU_REF_CP_SPLIT_INTERNAL_H_
#define KVSHARD_CPU_REF_CP_SPLIT_INTERNAL_H_

#include <cstdint>
#include <span>

#include "core/cp_plan.h"
#include "cpu_ref/cp_split.h"

namespace kvshard::ref::internal {

// Exclusive prefix sums (SGLang _prefix_offsets).
Int64List PrefixOffsets(std::span<const int64_t> lengths);
// Inclusive prefix sums (itertools.accumulate).
Int64List Accumulate(std::span<const int64_t> lengths);
// Python floor division for a positive divisor.
inline int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

}  // namespace kvshard::ref::internal

#endif  // KVSHARD_CPU_REF_CP_SPLIT_INTERNAL_H_

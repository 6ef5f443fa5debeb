// Shared helpers of the CP planners (cp_split.cc, cp_metadata.cc): prefix sums, Python floor division and
// the allocation-free fill routines behind both the public split builders and the batch plan.
#ifndef KVSHARD_CPU_REF_CP_SPLIT_INTERNAL_H_
#define KVSHARD_CPU_REF_CP_SPLIT_INTERNAL_H_

#include <cstdint>
#include <span>

#include "core/cp_plan.h"
#include "cpu_ref/cp_split.h"

namespace kvshard::ref::internal {

// Exclusive prefix sums (SGLang _prefix_offsets).
Int64List PrefixOffsets(std::span<const int64_t> lengths);
// The same into *out (reusing its storage).
void PrefixOffsetsInto(std::span<const int64_t> lengths, Int64List* out);
// Inclusive prefix sums (itertools.accumulate).
Int64List Accumulate(std::span<const int64_t> lengths);
// Python floor division for a positive divisor.
inline int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

// Division by a runtime-constant positive divisor through a double reciprocal plus one exact fix-up step
// (64-bit idiv dominates the planner otherwise). Exact for 0 <= n < 2^52.
class Divider {
 public:
  explicit Divider(int64_t d) : d_(d), inv_(1.0 / static_cast<double>(d)) {}
  int64_t Div(int64_t n) const {
    int64_t q = static_cast<int64_t>(static_cast<double>(n) * inv_);
    const int64_t r = n - q * d_;
    return r < 0 ? q - 1 : (r >= d_ ? q + 1 : q);
  }

 private:
  int64_t d_;
  double inv_;
};

// Deals `units` page units to `segments` as units//S each (= base), +1 for the first units%S (= remainder):
// segment page starts/ends from base_page and full-page token counts (units * page_size).
void DealPageUnits(int64_t base, int64_t remainder, int64_t base_page, int64_t segments, int64_t page_size,
                   int64_t* split, int64_t* starts, int64_t* ends);

// Page-aligned split of extend_len valid tokens (extend_len >= 1, page_size >= 2, aligned prefix) into
// `split`, `starts`, `ends` (2N entries each); returns the padded page count.
int64_t FillPageAlignedSplit(int64_t extend_len, int64_t extend_prefix_len, int64_t page_size, int64_t segments,
                             int64_t* split, int64_t* starts, int64_t* ends);
// Full-page-unit split of `page_units` pages into `split`, `starts`, `ends` (2N entries each).
void FillFullPageUnitSplit(int64_t page_units, int64_t extend_prefix_len, int64_t page_size, int64_t segments,
                           int64_t* split, int64_t* starts, int64_t* ends);
// Locates token actual-1 (1 <= actual <= sum(split)) in a 2N split; no validation.
LastTokenLocation LocateLastToken(std::span<const int64_t> split, int64_t cp_size, int64_t actual);

}  // namespace kvshard::ref::internal

#endif  // KVSHARD_CPU_REF_CP_SPLIT_INTERNAL_H_

// Value types shared by every layer: the page-shard spec (SGLang's PageShardSpec) and its validation.
#ifndef KVSHARD_CORE_SPEC_H_
#define KVSHARD_CORE_SPEC_H_

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace kvshard {

// Shard-group geometry: N ranks, pages of `page_size` token slots (spec §1).
struct PlacementSpec {
  int64_t shard_size = 1;  // N
  int64_t page_size = 1;   // ps, tokens per physical page
  int64_t logical_page_size() const { return shard_size * page_size; }
};

// SGLang's PageShardSpec: placement plus this rank and the scratch capacities.
struct PageShardSpec {
  int64_t shard_rank = 0;
  int64_t shard_size = 1;
  int64_t page_size = 1;
  int64_t max_prefix_tokens = 0;  // multiple of logical_page_size()
  int64_t chunk_tokens = 0;       // multiple of page_size
  int64_t logical_page_size() const { return shard_size * page_size; }
  PlacementSpec placement() const { return {shard_size, page_size}; }
};

// Largest accepted slot/length value: keeps every derived int64 product (slots * N * ps) exact.
inline constexpr int64_t kMaxSlot = int64_t{1} << 48;
// Largest accepted shard size and page size.
inline constexpr int64_t kMaxShardSize = 1 << 16;
inline constexpr int64_t kMaxPageSize = 1 << 20;

// OK iff N >= 1 and ps >= 1 (within limits); the message names the offending field.
Status ValidatePlacementSpec(const PlacementSpec& spec);
// OK iff 0 <= rank < N.
Status ValidateRank(int64_t rank, int64_t shard_size, const char* field = "rank");
// OK iff every loc is in [0, kMaxSlot); the message names `field[i]`.
Status ValidateLocs(const std::vector<int64_t>& locs, const char* field = "locs");
// Full PageShardSpec validation (SGLang's __post_init__ asserts, as errors).
Status ValidatePageShardSpec(const PageShardSpec& spec);

}  // namespace kvshard

#endif  // KVSHARD_CORE_SPEC_H_

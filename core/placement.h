// The placement bijection's per-slot result (spec §1), produced alike by cpu_ref and gpu so they diff bit for bit.
#ifndef KVSHARD_CORE_PLACEMENT_H_
#define KVSHARD_CORE_PLACEMENT_H_

#include <cstdint>
#include <vector>

namespace kvshard {

// Everything `kvshard place` reports for one rank: per slot its owner, local index and whether the rank
// owns it, and filter_local (the local indices of the owned slots, input order).
struct PlacementResult {
  std::vector<int64_t> owner;
  std::vector<int64_t> local_index;
  std::vector<bool> local_mask;
  std::vector<int64_t> filter_local;
  bool operator==(const PlacementResult&) const = default;
};

}  // namespace kvshard

#endif  // KVSHARD_CORE_PLACEMENT_H_

// Reference placement bijection.
#include "cpu_ref/placement.h"

namespace kvshard::ref {

StatusOr<Placement> Placement::Create(const PlacementSpec& spec) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec(spec));
  return Placement(spec);
}

std::vector<int64_t> Placement::FilterLocal(const std::vector<int64_t>& locs, int64_t rank) const {
  std::vector<int64_t> out;
  for (int64_t loc : locs) {
    if (LocalMask(loc, rank)) out.push_back(LocalIndex(loc));
  }
  return out;
}

StatusOr<PlacementResult> PlaceLocs(const PlacementSpec& spec, int64_t rank, const std::vector<int64_t>& locs) {
  KVSHARD_ASSIGN_OR_RETURN(Placement p, Placement::Create(spec));
  KVSHARD_RETURN_IF_ERROR(ValidateRank(rank, spec.shard_size));
  KVSHARD_RETURN_IF_ERROR(ValidateLocs(locs));
  PlacementResult r;
  r.owner.reserve(locs.size());
  r.local_index.reserve(locs.size());
  r.local_mask.reserve(locs.size());
  for (int64_t loc : locs) {
    r.owner.push_back(p.Owner(loc));
    r.local_index.push_back(p.LocalIndex(loc));
    r.local_mask.push_back(p.LocalMask(loc, rank));
  }
  r.filter_local = p.FilterLocal(locs, rank);
  return r;
}

}  // namespace kvshard::ref

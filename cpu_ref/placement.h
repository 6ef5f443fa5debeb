// Reference placement bijection (spec §1, SGLang page_interleave.py): logical page l lives on rank
// l % N as local page l // N, same in-page offset. Pure functions of (N, ps, loc).
#ifndef KVSHARD_CPU_REF_PLACEMENT_H_
#define KVSHARD_CPU_REF_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "core/placement.h"
#include "core/spec.h"
#include "core/status.h"

namespace kvshard::ref {

// The placement bijection between logical token slots and (owner rank, local row).
class Placement {
 public:
  // Validates the spec (N >= 1, ps >= 1).
  static StatusOr<Placement> Create(const PlacementSpec& spec);

  const PlacementSpec& spec() const { return spec_; }
  // Rank owning `loc`: (loc % (N*ps)) // ps.
  int64_t Owner(int64_t loc) const { return (loc % lps_) / spec_.page_size; }
  // Row of `loc` in its owner's local pool: (loc // (N*ps))*ps + loc % ps.
  int64_t LocalIndex(int64_t loc) const { return (loc / lps_) * spec_.page_size + loc % spec_.page_size; }
  // True iff `rank` owns `loc`.
  bool LocalMask(int64_t loc, int64_t rank) const { return Owner(loc) == rank; }
  // Inverse: the logical slot stored at `local_row` of rank `owner`.
  int64_t GlobalLoc(int64_t owner, int64_t local_row) const {
    return (local_row / spec_.page_size) * lps_ + owner * spec_.page_size + local_row % spec_.page_size;
  }
  // LocalIndex of the locs `rank` owns, input order preserved.
  std::vector<int64_t> FilterLocal(const std::vector<int64_t>& locs, int64_t rank) const;
  // True iff `loc` lies in the reserved logical pages 0..N-1 (local page 0 of every rank: trash).
  bool IsReserved(int64_t loc) const { return loc < lps_; }

 private:
  explicit Placement(const PlacementSpec& spec) : spec_(spec), lps_(spec.logical_page_size()) {}
  PlacementSpec spec_;
  int64_t lps_;
};

// Validates spec, rank and locs, then maps every loc.
StatusOr<PlacementResult> PlaceLocs(const PlacementSpec& spec, int64_t rank, const std::vector<int64_t>& locs);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_PLACEMENT_H_

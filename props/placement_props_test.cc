// Properties of the placement bijection (spec §1, §6): bijection both ways, exactly one owner,
// per-rank filter_local permutations, order preservation, ps-long owned runs, reserved trash page.
#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "cpu_ref/placement.h"
#include "props/generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

using ref::Placement;

KVSHARD_PROP(PlacementProps, BijectionBothWays, ()) {
  const PlacementSpec spec = *GenPlacementSpec();
  const Placement p = RC_VALUE(Placement::Create(spec));
  const int64_t loc = *GenLoc(spec, 64);
  const int64_t owner = p.Owner(loc);
  RC_ASSERT(owner >= 0 && owner < spec.shard_size);
  RC_ASSERT(p.GlobalLoc(owner, p.LocalIndex(loc)) == loc);
  // And (owner, row) -> loc -> (owner, row).
  const int64_t o = *rc::gen::inRange<int64_t>(0, spec.shard_size);
  const int64_t row = *rc::gen::inRange<int64_t>(0, 64 * spec.page_size);
  const int64_t g = p.GlobalLoc(o, row);
  RC_ASSERT(p.Owner(g) == o);
  RC_ASSERT(p.LocalIndex(g) == row);
}

KVSHARD_PROP(PlacementProps, ExactlyOneRankOwnsEachLoc, ()) {
  const PlacementSpec spec = *GenPlacementSpec();
  const Placement p = RC_VALUE(Placement::Create(spec));
  const int64_t loc = *GenLoc(spec, 64);
  int owners = 0;
  for (int64_t r = 0; r < spec.shard_size; ++r) owners += p.LocalMask(loc, r);
  RC_ASSERT(owners == 1);
}

KVSHARD_PROP(PlacementProps, FilterLocalOfAllRanksIsPermutationPerRank, ()) {
  const PlacementSpec spec = *GenPlacementSpec();
  const Placement p = RC_VALUE(Placement::Create(spec));
  const int64_t k = *rc::gen::inRange<int64_t>(0, 9);
  std::vector<int64_t> locs(k * spec.logical_page_size());
  std::iota(locs.begin(), locs.end(), 0);
  std::vector<int64_t> want(k * spec.page_size);
  std::iota(want.begin(), want.end(), 0);
  size_t total = 0;
  for (int64_t r = 0; r < spec.shard_size; ++r) {
    std::vector<int64_t> got = p.FilterLocal(locs, r);
    total += got.size();
    std::sort(got.begin(), got.end());
    RC_ASSERT(got == want);
  }
  RC_ASSERT(total == locs.size());
}

KVSHARD_PROP(PlacementProps, FilterLocalPreservesOrder, ()) {
  const PlacementSpec spec = *GenPlacementSpec();
  const Placement p = RC_VALUE(Placement::Create(spec));
  const auto locs = *rc::gen::container<std::vector<int64_t>>(GenLoc(spec, 16));
  const int64_t rank = *rc::gen::inRange<int64_t>(0, spec.shard_size);
  std::vector<int64_t> want;
  for (int64_t loc : locs) {
    if (p.Owner(loc) == rank) want.push_back(p.LocalIndex(loc));
  }
  RC_ASSERT(p.FilterLocal(locs, rank) == want);
}

KVSHARD_PROP(PlacementProps, OwnedRunsArePageLong, ()) {
  const PlacementSpec spec = *GenPlacementSpec();
  const Placement p = RC_VALUE(Placement::Create(spec));
  const int64_t page = *rc::gen::inRange<int64_t>(0, 1000);
  const int64_t first = page * spec.page_size;
  // Every slot of a physical page has one owner and consecutive local rows; the next page changes owner
  // (unless N = 1) and its local run restarts at a page boundary.
  for (int64_t off = 0; off < spec.page_size; ++off) {
    RC_ASSERT(p.Owner(first + off) == page % spec.shard_size);
    RC_ASSERT(p.LocalIndex(first + off) == (page / spec.shard_size) * spec.page_size + off);
  }
  if (spec.shard_size > 1) RC_ASSERT(p.Owner(first + spec.page_size) != p.Owner(first));
}

KVSHARD_PROP(PlacementProps, ReservedSlotsMapToLocalPageZero, ()) {
  const PlacementSpec spec = *GenPlacementSpec();
  const Placement p = RC_VALUE(Placement::Create(spec));
  const int64_t loc = *rc::gen::inRange<int64_t>(0, spec.logical_page_size());
  RC_ASSERT(p.IsReserved(loc));
  RC_ASSERT(p.LocalIndex(loc) / spec.page_size == 0);
  RC_ASSERT(p.LocalIndex(loc) == loc % spec.page_size);
}

}  // namespace
}  // namespace kvshard::props

// RapidCheck generators shared by the properties: shard geometries and slot vectors that reach the
// edges (N = 1, ps = 1, partial pages, reserved trash slots, empty inputs).
#ifndef KVSHARD_PROPS_GENERATORS_H_
#define KVSHARD_PROPS_GENERATORS_H_

#include <cstdint>
#include <vector>

#include <rapidcheck.h>

#include "core/spec.h"

namespace kvshard::props {

// N in 1..8 (biased to the edges 1, 2 and 8), ps in {1, 2, 3, 16, 64, 128} or 1..128.
inline rc::Gen<PlacementSpec> GenPlacementSpec() {
  return rc::gen::apply(
      [](int64_t n, int64_t ps) {
        return PlacementSpec{n, ps};
      },
      rc::gen::weightedOneOf<int64_t>({{3, rc::gen::element<int64_t>(1, 2, 8)}, {5, rc::gen::inRange<int64_t>(1, 9)}}),
      rc::gen::weightedOneOf<int64_t>(
          {{3, rc::gen::element<int64_t>(1, 2, 3, 16, 64, 128)}, {2, rc::gen::inRange<int64_t>(1, 129)}}));
}

// Slots in [0, pages * N * ps): mostly small, some in the reserved trash pages, some large.
inline rc::Gen<int64_t> GenLoc(const PlacementSpec& spec, int64_t logical_pages) {
  const int64_t hi = logical_pages * spec.logical_page_size();
  return rc::gen::weightedOneOf<int64_t>({
      {1, rc::gen::inRange<int64_t>(0, spec.logical_page_size())},
      {6, rc::gen::inRange<int64_t>(0, hi)},
      {1, rc::gen::inRange<int64_t>(int64_t{1} << 40, (int64_t{1} << 40) + hi)},
  });
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_GENERATORS_H_

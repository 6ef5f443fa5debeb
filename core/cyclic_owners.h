// The cyclic-owners rule every cached prefix obeys (spec §2, §3): a chain with rotation base b puts its k-th page
// on rank (b + k) % N, i.e. owner(page k) = (owner(page 0) + k) % N. One statement of it for the reference radix
// cache and gather plan and the simulator's prefix cache and owner checks.
#ifndef KVSHARD_CORE_CYCLIC_OWNERS_H_
#define KVSHARD_CORE_CYCLIC_OWNERS_H_

#include <cstdint>
#include <span>

namespace kvshard {

// True iff logical page `page` (>= 0) at position k of a chain with rotation base `base` has owner (base + k) % N.
inline bool IsCyclicOwner(int64_t page, int64_t base, int64_t k, int64_t n) { return page % n == (base + k) % n; }

// The first position k whose page breaks the cyclic owners from `base`, or -1 when every page follows them.
inline int64_t FirstNonCyclicPage(std::span<const int64_t> pages, int64_t base, int64_t n) {
  for (size_t k = 0; k < pages.size(); ++k) {
    if (!IsCyclicOwner(pages[k], base, static_cast<int64_t>(k), n)) return static_cast<int64_t>(k);
  }
  return -1;
}

}  // namespace kvshard

#endif  // KVSHARD_CORE_CYCLIC_OWNERS_H_

// The radix prefix cache of the simulator: SGLang's page-granular cache with the kv-shard rotation-base rule
// (spec §2, as cpu_ref/radix_cache.h) keyed by a 64-bit fingerprint per page instead of the page's tokens, so
// a whole serving trace fits in memory; LRU leaves are kept in an ordered set, so eviction is O(log n) a page.
#ifndef KVSHARD_SIM_PREFIX_CACHE_H_
#define KVSHARD_SIM_PREFIX_CACHE_H_

#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kvshard::sim {

// A prefix tree over page fingerprints; pages belong to an allocator the caller frees them to.
class PrefixCache {
 public:
  // The longest cached run of `fingerprints` (one per full page of a prompt).
  struct Match {
    int64_t pages_matched = 0;   // leading pages found
    std::vector<int64_t> pages;  // their logical pages
    int64_t rotation_base = -1;  // the chain's base, -1 when nothing matched
    int64_t node = 0;            // deepest matched node (0 = root), for Lock / Unlock
  };
  // What an insert did.
  struct InsertResult {
    bool declined = false;       // the matched chain has another base: nothing grafted
    int64_t new_pages = 0;       // pages added to the tree
    std::vector<int64_t> freed;  // request pages the caller must free (duplicates, or all when declined)
    // Not declined: the inserted path as a match of all its pages would give it (the tree's pages, the chain's
    // base, the deepest node), without walking it again.
    Match path;
  };

  // `shard_size` N checks that chains are cyclic (page % N == (base + k) % N); with `cyclic_chains` false
  // (simulate --alloc-mode owners, whose chains follow the CP compute owners) that check is off.
  explicit PrefixCache(int64_t shard_size, bool cyclic_chains = true);

  // Matches up to `max_pages` leading fingerprints and refreshes their LRU time.
  Match MatchPrefix(const std::vector<uint64_t>& fingerprints, int64_t max_pages);
  // Caches pages[k] under fingerprints[k] for k < fingerprints.size(): SGLang's insert with the rotation rule.
  StatusOr<InsertResult> Insert(const std::vector<uint64_t>& fingerprints, const std::vector<int64_t>& pages,
                                int64_t rotation_base);
  // Protects root..node from eviction (reference counted).
  void Lock(int64_t node);
  // Releases one Lock; an error when the path is not locked.
  Status Unlock(int64_t node);
  // Lock(to) then Unlock(from) where `from` is `to` or one of its ancestors (cache_unfinished_req moving a
  // request's lock down its own path): only the nodes between them change; an error when `from` is not locked.
  Status Relock(int64_t from, int64_t to);
  // Removes least-recently-used unlocked leaves until `num_pages` pages were removed or none is left; appends
  // their pages (to free) to *freed and returns how many.
  int64_t Evict(int64_t num_pages, std::vector<int64_t>* freed);
  // Pages held by the tree.
  int64_t cached_pages() const { return cached_pages_; }
  // Pages of unlocked nodes (SGLang's evictable_size() in pages): what eviction could free, leaves first.
  int64_t evictable_pages() const { return unlocked_pages_; }
  // Full check (O(tree)): parents and children agree, depths, one base per chain, cyclic owners, page counts,
  // the evictable set holds exactly the unlocked leaves, the unlocked-page count.
  Status CheckInvariants() const;

 private:
  struct Node {
    int64_t parent = -1;
    int64_t page = -1;
    int64_t base = -1;
    int64_t depth = 0;
    int64_t lock_ref = 0;
    int64_t children = 0;
    uint64_t key = 0;
    uint64_t last_access = 0;
    bool in_evictable = false;  // in evictable_ under (last_access, id)
  };
  struct EdgeHash {
    size_t operator()(const std::pair<int64_t, uint64_t>& e) const {
      return std::hash<uint64_t>()(e.second * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(e.first));
    }
  };
  bool Evictable(int64_t id) const { return id > 0 && nodes_[id].children == 0 && nodes_[id].lock_ref == 0; }
  void Touch(int64_t id);  // refreshes last_access, keeping the evictable set in step
  void UpdateEvictable(int64_t id);

  int64_t n_;
  bool cyclic_ = true;
  std::vector<Node> nodes_;  // nodes_[0] is the root
  std::vector<int64_t> free_ids_;
  std::unordered_map<std::pair<int64_t, uint64_t>, int64_t, EdgeHash> edges_;  // (parent, key) -> child
  std::set<std::pair<uint64_t, int64_t>> evictable_;                           // (last_access, id)
  int64_t cached_pages_ = 0;
  int64_t unlocked_pages_ = 0;  // live nodes with lock_ref 0
  uint64_t clock_ = 0;
};

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_PREFIX_CACHE_H_

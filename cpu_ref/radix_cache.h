// Reference radix prefix cache with the kv-shard rotation-base rule (spec §2): a tree over page-sized
// token blocks whose chains record their rotation base. Inserting under a different base than the
// matched chain is declined, so every cached prefix's owners stay one cyclic run.
#ifndef KVSHARD_CPU_REF_RADIX_CACHE_H_
#define KVSHARD_CPU_REF_RADIX_CACHE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "core/alloc_script.h"
#include "core/status.h"
#include "cpu_ref/allocator.h"

namespace kvshard::ref {

// A page-granular prefix cache whose pages belong to (and are returned to) an allocator.
class RadixCache {
 public:
  // The longest cached page-aligned prefix of some tokens.
  struct Match {
    int64_t prefix_len = 0;             // matched tokens, a multiple of page_size
    std::vector<int64_t> pages;         // the chain's pages for those tokens, position order
    int64_t rotation_base = kNewChain;  // the chain's rotation base; kNewChain when nothing matched
    int64_t node = 0;                   // deepest matched node (0 = root), for Lock / Unlock
  };
  // What an insert did.
  struct InsertResult {
    bool declined = false;    // the matched chain has another rotation base: nothing was grafted
    int64_t new_pages = 0;    // pages added to the tree
    int64_t freed_pages = 0;  // request pages returned to the allocator (duplicates, or all when declined)
  };
  // One root-to-leaf chain.
  struct Chain {
    std::vector<int64_t> pages;
    int64_t rotation_base = 0;
  };

  // `allocator` must outlive the cache.
  explicit RadixCache(PageInterleaveAllocator* allocator);

  // Matches whole page blocks of `tokens` (a partial last page never matches) and refreshes their LRU time.
  Match MatchPrefix(const std::vector<int64_t>& tokens);
  // Caches the full pages of `tokens` (KV in `pages`, position order, owners cyclic from rotation_base).
  // Pages duplicating cached blocks are freed; under a foreign matched base the insert is declined and
  // every request page not owned by the tree is freed. Pages past the full blocks are left to the caller.
  StatusOr<InsertResult> Insert(const std::vector<int64_t>& tokens, const std::vector<int64_t>& pages,
                                int64_t rotation_base);
  // Protects the path root..node from eviction (reference counted).
  void Lock(int64_t node);
  // Releases one Lock; error when the path is not locked.
  Status Unlock(int64_t node);
  // Frees least-recently-used unlocked leaves until `num_pages` pages were evicted or none is left.
  StatusOr<int64_t> Evict(int64_t num_pages);
  // Pages held by the tree.
  int64_t cached_pages() const { return cached_pages_; }
  // True iff `page` is one of the tree's pages.
  bool holds(int64_t page) const {
    return page >= 0 && page < static_cast<int64_t>(node_of_page_.size()) && node_of_page_[page] >= 0;
  }
  // The pages the last Insert or Evict returned to the allocator, in the order it freed them.
  const std::vector<int64_t>& last_freed() const { return last_freed_; }
  // Every root-to-leaf chain with its base.
  std::vector<Chain> Chains() const;
  // Checks the invariants: chains cyclic under their base, one base per chain, no page cached twice,
  // every cached page allocated.
  Status CheckInvariants() const;
  // Checks CheckInvariants' rules for the nodes added since the last call only (nodes never change once added, and a
  // removed node's page leaves node_of_page_ in the same step), appends their pages to *pages and forgets them.
  Status CheckNewNodes(std::vector<int64_t>* pages);

 private:
  struct Node {
    int64_t parent = -1;
    int64_t page = -1;
    int64_t base = kNewChain;
    int64_t depth = 0;  // position of this node's page in its chain + 1 (root: 0)
    int64_t lock_ref = 0;
    uint64_t last_access = 0;
    std::vector<int64_t> key;  // this node's token block
    std::map<std::vector<int64_t>, int64_t> children;
  };
  std::vector<int64_t> MatchNodes(const std::vector<int64_t>& tokens, int64_t max_pages);
  std::vector<int64_t> block_;  // MatchNodes' token block, kept for the next
  Status CheckInsertPages(const std::vector<int64_t>& pages, int64_t full, int64_t rotation_base) const;
  Status CheckCachedPositions(const std::vector<int64_t>& pages, int64_t full, const std::vector<int64_t>& path) const;
  int64_t AddNode(int64_t parent, const std::vector<int64_t>& tokens, int64_t page, int64_t base, int64_t k);
  Status FreePages(const std::vector<int64_t>& pages);

  PageInterleaveAllocator* allocator_;
  int64_t n_, ps_;
  std::vector<Node> nodes_;  // nodes_[0] is the root; removed nodes go to free_ids_
  std::vector<int64_t> free_ids_;
  // Children entries of removed nodes (a map node with its key's memory), reused by AddNode: memory only, the maps'
  // contents are what erase and emplace would leave.
  std::vector<std::map<std::vector<int64_t>, int64_t>::node_type> spare_children_;
  std::vector<int64_t> node_of_page_;  // per logical page: its node, or -1
  int64_t cached_pages_ = 0;
  uint64_t clock_ = 0;
  std::vector<int64_t> last_freed_;
  std::vector<int64_t> new_nodes_;  // added since the last CheckNewNodes
};

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_RADIX_CACHE_H_

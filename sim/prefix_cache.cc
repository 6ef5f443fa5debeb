// The simulator's prefix cache: ref::RadixCache's rules (match, graft or decline, LRU leaf eviction with the same
// order: oldest access, then lowest node id) over page fingerprints, with an ordered set of evictable leaves.
#include "sim/prefix_cache.h"

#include <algorithm>

#include "core/cyclic_owners.h"

namespace kvshard::sim {

PrefixCache::PrefixCache(int64_t shard_size, bool cyclic_chains) : n_(shard_size), cyclic_(cyclic_chains), nodes_(1) {}

void PrefixCache::UpdateEvictable(int64_t id) {
  Node& node = nodes_[id];
  const bool want = Evictable(id);
  if (want == node.in_evictable) return;
  if (want) {
    evictable_.insert({node.last_access, id});
  } else {
    evictable_.erase({node.last_access, id});
  }
  node.in_evictable = want;
}

void PrefixCache::Touch(int64_t id) {
  Node& node = nodes_[id];
  if (node.in_evictable) {  // re-keyed under the new access time
    evictable_.erase({node.last_access, id});
    node.last_access = clock_;
    evictable_.insert({node.last_access, id});
  } else {
    node.last_access = clock_;
  }
}

PrefixCache::Match PrefixCache::MatchPrefix(const std::vector<uint64_t>& fingerprints, int64_t max_pages) {
  Match m;
  ++clock_;
  int64_t cur = 0;
  const int64_t limit = std::min<int64_t>(max_pages, static_cast<int64_t>(fingerprints.size()));
  for (int64_t k = 0; k < limit; ++k) {
    const auto it = edges_.find({cur, fingerprints[k]});
    if (it == edges_.end()) break;
    cur = it->second;
    Touch(cur);
    m.pages.push_back(nodes_[cur].page);
  }
  m.pages_matched = static_cast<int64_t>(m.pages.size());
  m.node = cur;
  if (cur != 0) m.rotation_base = nodes_[cur].base;
  return m;
}

StatusOr<PrefixCache::InsertResult> PrefixCache::Insert(const std::vector<uint64_t>& fingerprints,
                                                        const std::vector<int64_t>& pages, int64_t rotation_base) {
  const int64_t full = static_cast<int64_t>(fingerprints.size());
  if (rotation_base < 0 || rotation_base >= n_) {
    return InvalidArgument("rotation_base: must be in [0, ", n_, "), got ", rotation_base);
  }
  if (static_cast<int64_t>(pages.size()) < full) {
    return InvalidArgument("pages: need one page per fingerprint (", full, "), got ", pages.size());
  }
  for (int64_t k = 0; cyclic_ && k < full; ++k) {
    if (!IsCyclicOwner(pages[k], rotation_base, k, n_)) {
      return InvalidArgument("pages[", k, "]: owner ", pages[k] % n_, " is not cyclic from rotation base ",
                             rotation_base);
    }
  }
  const Match m = MatchPrefix(fingerprints, full);
  const int64_t d = m.pages_matched;
  InsertResult result;
  result.declined = d > 0 && m.rotation_base != rotation_base;
  for (int64_t k = 0; k < (result.declined ? full : d); ++k) {
    if (k >= d || pages[k] != m.pages[k]) result.freed.push_back(pages[k]);
  }
  if (result.declined) return result;
  result.path.pages = m.pages;
  result.path.pages.insert(result.path.pages.end(), pages.begin() + d, pages.begin() + full);
  result.path.pages_matched = full;
  result.path.rotation_base = full > 0 ? rotation_base : -1;
  int64_t cur = m.node;
  for (int64_t k = d; k < full; ++k) {
    int64_t id;
    if (!free_ids_.empty()) {
      id = free_ids_.back();
      free_ids_.pop_back();
    } else {
      id = static_cast<int64_t>(nodes_.size());
      nodes_.emplace_back();
    }
    Node& node = nodes_[id];
    node = Node();
    node.parent = cur;
    node.page = pages[k];
    node.base = rotation_base;
    node.depth = k + 1;
    node.key = fingerprints[k];
    node.last_access = clock_;
    edges_.emplace(std::make_pair(cur, fingerprints[k]), id);
    if (cur != 0) {
      ++nodes_[cur].children;
      UpdateEvictable(cur);
    }
    UpdateEvictable(id);
    ++cached_pages_;
    ++unlocked_pages_;
    ++result.new_pages;
    cur = id;
  }
  result.path.node = cur;
  return result;
}

void PrefixCache::Lock(int64_t node) {
  for (int64_t id = node; id > 0; id = nodes_[id].parent) {
    if (nodes_[id].lock_ref++ == 0) --unlocked_pages_;
    UpdateEvictable(id);
  }
}

Status PrefixCache::Relock(int64_t from, int64_t to) {
  int64_t id = to;
  while (id > 0 && id != from) id = nodes_[id].parent;
  if (id != from) {  // not an ancestor: the two walks
    Lock(to);
    return Unlock(from);
  }
  if (from > 0 && nodes_[from].lock_ref == 0) return FailedPrecondition("node ", from, ": relock without lock");
  for (id = to; id != from; id = nodes_[id].parent) {
    if (nodes_[id].lock_ref++ == 0) --unlocked_pages_;
    UpdateEvictable(id);
  }
  return Status::Ok();
}

Status PrefixCache::Unlock(int64_t node) {
  for (int64_t id = node; id > 0; id = nodes_[id].parent) {
    if (nodes_[id].lock_ref == 0) return FailedPrecondition("node ", node, ": unlock without lock");
  }
  for (int64_t id = node; id > 0; id = nodes_[id].parent) {
    if (--nodes_[id].lock_ref == 0) ++unlocked_pages_;
    UpdateEvictable(id);
  }
  return Status::Ok();
}

int64_t PrefixCache::Evict(int64_t num_pages, std::vector<int64_t>* freed) {
  int64_t evicted = 0;
  while (evicted < num_pages && !evictable_.empty()) {
    const int64_t id = evictable_.begin()->second;
    evictable_.erase(evictable_.begin());
    Node& node = nodes_[id];
    freed->push_back(node.page);
    ++evicted;
    edges_.erase({node.parent, node.key});
    const int64_t parent = node.parent;
    node = Node();
    free_ids_.push_back(id);
    --cached_pages_;
    --unlocked_pages_;  // evictable nodes are unlocked
    if (parent != 0) {
      --nodes_[parent].children;
      UpdateEvictable(parent);
    }
  }
  return evicted;
}

Status PrefixCache::CheckInvariants() const {
  int64_t live = 0, evictable = 0, unlocked = 0;
  std::vector<int64_t> children(nodes_.size(), 0);
  for (int64_t id = 1; id < static_cast<int64_t>(nodes_.size()); ++id) {
    const Node& node = nodes_[id];
    if (node.page < 0) continue;
    ++live;
    unlocked += node.lock_ref == 0;
    if (node.parent != 0) ++children[node.parent];
    const Node& parent = nodes_[node.parent];
    if (node.parent != 0 && (parent.page < 0 || parent.base != node.base || parent.depth + 1 != node.depth)) {
      return Internal("prefix cache node ", id, ": parent ", node.parent, " has another chain or depth");
    }
    if (node.parent == 0 && node.depth != 1)
      return Internal("prefix cache node ", id, ": root child at depth ", node.depth);
    if (cyclic_ && !IsCyclicOwner(node.page, node.base, node.depth - 1, n_)) {
      return Internal("prefix cache node ", id, ": page ", node.page, " at position ", node.depth - 1,
                      " breaks the cyclic owners of base ", node.base);
    }
    const auto it = edges_.find({node.parent, node.key});
    if (it == edges_.end() || it->second != id) return Internal("prefix cache node ", id, ": no edge from its parent");
  }
  for (int64_t id = 1; id < static_cast<int64_t>(nodes_.size()); ++id) {
    if (nodes_[id].page < 0) continue;
    if (children[id] != nodes_[id].children) return Internal("prefix cache node ", id, ": child count differs");
    const bool in_set = evictable_.count({nodes_[id].last_access, id}) > 0;
    if (in_set != Evictable(id) || in_set != nodes_[id].in_evictable) {
      return Internal("prefix cache node ", id, ": evictable set out of step");
    }
    evictable += in_set;
  }
  if (live != cached_pages_ || static_cast<int64_t>(edges_.size()) != live) {
    return Internal("prefix cache: ", live, " live nodes, ", edges_.size(), " edges, counted ", cached_pages_);
  }
  if (evictable != static_cast<int64_t>(evictable_.size())) return Internal("prefix cache: stale evictable entries");
  if (unlocked != unlocked_pages_) {
    return Internal("prefix cache: ", unlocked, " unlocked pages, counted ", unlocked_pages_);
  }
  return Status::Ok();
}

}  // namespace kvshard::sim

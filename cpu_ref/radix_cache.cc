// Reference radix prefix cache (one node per page block) with graft-declined inserts and LRU eviction.
#include "cpu_ref/radix_cache.h"

#include <algorithm>
#include <queue>

#include "core/cyclic_owners.h"

namespace kvshard::ref {

RadixCache::RadixCache(PageInterleaveAllocator* allocator)
    : allocator_(allocator),
      n_(allocator->config().shard_size),
      ps_(allocator->config().page_size),
      nodes_(1),
      node_of_page_(allocator->num_logical_pages(), -1) {}

std::vector<int64_t> RadixCache::MatchNodes(const std::vector<int64_t>& tokens, int64_t max_pages) {
  std::vector<int64_t> path;
  int64_t cur = 0;
  ++clock_;
  for (int64_t k = 0; k < max_pages; ++k) {
    std::vector<int64_t>& block = block_;  // page k's tokens, in a buffer kept from match to match
    block.assign(tokens.begin() + k * ps_, tokens.begin() + (k + 1) * ps_);
    auto it = nodes_[cur].children.find(block);
    if (it == nodes_[cur].children.end()) break;
    cur = it->second;
    nodes_[cur].last_access = clock_;
    path.push_back(cur);
  }
  return path;
}

RadixCache::Match RadixCache::MatchPrefix(const std::vector<int64_t>& tokens) {
  const std::vector<int64_t> path = MatchNodes(tokens, static_cast<int64_t>(tokens.size()) / ps_);
  Match m;
  m.prefix_len = static_cast<int64_t>(path.size()) * ps_;
  for (int64_t id : path) m.pages.push_back(nodes_[id].page);
  if (!path.empty()) {
    m.rotation_base = nodes_[path[0]].base;
    m.node = path.back();
  }
  return m;
}

Status RadixCache::FreePages(const std::vector<int64_t>& pages) {
  last_freed_ = pages;
  std::vector<int64_t> locs;
  locs.reserve(pages.size());
  for (int64_t p : pages) locs.push_back(p * ps_);
  return allocator_->Free(locs);
}

// Insert's argument checks: a base in [0, N), one page per full token block, each allocated (not a trash page) and
// owned cyclically from the base, checked page by page in that order.
Status RadixCache::CheckInsertPages(const std::vector<int64_t>& pages, int64_t full, int64_t rotation_base) const {
  if (rotation_base < 0 || rotation_base >= n_) {
    return InvalidArgument("rotation_base: must be in [0, ", n_, "), got ", rotation_base);
  }
  if (static_cast<int64_t>(pages.size()) < full) {
    return InvalidArgument("pages: need one page per full token block (", full, "), got ", pages.size());
  }
  for (int64_t k = 0; k < full; ++k) {
    if (!allocator_->is_allocated(pages[k]) || pages[k] < n_) {
      return InvalidArgument("pages[", k, "]: page ", pages[k], " is not an allocated page");
    }
    if (!IsCyclicOwner(pages[k], rotation_base, k, n_)) {
      return InvalidArgument("pages[", k, "]: owner ", pages[k] % n_, " is not cyclic from rotation base ",
                             rotation_base, " (expected ", (rotation_base + k) % n_, ")");
    }
  }
  return Status::Ok();
}

// A page already cached must be the matched node at its own position.
Status RadixCache::CheckCachedPositions(const std::vector<int64_t>& pages, int64_t full,
                                        const std::vector<int64_t>& path) const {
  const int64_t d = static_cast<int64_t>(path.size());
  for (int64_t k = 0; k < full; ++k) {
    const int64_t holder = node_of_page_[pages[k]];
    if (holder != -1 && (k >= d || holder != path[k])) {
      return InvalidArgument("pages[", k, "]: page ", pages[k], " is cached at another position");
    }
  }
  return Status::Ok();
}

// A fresh node (a recycled id when one is free) under `parent` for page k of the chain.
int64_t RadixCache::AddNode(int64_t parent, const std::vector<int64_t>& tokens, int64_t page, int64_t base, int64_t k) {
  int64_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
    std::vector<int64_t> key = std::move(nodes_[id].key);  // its memory kept for the new node's block
    nodes_[id] = Node();
    nodes_[id].key = std::move(key);
  } else {
    id = static_cast<int64_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& node = nodes_[id];
  node.parent = parent;
  node.page = page;
  node.base = base;
  node.depth = k + 1;
  node.last_access = clock_;
  node.key.assign(tokens.begin() + k * ps_, tokens.begin() + (k + 1) * ps_);
  if (spare_children_.empty()) {
    nodes_[parent].children.emplace(node.key, id);
  } else {  // a removed child's entry, its key overwritten in the memory it has
    auto child = std::move(spare_children_.back());
    spare_children_.pop_back();
    child.key() = node.key;
    child.mapped() = id;
    nodes_[parent].children.insert(std::move(child));
  }
  if (node_of_page_[page] >= 0) new_nodes_.push_back(node_of_page_[page]);  // checked again: its page is taken
  node_of_page_[page] = id;
  ++cached_pages_;
  new_nodes_.push_back(id);
  return id;
}

StatusOr<RadixCache::InsertResult> RadixCache::Insert(const std::vector<int64_t>& tokens,
                                                      const std::vector<int64_t>& pages, int64_t rotation_base) {
  const int64_t full = static_cast<int64_t>(tokens.size()) / ps_;
  KVSHARD_RETURN_IF_ERROR(CheckInsertPages(pages, full, rotation_base));
  const std::vector<int64_t> path = MatchNodes(tokens, full);
  const int64_t d = static_cast<int64_t>(path.size());
  KVSHARD_RETURN_IF_ERROR(CheckCachedPositions(pages, full, path));
  // The rotation-base rule: a chain matched under another base declines the graft (every page is freed);
  // otherwise the matched part's duplicate pages are freed and the rest is grafted below the match.
  InsertResult result;
  std::vector<int64_t> to_free;
  result.declined = d > 0 && nodes_[path[0]].base != rotation_base;
  for (int64_t k = 0; k < (result.declined ? full : d); ++k) {
    if (k >= d || pages[k] != nodes_[path[k]].page) to_free.push_back(pages[k]);
  }
  if (!result.declined) {
    int64_t cur = d ? path.back() : 0;
    for (int64_t k = d; k < full; ++k, ++result.new_pages) cur = AddNode(cur, tokens, pages[k], rotation_base, k);
  }
  result.freed_pages = static_cast<int64_t>(to_free.size());
  KVSHARD_RETURN_IF_ERROR(FreePages(to_free));
  return result;
}

void RadixCache::Lock(int64_t node) {
  for (int64_t id = node; id > 0; id = nodes_[id].parent) ++nodes_[id].lock_ref;
}

Status RadixCache::Unlock(int64_t node) {
  for (int64_t id = node; id > 0; id = nodes_[id].parent) {
    if (nodes_[id].lock_ref == 0) return FailedPrecondition("node ", node, ": unlock without lock");
  }
  for (int64_t id = node; id > 0; id = nodes_[id].parent) --nodes_[id].lock_ref;
  return Status::Ok();
}

StatusOr<int64_t> RadixCache::Evict(int64_t num_pages) {
  using Entry = std::pair<uint64_t, int64_t>;  // (last_access, id): oldest first, then lowest id
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> leaves;
  auto evictable = [&](int64_t id) {
    return id > 0 && nodes_[id].page >= 0 && nodes_[id].children.empty() && nodes_[id].lock_ref == 0;
  };
  for (int64_t id = 1; id < static_cast<int64_t>(nodes_.size()); ++id) {
    if (evictable(id)) leaves.push({nodes_[id].last_access, id});
  }
  std::vector<int64_t> freed;
  while (static_cast<int64_t>(freed.size()) < num_pages && !leaves.empty()) {
    const int64_t id = leaves.top().second;
    leaves.pop();
    Node& node = nodes_[id];
    freed.push_back(node.page);
    node_of_page_[node.page] = -1;
    const int64_t parent = node.parent;
    spare_children_.push_back(nodes_[parent].children.extract(node.key));  // erased, its memory kept for AddNode
    std::vector<int64_t> key = std::move(node.key);
    node = Node();              // page = -1: not a live node
    node.key = std::move(key);  // its memory kept for the node AddNode makes here
    free_ids_.push_back(id);
    --cached_pages_;
    if (evictable(parent)) leaves.push({nodes_[parent].last_access, parent});
  }
  KVSHARD_RETURN_IF_ERROR(FreePages(freed));
  return static_cast<int64_t>(freed.size());
}

std::vector<RadixCache::Chain> RadixCache::Chains() const {
  std::vector<Chain> chains;
  for (int64_t id = 1; id < static_cast<int64_t>(nodes_.size()); ++id) {
    if (nodes_[id].page < 0 || !nodes_[id].children.empty()) continue;
    Chain c;
    for (int64_t cur = id; cur > 0; cur = nodes_[cur].parent) {
      c.pages.push_back(nodes_[cur].page);
      c.rotation_base = nodes_[cur].base;
    }
    std::reverse(c.pages.begin(), c.pages.end());
    chains.push_back(std::move(c));
  }
  return chains;
}

Status RadixCache::CheckInvariants() const {
  int64_t live = 0;
  for (int64_t id = 1; id < static_cast<int64_t>(nodes_.size()); ++id) {
    const Node& node = nodes_[id];
    if (node.page < 0) continue;
    ++live;
    const int64_t root_child = [&] {
      int64_t cur = id;
      while (nodes_[cur].parent > 0) cur = nodes_[cur].parent;
      return cur;
    }();
    if (node.base != nodes_[root_child].base) {
      return Internal("radix node ", id, ": base ", node.base, " differs from its chain's base ",
                      nodes_[root_child].base);
    }
    if (!IsCyclicOwner(node.page, node.base, node.depth - 1, n_)) {
      return Internal("radix node ", id, ": page ", node.page, " at position ", node.depth - 1,
                      " breaks the cyclic owners of base ", node.base);
    }
    if (node_of_page_[node.page] != id) return Internal("radix node ", id, ": page ", node.page, " cached twice");
    if (!allocator_->is_allocated(node.page)) {
      return Internal("radix node ", id, ": page ", node.page, " is cached but free in the allocator");
    }
  }
  if (live != cached_pages_) return Internal("radix cache: ", live, " live nodes, counted ", cached_pages_);
  return Status::Ok();
}

Status RadixCache::CheckNewNodes(std::vector<int64_t>* pages) {
  std::vector<int64_t> ids;
  ids.swap(new_nodes_);
  for (int64_t id : ids) {
    const Node& node = nodes_[id];
    if (node.page < 0) continue;  // evicted again (or its id reused, then listed again)
    pages->push_back(node.page);
    const int64_t parent_base = node.parent > 0 ? nodes_[node.parent].base : node.base;
    if (node.base != parent_base) {
      return Internal("radix node ", id, ": base ", node.base, " differs from its chain's base ", parent_base);
    }
    if (!IsCyclicOwner(node.page, node.base, node.depth - 1, n_)) {
      return Internal("radix node ", id, ": page ", node.page, " at position ", node.depth - 1,
                      " breaks the cyclic owners of base ", node.base);
    }
    if (node_of_page_[node.page] != id) return Internal("radix node ", id, ": page ", node.page, " cached twice");
    if (!allocator_->is_allocated(node.page)) {
      return Internal("radix node ", id, ": page ", node.page, " is cached but free in the allocator");
    }
  }
  return Status::Ok();
}

}  // namespace kvshard::ref

// SGLang's RadixCache, literally: each function below is the Python method of the same name in
// ../shared/sglang_ref/radix_cache.py, with time.monotonic() as a tick counter (only the order of times matters).
#include "cpu_ref/radix_tree.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace kvshard::ref {

RadixTree::RadixTree(PageInterleaveAllocator* allocator, int64_t page_size) : allocator_(allocator), ps_(page_size) {
  NewNode();  // reset(): the root, locked once so it is never evicted
  nodes_[kRoot].lock_ref = 1;
}

int64_t RadixTree::NewNode() {
  const int64_t id = static_cast<int64_t>(nodes_.size());  // never reused: a recorded node handle stays one node
  nodes_.emplace_back();
  nodes_[id].last_access_time = Tick();
  Tick();  // creation_time (FIFO/FILO policies only)
  nodes_[id].live = true;
  return id;
}

std::vector<int64_t> RadixTree::ChildKey(const std::vector<int64_t>& key, size_t at) const {
  return std::vector<int64_t>(key.begin() + at, key.begin() + at + ps_);
}

int64_t RadixTree::MatchLen(const std::vector<int64_t>& node_key, const std::vector<int64_t>& key, size_t at) const {
  const size_t n = std::min(node_key.size(), key.size() - at);
  size_t i = 0;
  while (i < n && node_key[i] == key[at + i]) ++i;
  return static_cast<int64_t>(i) / ps_ * ps_;
}

RadixTree::Match RadixTree::MatchPrefix(const std::vector<int64_t>& tokens) {
  Match m;
  const size_t len = tokens.size() / ps_ * ps_;  // page_aligned
  if (len == 0) return m;
  const std::vector<int64_t> key(tokens.begin(), tokens.begin() + len);
  const uint64_t access_time = Tick();  // _match_prefix_helper
  nodes_[kRoot].last_access_time = access_time;
  int64_t node = kRoot;
  size_t at = 0;
  while (at < len) {
    const auto it = nodes_[node].children.find(ChildKey(key, at));
    if (it == nodes_[node].children.end()) break;
    const int64_t child = it->second;
    nodes_[child].last_access_time = access_time;
    const int64_t prefix_len = MatchLen(nodes_[child].key, key, at);
    if (prefix_len < static_cast<int64_t>(nodes_[child].key.size())) {
      node = SplitNode(child, prefix_len);
      m.indices.insert(m.indices.end(), nodes_[node].value.begin(), nodes_[node].value.end());
      break;
    }
    m.indices.insert(m.indices.end(), nodes_[child].value.begin(), nodes_[child].value.end());
    node = child;
    at += prefix_len;
  }
  m.last_node = node;
  return m;
}

int64_t RadixTree::SplitNode(int64_t child, int64_t split_len) {
  const int64_t new_node = NewNode();
  Node& n = nodes_[new_node];
  Node& c = nodes_[child];
  n.parent = c.parent;
  n.lock_ref = c.lock_ref;
  n.key.assign(c.key.begin(), c.key.begin() + split_len);
  n.value.assign(c.value.begin(), c.value.begin() + split_len);
  n.rotation_base = c.rotation_base;
  c.key.erase(c.key.begin(), c.key.begin() + split_len);
  c.value.erase(c.value.begin(), c.value.begin() + split_len);
  c.parent = new_node;
  n.children.emplace(ChildKey(c.key, 0), child);
  nodes_[n.parent].children[ChildKey(n.key, 0)] = new_node;
  return new_node;
}

RadixTree::InsertResult RadixTree::Insert(const std::vector<int64_t>& tokens, const std::vector<int64_t>& values,
                                          int64_t rotation_base) {
  const size_t len = tokens.size() / ps_ * ps_;
  const std::vector<int64_t> key(tokens.begin(), tokens.begin() + len);
  InsertResult r;
  const uint64_t access_time = Tick();  // _insert_helper
  int64_t node = kRoot;
  nodes_[node].last_access_time = access_time;
  if (len == 0) return r;
  size_t at = 0;
  while (at < len) {
    const auto it = nodes_[node].children.find(ChildKey(key, at));
    if (it == nodes_[node].children.end()) break;
    node = it->second;
    nodes_[node].last_access_time = access_time;
    const int64_t prefix_len = MatchLen(nodes_[node].key, key, at);
    r.prefix_len += prefix_len;
    at += prefix_len;
    if (prefix_len < static_cast<int64_t>(nodes_[node].key.size())) node = SplitNode(node, prefix_len);
  }
  if (at < len) {
    if (rotation_base != kNewChain && node != kRoot && nodes_[node].rotation_base != rotation_base) {
      r.last_node = node;  // the tail's owners would not continue the chain's cyclic run: it stays uncached
      r.rotation_tail_declined = true;
      return r;
    }
    const int64_t new_node = NewNode();
    Node& n = nodes_[new_node];
    n.parent = node;
    n.key.assign(key.begin() + at, key.end());
    n.value.assign(values.begin() + at, values.begin() + len);
    n.rotation_base = rotation_base;
    nodes_[node].children.emplace(ChildKey(n.key, 0), new_node);
    evictable_size_ += static_cast<int64_t>(len - at);
    node = new_node;
  }
  r.last_node = node;
  return r;
}

StatusOr<int64_t> RadixTree::Evict(int64_t num_tokens) {
  last_evicted_.clear();
  using Entry = std::pair<uint64_t, int64_t>;  // (last_access_time, node): times are unique, so no ties
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (int64_t id = 1; id < static_cast<int64_t>(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    if (n.live && n.children.empty() && n.lock_ref == 0) heap.push({n.last_access_time, id});
  }
  int64_t num_evicted = 0;
  while (num_evicted < num_tokens && !heap.empty()) {
    const int64_t x = heap.top().second;
    heap.pop();
    const std::vector<int64_t> value = nodes_[x].value;
    KVSHARD_RETURN_IF_ERROR(allocator_->Free(value));  // free_segment(x.value): whole pages
    std::set<int64_t> pages;                           // what free() sees: the unique pages, ascending
    for (int64_t loc : value) pages.insert(loc / ps_);
    last_evicted_.emplace_back(pages.begin(), pages.end());
    num_evicted += static_cast<int64_t>(value.size());
    const int64_t parent = nodes_[x].parent;
    DeleteLeaf(x);
    if (nodes_[parent].children.empty() && nodes_[parent].lock_ref == 0) {
      heap.push({nodes_[parent].last_access_time, parent});
    }
  }
  return num_evicted;
}

void RadixTree::DeleteLeaf(int64_t node) {
  Node& n = nodes_[node];
  nodes_[n.parent].children.erase(ChildKey(n.key, 0));
  evictable_size_ -= static_cast<int64_t>(n.key.size());
  n = Node();
}

void RadixTree::IncLockRef(int64_t node) {
  for (; node != kRoot; node = nodes_[node].parent) {
    Node& n = nodes_[node];
    if (n.lock_ref == 0) {
      evictable_size_ -= static_cast<int64_t>(n.key.size());
      protected_size_ += static_cast<int64_t>(n.key.size());
    }
    ++n.lock_ref;
  }
}

void RadixTree::DecLockRef(int64_t node) {
  for (; node != kRoot; node = nodes_[node].parent) {
    Node& n = nodes_[node];
    if (n.lock_ref == 1) {
      evictable_size_ += static_cast<int64_t>(n.key.size());
      protected_size_ -= static_cast<int64_t>(n.key.size());
    }
    --n.lock_ref;
  }
}

int64_t RadixTree::total_size() const {
  int64_t total = 0;
  for (const Node& n : nodes_) total += n.live ? static_cast<int64_t>(n.value.size()) : 0;
  return total;
}

std::vector<int64_t> Slice(const std::vector<int64_t>& v, int64_t begin, int64_t end) {
  begin = std::clamp<int64_t>(begin, 0, static_cast<int64_t>(v.size()));
  end = std::clamp<int64_t>(end, begin, static_cast<int64_t>(v.size()));
  return std::vector<int64_t>(v.begin() + begin, v.begin() + end);
}

Status RadixTree::FreeSegment(const std::vector<int64_t>& locs, CacheResult* out) {
  if (locs.empty()) return Status::Ok();
  KVSHARD_RETURN_IF_ERROR(allocator_->Free(locs));
  std::set<int64_t> pages;  // what free() sees: the unique pages, ascending
  for (int64_t loc : locs) pages.insert(loc / ps_);
  out->freed.emplace_back(pages.begin(), pages.end());
  return Status::Ok();
}

Status RadixTree::FreeSegments(const std::vector<std::pair<std::vector<int64_t>, int64_t>>& segments,
                               CacheResult* out) {
  int64_t prev_end = -1;
  for (auto [locs, start_pos] : segments) {
    const int64_t n = static_cast<int64_t>(locs.size());
    if (n == 0) continue;
    const int64_t seg_end = start_pos + n;
    if (prev_end >= 0 && start_pos / ps_ == (prev_end - 1) / ps_) {  // a boundary page is freed once
      const int64_t boundary = (start_pos / ps_ + 1) * ps_;
      locs = Slice(locs, boundary - start_pos, n);
      start_pos = boundary;
    }
    prev_end = seg_end;
    KVSHARD_RETURN_IF_ERROR(FreeSegment(locs, out));
  }
  return Status::Ok();
}

StatusOr<RadixTree::CacheResult> RadixTree::CacheUnfinishedReq(Req& req, int64_t fill_len) {
  const std::vector<int64_t> kv_indices = Slice(req.row, 0, fill_len);
  const int64_t key_len = fill_len / ps_ * ps_;
  const InsertResult result =
      Insert(Slice(req.fill_ids, 0, key_len), Slice(kv_indices, 0, key_len), req.kv_rotation_base);
  CacheResult out{result.rotation_tail_declined, result.prefix_len, {}};
  if (result.rotation_tail_declined) {  // the request keeps its own pages: no dedup free, no rebind
    req.prefix_indices = kv_indices;
    return out;
  }
  KVSHARD_RETURN_IF_ERROR(FreeSegment(Slice(kv_indices, req.cache_protected_len, result.prefix_len), &out));
  const Match m = MatchPrefix(Slice(req.fill_ids, 0, key_len));
  if (static_cast<int64_t>(m.indices.size()) != key_len) {
    return Internal("cache_unfinished_req: re-match found ", m.indices.size(), " of ", key_len, " tokens");
  }
  for (int64_t i = req.cache_protected_len; i < key_len; ++i) req.row[i] = m.indices[i];
  req.cache_protected_len = key_len;
  DecLockRef(req.last_node);
  IncLockRef(m.last_node);
  req.prefix_indices = Slice(req.row, 0, fill_len);
  req.last_node = m.last_node;
  return out;
}

StatusOr<RadixTree::CacheResult> RadixTree::CacheFinishedReq(Req& req, int64_t kv_len) {
  const std::vector<int64_t> kv_indices = Slice(req.row, 0, kv_len);
  const int64_t key_len = kv_len / ps_ * ps_;
  const InsertResult result =
      Insert(Slice(req.fill_ids, 0, key_len), Slice(kv_indices, 0, key_len), req.kv_rotation_base);
  CacheResult out{result.rotation_tail_declined, result.prefix_len, {}};
  // A declined tail stayed request-owned: it is freed with the duplicates; then the unaligned tail.
  const int64_t freed_end = result.rotation_tail_declined ? key_len : result.prefix_len;
  KVSHARD_RETURN_IF_ERROR(
      FreeSegments({{Slice(kv_indices, req.cache_protected_len, freed_end), req.cache_protected_len},
                    {Slice(kv_indices, key_len, kv_len), key_len}},
                   &out));
  DecLockRef(req.last_node);
  return out;
}

std::set<int64_t> RadixTree::Pages() const {
  std::set<int64_t> pages;
  for (const Node& n : nodes_) {
    if (n.live) {
      for (int64_t loc : n.value) pages.insert(loc / ps_);
    }
  }
  return pages;
}

}  // namespace kvshard::ref

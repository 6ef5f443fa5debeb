// radix_* records: SGLang's RadixCache calls as a running engine makes them (the recorder attached to a server),
// run on the literal tree (cpu_ref/radix_tree.h) over the trace's allocator. Nodes are named by handles that
// number them in the order records first name them (0: the root), on the recorder's side and here alike, so a
// node the two sides disagree on shows up as a handle mismatch. Pages the tree frees go back through Release.
#include <algorithm>
#include <utility>
#include <vector>

#include "replay/replayer.h"

namespace kvshard::replay {
namespace {

std::vector<int64_t> Pages(const std::vector<int64_t>& locs, int64_t ps) {
  std::vector<int64_t> pages;
  for (size_t i = 0; i < locs.size(); i += ps) pages.push_back(locs[i] / ps);
  return pages;
}

}  // namespace

StatusOr<ref::RadixTree*> Replayer::Tree() {
  if (page_cache_used_) {
    return InvalidArgument(
        "op: radix_* records (SGLang's RadixCache) and match_prefix/insert/evict/dec_lock_ref "
        "(kvshard's page model) do not mix in one trace");
  }
  if (!tree_) {
    tree_ = std::make_unique<ref::RadixTree>(&*allocator_, allocator_->config().page_size);
    HandleOf(ref::RadixTree::kRoot);  // handle 0
  }
  return tree_.get();
}

Status Replayer::CheckSlots(const std::vector<int64_t>& locs, const char* field) const {
  const int64_t limit = allocator_->num_logical_pages() * allocator_->config().page_size;
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= limit) {
      return InvalidArgument(field, "[", i, "]: must be a slot of the pool [0, ", limit, "), got ", locs[i]);
    }
  }
  return Status::Ok();
}

int64_t Replayer::HandleOf(int64_t node) {
  const auto [it, added] = node_handle_.emplace(node, static_cast<int64_t>(handle_node_.size()));
  if (added) handle_node_.push_back(node);
  return it->second;
}

StatusOr<int64_t> Replayer::NodeOf(const Json& rec, const char* field) const {
  const int64_t h = rec.at(field).get<int64_t>();
  if (h < 0 || h >= static_cast<int64_t>(handle_node_.size())) {
    return InvalidArgument(field, ": no node has handle ", h, " (", handle_node_.size(),
                           " named so far; a handle is given when a record's answer first names its node)");
  }
  if (!tree_->is_live(handle_node_[h])) return InvalidArgument(field, ": node ", h, " was evicted");
  return handle_node_[h];
}

Json Replayer::TreeAnswer(Json answer) const {
  answer["evictable_size"] = tree_->evictable_size();
  answer["protected_size"] = tree_->protected_size();
  return answer;
}

StatusOr<Json> Replayer::RunTreeMatch(const Json& rec) {
  KVSHARD_ASSIGN_OR_RETURN(ref::RadixTree * tree, Tree());
  const ref::RadixTree::Match m = tree->MatchPrefix(JsonInts(rec.at("tokens")));
  return TreeAnswer({{"prefix_len", m.indices.size()},
                     {"pages", Pages(m.indices, allocator_->config().page_size)},
                     {"node", HandleOf(m.last_node)}});
}

StatusOr<Json> Replayer::RunTreeInsert(const Json& rec) {
  KVSHARD_ASSIGN_OR_RETURN(ref::RadixTree * tree, Tree());
  const std::vector<int64_t> tokens = JsonInts(rec.at("tokens"));
  const std::vector<int64_t> locs = JsonInts(rec.at("locs"));
  if (locs.size() < tokens.size()) {
    return InvalidArgument("locs: need one per token (", tokens.size(), "), got ", locs.size());
  }
  KVSHARD_RETURN_IF_ERROR(CheckSlots(locs, "locs"));
  const int64_t n = allocator_->config().shard_size;
  const Json& b = rec.at("rotation_base");
  if (!b.is_null() && (b.get<int64_t>() < 0 || b.get<int64_t>() >= n)) {
    return InvalidArgument("rotation_base: must be null or in [0, ", n, "), got ", b.get<int64_t>());
  }
  const ref::RadixTree::InsertResult r = tree->Insert(tokens, locs, b.is_null() ? kNewChain : b.get<int64_t>());
  return TreeAnswer({{"prefix_len", r.prefix_len},
                     {"rotation_tail_declined", r.rotation_tail_declined},
                     {"node", HandleOf(r.last_node)}});
}

StatusOr<Json> Replayer::RunTreeLock(const Json& rec, bool inc) {
  KVSHARD_ASSIGN_OR_RETURN(ref::RadixTree * tree, Tree());
  KVSHARD_ASSIGN_OR_RETURN(const int64_t node, NodeOf(rec, "node"));
  if (inc) {
    tree->IncLockRef(node);
  } else {
    tree->DecLockRef(node);
  }
  return TreeAnswer(Json::object());
}

StatusOr<Json> Replayer::RunTreeEvict(const Json& rec) {
  KVSHARD_ASSIGN_OR_RETURN(ref::RadixTree * tree, Tree());
  const int64_t num_tokens = rec.at("num_tokens").get<int64_t>();
  if (num_tokens < 0) return InvalidArgument("num_tokens: must be >= 0, got ", num_tokens);
  KVSHARD_ASSIGN_OR_RETURN(const int64_t evicted, tree->Evict(num_tokens));
  for (const std::vector<int64_t>& pages : tree->last_evicted()) {
    std::vector<int64_t> locs;
    for (int64_t p : pages) locs.push_back(p * allocator_->config().page_size);
    Release(locs);
  }
  return TreeAnswer({{"evicted_tokens", evicted}, {"evicted", tree->last_evicted()}});
}

StatusOr<Json> Replayer::RunTreeCacheReq(const Json& rec, bool finished) {
  KVSHARD_ASSIGN_OR_RETURN(ref::RadixTree * tree, Tree());
  ref::RadixTree::Req req;
  req.fill_ids = JsonInts(rec.at("fill_ids"));
  req.row = JsonInts(rec.at("row"));
  const int64_t len = static_cast<int64_t>(req.fill_ids.size());
  if (static_cast<int64_t>(req.row.size()) != len) {
    return InvalidArgument("row: need one loc per fill id (", len, "), got ", req.row.size());
  }
  KVSHARD_RETURN_IF_ERROR(CheckSlots(req.row, "row"));
  req.cache_protected_len = rec.at("cache_protected_len").get<int64_t>();
  if (req.cache_protected_len < 0 || req.cache_protected_len > len) {
    return InvalidArgument("cache_protected_len: must be in [0, ", len, "], got ", req.cache_protected_len);
  }
  KVSHARD_ASSIGN_OR_RETURN(req.last_node, NodeOf(rec, "last_node"));
  const Json& b = rec.at("rotation_base");
  const int64_t n = allocator_->config().shard_size;
  if (!b.is_null() && (b.get<int64_t>() < 0 || b.get<int64_t>() >= n)) {
    return InvalidArgument("rotation_base: must be null or in [0, ", n, "), got ", b.get<int64_t>());
  }
  req.kv_rotation_base = b.is_null() ? kNewChain : b.get<int64_t>();
  KVSHARD_ASSIGN_OR_RETURN(const ref::RadixTree::CacheResult r,
                           finished ? tree->CacheFinishedReq(req, len) : tree->CacheUnfinishedReq(req, len));
  for (const std::vector<int64_t>& pages : r.freed) {
    std::vector<int64_t> locs;
    for (int64_t p : pages) locs.push_back(p * allocator_->config().page_size);
    Release(locs);
  }
  Json j = {{"rotation_tail_declined", r.rotation_tail_declined}, {"prefix_len", r.prefix_len}, {"freed", r.freed}};
  if (!finished) {
    j["cache_protected_len"] = req.cache_protected_len;
    j["last_node"] = HandleOf(req.last_node);
    j["row_pages"] = Pages(req.prefix_indices, allocator_->config().page_size);
  }
  return TreeAnswer(std::move(j));
}

Status Replayer::CheckTreeInvariants() const {
  if (!tree_) return Status::Ok();
  for (int64_t p : tree_->Pages()) {
    if (holder_[p] == -1) return Mismatch("invariant: radix tree: page ", p, " is cached but was freed");
  }
  if (tree_->evictable_size() + tree_->protected_size() != tree_->total_size()) {
    return Mismatch("invariant: radix tree: evictable ", tree_->evictable_size(), " + protected ",
                    tree_->protected_size(), " != total ", tree_->total_size());
  }
  return Status::Ok();
}

}  // namespace kvshard::replay

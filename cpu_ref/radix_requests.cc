// The scheduler's request path around SGLang's radix cache, one function per SGLang step (see the header).
#include "cpu_ref/radix_requests.h"

#include <algorithm>
#include <set>
#include <utility>

namespace kvshard::ref {
RadixRequests::RadixRequests(PageInterleaveAllocator* allocator)
    : allocator_(allocator),
      n_(allocator->config().shard_size),
      ps_(allocator->config().page_size),
      tree_(allocator, allocator->config().page_size) {}

StatusOr<RadixRequests::Req*> RadixRequests::Find(const std::string& rid, bool need_allocated) {
  const auto it = reqs_.find(rid);
  if (it == reqs_.end()) return InvalidArgument("req: no live request ", QuoteInput(rid));
  if (need_allocated && !it->second.allocated) {
    return FailedPrecondition("req: request ", QuoteInput(rid), " has no KV allocated for its extend");
  }
  return &it->second;
}

StatusOr<RadixRequests::Admitted> RadixRequests::Admit(const std::string& rid, const std::vector<int64_t>& tokens,
                                                       int64_t extend_end) {
  auto it = reqs_.find(rid);
  if (it == reqs_.end()) {  // init_next_round_input's match (limit input_len - 1), PrefillAdder's lock
    Req req;
    req.sg.fill_ids = tokens;
    const int64_t limit = std::max<int64_t>(static_cast<int64_t>(tokens.size()) - 1, 0);
    const RadixTree::Match m = tree_.MatchPrefix(Slice(tokens, 0, limit));
    req.sg.prefix_indices = m.indices;
    req.sg.last_node = m.last_node;
    req.sg.cache_protected_len = static_cast<int64_t>(m.indices.size());
    it = reqs_.emplace(rid, std::move(req)).first;
    tree_.IncLockRef(it->second.sg.last_node);
  } else if (it->second.sg.row.empty()) {
    return FailedPrecondition("req: request ", QuoteInput(rid), " was admitted and holds no KV yet (abort_req it)");
  }
  // A continuing chunk (add_chunked_req; again after a failed allocation) extends from its prefix, no new match.
  Req& req = it->second;
  const int64_t prefix_len = static_cast<int64_t>(req.sg.prefix_indices.size());
  const int64_t input_len = static_cast<int64_t>(req.sg.fill_ids.size());
  const int64_t end = extend_end < 0 ? input_len : extend_end;
  if (end <= prefix_len || end > input_len) {
    return InvalidArgument("extend_end: must be in (", prefix_len, ", ", input_len, "] (the prefix, the input), got ",
                           end);
  }
  req.extend_end = end;
  req.allocated = false;
  return Admitted{prefix_len, tree_.rotation_base(req.sg.last_node)};
}

Status RadixRequests::EvictUntilAllocatable(int64_t num_tokens, Allocated* out) {
  auto evict = [&](int64_t tokens) -> StatusOr<int64_t> {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t evicted, tree_.Evict(tokens));
    out->evicted_tokens += evicted;
    for (const auto& pages : tree_.last_evicted()) out->evicted.push_back(pages);
    return evicted;
  };
  if (allocator_->available_size() >= num_tokens) return Status::Ok();
  KVSHARD_RETURN_IF_ERROR(evict(num_tokens - allocator_->available_size()).status());
  while (allocator_->available_size() < num_tokens) {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t evicted, evict(std::max(num_tokens - allocator_->available_size(), ps_)));
    if (evicted == 0) break;
  }
  return Status::Ok();
}

StatusOr<RadixRequests::Allocated> RadixRequests::AllocExtend(const std::vector<std::string>& rids) {
  std::vector<Req*> reqs;
  AllocBatch batch;
  int64_t extend_num_tokens = 0;
  for (const std::string& rid : rids) {
    KVSHARD_ASSIGN_OR_RETURN(Req * req, Find(rid, false));
    if (req->allocated)
      return FailedPrecondition("reqs: request ", QuoteInput(rid), " is not admitted for a new extend");
    if (std::find(reqs.begin(), reqs.end(), req) != reqs.end())
      return InvalidArgument("reqs: ", QuoteInput(rid), " twice");
    reqs.push_back(req);
    const int64_t p = static_cast<int64_t>(req->sg.prefix_indices.size());
    batch.prefix_lens.push_back(p);
    batch.seq_lens.push_back(req->extend_end);
    batch.last_locs.push_back(p > 0 ? req->sg.prefix_indices.back() : -1);
    extend_num_tokens += req->extend_end - p;
  }
  Allocated out;
  // evict_from_tree_cache: the extend plus one N*ps reserve per request.
  KVSHARD_RETURN_IF_ERROR(
      EvictUntilAllocatable(extend_num_tokens + static_cast<int64_t>(reqs.size()) * ps_ * n_, &out));
  for (const Req* req : reqs) {  // _kv_shard_rotation_bases
    const int64_t node_base = tree_.rotation_base(req->sg.last_node);
    batch.rotation_bases.push_back(req->sg.prefix_indices.empty() ? kNewChain
                                   : node_base != kNewChain       ? node_base
                                                                  : req->sg.kv_rotation_base);
  }
  ExtendPages pages;
  KVSHARD_ASSIGN_OR_RETURN(const bool ok, allocator_->AllocExtend(batch, &pages));
  if (!ok) return OutOfRange("Prefill out of memory. Try to allocate ", extend_num_tokens, " tokens.");
  for (size_t i = 0; i < reqs.size(); ++i) {  // stamp the bases, write_cache_indices
    Req& req = *reqs[i];
    req.sg.kv_rotation_base = pages.rotation_bases[i];
    const std::vector<int64_t> mine(pages.pages.begin() + pages.offsets[i], pages.pages.begin() + pages.offsets[i + 1]);
    const int64_t p = batch.prefix_lens[i];
    req.sg.row = req.sg.prefix_indices;
    for (int64_t pos = p; pos < req.extend_end; ++pos) req.sg.row.push_back(mine[(pos - p) / ps_] * ps_ + pos % ps_);
    req.allocated = true;
    out.pages.push_back(mine);
    out.rotation_bases.push_back(req.sg.kv_rotation_base);
  }
  return out;
}

RadixRequests::Cached RadixRequests::Done(const RadixTree::CacheResult& r, const Req& req) const {
  Cached out{r.rotation_tail_declined, r.prefix_len, req.sg.cache_protected_len, r.freed, {}};
  for (size_t i = 0; i < req.sg.prefix_indices.size(); i += ps_)
    out.row_pages.push_back(req.sg.prefix_indices[i] / ps_);
  return out;
}

StatusOr<RadixRequests::Cached> RadixRequests::CacheUnfinished(const std::string& rid) {
  KVSHARD_ASSIGN_OR_RETURN(Req * req, Find(rid, true));
  KVSHARD_ASSIGN_OR_RETURN(const RadixTree::CacheResult r, tree_.CacheUnfinishedReq(req->sg, req->extend_end));
  return Done(r, *req);
}

StatusOr<RadixRequests::Cached> RadixRequests::CacheFinished(const std::string& rid, int64_t kv_len) {
  KVSHARD_ASSIGN_OR_RETURN(Req * req, Find(rid, false));
  const int64_t written = static_cast<int64_t>(req->sg.row.size());
  if (kv_len < 0 || kv_len > written) {
    return InvalidArgument("kv_len: must be in [0, ", written, "] (the KV written), got ", kv_len);
  }
  KVSHARD_ASSIGN_OR_RETURN(const RadixTree::CacheResult r, tree_.CacheFinishedReq(req->sg, kv_len));
  const Cached out = Done(r, *req);
  reqs_.erase(rid);
  return out;
}

Status RadixRequests::Abort(const std::string& rid) {
  KVSHARD_ASSIGN_OR_RETURN(Req * req, Find(rid, false));
  if (req->allocated || !req->sg.row.empty()) {
    return FailedPrecondition("req: request ", QuoteInput(rid), " holds KV; finish it (cache_finished_req) instead");
  }
  tree_.DecLockRef(req->sg.last_node);
  reqs_.erase(rid);
  return Status::Ok();
}

Status RadixRequests::CheckInvariants() const {
  std::set<int64_t> held = tree_.Pages();
  for (const auto& [rid, req] : reqs_) {
    for (int64_t loc : req.sg.row) held.insert(loc / ps_);
  }
  for (int64_t page : held) {
    if (!allocator_->is_allocated(page)) return Internal("page ", page, " is held but free in the allocator");
  }
  int64_t free_pages = 0;
  for (int64_t c : allocator_->class_free_page_counts()) free_pages += c;
  const int64_t pool = n_ * allocator_->config().pages_per_rank;
  if (free_pages + static_cast<int64_t>(held.size()) != pool) {
    return Internal(free_pages, " free + ", held.size(), " held pages (tree and request rows) != the pool's ", pool);
  }
  if (tree_.evictable_size() + tree_.protected_size() != tree_.total_size()) {
    return Internal("radix tree: evictable ", tree_.evictable_size(), " + protected ", tree_.protected_size(),
                    " != total ", tree_.total_size());
  }
  return Status::Ok();
}

}  // namespace kvshard::ref

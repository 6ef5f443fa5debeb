// Radix prefix cache records of a trace (match_prefix, dec_lock_ref, insert, evict) on the reference cache
// over the trace's allocator; pages move between alloc requests, the cache and the free lists.
#include <algorithm>
#include <utility>

#include "replay/replayer.h"

namespace kvshard::replay {

StatusOr<FieldAnswer> Replayer::RunMatch(const Json& rec) {
  KVSHARD_RETURN_IF_ERROR(UsePageCache());
  std::vector<int64_t> tokens_holder;
  const std::vector<int64_t>& tokens = TakeInts(rec, "tokens", &tokens_holder);
  ref::RadixCache::Match m = cache_->MatchPrefix(tokens);
  const int64_t ps = allocator_->config().page_size;
  FieldAnswer a;
  a.Add("prefix_len", m.prefix_len);
  const int64_t last_loc = m.pages.empty() ? 0 : m.pages.back() * ps + ps - 1;
  a.Add("pages", std::move(m.pages));
  if (m.rotation_base == kNewChain) {
    a.Add("rotation_base", Json(nullptr));
  } else {
    a.Add("rotation_base", m.rotation_base);
  }
  a.Add("last_loc", last_loc);
  if (rec.contains("lock") && rec.at("lock").get<bool>()) {
    cache_->Lock(m.node);
    locks_[matches_] = m.node;
    a.Add("match", matches_++);
  }
  return a;
}

StatusOr<FieldAnswer> Replayer::RunDecLockRef(const Json& rec) {
  KVSHARD_RETURN_IF_ERROR(UsePageCache());
  const int64_t k = rec.at("match").get<int64_t>();
  const auto it = locks_.find(k);
  if (it == locks_.end()) {
    return InvalidArgument("match: no locked match ", k, " (", matches_, " locking matches so far; each unlocks once)");
  }
  KVSHARD_RETURN_IF_ERROR(cache_->Unlock(it->second));
  locks_.erase(it);
  FieldAnswer a;
  a.Add("op", std::string("dec_lock_ref"));
  a.Add("locked_matches", static_cast<int64_t>(locks_.size()));
  return a;
}

StatusOr<FieldAnswer> Replayer::RunInsert(const Json& rec) {
  KVSHARD_RETURN_IF_ERROR(UsePageCache());
  std::vector<int64_t> tokens_holder, pages_holder;
  const std::vector<int64_t>& tokens = TakeInts(rec, "tokens", &tokens_holder);
  const std::vector<int64_t>& pages = TakeInts(rec, "pages", &pages_holder);
  const int64_t limit = allocator_->num_logical_pages();
  for (size_t k = 0; k < pages.size(); ++k) {
    if (pages[k] < 0 || pages[k] >= limit) {
      return InvalidArgument("pages[", k, "]: must be a logical page in [0, ", limit, "), got ", pages[k]);
    }
  }
  KVSHARD_ASSIGN_OR_RETURN(ref::RadixCache::InsertResult ins,
                           cache_->Insert(tokens, pages, rec.at("rotation_base").get<int64_t>()));
  // Pages the tree now holds leave their alloc request; pages it freed leave the handed-out set.
  const int64_t full = static_cast<int64_t>(tokens.size()) / allocator_->config().page_size;
  for (int64_t k = 0; k < full; ++k) {
    int64_t& h = holder_[pages[k]];
    if (h < 0 || !cache_->holds(pages[k])) continue;
    const auto it = held_.find(h);
    if (--it->second.live == 0) held_.erase(it);
    h = kCached;
  }
  std::vector<int64_t> freed_locs;
  for (int64_t p : cache_->last_freed()) freed_locs.push_back(p * allocator_->config().page_size);
  Release(freed_locs);
  FieldAnswer a;
  a.Add("declined", ins.declined);
  a.Add("new_pages", ins.new_pages);
  a.Add("freed_pages", ins.freed_pages);
  a.Add("cached_pages", cache_->cached_pages());
  return a;
}

StatusOr<FieldAnswer> Replayer::RunEvict(const Json& rec) {
  KVSHARD_RETURN_IF_ERROR(UsePageCache());
  const int64_t num_pages = rec.at("num_pages").get<int64_t>();
  if (num_pages < 0) return InvalidArgument("num_pages: must be >= 0, got ", num_pages);
  KVSHARD_ASSIGN_OR_RETURN(int64_t evicted, cache_->Evict(num_pages));
  std::vector<int64_t> freed_locs;
  for (int64_t p : cache_->last_freed()) freed_locs.push_back(p * allocator_->config().page_size);
  Release(freed_locs);
  FieldAnswer a;
  a.Add("evicted_pages", evicted);
  a.Add("freed", cache_->last_freed());
  a.Add("cached_pages", cache_->cached_pages());
  return a;
}

Status Replayer::UsePageCache() {
  if (tree_) {
    return InvalidArgument(
        "op: match_prefix/insert/evict/dec_lock_ref (kvshard's page model) and radix_* records "
        "(SGLang's RadixCache) do not mix in one trace");
  }
  page_cache_used_ = true;
  return Status::Ok();
}

Status Replayer::CheckCacheInvariants() {
  if (!cache_) return Status::Ok();
  // What the record changed: the nodes it added (their pages now the cache's), and cached pages it freed.
  std::vector<int64_t> added;
  if (Status s = cache_->CheckNewNodes(&added); !s.ok()) return Mismatch("invariant: radix cache: ", s.message());
  for (int64_t p : added) {
    if (holder_[p] != kCached) {
      return Mismatch("invariant: page ", p, " is cached but ",
                      holder_[p] == -1 ? "was freed" : StrCat("is held by alloc request ", holder_[p]));
    }
  }
  if (!freed_cached_.empty()) {
    const int64_t p = freed_cached_.front();
    freed_cached_.clear();
    return Mismatch("invariant: page ", p, " is cached but was freed");
  }
  return full_invariants_ ? CheckWholeCache() : Status::Ok();
}

Status Replayer::CheckWholeCache() const {
  if (cache_->cached_pages() == 0) return Status::Ok();
  if (Status s = cache_->CheckInvariants(); !s.ok()) return Mismatch("invariant: radix cache: ", s.message());
  for (const ref::RadixCache::Chain& chain : cache_->Chains()) {
    for (int64_t p : chain.pages) {
      if (holder_[p] != kCached) {
        return Mismatch("invariant: page ", p, " is cached but ",
                        holder_[p] == -1 ? "was freed" : StrCat("is held by alloc request ", holder_[p]));
      }
    }
  }
  return Status::Ok();
}

}  // namespace kvshard::replay

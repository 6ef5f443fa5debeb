// Radix-cache properties (spec §2, §6): the graft-declined rule, and LRU eviction checked against a naive model
// of the tree that replays the same match/insert history and locks and predicts exactly which pages go.
#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/alloc_script.h"
#include "cpu_ref/allocator.h"
#include "cpu_ref/radix_cache.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

using V = std::vector<int64_t>;

// The graft rule in isolation: two chains of the same tokens; inserting the second is declined iff its
// base differs from the first's, and only then are all its pages freed.
KVSHARD_PROP(RadixProps, InsertDeclinedIffMatchedChainHasAnotherBase, ()) {
  const int64_t n = DrawShardSize(), ps = DrawPageSize();
  auto a = RC_VALUE(ref::PageInterleaveAllocator::Create({n, ps, 16}));
  ref::RadixCache cache(&a);
  const int64_t len1 = *rc::gen::inRange<int64_t>(1, 4 * n * ps), len2 = *rc::gen::inRange<int64_t>(1, 4 * n * ps);
  V tokens(std::max(len1, len2));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i);
  const int64_t b1 = *rc::gen::inRange<int64_t>(0, n), b2 = *rc::gen::inRange<int64_t>(0, n);
  ref::ExtendPages out;
  RC_ASSERT(RC_VALUE(a.AllocExtend({{0, 0}, {len1, len2}, {b1, b2}, {0, 0}}, &out)));
  const V p1(out.pages.begin(), out.pages.begin() + out.offsets[1]);
  const V p2(out.pages.begin() + out.offsets[1], out.pages.end());
  RC_VALUE(cache.Insert(V(tokens.begin(), tokens.begin() + len1), p1, b1));
  const int64_t full1 = len1 / ps, full2 = len2 / ps;
  const ref::RadixCache::InsertResult ins = RC_VALUE(cache.Insert(V(tokens.begin(), tokens.begin() + len2), p2, b2));
  const bool overlap = full1 > 0 && full2 > 0;
  RC_ASSERT(ins.declined == (overlap && b1 != b2));
  RC_ASSERT(ins.freed_pages == (ins.declined ? full2 : std::min(full1, full2)));
  RC_ASSERT(cache.cached_pages() == (ins.declined ? full1 : std::max(full1, full2)));
  RC_ASSERT_OK(cache.CheckInvariants());
}

// A naive radix cache: one entry per cached token prefix (whole blocks), with its page, chain base, lock count
// and last access tick. Every match or insert is one tick that touches the nodes of its matched path.
class NaiveRadix {
 public:
  explicit NaiveRadix(int64_t page_size) : ps_(page_size) {}

  // Pages of the cached blocks of `tokens`; touches them.
  V Match(const V& tokens) {
    ++clock_;
    V pages;
    for (const V& key : MatchedKeys(tokens, static_cast<int64_t>(tokens.size()) / ps_)) {
      nodes_[key].time = clock_;
      pages.push_back(nodes_[key].page);
    }
    return pages;
  }

  // Insert's outcome: declined under another base, else the missing blocks are added (touched with the path).
  ref::RadixCache::InsertResult Insert(const V& tokens, const V& pages, int64_t base) {
    ++clock_;
    const int64_t full = static_cast<int64_t>(tokens.size()) / ps_;
    const std::vector<V> path = MatchedKeys(tokens, full);
    const int64_t d = static_cast<int64_t>(path.size());
    for (const V& key : path) nodes_[key].time = clock_;
    ref::RadixCache::InsertResult r;
    r.declined = d > 0 && nodes_[path[0]].base != base;
    for (int64_t k = 0; k < (r.declined ? full : d); ++k) r.freed_pages += k >= d || pages[k] != nodes_[path[k]].page;
    if (r.declined) return r;
    for (int64_t k = d; k < full; ++k) {
      nodes_[V(tokens.begin(), tokens.begin() + (k + 1) * ps_)] = {pages[k], base, 0, clock_};
      ++r.new_pages;
    }
    return r;
  }

  // Adds `delta` to the lock count of the first `blocks` blocks of `tokens` (all cached).
  void Lock(const V& tokens, int64_t blocks, int64_t delta) {
    for (int64_t k = 1; k <= blocks; ++k) nodes_[V(tokens.begin(), tokens.begin() + k * ps_)].locks += delta;
  }

  // The pages Evict(num_pages) frees, in order: repeatedly the least recently touched unlocked leaf (a parent
  // whose children are all gone is a leaf too), until num_pages pages or no such leaf is left.
  V Evict(int64_t num_pages) {
    V out;
    std::set<V> evicted;
    skipped_locked_ = climbed_ = false;
    while (static_cast<int64_t>(out.size()) < num_pages) {
      std::set<V> parents;  // keys with at least one child
      for (const auto& [key, node] : nodes_) {
        if (static_cast<int64_t>(key.size()) > ps_) parents.insert(V(key.begin(), key.end() - ps_));
      }
      const V* oldest = nullptr;
      int ties = 0;
      for (const auto& [key, node] : nodes_) {
        if (parents.count(key)) continue;
        if (node.locks > 0) {
          skipped_locked_ = true;
          continue;
        }
        if (!oldest || node.time < nodes_[*oldest].time) {
          oldest = &key;
          ties = 0;
        } else if (node.time == nodes_[*oldest].time) {
          ++ties;
        }
      }
      if (!oldest) break;
      // One tick touches one root path, which ends in one leaf: distinct leaves never share a tick.
      if (ties > 0) RC_FAIL("model: two evictable leaves share the oldest tick");
      out.push_back(nodes_[*oldest].page);
      for (const V& e : evicted) climbed_ |= V(e.begin(), e.end() - ps_) == *oldest;
      evicted.insert(*oldest);
      nodes_.erase(*oldest);
    }
    return out;
  }

  // Whether the last Evict passed over a locked leaf.
  bool last_evict_skipped_locked() const { return skipped_locked_; }
  // Whether the last Evict freed a node whose child it had freed before (the parent became a leaf).
  bool last_evict_climbed() const { return climbed_; }

  // Every cached page.
  std::set<int64_t> Pages() const {
    std::set<int64_t> pages;
    for (const auto& [key, node] : nodes_) pages.insert(node.page);
    return pages;
  }

 private:
  struct Node {
    int64_t page = -1, base = 0, locks = 0;
    uint64_t time = 0;
  };
  // Keys of the cached prefixes of `tokens` of 1, 2, ... blocks, up to `max_blocks` or the first missing one.
  std::vector<V> MatchedKeys(const V& tokens, int64_t max_blocks) const {
    std::vector<V> keys;
    for (int64_t k = 1; k <= max_blocks; ++k) {
      V key(tokens.begin(), tokens.begin() + k * ps_);
      if (!nodes_.count(key)) break;
      keys.push_back(std::move(key));
    }
    return keys;
  }

  int64_t ps_;
  uint64_t clock_ = 0;
  std::map<V, Node> nodes_;
  bool skipped_locked_ = false, climbed_ = false;
};

// One operation of an LRU scenario (documents are token sequences that share prefixes with each other).
struct RadixOp {
  enum Kind { kInsert, kMatch, kLock, kUnlock, kEvict } kind = kMatch;
  int64_t doc = 0, len = 1;
  bool extend = false;  // kInsert: extend the chain matched on len - 1 tokens (else a fresh chain of `base`)
  int64_t base = kNewChain;
  int64_t arg = 0;  // kUnlock: which held lock (modulo their count); kEvict: pages to evict
};

// An LRU scenario: allocator geometry, documents (doc d shares its first shared[d] tokens with parent[d]), ops.
struct RadixScenario {
  int64_t shard_size = 1, page_size = 1, pages_per_rank = 1, max_len = 1;
  V parent, shared;
  std::vector<RadixOp> ops;
};

// RapidCheck printer (found by ADL) of the shrunk counterexample.
void showValue(const RadixScenario& s, std::ostream& os) {
  os << "N=" << s.shard_size << " ps=" << s.page_size << " pages_per_rank=" << s.pages_per_rank << " docs: 0";
  for (size_t d = 1; d < s.parent.size(); ++d) {
    os << ", " << d << " (first " << s.shared[d] << " tokens of " << s.parent[d] << ")";
  }
  os << "\n";
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const RadixOp& op = s.ops[i];
    os << "  #" << i << " ";
    switch (op.kind) {
      case RadixOp::kInsert:
        os << "insert doc " << op.doc << " len " << op.len
           << (op.extend              ? " extending its match"
               : op.base == kNewChain ? " as a new chain (null base)"
                                      : StrCat(" as a fresh chain of base ", op.base))
           << "\n";
        break;
      case RadixOp::kMatch: os << "match doc " << op.doc << " len " << op.len << "\n"; break;
      case RadixOp::kLock: os << "match and lock doc " << op.doc << " len " << op.len << "\n"; break;
      case RadixOp::kUnlock: os << "unlock held lock " << op.arg << " (modulo the locks held)\n"; break;
      case RadixOp::kEvict: os << "evict " << op.arg << " pages\n"; break;
    }
  }
}

RadixScenario DrawRadixScenario() {
  RadixScenario s;
  s.shard_size = *rc::gen::element<int64_t>(1, 2, 3, 4);
  s.page_size = *rc::gen::element<int64_t>(1, 1, 2, 3);
  s.pages_per_rank = *rc::gen::inRange<int64_t>(1, 13);
  s.max_len = *rc::gen::inRange<int64_t>(1, (3 * s.shard_size + 4) * s.page_size + 1);
  const int64_t docs =  // one document (a single chain) or 2..5 sharing prefixes
      *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(1)}, {4, rc::gen::inRange<int64_t>(2, 6)}});
  s.parent.push_back(0);
  s.shared.push_back(0);
  for (int64_t d = 1; d < docs; ++d) {
    s.parent.push_back(*rc::gen::inRange<int64_t>(0, d));
    s.shared.push_back(*rc::gen::inRange<int64_t>(0, s.max_len + 1));
  }
  const int64_t n = s.shard_size, ppr = s.pages_per_rank, max_len = s.max_len;
  const auto op =
      rc::gen::resize(100, rc::gen::exec([n, ppr, max_len, docs] {
                        RadixOp op;
                        op.kind = *rc::gen::weightedElement<RadixOp::Kind>({{4, RadixOp::kInsert},
                                                                            {3, RadixOp::kMatch},
                                                                            {1, RadixOp::kLock},
                                                                            {1, RadixOp::kUnlock},
                                                                            {3, RadixOp::kEvict}});
                        op.doc = *rc::gen::inRange<int64_t>(0, docs);
                        op.len = *rc::gen::inRange<int64_t>(1, max_len + 1);
                        op.extend = *rc::gen::arbitrary<bool>();
                        op.base = *rc::gen::inRange<int64_t>(kNewChain, n);
                        op.arg = *rc::gen::weightedOneOf<int64_t>(
                            {{3, rc::gen::inRange<int64_t>(0, 4)}, {1, rc::gen::inRange<int64_t>(0, n * ppr + 3)}});
                        return op;
                      }));
  // Up to 40 ops; shrinking drops any of them.
  s.ops = *rc::gen::resize(40, rc::gen::container<std::vector<RadixOp>>(op));
  return s;
}

// Replays a scenario on the allocator + radix cache and on the naive model, comparing every outcome.
class LruChecker {
 public:
  explicit LruChecker(const RadixScenario& s)
      : s_(s),
        alloc_(RC_VALUE(ref::PageInterleaveAllocator::Create({s.shard_size, s.page_size, s.pages_per_rank}))),
        cache_(&alloc_),
        model_(s.page_size) {}

  void Run() {
    for (size_t i = 0; i < s_.ops.size(); ++i) {
      step_ = i;
      const RadixOp& op = s_.ops[i];
      switch (op.kind) {
        case RadixOp::kInsert: Insert(op); break;
        case RadixOp::kMatch: Match(Tokens(op.doc, op.len)); break;
        case RadixOp::kLock: {
          const V tokens = Tokens(op.doc, op.len);
          const ref::RadixCache::Match m = Match(tokens);
          cache_.Lock(m.node);
          model_.Lock(tokens, m.prefix_len / s_.page_size, +1);
          held_.push_back({m.node, V(tokens.begin(), tokens.begin() + m.prefix_len)});
          break;
        }
        case RadixOp::kUnlock:
          if (held_.empty()) break;
          Unlock(static_cast<size_t>(op.arg) % held_.size());
          break;
        case RadixOp::kEvict: Evict(op.arg); break;
      }
      if (cached() != model_.Pages()) RC_FAIL(StrCat(Where(), "cached pages differ from the model's"));
      RC_ASSERT_OK(cache_.CheckInvariants());
    }
    step_ = s_.ops.size();
    while (!held_.empty()) Unlock(held_.size() - 1);  // then everything is evictable, in LRU order
    Evict(s_.shard_size * s_.pages_per_rank + 1);
    RC_ASSERT(cache_.cached_pages() == 0);
    RC_TAG(evicts_partial_ ? "an eviction stopped short of the evictable leaves" : "no partial eviction");
    RC_TAG(skipped_locked_ ? "an eviction skipped locked leaves" : "no locked leaf skipped");
    RC_TAG(parent_became_leaf_ ? "a parent became a leaf within one eviction" : "no parent became a leaf");
  }

 private:
  std::string Where() const {
    return step_ < s_.ops.size() ? StrCat("op #", step_, ": ") : "after the ops, all locks released: ";
  }

  V Tokens(int64_t doc, int64_t len) const {
    V t(len);
    for (int64_t i = 0; i < len; ++i) {
      int64_t d = doc;
      while (d > 0 && i < s_.shared[d]) d = s_.parent[d];
      t[i] = (d + 1) * 1000003 + i;
    }
    return t;
  }

  std::set<int64_t> cached() const {
    std::set<int64_t> pages;
    for (const auto& chain : cache_.Chains()) pages.insert(chain.pages.begin(), chain.pages.end());
    return pages;
  }

  ref::RadixCache::Match Match(const V& tokens) {
    const ref::RadixCache::Match m = cache_.MatchPrefix(tokens);
    const V want = model_.Match(tokens);
    if (m.pages != want || m.prefix_len != static_cast<int64_t>(want.size()) * s_.page_size) {
      RC_FAIL(StrCat(Where(), "match of ", tokens.size(), " tokens gave pages ", rc::toString(m.pages), ", model ",
                     rc::toString(want)));
    }
    return m;
  }

  void Unlock(size_t i) {
    RC_ASSERT_OK(cache_.Unlock(held_[i].first));
    model_.Lock(held_[i].second, static_cast<int64_t>(held_[i].second.size()) / s_.page_size, -1);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void Insert(const RadixOp& op) {
    const int64_t ps = s_.page_size;
    const V tokens = Tokens(op.doc, op.len);
    ref::RadixCache::Match m;
    if (op.extend) m = Match(V(tokens.begin(), tokens.end() - 1));  // keep one token to compute
    const int64_t base = op.extend ? m.rotation_base : op.base;
    ref::ExtendPages out;
    const AllocBatch batch{{m.prefix_len}, {op.len}, {base}, {0}};
    if (!RC_VALUE(alloc_.AllocExtend(batch, &out))) {
      // Deferred: as the scheduler, lock the match, evict what the request needs at most, retry once.
      held_.push_back({m.node, V(tokens.begin(), tokens.begin() + m.prefix_len)});
      model_.Lock(tokens, m.prefix_len / ps, +1);
      cache_.Lock(m.node);
      Evict(((op.len + ps - 1) / ps - m.prefix_len / ps) * s_.shard_size);
      Unlock(held_.size() - 1);
      if (!RC_VALUE(alloc_.AllocExtend(batch, &out))) return;
    }
    V pages = m.pages;
    pages.insert(pages.end(), out.pages.begin(), out.pages.end());
    const ref::RadixCache::InsertResult got = RC_VALUE(cache_.Insert(tokens, pages, out.rotation_bases[0]));
    const ref::RadixCache::InsertResult want = model_.Insert(tokens, pages, out.rotation_bases[0]);
    if (got.declined != want.declined || got.new_pages != want.new_pages || got.freed_pages != want.freed_pages) {
      RC_FAIL(StrCat(Where(), "insert gave (declined ", got.declined, ", new ", got.new_pages, ", freed ",
                     got.freed_pages, "), model (", want.declined, ", ", want.new_pages, ", ", want.freed_pages, ")"));
    }
    if (op.len % ps != 0) RC_ASSERT_OK(alloc_.Free({pages.back() * ps}));  // the partial tail page
  }

  void Evict(int64_t num_pages) {
    const std::set<int64_t> before = cached();
    const V want = model_.Evict(num_pages);
    const int64_t got = RC_VALUE(cache_.Evict(num_pages));
    const std::set<int64_t> after = cached();
    std::set<int64_t> freed;
    std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::inserter(freed, freed.end()));
    if (got != static_cast<int64_t>(want.size()) || freed != std::set<int64_t>(want.begin(), want.end())) {
      RC_FAIL(StrCat(Where(), "evict(", num_pages, ") returned ", got, " and freed pages ", rc::toString(freed),
                     "; the model's LRU order frees ", rc::toString(want)));
    }
    for (int64_t p : want) {
      if (alloc_.is_allocated(p)) RC_FAIL(StrCat(Where(), "evicted page ", p, " is still allocated"));
    }
    evicts_partial_ |= !want.empty() && !NaiveRadix(model_).Evict(1).empty();
    skipped_locked_ |= !want.empty() && model_.last_evict_skipped_locked();
    parent_became_leaf_ |= model_.last_evict_climbed();
  }

  const RadixScenario& s_;
  ref::PageInterleaveAllocator alloc_;
  ref::RadixCache cache_;
  NaiveRadix model_;
  std::vector<std::pair<int64_t, V>> held_;  // (locked node, its matched tokens)
  size_t step_ = 0;
  bool evicts_partial_ = false, skipped_locked_ = false, parent_became_leaf_ = false;
};

// Eviction frees exactly the model's LRU order: repeatedly the least recently matched/inserted unlocked leaf (a
// parent whose children are gone becomes a leaf in the same eviction, locked paths are skipped), until the
// requested pages or nothing evictable is left; evicted pages return to the allocator.
KVSHARD_PROP(RadixProps, EvictionFreesExactlyTheLeastRecentlyUsedUnlockedLeaves, ()) {
  const RadixScenario s = *rc::gen::resize(100, rc::gen::exec(&DrawRadixScenario));
  LruChecker(s).Run();
}

}  // namespace
}  // namespace kvshard::props

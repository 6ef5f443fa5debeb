// The simulator's prefix cache (sim/prefix_cache.h) diffed against the reference radix cache
// (cpu_ref/radix_cache.h, spec §2, §6): the same random matches, batch inserts, locks, unlocks and evictions drive
// both, the simulator's cache keyed by one fingerprint per page (an injective function of the page's tokens, so
// equal token blocks <=> equal fingerprints), and every observable answer must agree exactly: matched pages, length
// and base, insert outcomes and the pages each frees (in order), evicted pages (in order), cached page counts, and
// both caches' invariants after every op.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/alloc_script.h"
#include "core/status.h"
#include "cpu_ref/allocator.h"
#include "cpu_ref/radix_cache.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "sim/prefix_cache.h"

namespace kvshard::props {
namespace {

using V = std::vector<int64_t>;
using Fps = std::vector<uint64_t>;

// One request of a batch insert: a prefix of a document.
struct SimRequest {
  int64_t doc = 0, len = 1;
  bool fresh = false;        // a new chain of `base` (no match); else it extends its match on len - 1 tokens
  int64_t base = kNewChain;  // fresh: kNewChain or an explicit rotation base
};

// One operation of a scenario.
struct SimOp {
  enum Kind { kBatch, kMatch, kLock, kUnlock, kEvict } kind = kMatch;
  std::vector<SimRequest> reqs;  // kBatch
  int64_t doc = 0, len = 1;      // kMatch, kLock
  int64_t arg = 0;               // kUnlock: which held lock (modulo their count); kEvict: pages to evict
};

// Allocator geometry, documents (token sequences; doc d > 0 starts with the first shared[d] tokens of parent[d],
// the rest drawn from `alphabet` symbols, so small alphabets also repeat blocks by accident), and the ops.
struct SimScenario {
  int64_t shard_size = 1, page_size = 1, pages_per_rank = 1, alphabet = 1;
  bool need_sort = false;
  std::vector<V> docs;
  V parent, shared;
  std::vector<SimOp> ops;
};

// RapidCheck printer (found by ADL) of the shrunk counterexample.
void showValue(const SimScenario& s, std::ostream& os) {
  os << "N=" << s.shard_size << " ps=" << s.page_size << " pages_per_rank=" << s.pages_per_rank
     << " need_sort=" << s.need_sort << " alphabet=" << s.alphabet << "\n";
  for (size_t d = 0; d < s.docs.size(); ++d) {
    os << "  doc " << d;
    if (d > 0) os << " (first " << s.shared[d] << " tokens of doc " << s.parent[d] << ")";
    os << ": " << rc::toString(s.docs[d]) << "\n";
  }
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const SimOp& op = s.ops[i];
    os << "  #" << i << " ";
    switch (op.kind) {
      case SimOp::kBatch:
        os << "batch insert:";
        for (const SimRequest& r : op.reqs) {
          os << " (doc " << r.doc << " len " << r.len
             << (!r.fresh              ? ", extending its match"
                 : r.base == kNewChain ? ", new chain (null base)"
                                       : StrCat(", new chain of base ", r.base))
             << ")";
        }
        os << "\n";
        break;
      case SimOp::kMatch: os << "match doc " << op.doc << " len " << op.len << "\n"; break;
      case SimOp::kLock: os << "match and lock doc " << op.doc << " len " << op.len << "\n"; break;
      case SimOp::kUnlock: os << "unlock held lock " << op.arg << " (modulo the locks held)\n"; break;
      case SimOp::kEvict: os << "evict " << op.arg << " pages\n"; break;
    }
  }
}

SimScenario DrawSimScenario() {
  SimScenario s;
  s.shard_size = *rc::gen::element<int64_t>(1, 2, 3, 4, 8);
  s.page_size = *rc::gen::element<int64_t>(1, 1, 2, 3, 4);
  s.pages_per_rank = *rc::gen::inRange<int64_t>(1, 13);  // small pools: eviction and exhaustion happen
  s.need_sort = *rc::gen::arbitrary<bool>();
  s.alphabet = *rc::gen::element<int64_t>(1, 2, 3, 1000000);
  const int64_t max_len = *rc::gen::inRange<int64_t>(1, (2 * s.shard_size + 4) * s.page_size + 1);
  const int64_t docs =  // one document or 2..5 sharing prefixes
      *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(1)}, {4, rc::gen::inRange<int64_t>(2, 6)}});
  const auto symbol = rc::gen::inRange<int64_t>(0, s.alphabet);
  for (int64_t d = 0; d < docs; ++d) {
    const int64_t parent = d == 0 ? 0 : *rc::gen::inRange<int64_t>(0, d);
    const int64_t shared = d == 0 ? 0 : *rc::gen::inRange<int64_t>(0, max_len + 1);
    V tokens;
    if (d > 0) tokens.assign(s.docs[parent].begin(), s.docs[parent].begin() + shared);
    const V rest = *rc::gen::container<V>(static_cast<size_t>(max_len - shared), symbol);
    tokens.insert(tokens.end(), rest.begin(), rest.end());
    s.docs.push_back(std::move(tokens));
    s.parent.push_back(parent);
    s.shared.push_back(shared);
  }
  const int64_t n = s.shard_size, ppr = s.pages_per_rank;
  const auto request = rc::gen::exec([n, max_len, docs] {
    SimRequest r;
    r.doc = *rc::gen::inRange<int64_t>(0, docs);
    r.len = *rc::gen::inRange<int64_t>(1, max_len + 1);
    r.fresh = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    r.base = *rc::gen::inRange<int64_t>(kNewChain, n);
    return r;
  });
  const auto op = rc::gen::exec([n, ppr, max_len, docs, request] {
    SimOp op;
    op.kind = *rc::gen::weightedElement<SimOp::Kind>(
        {{4, SimOp::kBatch}, {2, SimOp::kMatch}, {1, SimOp::kLock}, {1, SimOp::kUnlock}, {2, SimOp::kEvict}});
    if (op.kind == SimOp::kBatch) {
      const int64_t size = *rc::gen::weightedElement<int64_t>({{3, 1}, {2, 2}, {1, 3}});
      op.reqs = *rc::gen::container<std::vector<SimRequest>>(static_cast<size_t>(size), request);
    }
    op.doc = *rc::gen::inRange<int64_t>(0, docs);
    op.len = *rc::gen::inRange<int64_t>(1, max_len + 1);
    op.arg = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::inRange<int64_t>(0, 4)}, {1, rc::gen::inRange<int64_t>(0, n * ppr + 3)}});
    return op;
  });
  // Up to 40 ops; shrinking drops any of them.
  s.ops = *rc::gen::resize(40, rc::gen::container<std::vector<SimOp>>(op));
  return s;
}

// Replays a scenario on the allocator + reference cache and on the simulator's cache, comparing every answer.
class SimDiff {
 public:
  explicit SimDiff(const SimScenario& s)
      : s_(s),
        ps_(s.page_size),
        alloc_(RC_VALUE(ref::PageInterleaveAllocator::Create(
            {s.shard_size, s.page_size, s.pages_per_rank, s.need_sort, /*check_last_loc=*/true}))),
        ref_(&alloc_),
        sim_(s.shard_size) {}
  SimDiff(const SimDiff&) = delete;
  SimDiff& operator=(const SimDiff&) = delete;

  void Run() {
    for (size_t i = 0; i < s_.ops.size(); ++i) {
      step_ = i;
      const SimOp& op = s_.ops[i];
      switch (op.kind) {
        case SimOp::kBatch: Batch(op.reqs); break;
        case SimOp::kMatch: {
          const V tokens = Tokens(op.doc, op.len);
          const Fps fps = Fingerprints(tokens);
          Match(tokens, fps, static_cast<int64_t>(fps.size()));
          break;
        }
        case SimOp::kLock: {
          const V tokens = Tokens(op.doc, op.len);
          const Fps fps = Fingerprints(tokens);
          const Both m = Match(tokens, fps, static_cast<int64_t>(fps.size()));
          ref_.Lock(m.ref.node);
          sim_.Lock(m.sim.node);
          held_.push_back({m.ref.node, m.sim.node, !m.ref.pages.empty()});
          break;
        }
        case SimOp::kUnlock:
          if (held_.empty()) break;
          Unlock(held_, static_cast<size_t>(op.arg) % held_.size());
          break;
        case SimOp::kEvict: Evict(op.arg, "evict"); break;
      }
      Compare();
    }
    step_ = s_.ops.size();
    while (!held_.empty()) Unlock(held_, held_.size() - 1);  // then everything is evictable, in LRU order
    Evict(s_.shard_size * s_.pages_per_rank + 1, "evict everything");
    Compare();
    RC_ASSERT(ref_.cached_pages() == 0);
    RC_CLASSIFY(s_.shard_size == 1, "N=1");
    RC_CLASSIFY(s_.page_size == 1, "page_size=1");
    RC_CLASSIFY(declined_, "declined graft");
    RC_CLASSIFY(duplicates_, "duplicate pages freed");
    RC_CLASSIFY(locked_stop_, "eviction stopped at locked paths");
    RC_CLASSIFY(empty_match_, "empty match");
    RC_CLASSIFY(exhausted_, "batch deferred after eviction");
  }

 private:
  // A match's answer from both caches.
  struct Both {
    ref::RadixCache::Match ref;
    sim::PrefixCache::Match sim;
  };
  // A locked match: the node handle in each cache, and whether it locks any node.
  struct Held {
    int64_t ref_node = 0, sim_node = 0;
    bool nonempty = false;
  };

  std::string Where() const {
    return step_ < s_.ops.size() ? StrCat("op #", step_, ": ") : "after the ops, all locks released: ";
  }

  V Tokens(int64_t doc, int64_t len) const { return V(s_.docs[doc].begin(), s_.docs[doc].begin() + len); }

  // One fingerprint per full page: a fresh 64-bit id per distinct token block (the odd multiplier is a bijection
  // mod 2^64, so ids stay distinct while spreading over all 64 bits).
  Fps Fingerprints(const V& tokens) {
    Fps fps;
    for (size_t k = 0; k + ps_ <= tokens.size(); k += ps_) {
      const uint64_t next = (fingerprint_.size() + 1) * 0x9e3779b97f4a7c15ULL;
      fps.push_back(fingerprint_.try_emplace(V(tokens.begin() + k, tokens.begin() + k + ps_), next).first->second);
    }
    return fps;
  }

  // Matches `tokens` in the reference and the first `max_pages` of `fps` in the simulator's cache.
  Both Match(const V& tokens, const Fps& fps, int64_t max_pages) {
    Both m{ref_.MatchPrefix(tokens), sim_.MatchPrefix(fps, max_pages)};
    if (m.sim.pages != m.ref.pages || m.sim.pages_matched * ps_ != m.ref.prefix_len ||
        m.sim.rotation_base != m.ref.rotation_base) {
      RC_FAIL(StrCat(Where(), "match of ", tokens.size(), " tokens: reference pages ", rc::toString(m.ref.pages), " (",
                     m.ref.prefix_len, " tokens, base ", m.ref.rotation_base, "), sim pages ",
                     rc::toString(m.sim.pages), " (", m.sim.pages_matched, " pages, base ", m.sim.rotation_base, ")"));
    }
    empty_match_ |= m.ref.pages.empty();
    return m;
  }

  void Unlock(std::vector<Held>& locks, size_t i) {
    RC_ASSERT_OK(ref_.Unlock(locks[i].ref_node));
    RC_ASSERT_OK(sim_.Unlock(locks[i].sim_node));
    locks.erase(locks.begin() + static_cast<std::ptrdiff_t>(i));
  }

  bool AnyNonemptyLock() const {
    for (const auto* locks : {&held_, &batch_locks_}) {
      for (const Held& h : *locks) {
        if (h.nonempty) return true;
      }
    }
    return false;
  }

  void Evict(int64_t num_pages, const char* what) {
    const int64_t got_ref = RC_VALUE(ref_.Evict(num_pages));
    std::vector<int64_t> freed;
    const int64_t got_sim = sim_.Evict(num_pages, &freed);
    if (got_sim != got_ref || freed != ref_.last_freed()) {
      RC_FAIL(StrCat(Where(), what, "(", num_pages, "): reference evicted ", got_ref, " pages ",
                     rc::toString(ref_.last_freed()), ", sim ", got_sim, " pages ", rc::toString(freed)));
    }
    // Fewer than asked while pages stay cached: every remaining leaf is on a locked path.
    locked_stop_ |= got_ref < num_pages && ref_.cached_pages() > 0 && AnyNonemptyLock();
  }

  // One alloc_extend batch as the scheduler runs it (props/stream_driver.cc): match each request on its first
  // len - 1 tokens and lock the match, allocate on the match's base and last_loc (on a deferral evict what the
  // batch needs at most and retry once), insert each request into both caches, free the partial tail page, unlock.
  void Batch(const std::vector<SimRequest>& reqs) {
    struct Req {
      V tokens;
      Fps fps;
      Both m;
    };
    std::vector<Req> rs;
    AllocBatch batch;
    for (const SimRequest& r : reqs) {
      Req q{Tokens(r.doc, r.len), {}, {}};
      q.fps = Fingerprints(q.tokens);
      int64_t base = r.base;
      if (!r.fresh) {  // the simulator's call: every full page's fingerprint, at most (len - 1) / ps pages
        q.m = Match(V(q.tokens.begin(), q.tokens.end() - 1), q.fps, (r.len - 1) / ps_);
        base = q.m.ref.rotation_base;
        ref_.Lock(q.m.ref.node);
        sim_.Lock(q.m.sim.node);
        batch_locks_.push_back({q.m.ref.node, q.m.sim.node, !q.m.ref.pages.empty()});
      }
      batch.prefix_lens.push_back(q.m.ref.prefix_len);
      batch.seq_lens.push_back(r.len);
      batch.rotation_bases.push_back(base);
      batch.last_locs.push_back(q.m.ref.prefix_len ? q.m.ref.pages.back() * ps_ + ps_ - 1 : 0);
      rs.push_back(std::move(q));
    }
    ref::ExtendPages out;
    bool ok = RC_VALUE(alloc_.AllocExtend(batch, &out));
    if (!ok) {
      int64_t need = 0;
      for (size_t i = 0; i < reqs.size(); ++i) need += (batch.seq_lens[i] + ps_ - 1) / ps_ - batch.prefix_lens[i] / ps_;
      Evict(need * s_.shard_size, "deferred batch's evict");
      ok = RC_VALUE(alloc_.AllocExtend(batch, &out));
      exhausted_ |= !ok;
    }
    for (size_t i = 0; ok && i < rs.size(); ++i) {
      V pages = rs[i].m.ref.pages;
      pages.insert(pages.end(), out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
      const int64_t base = out.rotation_bases[i];
      const ref::RadixCache::InsertResult want = RC_VALUE(ref_.Insert(rs[i].tokens, pages, base));
      const sim::PrefixCache::InsertResult got = RC_VALUE(sim_.Insert(rs[i].fps, pages, base));
      if (got.declined != want.declined || got.new_pages != want.new_pages || got.freed != ref_.last_freed() ||
          static_cast<int64_t>(got.freed.size()) != want.freed_pages) {
        RC_FAIL(StrCat(Where(), "insert of request ", i, " (", rs[i].tokens.size(), " tokens, pages ",
                       rc::toString(pages), ", base ", base, "): reference (declined ", want.declined, ", new ",
                       want.new_pages, ", freed ", want.freed_pages, " pages ", rc::toString(ref_.last_freed()),
                       "), sim (declined ", got.declined, ", new ", got.new_pages, ", freed ", rc::toString(got.freed),
                       ")"));
      }
      // The reference freed got.freed through the allocator already: the simulator's list is not freed again.
      declined_ |= want.declined;
      duplicates_ |= !want.declined && want.freed_pages > 0;
      if (static_cast<int64_t>(rs[i].tokens.size()) % ps_ != 0) RC_ASSERT_OK(alloc_.Free({pages.back() * ps_}));
    }
    while (!batch_locks_.empty()) Unlock(batch_locks_, batch_locks_.size() - 1);
  }

  // Both caches hold the same number of pages, pass their invariants, and every other page is free.
  void Compare() {
    if (ref_.cached_pages() != sim_.cached_pages()) {
      RC_FAIL(StrCat(Where(), "reference caches ", ref_.cached_pages(), " pages, sim ", sim_.cached_pages()));
    }
    RC_ASSERT_OK(ref_.CheckInvariants());
    RC_ASSERT_OK(sim_.CheckInvariants());
    const int64_t free_pages = alloc_.aggregate_free_size() / ps_;
    if (free_pages + ref_.cached_pages() != s_.shard_size * s_.pages_per_rank) {
      RC_FAIL(StrCat(Where(), free_pages, " free + ", ref_.cached_pages(),
                     " cached pages != ", s_.shard_size * s_.pages_per_rank));
    }
  }

  const SimScenario& s_;
  const int64_t ps_;
  ref::PageInterleaveAllocator alloc_;
  ref::RadixCache ref_;
  sim::PrefixCache sim_;
  std::map<V, uint64_t> fingerprint_;  // token block -> its fingerprint
  std::vector<Held> held_;             // locks held across ops (kLock)
  std::vector<Held> batch_locks_;      // the running batch's locks
  size_t step_ = 0;
  bool declined_ = false, duplicates_ = false, locked_stop_ = false, empty_match_ = false, exhausted_ = false;
};

// The simulator's prefix cache answers exactly as the reference radix cache on every op: matches (pages, length,
// base), inserts (declined, new pages, the freed duplicate or declined pages in order), LRU evictions (the evicted
// pages in order, oldest access then lowest node id, locked paths skipped), cached page counts and invariants.
KVSHARD_PROP(SimProps, PrefixCacheAnswersExactlyAsTheReferenceRadixCache, ()) {
  const SimScenario s = *rc::gen::resize(100, rc::gen::exec(&DrawSimScenario));
  SimDiff(s).Run();
}

}  // namespace
}  // namespace kvshard::props

// Sharded-pool properties (spec §3, §6): the layer-ahead residency protocol, owner-filtered writes, and the
// write-plan cache (SGLang's one entry keyed on (loc list, epoch)) checked against the unsharded baseline and
// a model of the staged scratch rows, on writes of many different loc lists within and across extends, for
// one-buffer, MHA (K/V of different widths), MLA and MLA-plus-extra-tensor pools (every buffer of a layer).
#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/gather_plan.h"
#include "cpu_ref/sharded_pool.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

using V = std::vector<int64_t>;
using Rows = std::vector<uint32_t>;

// One step of a write-plan scenario: write `locs` at `layer`, or read the next unread layer.
struct PoolOp {
  bool read = false;
  int64_t layer = 0;
  V locs;
};

// One extend batch (one epoch): begin, ops while active (writes of chunk slots only), end, writes outside.
struct PoolEpoch {
  std::vector<ExtendRequest> requests;
  std::vector<PoolOp> during;
  std::vector<PoolOp> after;
};

// A whole write-plan case: pool geometry, writes before the first batch (epoch 0), then the epochs.
struct WritePlanScenario {
  ref::ShardedPoolConfig config;
  std::vector<PoolOp> initial;
  std::vector<PoolEpoch> epochs;
};

// How one op picks its loc list, independent of the state so that shrinking can drop any op: it is
// materialized against the candidate locs and the lists written before it (ListFromRecipe).
struct OpRecipe {
  enum Kind { kFresh, kLast, kEarlier, kSwapOne, kPermuteTail, kOneLonger, kOneShorter };
  bool read = false;     // during an extend: read the next unread layer instead of writing
  bool in_order = true;  // write the layer read next (SGLang's order) instead of `layer`
  int64_t layer = 0;
  Kind kind = kFresh;
  uint32_t a = 0, b = 0;  // which list / position / candidate / size; the shuffle seed
};

// The drawn form of a WritePlanScenario: batches and op recipes (Materialize turns it into concrete lists).
struct WritePlanRecipe {
  ref::ShardedPoolConfig config;
  V extra_slots;  // random slots written outside batches, besides every batch's slots
  std::vector<OpRecipe> initial;
  struct Epoch {
    std::vector<ExtendRequest> requests;
    std::vector<OpRecipe> during, after;
  };
  std::vector<Epoch> epochs;
};

// Slots of positions [from, to) of a request.
V Slots(const ExtendRequest& r, int64_t from, int64_t to, int64_t ps) {
  V out;
  for (int64_t pos = from; pos < to; ++pos) out.push_back(r.pages[pos / ps] * ps + pos % ps);
  return out;
}

// The loc list of a recipe over `candidates` (unique locs) and the lists written before, biased to what a weak
// cache key confuses: the last list again, an earlier list, the last list with one non-first loc swapped (same
// length, same first loc), its tail permuted, one loc longer or shorter, or a fresh list. Only earlier lists
// made of candidates count; a kind that does not apply (list too short, no unused candidate) repeats the last.
V ListFromRecipe(const OpRecipe& r, const V& candidates, const std::vector<V>& history) {
  const std::set<int64_t> allowed(candidates.begin(), candidates.end());
  std::vector<const V*> eligible;  // oldest first
  for (const V& h : history) {
    if (std::all_of(h.begin(), h.end(), [&](int64_t l) { return allowed.count(l) > 0; })) eligible.push_back(&h);
  }
  std::mt19937 rng(r.b);
  if (eligible.empty() || r.kind == OpRecipe::kFresh) {
    V fresh = candidates;
    std::shuffle(fresh.begin(), fresh.end(), rng);
    fresh.resize(r.a % (fresh.size() + 1));
    return fresh;
  }
  if (r.kind == OpRecipe::kEarlier) return *eligible[r.a % eligible.size()];
  V list = *eligible.back();
  V unused;  // candidates not in `list`
  for (int64_t l : candidates) {
    if (std::find(list.begin(), list.end(), l) == list.end()) unused.push_back(l);
  }
  if (r.kind == OpRecipe::kSwapOne && list.size() >= 2 && !unused.empty()) {
    list[1 + r.a % (list.size() - 1)] = unused[r.b % unused.size()];
  } else if (r.kind == OpRecipe::kPermuteTail && list.size() >= 3) {
    std::shuffle(list.begin() + 1, list.end(), rng);
  } else if (r.kind == OpRecipe::kOneLonger && !unused.empty()) {
    list.push_back(unused[r.a % unused.size()]);
  } else if (r.kind == OpRecipe::kOneShorter && !list.empty()) {
    list.pop_back();
  }
  return list;
}

// The ops of `recipes` over `candidates` (reads only when `reads`), appending every list to `history`.
std::vector<PoolOp> OpsFromRecipes(const std::vector<OpRecipe>& recipes, bool reads, int64_t layers,
                                   const V& candidates, std::vector<V>* history) {
  std::vector<PoolOp> ops;
  int64_t next_read = 0;
  for (const OpRecipe& r : recipes) {
    if (r.read && reads) {
      ops.push_back({true, 0, {}});
      ++next_read;
      continue;
    }
    const int64_t layer = reads && r.in_order && next_read < layers ? next_read : r.layer;
    ops.push_back({false, layer, ListFromRecipe(r, candidates, *history)});
    history->push_back(ops.back().locs);
  }
  return ops;
}

WritePlanScenario Materialize(const WritePlanRecipe& recipe) {
  WritePlanScenario s;
  s.config = recipe.config;
  const int64_t ps = s.config.page_size;
  std::set<int64_t> outside(recipe.extra_slots.begin(), recipe.extra_slots.end());
  for (const WritePlanRecipe::Epoch& e : recipe.epochs) {
    for (const ExtendRequest& r : e.requests) {
      for (int64_t loc : Slots(r, 0, r.seq_len, ps)) outside.insert(loc);
    }
  }
  const V outside_locs(outside.begin(), outside.end());
  std::vector<V> history;
  s.initial = OpsFromRecipes(recipe.initial, false, s.config.num_layers, outside_locs, &history);
  for (const WritePlanRecipe::Epoch& e : recipe.epochs) {
    std::set<int64_t> chunk;  // the batch's out_cache_loc, as a set
    for (const ExtendRequest& r : e.requests) {
      for (int64_t loc : Slots(r, r.prefix_len, r.seq_len, ps)) chunk.insert(loc);
    }
    PoolEpoch epoch{e.requests, {}, {}};
    epoch.during = OpsFromRecipes(e.during, true, s.config.num_layers, V(chunk.begin(), chunk.end()), &history);
    epoch.after = OpsFromRecipes(e.after, false, s.config.num_layers, outside_locs, &history);
    s.epochs.push_back(std::move(epoch));
  }
  return s;
}

void ShowOps(const std::vector<PoolOp>& ops, std::ostream& os) {
  for (const PoolOp& op : ops) {
    if (op.read) {
      os << "    read next layer\n";
    } else {
      os << "    write layer " << op.layer << " locs " << rc::toString(op.locs) << "\n";
    }
  }
}

// RapidCheck printer (found by ADL): the shrunk counterexample as concrete batches and loc lists.
void showValue(const WritePlanRecipe& recipe, std::ostream& os) {
  const WritePlanScenario s = Materialize(recipe);
  const ref::ShardedPoolConfig& c = s.config;
  os << "N=" << c.shard_size << " ps=" << c.page_size << " pages_per_rank=" << c.pages_per_rank
     << " layers=" << c.num_layers << " row_words=" << c.row_words << " max_prefix_tokens=" << c.max_prefix_tokens
     << " chunk_tokens=" << c.chunk_tokens << " buffers=";
  for (const ref::PoolBuffer& b : c.buffers) os << b.name << ":" << b.row_bytes << " ";
  os << "\n  epoch 0 (no batch), writes:\n";
  ShowOps(s.initial, os);
  for (size_t e = 0; e < s.epochs.size(); ++e) {
    os << "  epoch " << e + 1 << ": begin_shard_extend";
    for (const ExtendRequest& r : s.epochs[e].requests) {
      os << " (prefix " << r.prefix_len << ", seq " << r.seq_len << ", pages " << rc::toString(r.pages) << ")";
    }
    os << "\n";
    ShowOps(s.epochs[e].during, os);
    os << "  end_shard_extend\n";
    ShowOps(s.epochs[e].after, os);
  }
}

// 0..max_ops op recipes: mostly writes (reads when `reads`), list kinds weighted towards the confusable ones.
rc::Gen<std::vector<OpRecipe>> GenOpRecipes(bool reads, int64_t layers, int64_t max_ops) {
  const rc::Gen<OpRecipe> op =
      rc::gen::resize(100, rc::gen::exec([reads, layers] {
                        OpRecipe r;
                        r.read = reads && *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
                        r.in_order = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
                        r.layer = *rc::gen::inRange<int64_t>(0, layers);
                        r.kind = *rc::gen::weightedElement<OpRecipe::Kind>({{2, OpRecipe::kFresh},
                                                                            {3, OpRecipe::kLast},
                                                                            {1, OpRecipe::kEarlier},
                                                                            {4, OpRecipe::kSwapOne},
                                                                            {1, OpRecipe::kPermuteTail},
                                                                            {1, OpRecipe::kOneLonger},
                                                                            {1, OpRecipe::kOneShorter}});
                        r.a = *rc::gen::arbitrary<uint32_t>();
                        r.b = *rc::gen::arbitrary<uint32_t>();
                        return r;
                      }));
  // The container's size bounds its length (0..max_ops); shrinking drops any op.
  return rc::gen::resize(max_ops, rc::gen::container<std::vector<OpRecipe>>(op));
}

WritePlanRecipe DrawWritePlanRecipe() {
  WritePlanRecipe s;
  ref::ShardedPoolConfig& c = s.config;
  c.shard_size = DrawShardSize();
  c.page_size = DrawPageSize();
  c.pages_per_rank = *rc::gen::inRange<int64_t>(1, 12);
  c.num_layers = *rc::gen::inRange<int64_t>(1, 5);
  c.row_words = *rc::gen::inRange<int64_t>(1, 3);
  c.buffers = DrawPoolBuffers();
  const int64_t n = c.shard_size, ps = c.page_size;
  s.extra_slots = *rc::gen::container<V>(*rc::gen::inRange<int64_t>(0, 4),
                                         rc::gen::inRange<int64_t>(0, n * (c.pages_per_rank + 1) * ps));
  s.initial = *GenOpRecipes(false, c.num_layers, 3);
  const int64_t ppr = c.pages_per_rank, layers = c.num_layers;
  const auto epoch = rc::gen::resize(100, rc::gen::exec([n, ps, ppr, layers] {
                                       WritePlanRecipe::Epoch e;
                                       e.requests = DrawRequests(n, ps, ppr).requests;
                                       e.during = *GenOpRecipes(true, layers, 12);
                                       e.after = *GenOpRecipes(false, layers, 2);
                                       return e;
                                     }));
  // 1..3 epochs (shrinking drops any of them but the last one left).
  s.epochs = *rc::gen::resize(2, rc::gen::container<std::vector<WritePlanRecipe::Epoch>>(epoch));
  s.epochs.push_back(*epoch);
  int64_t block_pages = 0, chunk_pages = 0;
  for (const WritePlanRecipe::Epoch& e : s.epochs) {
    int64_t block = 0, chunk = 0;
    for (const ExtendRequest& r : e.requests) {
      block += (r.prefix_len / ps + n - 1) / n;
      chunk += static_cast<int64_t>(r.pages.size()) - r.prefix_len / ps;
    }
    block_pages = std::max(block_pages, block);
    chunk_pages = std::max(chunk_pages, chunk);
  }
  c.max_prefix_tokens = n * ps * block_pages;
  c.chunk_tokens = ps * chunk_pages;
  return s;
}

// Rank r's persisted rows equal the baseline's rows of the locs they hold, for every rank, layer, buffer, row.
void AssertPersistedEqualsBaseline(const ref::ShardedPool& pool, const ref::UnshardedPool& base,
                                   const ref::ShardedPoolConfig& c) {
  const int64_t n = c.shard_size, ps = c.page_size, rows = (c.pages_per_rank + 1) * ps;
  const std::vector<ref::PoolBuffer> buffers = ref::BuffersOf(c);
  for (int64_t r = 0; r < n; ++r) {
    V locs(rows);
    for (int64_t row = 0; row < rows; ++row) locs[row] = (row / ps) * n * ps + r * ps + row % ps;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const ref::BufferRows want = RC_VALUE(base.ReadBuffers(l, locs));
      for (size_t b = 0; b < buffers.size(); ++b) {
        const int64_t w = buffers[b].row_bytes;
        for (int64_t row = 0; row < rows; ++row) {
          const std::vector<uint8_t> got = pool.LocalRowBytes(r, l, static_cast<int64_t>(b), row);
          if (!std::equal(got.begin(), got.end(), want[b].begin() + row * w)) {
            RC_FAIL(StrCat("rank ", r, " layer ", l, " buffer ", buffers[b].name, " local row ", row, " (loc ",
                           locs[row], ") differs from the unsharded baseline"));
          }
        }
      }
    }
  }
}

// Row i of every buffer of `rows`.
ref::BufferRows RowOf(const ref::BufferRows& rows, const std::vector<ref::PoolBuffer>& buffers, size_t i) {
  ref::BufferRows out;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const int64_t w = buffers[b].row_bytes;
    out.emplace_back(rows[b].begin() + i * w, rows[b].begin() + (i + 1) * w);
  }
  return out;
}

// Replays a scenario on the sharded pool and the baseline, checking every write and read against them.
class WritePlanChecker {
 public:
  explicit WritePlanChecker(const ref::ShardedPoolConfig& c)
      : c_(c),
        buffers_(ref::BuffersOf(c)),
        pool_(RC_VALUE(ref::ShardedPool::Create(c))),
        base_(RC_VALUE(ref::UnshardedPool::Create(c))) {}

  void Run(const WritePlanScenario& s) {
    Apply(s.initial);
    for (const PoolEpoch& e : s.epochs) {
      RC_ASSERT_OK(pool_.BeginShardExtend(e.requests));
      ++epoch_;
      lists_this_epoch_.clear();
      staged_.clear();
      next_read_ = 0;
      read_locs_.clear();
      chunk_.clear();
      for (const ExtendRequest& r : e.requests) {
        for (int64_t loc : Slots(r, 0, r.seq_len, c_.page_size)) read_locs_.push_back(loc);
        for (int64_t loc : Slots(r, r.prefix_len, r.seq_len, c_.page_size)) chunk_.insert(loc);
      }
      Apply(e.during);
      pool_.EndShardExtend();
      Apply(e.after);
      AssertPersistedEqualsBaseline(pool_, base_, c_);
    }
    AssertPersistedEqualsBaseline(pool_, base_, c_);
    RC_TAG(equal_length_lists_ ? "different equal-length lists in one epoch" : "no equal-length lists");
    RC_TAG(relisted_across_epochs_ ? "a list rewritten first thing in a new epoch" : "no list rewritten across epochs");
    RC_TAG(staged_compared_ ? "staged chunk rows read back" : "no staged row read back");
    RC_TAG(StrCat(buffers_.size(), " buffer(s) per layer"));
    // One gather per layer moves every (pool buffer, scratch tensor) pair.
    RC_ASSERT(pool_.pair_gathers() == pool_.gathers() * static_cast<int64_t>(buffers_.size()));
  }

 private:
  void Apply(const std::vector<PoolOp>& ops) {
    for (const PoolOp& op : ops) op.read ? Read() : Write(op.layer, op.locs);
  }

  void Write(int64_t layer, const V& locs) {
    const int64_t n = c_.shard_size, ps = c_.page_size;
    const ref::BufferRows rows = ref::AllBufferRowValues(layer, buffers_, locs, ++salt_);
    if (c_.buffers.empty()) {  // the one-buffer form goes through the word API
      const Rows words = ref::RowValues(layer, locs, salt_, c_.row_words);
      RC_ASSERT_OK(pool_.Write(layer, locs, words));
      RC_ASSERT_OK(base_.Write(layer, locs, words));
    } else {
      RC_ASSERT_OK(pool_.WriteBuffers(layer, locs, rows));
      RC_ASSERT_OK(base_.WriteBuffers(layer, locs, rows));
    }
    for (size_t i = 0; i < locs.size(); ++i) {
      const int64_t owner = (locs[i] % (n * ps)) / ps, row = (locs[i] / (n * ps)) * ps + locs[i] % ps;
      const ref::BufferRows want = RowOf(rows, buffers_, i);
      for (size_t b = 0; b < buffers_.size(); ++b) {
        if (pool_.LocalRowBytes(owner, layer, static_cast<int64_t>(b), row) != want[b]) {
          RC_FAIL(StrCat("epoch ", epoch_, " layer ", layer, " write of ", rc::toString(locs), ": loc ", locs[i],
                         " buffer ", buffers_[b].name, " not persisted at rank ", owner, " local row ", row));
        }
      }
    }
    // The model of the one-entry cache: the owner filter is rebuilt iff (epoch, locs) differs from the last.
    relisted_across_epochs_ |= plan_key_.first != epoch_ && plan_key_.second == locs;
    if (!(plan_key_.first == epoch_ && plan_key_.second == locs)) {
      plan_key_ = {epoch_, locs};
      ++plan_builds_;
    }
    if (pool_.write_plan_builds() != plan_builds_) {
      RC_FAIL(StrCat("epoch ", epoch_, " write of ", rc::toString(locs), ": ", pool_.write_plan_builds(),
                     " owner-filter builds, want ", plan_builds_,
                     " (rebuilt exactly when (epoch, locs) differs from the previous write's)"));
    }
    for (const V& earlier : lists_this_epoch_) equal_length_lists_ |= earlier.size() == locs.size() && earlier != locs;
    lists_this_epoch_.push_back(locs);
    if (pool_.active()) {
      for (size_t i = 0; i < locs.size(); ++i) staged_[{layer % 2, locs[i]}] = RowOf(rows, buffers_, i);
    }
  }

  // Reads the next layer: prefix rows equal the baseline (gathered from the persisted pools), chunk rows equal
  // the last row staged at that loc into the layer's slot during this batch (rows never staged are skipped).
  void Read() {
    if (next_read_ >= c_.num_layers) return;
    const int64_t l = next_read_++;
    const auto got = RC_VALUE(pool_.ReadBuffers(l, read_locs_));
    const ref::BufferRows want = RC_VALUE(base_.ReadBuffers(l, read_locs_));
    if (c_.buffers.empty()) {  // the word API reads the same bytes
      const auto words = RC_VALUE(pool_.Read(l, read_locs_));
      RC_ASSERT(words.size() == got.size());
    }
    for (size_t i = 0; i < read_locs_.size(); ++i) {
      const int64_t loc = read_locs_[i];
      ref::BufferRows expect = RowOf(want, buffers_, i);
      if (chunk_.count(loc)) {
        auto it = staged_.find({l % 2, loc});
        if (it == staged_.end()) continue;
        expect = it->second;
        staged_compared_ = true;
      }
      for (int64_t r = 0; r < c_.shard_size; ++r) {
        if (RowOf(got[r], buffers_, i) != expect) {
          RC_FAIL(StrCat("epoch ", epoch_, " read of layer ", l, " on rank ", r, ": loc ", loc,
                         chunk_.count(loc) ? " (chunk) differs from the row staged last"
                                           : " (prefix) differs from the unsharded baseline"));
        }
      }
    }
  }

  ref::ShardedPoolConfig c_;
  std::vector<ref::PoolBuffer> buffers_;
  ref::ShardedPool pool_;
  ref::UnshardedPool base_;
  int64_t epoch_ = 0, salt_ = 0, next_read_ = 0, plan_builds_ = 0;
  std::pair<int64_t, V> plan_key_{-1, {}};
  std::map<std::pair<int64_t, int64_t>, ref::BufferRows> staged_;  // (slot, loc) -> rows staged during this batch
  V read_locs_;
  std::set<int64_t> chunk_;
  std::vector<V> lists_this_epoch_;
  bool equal_length_lists_ = false, relisted_across_epochs_ = false, staged_compared_ = false;
};

// The write-plan cache is keyed on (epoch, the exact loc list): different lists written within one extend
// (equal lengths, a shared first loc, the same list again) and across epochs persist exactly the baseline's
// rows and stage exactly their own rows, and the owner filter is rebuilt exactly when (epoch, locs) changes.
KVSHARD_PROP(PoolProps, WritePlanCacheKeyedOnEpochAndExactLocs, ()) {
  const WritePlanScenario s = Materialize(*rc::gen::resize(100, rc::gen::exec(&DrawWritePlanRecipe)));
  WritePlanChecker(s.config).Run(s);
}

// set_kv_buffer_prefix_valid is rejected with SGLang's text in every state (before, inside and after an
// extend, after writes) and leaves the observable state unchanged.
KVSHARD_PROP(PoolProps, PrefixValidCommitAlwaysRejectedStateUnchanged, ()) {
  const ExtendBatch b = DrawFullSizeBatch();
  ref::ShardedPoolConfig c{b.shard_size, b.page_size, b.pages_per_rank, b.max_prefix_tokens, b.chunk_tokens, 2, 1};
  c.buffers = DrawPoolBuffers();
  ref::ShardedPool pool = RC_VALUE(ref::ShardedPool::Create(c));
  const auto check = [&pool] {
    const int64_t epoch = pool.epoch(), builds = pool.write_plan_builds(), gathers = pool.gathers();
    const Status s = pool.WritePrefixValid();
    RC_ASSERT(s.code() == StatusCode::kFailedPrecondition);
    RC_ASSERT(s.message() == std::string(ref::kPrefixValidUnsupported));
    RC_ASSERT(pool.epoch() == epoch && pool.write_plan_builds() == builds && pool.gathers() == gathers);
  };
  check();
  RC_ASSERT_OK(pool.BeginShardExtend(b.requests));
  check();
  V chunk;
  for (const ExtendRequest& r : b.requests) {
    for (int64_t pos = r.prefix_len; pos < r.seq_len; ++pos)
      chunk.push_back(r.pages[pos / b.page_size] * b.page_size + pos % b.page_size);
  }
  RC_ASSERT_OK(pool.WriteBuffers(0, chunk, ref::AllBufferRowValues(0, ref::BuffersOf(c), chunk, 1)));
  check();
  pool.EndShardExtend();
  check();
}

// The layer-ahead protocol: reading layer l needs slot l % 2 to hold (l, epoch); it kicks layer l + 1.
KVSHARD_PROP(PoolProps, ResidencyMissesExactlyWhenLayerAheadOrderIsBroken, ()) {
  const ExtendBatch b = DrawFullSizeBatch();
  const int64_t layers = *rc::gen::inRange<int64_t>(1, 6);
  ref::ShardedPool pool = RC_VALUE(ref::ShardedPool::Create(
      {b.shard_size, b.page_size, b.pages_per_rank, b.max_prefix_tokens, b.chunk_tokens, layers, 1}));
  RC_ASSERT_OK(pool.BeginShardExtend(b.requests));
  const bool has_prefix = pool.plan().block_pages > 0;
  std::pair<int64_t, int64_t> model[2] = {{has_prefix ? 0 : -1, has_prefix ? 1 : -1}, {-1, -1}};
  const auto reads = *rc::gen::container<V>(rc::gen::inRange<int64_t>(0, layers));
  for (int64_t l : reads) {
    const bool resident = !has_prefix || model[l % 2] == std::pair<int64_t, int64_t>{l, 1};
    auto got = pool.Read(l, {0});
    RC_ASSERT(got.ok() == resident);
    if (!resident) {
      RC_ASSERT(got.status().message().find("prefix scratch miss for layer") != std::string::npos);
      continue;
    }
    if (l + 1 < layers) model[(l + 1) % 2] = {l + 1, 1};
    RC_ASSERT(pool.resident_key(b.shard_size - 1, (l + 1) % 2) ==
              (l + 1 < layers ? model[(l + 1) % 2] : pool.resident_key(0, (l + 1) % 2)));
  }
}

// Owner-filtered writes: the owner's local row holds the row, every other rank's row is untouched; the
// owner filter is computed once per (locs, epoch).
KVSHARD_PROP(PoolProps, WritesPersistOnlyOwnedRowsWithCachedWritePlan, ()) {
  const int64_t n = DrawShardSize(), ps = DrawPageSize(), ppr = *rc::gen::inRange<int64_t>(0, 8);
  const int64_t layers = *rc::gen::inRange<int64_t>(1, 4);
  ref::ShardedPool pool = RC_VALUE(ref::ShardedPool::Create({n, ps, ppr, 0, 0, layers, 1}));
  auto locs = *rc::gen::container<V>(rc::gen::inRange<int64_t>(0, n * (ppr + 1) * ps));
  std::sort(locs.begin(), locs.end());
  locs.erase(std::unique(locs.begin(), locs.end()), locs.end());
  for (int64_t l = 0; l < layers; ++l) RC_ASSERT_OK(pool.Write(l, locs, ref::RowValues(l, locs, 3, 1)));
  RC_ASSERT(pool.write_plan_builds() == 1);
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t loc : locs) {
      const int64_t owner = (loc % (n * ps)) / ps, row = (loc / (n * ps)) * ps + loc % ps;
      RC_ASSERT(pool.LocalRow(owner, l, row)[0] == ref::RowValue(l, loc, 3, 0));
      for (int64_t r = 0; r < n; ++r) {
        if (r == owner) continue;
        const int64_t other = (row / ps) * n * ps + r * ps + row % ps;  // the loc rank r stores at `row`
        const bool written = std::binary_search(locs.begin(), locs.end(), other);
        RC_ASSERT(pool.LocalRow(r, l, row)[0] == (written ? ref::RowValue(l, other, 3, 0) : 0u));
      }
    }
  }
}

}  // namespace
}  // namespace kvshard::props

// The synthetic trace generator: inputs drawn from a seeded PRNG, every record run through the replayer so
// that its expect is the reference's answer (or {"error": ...} when the reference rejects it).
#include "replay/trace_gen.h"

#include <algorithm>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "replay/replayer.h"
#include "replay/trace_gen_cp.h"
#include "core/gather_plan.h"
#include "core/hash.h"
#include "core/spec.h"
#include "core/trace.h"

namespace kvshard::replay {
namespace {

// splitmix64: the same stream on every platform (std distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {  // the finalizer of the state, then the state advances by the golden gamma
    const uint64_t z = Mix64(state_);
    state_ += 0x9e3779b97f4a7c15ULL;
    return z;
  }
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Percent(int64_t p) { return Uniform(0, 99) < p; }

 private:
  uint64_t state_;
};

int64_t CeilDivide(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A live chain: its tokens, base, pages in position order, and the alloc requests holding them.
struct Chain {
  int64_t len = 0;
  int64_t base = 0;
  std::vector<int64_t> pages;
  std::vector<std::pair<int64_t, int64_t>> holders;  // (request id, pages it still holds), in position order
};

// A document of the radix cache: token i is its root document's for i < shared (a shared system prompt), its own
// after. Documents never change: a request reads a prefix of one.
struct Doc {
  int64_t root = 0;
  int64_t shared = 0;
};

// A document request of the batch being built: its locked match and the pages it extends.
struct DocRequest {
  int64_t index = 0;  // position in the alloc batch
  int64_t doc = 0;
  int64_t len = 0;    // tokens (seq_len)
  int64_t match = 0;  // the locking match's K
  std::vector<int64_t> prefix_pages;
};

// Documents a request revisits are drawn from the most recent ones (older ones are likely evicted).
constexpr int64_t kRecentDocs = 32;
// With the radix cache, the longest request (a document request's records list its tokens).
constexpr int64_t kMaxDocTokens = int64_t{1} << 20;
// With the radix cache, the chance that a request is a document request (else an allocator chain as without).
constexpr int64_t kDocPercent = 50;

class Generator {
 public:
  Generator(const TraceGenOptions& o, std::unique_ptr<Replayer> replayer, TraceWriter* writer)
      : o_(o), rng_(o.seed), replayer_(std::move(replayer)), writer_(writer) {}

  Status Run() {
    while (!Full()) {
      const int64_t roll = rng_.Uniform(0, 99);
      if (roll < 4) {
        if (!o_.allocator_only) KVSHARD_RETURN_IF_ERROR(Place());
      } else if (chains_.empty() || roll < 15 + 75 * free_share_ / 100) {
        KVSHARD_RETURN_IF_ERROR(AllocBatch());
      } else if (rng_.Percent(60)) {
        KVSHARD_RETURN_IF_ERROR(FreeOne());
      } else {
        KVSHARD_RETURN_IF_ERROR(FreeGroup());
      }
    }
    return Status::Ok();
  }

 private:
  bool Full() const { return writer_->records() >= o_.records; }

  // Runs `rec` through the reference, attaches its answer as expect (the `keep` keys when given, less the `drop`
  // keys of each "ranks" entry) and writes it. With `narrow`, the reference builds only the `keep` keys. Returns
  // the answer, or null when the reference rejected the record (its expect is then the error). Never called when
  // the trace is full.
  StatusOr<Json> Emit(Json rec, const std::vector<std::string>& keep = {}, const std::vector<std::string>& drop = {},
                      bool narrow = false) {
    KVSHARD_CHECK(!Full());
    Json only = Json::object();
    for (const std::string& k : keep) only[k] = true;
    TraceRecord record{writer_->records() + 2, rec.at("op").get<std::string>(), rec};
    StatusOr<Json> got = replayer_->Execute(record, narrow ? &only : nullptr);
    if (!got.ok() && got.status().code() == StatusCode::kMismatch) return got.status();  // a broken invariant
    if (!got.ok()) {
      rec["expect"] = Json{{"error", got.status().message()}};
    } else if (keep.empty()) {
      rec["expect"] = *got;
    } else {
      Json subset = Json::object();
      for (const std::string& k : keep) {
        if (got->contains(k)) subset[k] = got->at(k);
      }
      if (subset.contains("ranks")) {
        for (Json& rank : subset["ranks"]) {
          for (const std::string& k : drop) rank.erase(k);
        }
      }
      rec["expect"] = std::move(subset);
    }
    KVSHARD_RETURN_IF_ERROR(writer_->WriteRecord(rec));
    if (!got.ok()) return Json(nullptr);
    if (got->contains("aggregate_free_size")) {
      free_share_ = 100 * got->at("aggregate_free_size").get<int64_t>() / (o_.page_size * PoolPages());
    }
    if (got->contains("cached_pages")) cached_pages_ = got->at("cached_pages").get<int64_t>();
    return got;
  }

  int64_t PoolPages() const { return o_.shard_size * o_.pages_per_rank; }

  // A request length: uniform, or (edge-heavy) at page and CP edges.
  int64_t Length(int64_t most) {
    const int64_t ps = o_.page_size;
    if (o_.edge_heavy && rng_.Percent(50)) {
      const int64_t edges[] = {1, ps - 1, ps, ps + 1, 2 * ps, o_.cp_size - 1, 2 * o_.cp_size * ps + 1};
      return std::clamp<int64_t>(edges[rng_.Uniform(0, 6)], 1, most);
    }
    return rng_.Uniform(1, most);
  }

  // The first `len` tokens of document `d` (ids below 2^15, so that lines stay short).
  std::vector<int64_t> Tokens(int64_t d, int64_t len) const {
    std::vector<int64_t> t(static_cast<size_t>(len));
    const Doc& doc = docs_[d];
    const uint64_t own = Mix64(o_.seed ^ Mix64(static_cast<uint64_t>(d)));
    const uint64_t root = Mix64(o_.seed ^ Mix64(static_cast<uint64_t>(doc.root)));
    for (int64_t i = 0; i < len; ++i) {
      t[i] = static_cast<int64_t>(Mix64((i < doc.shared ? root : own) + static_cast<uint64_t>(i)) & 0x7fff);
    }
    return t;
  }

  // A recent document (share-percent), or a new one that shares a prefix of a recent one's root (half of them).
  int64_t PickDoc() {
    const int64_t docs = static_cast<int64_t>(docs_.size());
    const int64_t recent = std::min(docs, kRecentDocs);
    if (docs > 0 && rng_.Percent(o_.share_percent)) return docs - 1 - rng_.Uniform(0, recent - 1);
    Doc doc{docs, 0};
    if (docs > 0 && rng_.Percent(50)) {
      doc.root = docs_[docs - 1 - rng_.Uniform(0, recent - 1)].root;
      doc.shared = Length(o_.max_len);
    }
    docs_.push_back(doc);
    return docs;
  }

  Status Place() {
    Json rec{{"op", "place"},
             {"shard_size", o_.shard_size},
             {"page_size", o_.page_size},
             {"rank", rng_.Uniform(0, o_.shard_size - 1)}};
    std::vector<int64_t> locs;
    const int64_t count = rng_.Uniform(1, 16);
    for (int64_t i = 0; i < count; ++i)
      locs.push_back(rng_.Uniform(0, o_.shard_size * (o_.pages_per_rank + 1) * o_.page_size - 1));
    rec["locs"] = locs;
    return Emit(rec).status();
  }

  // Releases the batch's locked matches (a deferred or rejected batch).
  Status UnlockAll(const std::vector<DocRequest>& docs) {
    for (const DocRequest& d : docs) {
      if (Full()) return Status::Ok();
      KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "dec_lock_ref"}, {"match", d.match}}).status());
    }
    return Status::Ok();
  }

  // One serving step: a batch of chain requests (extensions of live chains by share-percent, else new chains)
  // and, with the radix cache, document requests that first match their cached prefix (on len - 1 tokens, with
  // lock). The alloc; when it defers with pages cached, an eviction and one retry. A committed batch runs the
  // pipeline and its gather plan, split and rerange; then each document request inserts its pages into the cache,
  // frees its partial tail page by slots and unlocks its match.
  Status AllocBatch() {
    const int64_t ps = o_.page_size, n = o_.shard_size;
    const int64_t reqs = o_.edge_heavy && rng_.Percent(30) ? 1 : rng_.Uniform(1, o_.batch_size);
    std::vector<size_t> aligned;
    for (size_t c = 0; c < chains_.size(); ++c) {
      if (chains_[c].len % ps == 0) aligned.push_back(c);
    }
    std::vector<int64_t> prefix, seq, last_locs, chain_of;
    std::vector<DocRequest> docs;
    Json bases = Json::array();
    for (int64_t i = 0; i < reqs; ++i) {
      if (o_.radix && rng_.Percent(kDocPercent)) {
        if (Full()) return Status::Ok();
        DocRequest d{i, PickDoc(), 0, 0, {}};
        d.len = Length(o_.max_len);
        std::vector<int64_t> tokens = Tokens(d.doc, d.len);
        tokens.pop_back();  // keep at least one token to compute
        KVSHARD_ASSIGN_OR_RETURN(Json m, Emit(Json{{"op", "match_prefix"}, {"tokens", tokens}, {"lock", true}}));
        if (m.is_null()) return Status::Ok();  // unreachable: a match is never rejected
        d.match = m.at("match").get<int64_t>();
        d.prefix_pages = m.at("pages").get<std::vector<int64_t>>();
        chain_of.push_back(-1);
        prefix.push_back(m.at("prefix_len").get<int64_t>());
        seq.push_back(d.len);
        if (!m.at("rotation_base").is_null()) {
          bases.push_back(m.at("rotation_base"));
        } else {  // a new chain: the allocator's base, or a random one (batch-mates on one document then differ)
          bases.push_back(rng_.Percent(25) ? Json(rng_.Uniform(0, n - 1)) : Json(nullptr));
        }
        last_locs.push_back(m.at("last_loc").get<int64_t>());
        docs.push_back(std::move(d));
      } else if (!aligned.empty() && rng_.Percent(o_.share_percent)) {
        const size_t pick = static_cast<size_t>(rng_.Uniform(0, static_cast<int64_t>(aligned.size()) - 1));
        const Chain& c = chains_[aligned[pick]];
        chain_of.push_back(static_cast<int64_t>(aligned[pick]));
        aligned.erase(aligned.begin() + static_cast<std::ptrdiff_t>(pick));
        prefix.push_back(c.len);
        seq.push_back(c.len + Length(o_.max_len));
        bases.push_back(c.base);
        last_locs.push_back(c.pages.back() * ps + ps - 1);
      } else {
        chain_of.push_back(-1);
        prefix.push_back(0);
        seq.push_back(Length(o_.max_len));
        bases.push_back(rng_.Percent(25) ? Json(rng_.Uniform(0, n - 1)) : Json(nullptr));
        last_locs.push_back(0);
      }
    }
    if (Full()) return Status::Ok();
    Json rec{{"op", "alloc"},
             {"prefix_lens", prefix},
             {"seq_lens", seq},
             {"rotation_bases", bases},
             {"last_locs", last_locs}};
    int64_t first_id = next_request_;
    next_request_ += reqs;
    KVSHARD_ASSIGN_OR_RETURN(Json got, Emit(rec));
    if (!got.is_null() && !got.at("ok").get<bool>() && o_.radix && cached_pages_ > 0) {
      // Deferred: evict N pages per page the batch needs (as props/stream_driver.cc does), then retry once.
      int64_t need = 0;
      for (int64_t i = 0; i < reqs; ++i) need += CeilDivide(seq[i], ps) - prefix[i] / ps;
      if (Full()) return Status::Ok();
      KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "evict"}, {"num_pages", need * n}}).status());
      if (Full()) return Status::Ok();
      first_id = next_request_;
      next_request_ += reqs;
      KVSHARD_ASSIGN_OR_RETURN(got, Emit(rec));
    }
    if (got.is_null() || !got.at("ok").get<bool>()) return UnlockAll(docs);
    Json requests = Json::array();
    std::vector<int64_t> extend;
    std::vector<std::vector<int64_t>> doc_pages(static_cast<size_t>(reqs));
    size_t next_doc = 0;
    for (int64_t i = 0; i < reqs; ++i) {
      const std::vector<int64_t> pages = got.at("pages")[i].get<std::vector<int64_t>>();
      extend.push_back(seq[i] - prefix[i]);
      if (next_doc < docs.size() && docs[next_doc].index == i) {
        std::vector<int64_t>& all = doc_pages[i];
        all = docs[next_doc++].prefix_pages;
        all.insert(all.end(), pages.begin(), pages.end());
        requests.push_back(Json{{"prefix_len", prefix[i]}, {"seq_len", seq[i]}, {"pages", all}});
        continue;
      }
      if (chain_of[i] < 0) {
        chains_.push_back(Chain{0, got.at("rotation_bases")[i].get<int64_t>(), {}, {}});
        chain_of[i] = static_cast<int64_t>(chains_.size()) - 1;
      }
      Chain& c = chains_[chain_of[i]];
      c.pages.insert(c.pages.end(), pages.begin(), pages.end());
      c.holders.emplace_back(first_id + i, static_cast<int64_t>(pages.size()));
      c.len = seq[i];
      requests.push_back(Json{{"prefix_len", prefix[i]}, {"seq_len", seq[i]}, {"pages", c.pages}});
    }
    KVSHARD_RETURN_IF_ERROR(Pipeline(requests));
    if (o_.allocator_only) return Status::Ok();  // no plan records, and (no radix) no document requests
    KVSHARD_RETURN_IF_ERROR(GatherPlan(requests));
    KVSHARD_ASSIGN_OR_RETURN(Json split, SplitAndRerange(extend, prefix));
    if (o_.cp_records) {
      CpGenBatch cp{o_.cp_size, o_.page_size, extend, prefix, {}, std::move(split), o_.edge_heavy};
      for (int64_t i = 0; i < reqs; ++i) cp.new_pages.push_back(got.at("pages")[i].get<std::vector<int64_t>>());
      CpGenHooks hooks{[this](int64_t lo, int64_t hi) { return rng_.Uniform(lo, hi); },
                       [this](Json rec) { return Emit(std::move(rec)); }, [this] { return Full(); }};
      KVSHARD_RETURN_IF_ERROR(EmitCpRecords(cp, hooks));
    }
    // Finish the document requests: cache the full pages, free the partial tail page, unlock.
    for (const DocRequest& d : docs) {
      if (Full()) return Status::Ok();
      const std::vector<int64_t>& pages = doc_pages[d.index];
      KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "insert"},
                                        {"tokens", Tokens(d.doc, d.len)},
                                        {"pages", pages},
                                        {"rotation_base", got.at("rotation_bases")[d.index]}})
                                  .status());
      if (d.len % ps != 0) {
        if (Full()) return Status::Ok();
        std::vector<int64_t> locs;
        for (int64_t pos = (d.len - 1) / ps * ps; pos < d.len; ++pos) locs.push_back(pages.back() * ps + pos % ps);
        KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "free"}, {"locs", locs}}).status());
      }
      if (Full()) return Status::Ok();
      KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "dec_lock_ref"}, {"match", d.match}}).status());
    }
    return Status::Ok();
  }

  // The committed batch on the sharded pool: begin_shard_extend (the req_to_token pages), per layer the chunk's
  // writes and the whole batch's reads (default locs), end_shard_extend. Expect keeps the small fields (the
  // scratch rows once: they are the same for every layer of an extend).
  Status Pipeline(const Json& requests) {
    if (o_.num_layers == 0 || Full()) return Status::Ok();
    KVSHARD_ASSIGN_OR_RETURN(Json begin, Emit(Json{{"op", "begin_shard_extend"}, {"requests", requests}},
                                              {"block_pages", "page_pos", "out_cache_loc", "epoch"}, {}, true));
    if (begin.is_null()) return Status::Ok();  // rejected: no extend in flight
    for (int64_t layer = 0; layer < o_.num_layers; ++layer) {
      if (Full()) return Status::Ok();
      KVSHARD_RETURN_IF_ERROR(
          Emit(Json{{"op", "set_kv_buffer"}, {"layer", layer}}, {"owned_counts"}, {}, true).status());
      if (Full()) return Status::Ok();
      const std::vector<std::string> keep =
          layer == 0 ? std::vector<std::string>{"slot", "scratch_rows"} : std::vector<std::string>{"slot"};
      KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "get_key_buffer"}, {"layer", layer}}, keep, {}, true).status());
    }
    if (Full()) return Status::Ok();
    return Emit(Json{{"op", "end_shard_extend"}}).status();
  }

  Status GatherPlan(const Json& requests) {
    if (Full()) return Status::Ok();
    const int64_t n = o_.shard_size, ps = o_.page_size;
    int64_t block = 0, chunk = 0;
    for (const Json& r : requests) {
      block += CeilDivide(r.at("prefix_len").get<int64_t>() / ps, n);
      chunk += CeilDivide(r.at("seq_len").get<int64_t>(), ps) - r.at("prefix_len").get<int64_t>() / ps;
    }
    int64_t prefix_cap = n * ps * block, chunk_cap = ps * chunk;
    if (o_.edge_heavy && rng_.Percent(10)) {  // one page under a capacity: the plan must be rejected
      if (rng_.Percent(50) && prefix_cap > 0) {
        prefix_cap -= n * ps;
      } else {
        chunk_cap -= ps;
      }
    }
    Json batch{{"shard_size", n},
               {"page_size", ps},
               {"pages_per_rank", o_.pages_per_rank},
               {"max_prefix_tokens", prefix_cap},
               {"chunk_tokens", chunk_cap},
               {"requests", requests}};
    // send_rows follow from send_local_pages (rows p*ps .. p*ps+ps-1): the expect keeps the pages only.
    return Emit(Json{{"op", "gather_plan"}, {"batch", batch}}, {"block_pages", "page_pos", "ranks"}, {"send_rows"})
        .status();
  }

  // The batch's split (for one random rank) and rerange records; returns the split's answer (null when rejected
  // or not written).
  StatusOr<Json> SplitAndRerange(const std::vector<int64_t>& extend, const std::vector<int64_t>& prefix) {
    if (Full()) return Json(nullptr);
    Json split{{"op", "split"},
               {"cp_size", o_.cp_size},
               {"cp_rank", rng_.Uniform(0, o_.cp_size - 1)},
               {"page_size", o_.page_size},
               {"extend_lens", extend},
               {"prefix_lens", prefix}};
    KVSHARD_ASSIGN_OR_RETURN(
        Json answer,
        Emit(split, {"request_split_lists", "request_compute_split_lists", "request_kv_len_prev", "request_kv_len_next",
                     "request_last_token_owner", "request_last_token_local_offset", "compute_padding_enabled"}));
    if (Full()) return answer;
    Json rerange{{"op", "rerange"},
                 {"cp_size", o_.cp_size},
                 {"page_size", o_.page_size},
                 {"extend_lens", extend},
                 {"prefix_lens", prefix}};
    KVSHARD_RETURN_IF_ERROR(Emit(rerange, {"max_rank_token", "per_rank_tokens", "source_rows"}).status());
    return answer;
  }

  // Frees one chain's tail page by slots, or the whole chain by request.
  Status FreeOne() {
    const size_t c = static_cast<size_t>(rng_.Uniform(0, static_cast<int64_t>(chains_.size()) - 1));
    Chain& chain = chains_[c];
    if (rng_.Percent(50) && chain.pages.size() > 1) {
      const int64_t ps = o_.page_size, last = chain.pages.back();
      std::vector<int64_t> locs;
      for (int64_t pos = (chain.len - 1) / ps * ps; pos < chain.len; ++pos) locs.push_back(last * ps + pos % ps);
      chain.pages.pop_back();
      chain.len = static_cast<int64_t>(chain.pages.size()) * ps;
      if (--chain.holders.back().second == 0) chain.holders.pop_back();
      return Emit(Json{{"op", "free"}, {"locs", locs}}).status();
    }
    Json frees = Json::array();
    for (const auto& [id, held] : chain.holders) frees.push_back(Json{{"request", id}});
    chains_.erase(chains_.begin() + static_cast<std::ptrdiff_t>(c));
    if (frees.size() == 1) return Emit(Json{{"op", "free"}, {"request", frees[0].at("request")}}).status();
    return Emit(Json{{"op", "free_group"}, {"frees", frees}}).status();
  }

  // Frees up to three whole chains in one free group.
  Status FreeGroup() {
    Json frees = Json::array();
    const int64_t k = rng_.Uniform(1, std::min<int64_t>(3, static_cast<int64_t>(chains_.size())));
    for (int64_t i = 0; i < k; ++i) {
      const size_t c = static_cast<size_t>(rng_.Uniform(0, static_cast<int64_t>(chains_.size()) - 1));
      for (const auto& [id, held] : chains_[c].holders) frees.push_back(Json{{"request", id}});
      chains_.erase(chains_.begin() + static_cast<std::ptrdiff_t>(c));
    }
    return Emit(Json{{"op", "free_group"}, {"frees", frees}}).status();
  }

  const TraceGenOptions& o_;
  Rng rng_;
  std::unique_ptr<Replayer> replayer_;
  TraceWriter* writer_;
  int64_t next_request_ = 0, free_share_ = 100, cached_pages_ = 0;
  std::vector<Chain> chains_;
  std::vector<Doc> docs_;
};

}  // namespace

Status ValidateTraceGenOptions(const TraceGenOptions& o) {
  if (o.records < 0) return InvalidArgument("records: must be >= 0, got ", o.records);
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec({o.shard_size, o.page_size}));
  if (o.pages_per_rank < 1 || o.pages_per_rank >= kMaxPoolLogicalPages / o.shard_size) {
    return InvalidArgument("pages_per_rank: must be in [1, ", kMaxPoolLogicalPages / o.shard_size, "), got ",
                           o.pages_per_rank);
  }
  if (o.cp_size < 1 || o.cp_size > kMaxShardSize)
    return InvalidArgument("cp_size: must be in [1, ", kMaxShardSize, "]");
  if (o.batch_size < 1 || o.batch_size > 4096) return InvalidArgument("batch_size: must be in [1, 4096]");
  if (o.max_len < 1 || o.max_len > (int64_t{1} << 32)) return InvalidArgument("max_len: must be in [1, 2^32]");
  if (o.share_percent < 0 || o.share_percent > 100) return InvalidArgument("share_percent: must be in [0, 100]");
  if (o.radix && o.max_len > kMaxDocTokens) {
    return InvalidArgument(
        "max_len: must be at most ", kMaxDocTokens,
        " with the radix cache (document requests list their tokens; radix = false allows 2^32), got ", o.max_len);
  }
  if (o.num_layers < 0 || o.num_layers > 4096) return InvalidArgument("num_layers: must be in [0, 4096]");
  if (o.row_words < 1 || o.row_words > 4096) return InvalidArgument("row_words: must be in [1, 4096]");
  if (o.allocator_only && (o.num_layers > 0 || o.radix || o.cp_records)) {
    return InvalidArgument(
        "allocator_only: writes only allocator records: needs num_layers 0, radix = false and no cp_records");
  }
  return Status::Ok();
}

ScratchBound TraceGenScratchBound(const TraceGenOptions& o) {
  const int64_t n = o.shard_size, ps = o.page_size, k = o.pages_per_rank, b = o.batch_size;
  // Chunk: a request's new pages are at most ceil(max_len / ps) (a new chain or document request has at most
  // max_len tokens, an extension adds at most max_len to an aligned prefix), and a batch's are distinct free pages.
  const int64_t chunk_pages = std::min(b * CeilDivide(o.max_len, ps), n * k);
  // Prefix: block_pages = sum of ceil(K_i / N). Extended chains hold disjoint pages (sum K_i <= N*K, so their
  // terms add up to at most K + b); a document prefix has at most (max_len - 1) / ps pages, shared or not; no
  // request's term exceeds K.
  int64_t block = 0;
  if (o.share_percent > 0) block += std::min(b * k, k + b);
  if (o.radix) block += b * CeilDivide(std::min((o.max_len - 1) / ps, n * k), n);
  block = std::min(block, b * k);
  return {n * ps * block, ps * chunk_pages};
}

Status GenerateTrace(const TraceGenOptions& o, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(ValidateTraceGenOptions(o));
  Json generator{{"tool", "kvshard gen"},
                 {"seed", o.seed},
                 {"records", o.records},
                 {"batch_size", o.batch_size},
                 {"max_len", o.max_len},
                 {"cp_size", o.cp_size},
                 {"share_percent", o.share_percent},
                 {"edge_heavy", o.edge_heavy},
                 {"layers", o.num_layers},
                 {"radix", o.radix}};
  if (o.cp_records) generator["cp_records"] = true;  // only when asked: the other traces keep their bytes
  if (o.allocator_only) generator["allocator_only"] = true;
  Json header{{"kvshard_trace", kTraceVersion},
              {"allocator",
               {{"shard_size", o.shard_size},
                {"page_size", o.page_size},
                {"pages_per_rank", o.pages_per_rank},
                {"need_sort", o.need_sort}}}};
  if (o.num_layers > 0) {
    const ScratchBound bound = TraceGenScratchBound(o);
    header["pool"] = Json{{"max_prefix_tokens", bound.max_prefix_tokens},
                          {"chunk_tokens", bound.chunk_tokens},
                          {"num_layers", o.num_layers},
                          {"row_words", o.row_words},
                          {"payload_seed", static_cast<int64_t>(Mix64(o.seed ^ 0x706f6f6cULL) >> 1)}};
  }
  header["generator"] = generator;
  StatusOr<std::unique_ptr<Replayer>> replayer = Replayer::Create(header);
  if (!replayer.ok()) {
    return InvalidArgument("num_layers: the pipeline's pool does not fit (", replayer.status().message(),
                           "); use num_layers 0, or a smaller batch_size, max_len, pages_per_rank or row_words");
  }
  TraceWriter writer(&out);
  KVSHARD_RETURN_IF_ERROR(writer.WriteHeader(header));
  KVSHARD_RETURN_IF_ERROR(Generator(o, std::move(*replayer), &writer).Run());
  return writer.Finish("gen");
}

}  // namespace kvshard::replay

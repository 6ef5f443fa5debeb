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
#include "replay/trace_gen_internal.h"
#include "core/gather_plan.h"
#include "core/hash.h"
#include "core/spec.h"
#include "core/trace.h"

namespace kvshard::replay {
namespace {

using trace_gen::CeilDivide;
using trace_gen::Generator;

// Documents a request revisits are drawn from the most recent ones (older ones are likely evicted).
constexpr int64_t kRecentDocs = 32;
// With the radix cache, the longest request (a document request's records list its tokens).
constexpr int64_t kMaxDocTokens = int64_t{1} << 20;
// With the radix cache, the chance that a request is a document request (else an allocator chain as without).
constexpr int64_t kDocPercent = 50;

}  // namespace

namespace trace_gen {

Status Generator::Run() {
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

StatusOr<Json> Generator::Emit(Json rec, const std::vector<std::string>& keep, const std::vector<std::string>& drop,
                               bool narrow) {
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

int64_t Generator::Length(int64_t most) {
  const int64_t ps = o_.page_size;
  if (o_.edge_heavy && rng_.Percent(50)) {
    const int64_t edges[] = {1, ps - 1, ps, ps + 1, 2 * ps, o_.cp_size - 1, 2 * o_.cp_size * ps + 1};
    return std::clamp<int64_t>(edges[rng_.Uniform(0, 6)], 1, most);
  }
  return rng_.Uniform(1, most);
}

std::vector<int64_t> Generator::Tokens(int64_t d, int64_t len) const {
  std::vector<int64_t> t(static_cast<size_t>(len));
  const Doc& doc = docs_[d];
  const uint64_t own = Mix64(o_.seed ^ Mix64(static_cast<uint64_t>(d)));
  const uint64_t root = Mix64(o_.seed ^ Mix64(static_cast<uint64_t>(doc.root)));
  for (int64_t i = 0; i < len; ++i) {
    t[i] = static_cast<int64_t>(Mix64((i < doc.shared ? root : own) + static_cast<uint64_t>(i)) & 0x7fff);
  }
  return t;
}

int64_t Generator::PickDoc() {
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

Status Generator::Place() {
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

Status Generator::UnlockAll(const std::vector<DocRequest>& docs) {
  for (const DocRequest& d : docs) {
    if (Full()) return Status::Ok();
    KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "dec_lock_ref"}, {"match", d.match}}).status());
  }
  return Status::Ok();
}

Status Generator::AllocBatch() {
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
  Json rec{
      {"op", "alloc"}, {"prefix_lens", prefix}, {"seq_lens", seq}, {"rotation_bases", bases}, {"last_locs", last_locs}};
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

Status Generator::FreeOne() {
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

Status Generator::FreeGroup() {
  Json frees = Json::array();
  const int64_t k = rng_.Uniform(1, std::min<int64_t>(3, static_cast<int64_t>(chains_.size())));
  for (int64_t i = 0; i < k; ++i) {
    const size_t c = static_cast<size_t>(rng_.Uniform(0, static_cast<int64_t>(chains_.size()) - 1));
    for (const auto& [id, held] : chains_[c].holders) frees.push_back(Json{{"request", id}});
    chains_.erase(chains_.begin() + static_cast<std::ptrdiff_t>(c));
  }
  return Emit(Json{{"op", "free_group"}, {"frees", frees}}).status();
}

}  // namespace trace_gen

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

// The synthetic trace generator: inputs drawn from a seeded PRNG, every record run through the replayer so
// that its expect is the reference's answer (or {"error": ...} when the reference rejects it).
#include "cli/trace_gen.h"

#include <algorithm>
#include <ostream>
#include <utility>
#include <vector>

#include "cli/replay.h"
#include "core/gather_plan.h"
#include "core/spec.h"
#include "core/trace.h"

namespace kvshard::cli {
namespace {

// splitmix64: the same stream on every platform (std distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  bool Percent(int64_t p) { return Uniform(0, 99) < p; }

 private:
  uint64_t state_;
};

// A live chain: its tokens, base, pages in position order, and the alloc requests holding them.
struct Chain {
  int64_t len = 0;
  int64_t base = 0;
  std::vector<int64_t> pages;
  std::vector<std::pair<int64_t, int64_t>> holders;  // (request id, pages it still holds), in position order
};

class Generator {
 public:
  Generator(const TraceGenOptions& o, std::unique_ptr<Replayer> replayer, std::ostream& out)
      : o_(o), rng_(o.seed), replayer_(std::move(replayer)), out_(out) {}

  Status Run() {
    while (written_ < o_.records) {
      const int64_t roll = rng_.Uniform(0, 99);
      if (roll < 4) {
        KVSHARD_RETURN_IF_ERROR(Place());
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
  // Runs `rec` through the reference, attaches its answer as expect (the `keep` keys when given, less the `drop`
  // keys of each "ranks" entry) and writes it. Returns the answer, or null when the reference rejected the
  // record (its expect is then the error).
  StatusOr<Json> Emit(Json rec, const std::vector<std::string>& keep = {}, const std::vector<std::string>& drop = {}) {
    TraceRecord record{written_ + 2, rec.at("op").get<std::string>(), rec};
    StatusOr<Json> got = replayer_->Execute(record);
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
    out_ << rec.dump() << "\n";
    ++written_;
    if (!got.ok()) return Json(nullptr);
    if (got->contains("aggregate_free_size")) {
      free_share_ = 100 * got->at("aggregate_free_size").get<int64_t>() / (o_.page_size * PoolPages());
    }
    return got;
  }

  static int64_t CeilDivide(int64_t a, int64_t b) { return (a + b - 1) / b; }
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

  Status Place() {
    Json rec{{"op", "place"}, {"shard_size", o_.shard_size}, {"page_size", o_.page_size},
             {"rank", rng_.Uniform(0, o_.shard_size - 1)}};
    std::vector<int64_t> locs;
    const int64_t count = rng_.Uniform(1, 16);
    for (int64_t i = 0; i < count; ++i) locs.push_back(rng_.Uniform(0, o_.shard_size * (o_.pages_per_rank + 1) * o_.page_size - 1));
    rec["locs"] = locs;
    return Emit(rec).status();
  }

  Status AllocBatch() {
    const int64_t ps = o_.page_size, n = o_.shard_size;
    const int64_t reqs = o_.edge_heavy && rng_.Percent(30) ? 1 : rng_.Uniform(1, o_.batch_size);
    std::vector<size_t> aligned;
    for (size_t c = 0; c < chains_.size(); ++c) {
      if (chains_[c].len % ps == 0) aligned.push_back(c);
    }
    std::vector<int64_t> prefix, seq, last_locs, chain_of;
    Json bases = Json::array();
    for (int64_t i = 0; i < reqs; ++i) {
      if (!aligned.empty() && rng_.Percent(o_.share_percent)) {
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
    Json rec{{"op", "alloc"}, {"prefix_lens", prefix}, {"seq_lens", seq}, {"rotation_bases", bases},
             {"last_locs", last_locs}};
    const int64_t first_id = next_request_;
    next_request_ += reqs;
    KVSHARD_ASSIGN_OR_RETURN(Json got, Emit(rec));
    if (got.is_null() || !got.at("ok").get<bool>()) return Status::Ok();
    Json requests = Json::array();
    std::vector<int64_t> extend;
    for (int64_t i = 0; i < reqs; ++i) {
      const std::vector<int64_t> pages = got.at("pages")[i].get<std::vector<int64_t>>();
      if (chain_of[i] < 0) {
        chains_.push_back(Chain{0, got.at("rotation_bases")[i].get<int64_t>(), {}, {}});
        chain_of[i] = static_cast<int64_t>(chains_.size()) - 1;
      }
      Chain& c = chains_[chain_of[i]];
      c.pages.insert(c.pages.end(), pages.begin(), pages.end());
      c.holders.emplace_back(first_id + i, static_cast<int64_t>(pages.size()));
      c.len = seq[i];
      requests.push_back(Json{{"prefix_len", prefix[i]}, {"seq_len", seq[i]}, {"pages", c.pages}});
      extend.push_back(seq[i] - prefix[i]);
    }
    KVSHARD_RETURN_IF_ERROR(GatherPlan(requests));
    return SplitAndRerange(extend, prefix);
  }

  Status GatherPlan(const Json& requests) {
    if (written_ >= o_.records) return Status::Ok();
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
    Json batch{{"shard_size", n}, {"page_size", ps}, {"pages_per_rank", o_.pages_per_rank},
               {"max_prefix_tokens", prefix_cap}, {"chunk_tokens", chunk_cap}, {"requests", requests}};
    // send_rows follow from send_local_pages (rows p*ps .. p*ps+ps-1): the expect keeps the pages only.
    return Emit(Json{{"op", "gather_plan"}, {"batch", batch}}, {"block_pages", "page_pos", "ranks"},
                {"send_rows"}).status();
  }

  Status SplitAndRerange(const std::vector<int64_t>& extend, const std::vector<int64_t>& prefix) {
    if (written_ >= o_.records) return Status::Ok();
    Json split{{"op", "split"}, {"cp_size", o_.cp_size}, {"cp_rank", rng_.Uniform(0, o_.cp_size - 1)},
               {"page_size", o_.page_size}, {"extend_lens", extend}, {"prefix_lens", prefix}};
    KVSHARD_RETURN_IF_ERROR(Emit(split, {"request_split_lists", "request_compute_split_lists", "request_kv_len_prev",
                                         "request_kv_len_next", "request_last_token_owner",
                                         "request_last_token_local_offset", "compute_padding_enabled"})
                                .status());
    if (written_ >= o_.records) return Status::Ok();
    Json rerange{{"op", "rerange"}, {"cp_size", o_.cp_size}, {"page_size", o_.page_size}, {"extend_lens", extend},
                 {"prefix_lens", prefix}};
    return Emit(rerange, {"max_rank_token", "per_rank_tokens", "source_rows"}).status();
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
  std::ostream& out_;
  int64_t written_ = 0, next_request_ = 0, free_share_ = 100;
  std::vector<Chain> chains_;
};

}  // namespace

Status ValidateTraceGenOptions(const TraceGenOptions& o) {
  if (o.records < 0) return InvalidArgument("--records: must be >= 0, got ", o.records);
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec({o.shard_size, o.page_size}));
  if (o.pages_per_rank < 1 || o.pages_per_rank >= kMaxPoolLogicalPages / o.shard_size) {
    return InvalidArgument("--pages-per-rank: must be in [1, ", kMaxPoolLogicalPages / o.shard_size, "), got ",
                           o.pages_per_rank);
  }
  if (o.cp_size < 1 || o.cp_size > kMaxShardSize) return InvalidArgument("--cp-size: must be in [1, ", kMaxShardSize, "]");
  if (o.batch_size < 1 || o.batch_size > 4096) return InvalidArgument("--batch-size: must be in [1, 4096]");
  if (o.max_len < 1 || o.max_len > (int64_t{1} << 32)) return InvalidArgument("--max-len: must be in [1, 2^32]");
  if (o.share_percent < 0 || o.share_percent > 100) return InvalidArgument("--share-percent: must be in [0, 100]");
  return Status::Ok();
}

Status GenerateTrace(const TraceGenOptions& o, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(ValidateTraceGenOptions(o));
  Json generator{{"tool", "kvshard gen"}, {"seed", o.seed}, {"records", o.records}, {"batch_size", o.batch_size},
                 {"max_len", o.max_len}, {"cp_size", o.cp_size}, {"share_percent", o.share_percent},
                 {"edge_heavy", o.edge_heavy}};
  Json header{{"kvshard_trace", kTraceVersion},
              {"allocator", {{"shard_size", o.shard_size}, {"page_size", o.page_size},
                             {"pages_per_rank", o.pages_per_rank}, {"need_sort", o.need_sort}}},
              {"generator", generator}};
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<Replayer> replayer, Replayer::Create(header));
  out << header.dump() << "\n";
  return Generator(o, std::move(replayer), out).Run();
}

}  // namespace kvshard::cli

// The simulator's observer that writes a trace as the simulation runs: one line per call, built as text (the
// records' lists can be long, so no JSON tree), written at once; memory is the live requests and one line.
#include "sim/sim_trace.h"

#include <algorithm>
#include <charconv>
#include <ostream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/trace.h"
#include "cpu_fast/gather_plan.h"

namespace kvshard::sim {
namespace {

void AppendInt(std::string& s, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

void AppendInts(std::string& s, const std::vector<int64_t>& v, int64_t scale = 1) {
  s += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    AppendInt(s, v[i] * scale);
  }
  s += ']';
}

void AppendBase(std::string& s, int64_t base) {
  if (base == kNewChain) {
    s += "null";
  } else {
    AppendInt(s, base);
  }
}

// Sizes the pool's scratch: the largest gather span and chunk of the first max_batches batches (pass one).
class ScratchProbe : public SimObserver {
 public:
  explicit ScratchProbe(int64_t max_batches) : max_batches_(max_batches) {}
  void OnStart(const AllocatorConfig& a) override { allocator_ = a; }
  void OnBatch(const std::vector<int64_t>&, const std::vector<ExtendRequest>& batch) override {
    const int64_t n = allocator_.shard_size, ps = allocator_.page_size;
    int64_t block_pages = 0, chunk_pages = 0;
    for (const ExtendRequest& r : batch) {
      block_pages += (r.prefix_len / ps + n - 1) / n;  // the plan's sum of ceil(K_i / N)
      chunk_pages += PositionPages(r.seq_len, ps) - r.prefix_len / ps;
    }
    max_prefix_tokens_ = std::max(max_prefix_tokens_, n * ps * block_pages);
    chunk_tokens_ = std::max(chunk_tokens_, ps * chunk_pages);
    ++batches_;
  }
  bool Done() const override { return max_batches_ > 0 && batches_ >= max_batches_; }

  AllocatorConfig allocator_;
  int64_t max_batches_, batches_ = 0, max_prefix_tokens_ = 0, chunk_tokens_ = 0;
};

// Writes every observed call as a trace record whose expect is the simulator's answer.
class TraceEmitter : public SimObserver {
 public:
  TraceEmitter(const SimTraceOptions& o, int64_t max_prefix_tokens, int64_t chunk_tokens, std::ostream& out)
      : o_(o), writer_(&out) {
    counts_.max_prefix_tokens = max_prefix_tokens;
    counts_.chunk_tokens = chunk_tokens;
  }

  void OnStart(const AllocatorConfig& a) override {
    n_ = a.shard_size;
    ps_ = a.page_size;
    ppr_ = a.pages_per_rank;
    Json h;
    h["allocator"] = {{"shard_size", n_}, {"page_size", ps_}, {"pages_per_rank", ppr_}, {"need_sort", a.need_sort}};
    if (o_.num_layers > 0) {
      h["pool"] = {{"max_prefix_tokens", counts_.max_prefix_tokens},
                   {"chunk_tokens", counts_.chunk_tokens},
                   {"num_layers", o_.num_layers},
                   {"row_words", o_.row_words}};
    }
    h["generator"] = o_.generator;
    (void)writer_.WriteHeader(h);  // a failed write leaves the stream failed: Finish reports it
  }

  void OnMatch(int64_t request, const std::vector<uint64_t>& fps, int64_t tokens, const PrefixCache::Match& m,
               bool lock) override {
    if (closed_) return;
    Match(fps, tokens, m, lock);
    if (lock) live_[request].match = matches_ - 1;
  }

  void OnRelock(int64_t request, const std::vector<uint64_t>& fps, int64_t tokens,
                const PrefixCache::Match& m) override {
    if (closed_) return;
    Match(fps, tokens, m, /*lock=*/true);
    Live& live = live_[request];
    Begin("dec_lock_ref");
    s_ += ", \"match\": ";
    AppendInt(s_, live.match);
    s_ += ", \"expect\": {\"locked_matches\": ";
    AppendInt(s_, static_cast<int64_t>(live_.size()));
    s_ += "}";
    End();
    live.match = matches_ - 1;
  }

  void OnAlloc(const std::vector<int64_t>& requests, const AllocBatch& b, bool ok, const ExtendPages& out,
               const fast::PageInterleaveAllocator& a) override {
    if (closed_) return;
    Begin("alloc");
    s_ += ", \"prefix_lens\": ";
    AppendInts(s_, b.prefix_lens);
    s_ += ", \"seq_lens\": ";
    AppendInts(s_, b.seq_lens);
    s_ += ", \"rotation_bases\": [";
    for (size_t i = 0; i < b.rotation_bases.size(); ++i) {
      if (i) s_ += ", ";
      AppendBase(s_, b.rotation_bases[i]);
    }
    s_ += "], \"last_locs\": ";
    AppendInts(s_, b.last_locs);
    s_ += ", \"expect\": {\"ok\": ";
    s_ += ok ? "true" : "false";
    if (ok) {
      s_ += ", \"rotation_bases\": ";
      AppendInts(s_, out.rotation_bases);
      s_ += ", \"pages\": [";
      for (size_t i = 0; i < requests.size(); ++i) {
        std::vector<int64_t> pages(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
        if (i) s_ += ", ";
        AppendInts(s_, pages);
        std::vector<int64_t>& own = live_[requests[i]].own_pages;
        own.insert(own.end(), pages.begin(), pages.end());
      }
      s_ += ']';
    }
    AppendAllocatorState(a);
    s_ += '}';
    End();
    ++counts_.allocs;
    counts_.deferred_allocs += !ok;
  }

  void OnEvict(int64_t num_pages, const std::vector<int64_t>& freed, int64_t cached_pages) override {
    if (closed_) return;
    Evict(num_pages, &freed, cached_pages);
    cached_pages_ = cached_pages;
    ++counts_.evicts;
    counts_.evicted_pages += static_cast<int64_t>(freed.size());
  }

  void OnBatch(const std::vector<int64_t>&, const std::vector<ExtendRequest>& batch) override {
    if (closed_) return;
    if (o_.num_layers > 0) Pipeline(batch);
    if (++counts_.batches == o_.max_batches) Close(/*truncated=*/true);
  }

  void OnFree(const std::vector<int64_t>& pages, const fast::PageInterleaveAllocator& a) override {
    if (closed_) return;
    Free(pages, &a);
    ++counts_.frees;
  }

  void OnInsert(int64_t request, const std::vector<uint64_t>& fps, const std::vector<int64_t>& pages,
                int64_t rotation_base, const PrefixCache::InsertResult& r, int64_t cached_pages) override {
    if (closed_) return;
    // The inserted pages leave the request: grafted into the tree, or freed (duplicates; all when declined).
    if (const auto it = live_.find(request); it != live_.end()) {
      const std::unordered_set<int64_t> gone(pages.begin(), pages.end());
      std::vector<int64_t>& own = it->second.own_pages;
      own.erase(std::remove_if(own.begin(), own.end(), [&](int64_t p) { return gone.count(p) > 0; }), own.end());
    }
    Begin("insert");
    s_ += ", \"tokens\": ";
    AppendTokens(fps, static_cast<int64_t>(fps.size()) * ps_);
    s_ += ", \"pages\": ";
    AppendInts(s_, pages);
    s_ += ", \"rotation_base\": ";
    AppendInt(s_, rotation_base);
    s_ += ", \"expect\": {\"declined\": ";
    s_ += r.declined ? "true" : "false";
    s_ += ", \"new_pages\": ";
    AppendInt(s_, r.new_pages);
    s_ += ", \"freed_pages\": ";
    AppendInt(s_, static_cast<int64_t>(r.freed.size()));
    s_ += ", \"cached_pages\": ";
    AppendInt(s_, cached_pages);
    s_ += "}";
    End();
    cached_pages_ = cached_pages;
    ++counts_.inserts;
    counts_.declined += r.declined;
    counts_.duplicate_pages += r.declined ? 0 : static_cast<int64_t>(r.freed.size());
  }

  void OnUnlock(int64_t request) override {
    if (closed_) return;
    Unlock(request);
    ++counts_.unlocks;
  }

  // Ends the trace after the simulation: what is still held is released, then the cache is emptied.
  Status Finish() {
    if (!closed_) Close(/*truncated=*/false);
    return writer_.Finish("emit_trace");
  }

  const SimTraceCounts& counts() const { return counts_; }

 private:
  // A request the trace has matched and not yet unlocked: its locking match and the pages allocated to it.
  struct Live {
    int64_t match = 0;
    std::vector<int64_t> own_pages;
  };

  // A match_prefix of the first `tokens` tokens; with `lock`, a locking one (its handle is matches_ - 1 after).
  void Match(const std::vector<uint64_t>& fps, int64_t tokens, const PrefixCache::Match& m, bool lock) {
    Begin("match_prefix");
    s_ += ", \"tokens\": ";
    AppendTokens(fps, tokens);
    s_ += lock ? ", \"lock\": true" : "";
    s_ += ", \"expect\": {\"prefix_len\": ";
    AppendInt(s_, m.pages_matched * ps_);
    s_ += ", \"pages\": ";
    AppendInts(s_, m.pages);
    s_ += ", \"rotation_base\": ";
    AppendBase(s_, m.pages.empty() ? kNewChain : m.rotation_base);
    s_ += ", \"last_loc\": ";
    AppendInt(s_, m.pages.empty() ? 0 : m.pages.back() * ps_ + ps_ - 1);
    if (lock) {
      s_ += ", \"match\": ";
      AppendInt(s_, matches_++);
      ++counts_.matches;
    }
    s_ += "}";
    End();
  }

  void Begin(const char* op) {
    s_.clear();
    s_ += "{\"op\": \"";
    s_ += op;
    s_ += '"';
  }
  void End() {
    s_ += '}';
    (void)writer_.WriteRecordText(s_);  // a failed write leaves the stream failed: Finish reports it
    ++counts_.records;
  }

  // The first `count` tokens of a prompt: page k of the full pages is ps copies of its fingerprint's token id
  // (ids from 1, one per distinct fingerprint, so equal pages <=> equal token blocks); later tokens are 0 (a
  // partial page, never cached).
  void AppendTokens(const std::vector<uint64_t>& fps, int64_t count) {
    s_ += '[';
    for (int64_t t = 0; t < count; ++t) {
      if (t) s_ += ", ";
      const int64_t page = t / ps_;
      if (page >= static_cast<int64_t>(fps.size())) {
        s_ += '0';
        continue;
      }
      if (t % ps_ == 0) token_ = tokens_.try_emplace(fps[page], static_cast<int64_t>(tokens_.size()) + 1).first->second;
      AppendInt(s_, token_);
    }
    s_ += ']';
  }

  void AppendAllocatorState(const fast::PageInterleaveAllocator& a) {
    s_ += ", \"class_free_page_counts\": ";
    AppendInts(s_, a.class_free_page_counts());
    s_ += ", \"available_size\": ";
    AppendInt(s_, a.available_size());
    s_ += ", \"aggregate_free_size\": ";
    AppendInt(s_, a.aggregate_free_size());
  }

  // A free of `pages` by slot list; with `a`, the allocator state after it is the expect.
  void Free(const std::vector<int64_t>& pages, const fast::PageInterleaveAllocator* a) {
    Begin("free");
    s_ += ", \"locs\": ";
    AppendInts(s_, pages, ps_);
    if (a) {
      s_ += ", \"expect\": {\"op\": \"free\"";
      AppendAllocatorState(*a);
      s_ += '}';
    }
    End();
  }

  void Unlock(int64_t request) {
    const auto it = live_.find(request);
    Begin("dec_lock_ref");
    s_ += ", \"match\": ";
    AppendInt(s_, it->second.match);
    live_.erase(it);
    s_ += ", \"expect\": {\"locked_matches\": ";
    AppendInt(s_, static_cast<int64_t>(live_.size()));
    s_ += "}";
    End();
  }

  // An evict of num_pages; with `freed`, the pages it frees in order are expected too.
  void Evict(int64_t num_pages, const std::vector<int64_t>* freed, int64_t cached_pages) {
    Begin("evict");
    s_ += ", \"num_pages\": ";
    AppendInt(s_, num_pages);
    s_ += ", \"expect\": {\"evicted_pages\": ";
    AppendInt(s_, freed ? static_cast<int64_t>(freed->size()) : num_pages);
    if (freed) {
      s_ += ", \"freed\": ";
      AppendInts(s_, *freed);
    }
    s_ += ", \"cached_pages\": ";
    AppendInt(s_, cached_pages);
    s_ += "}";
    End();
  }

  // begin_shard_extend (the plan of cpu_fast/, as the simulator builds it, at the header's capacities), per
  // layer set_kv_buffer and get_key_buffer of every slot of the batch (replay's defaults), end_shard_extend. The
  // reads' scratch_rows are not expected: page_pos (expected) determines them.
  void Pipeline(const std::vector<ExtendRequest>& requests) {
    const int64_t before = counts_.records;
    ExtendBatch eb{n_, ps_, ppr_, counts_.max_prefix_tokens, counts_.chunk_tokens, requests};
    Begin("begin_shard_extend");
    s_ += ", \"requests\": [";
    std::vector<int64_t> chunk;
    for (size_t i = 0; i < requests.size(); ++i) {
      const ExtendRequest& r = requests[i];
      if (i) s_ += ", ";
      s_ += "{\"prefix_len\": ";
      AppendInt(s_, r.prefix_len);
      s_ += ", \"seq_len\": ";
      AppendInt(s_, r.seq_len);
      s_ += ", \"pages\": ";
      AppendInts(s_, r.pages);
      s_ += '}';
      for (int64_t pos = r.prefix_len; pos < r.seq_len; ++pos) chunk.push_back(r.pages[pos / ps_] * ps_ + pos % ps_);
    }
    s_ += "], \"expect\": ";
    if (Status st = planner_.Build(eb, &plan_, /*with_send_rows=*/false); !st.ok()) {
      s_ += Json{{"error", st.message()}}.dump();  // replay must reject the batch the same way; no extend opens
      End();
      counts_.pipeline_records += counts_.records - before;
      return;
    }
    s_ += "{\"block_pages\": ";
    AppendInt(s_, plan_.block_pages);
    s_ += ", \"n_prefix_slots\": ";
    AppendInt(s_, plan_.n_prefix_slots);
    s_ += ", \"trash_page\": ";
    AppendInt(s_, plan_.trash_page);
    s_ += ", \"chunk_base_page\": ";
    AppendInt(s_, plan_.chunk_base_page);
    s_ += ", \"page_pos\": [";
    for (size_t i = 0; i < plan_.mapped_pages.size(); ++i) {
      if (i) s_ += ", ";
      s_ += '[';
      AppendInt(s_, plan_.mapped_pages[i]);
      s_ += ", ";
      AppendInt(s_, plan_.mapped_scratch_pages[i]);
      s_ += ']';
    }
    s_ += "], \"ranks\": [";
    for (size_t r = 0; r < plan_.ranks.size(); ++r) {
      if (r) s_ += ", ";
      s_ += "{\"rank\": ";
      AppendInt(s_, plan_.ranks[r].rank);
      s_ += ", \"send_local_pages\": ";
      AppendInts(s_, plan_.ranks[r].send_local_pages);
      s_ += '}';
    }
    s_ += "], \"epoch\": ";
    AppendInt(s_, ++epoch_);
    s_ += ", \"out_cache_loc\": ";
    AppendInts(s_, chunk);
    s_ += '}';
    End();
    for (int64_t layer = 0; layer < o_.num_layers; ++layer) {
      Begin("set_kv_buffer");
      s_ += ", \"layer\": ";
      AppendInt(s_, layer);
      s_ += ", \"expect\": {\"staged\": true, \"generation\": ";
      AppendInt(s_, ++generation_);
      s_ += "}";
      End();
      Begin("get_key_buffer");
      s_ += ", \"layer\": ";
      AppendInt(s_, layer);
      s_ += ", \"expect\": {\"slot\": ";
      AppendInt(s_, layer % 2);
      s_ += "}";
      End();
    }
    Begin("end_shard_extend");
    End();
    counts_.pipeline_records += counts_.records - before;
  }

  // Releases what the trace still holds (each live request's pages, then its lock, by request), evicts the
  // whole cache and checks that every page is free again.
  void Close(bool truncated) {
    const int64_t before = counts_.records;
    std::vector<int64_t> ids;
    for (const auto& [id, live] : live_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (int64_t id : ids) {
      if (!live_.at(id).own_pages.empty()) Free(live_.at(id).own_pages, nullptr);
      Unlock(id);
    }
    if (cached_pages_ > 0) Evict(cached_pages_, nullptr, 0);
    Begin("free");
    s_ += ", \"locs\": [], \"expect\": {\"class_free_page_counts\": ";
    AppendInts(s_, std::vector<int64_t>(n_, ppr_));
    s_ += ", \"aggregate_free_size\": ";
    AppendInt(s_, n_ * ppr_ * ps_);
    s_ += "}";
    End();
    counts_.closing_records = counts_.records - before;
    counts_.truncated = truncated;
    closed_ = true;
    live_.clear();
    tokens_.clear();
  }

  const SimTraceOptions& o_;
  kvshard::TraceWriter writer_;
  SimTraceCounts counts_;
  int64_t n_ = 1, ps_ = 1, ppr_ = 0;
  std::string s_;                                 // the record being built
  std::unordered_map<uint64_t, int64_t> tokens_;  // fingerprint -> token id
  int64_t token_ = 0;
  std::unordered_map<int64_t, Live> live_;  // by request
  int64_t matches_ = 0, epoch_ = 0, generation_ = 0, cached_pages_ = 0;
  bool closed_ = false;
  fast::GatherPlanner planner_;
  GatherPlan plan_;
};

}  // namespace

StatusOr<SimTraceCounts> SimulateWithTrace(const Workload& workload, const SimConfig& config,
                                           const SimTraceOptions& options, std::ostream& out, SimResult* result,
                                           const SimProgress& progress, SimRecord* record) {
  if (options.max_batches < 0) return InvalidArgument("max_batches: must be >= 0, got ", options.max_batches);
  if (options.num_layers < 0 || options.num_layers > 4096) {
    return InvalidArgument("num_layers: must be in [0, 4096], got ", options.num_layers);
  }
  SimConfig c = config;
  int64_t max_prefix_tokens = 0, chunk_tokens = 0;
  if (options.num_layers > 0) {  // pass one: the scratch the emitted batches need, and the replay's memory
    ScratchProbe probe(options.max_batches);
    c.observer = &probe;
    KVSHARD_ASSIGN_OR_RETURN(SimResult ignored, Simulate(workload, c));
    (void)ignored;
    const AllocatorConfig& a = probe.allocator_;
    const int64_t slots = a.shard_size * (a.pages_per_rank + 1) * a.page_size;
    const int64_t bytes =
        8 * options.row_words *
        (slots * options.num_layers + a.shard_size * (probe.max_prefix_tokens_ + probe.chunk_tokens_));
    if (bytes > kMaxEmitReplayBytes) {
      return InvalidArgument("num_layers: replaying the pipeline of this pool (", slots, " slots, ", options.num_layers,
                             " layers, held sharded and unsharded) needs ", bytes >> 20, " MiB, more than ",
                             kMaxEmitReplayBytes >> 20, " MiB: bound the pool with cache_tokens, or give num_layers 0");
    }
    max_prefix_tokens = probe.max_prefix_tokens_;
    chunk_tokens = probe.chunk_tokens_;
  }
  TraceEmitter writer(options, max_prefix_tokens, chunk_tokens, out);
  c.observer = &writer;
  KVSHARD_ASSIGN_OR_RETURN(*result, Simulate(workload, c, progress, record));
  KVSHARD_RETURN_IF_ERROR(writer.Finish());
  return writer.counts();
}

}  // namespace kvshard::sim

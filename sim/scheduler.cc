// SGLang's scheduling pass on a sharded prefill node, literally: get_new_batch_prefill with its PrefillAdder
// (schedule_policy.py, kv-shard branch) — the KV budget with the N*ps per-request reserve and max_new_tokens 1
// (PrefillBootstrapQueue._process_req), the assembly-scratch gate (_kv_shard_reserve_scratch), page-floored chunk
// boundaries (add_chunked_req, add_one_req), and SchedulePolicy.calc_priority (fcfs, lpm). SWA, mamba, dLLM,
// hierarchical cache, priorities and the prefill delayer are not modelled (docs/simulate.md).
#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_set>

#include "core/hash.h"
#include "sim/simulation.h"

namespace kvshard::sim::internal {
namespace {

// SGLang's AddReqResult.
enum class AddResult { kContinue, kNoToken, kOther };

constexpr int64_t kMaxNewTokens = 1;  // PrefillBootstrapQueue._process_req: max_new_tokens = 1 on a prefill node
constexpr int64_t kInBatchCheckThreshold = 32;         // IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD
constexpr int64_t kInBatchDeprioritizeThreshold = 32;  // IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD
constexpr size_t kLpmQueueLimit = 128;                 // _determine_active_policy: fcfs above this many waiting

// PrefillAdder's budget state for one pass (running_batch is empty on a prefill node: no decode offsets).
class PrefillAdder {
 public:
  PrefillAdder(const SimConfig& c, const ScratchSpec& scratch, const fast::PageInterleaveAllocator& alloc,
               const PrefixCache& cache)
      : c_(c), scratch_(scratch), alloc_(alloc), cache_(cache) {
    ps_ = c.page_size;
    granule_ = c.shard_size > 1 ? ps_ : 0;
    per_req_token_overhead_ = granule_ ? c.shard_size * granule_ : ps_;
    rem_input_tokens_ = c.max_prefill_tokens;
    if (c.chunked_prefill_size > 0) rem_chunk_tokens_ = c.chunked_prefill_size;
  }

  int64_t Available() const { return alloc_.available_size() + cache_.evictable_pages() * ps_; }
  int64_t RemTotalTokens() const { return Available() - rem_total_token_offset_; }
  int64_t CurRemTokens() const { return Available() - cur_rem_token_offset_; }
  int64_t CeilPaged(int64_t tokens) const { return (tokens + ps_ - 1) / ps_ * ps_; }
  const std::optional<int64_t>& rem_chunk_tokens() const { return rem_chunk_tokens_; }

  AddResult BudgetState() const {
    if (RemTotalTokens() <= 0 || CurRemTokens() <= 0) return AddResult::kNoToken;
    if (rem_input_tokens_ <= 0) return AddResult::kOther;
    if (rem_chunk_tokens_ && *rem_chunk_tokens_ <= 0) return AddResult::kOther;
    return AddResult::kContinue;
  }

  void UpdateBudget(int64_t extend_input_len, int64_t max_new_tokens) {
    extend_input_len = CeilPaged(extend_input_len);
    rem_total_token_offset_ += extend_input_len + max_new_tokens + per_req_token_overhead_;
    cur_rem_token_offset_ += extend_input_len + per_req_token_overhead_;
    rem_input_tokens_ -= extend_input_len;
    if (rem_chunk_tokens_) *rem_chunk_tokens_ -= extend_input_len;
  }

  // _kv_shard_reserve_scratch; `first_failed` is set when even the first reservation of the pass does not fit
  // (SGLang raises: a silent livelock otherwise).
  bool ReserveScratch(int64_t prefix_len, int64_t extend_len, bool* first_failed) {
    if (!granule_) return true;
    const int64_t n = c_.shard_size;
    const int64_t block = block_bound_pages_ + ((prefix_len / granule_) + n - 1) / n;
    const int64_t chunk = chunk_pages_ + (extend_len + granule_ - 1) / granule_;
    if (n * block * granule_ > scratch_.max_prefix_tokens || chunk * granule_ > scratch_.chunk_tokens) {
      if (block_bound_pages_ == 0 && chunk_pages_ == 0) *first_failed = true;
      return false;
    }
    block_bound_pages_ = block;
    chunk_pages_ = chunk;
    return true;
  }

  // add_chunked_req: the continuing request's next chunk length (its extend), budget charged. `off_page` is set
  // when SGLang's fallback (rem_chunk_tokens when flooring leaves nothing) would end the chunk off the page.
  int64_t AddChunkedReq(int64_t prefix_len, int64_t input_len, bool* scratch_failed, bool* off_page) {
    int64_t rem = std::min(*rem_chunk_tokens_, RemTotalTokens());
    if (rem <= 0) rem = *rem_chunk_tokens_;
    // kv_shard_granule; at N = 1 (SGLang's unsharded engine, no granule) the model floors to the page too: its
    // pool is the page-interleave allocator, which takes page-aligned extends only.
    const int64_t granule = granule_ ? granule_ : ps_;
    const int64_t floored = (prefix_len + rem) / granule * granule - prefix_len;
    rem = floored > 0 ? floored : *rem_chunk_tokens_;
    if (floored <= 0 && rem < input_len - prefix_len && (prefix_len + rem) % ps_ != 0) {
      // SGLang's alloc_extend asserts on the next chunk's unaligned prefix; the model keeps the page.
      *off_page = true;
      rem = rem / ps_ * ps_;
    }
    const int64_t cand = input_len - prefix_len;
    const bool truncated = cand > rem;
    const int64_t new_len = std::min(cand, rem);
    bool first_failed = false;
    if (!ReserveScratch(prefix_len, new_len, &first_failed)) *scratch_failed = true;
    UpdateBudget(new_len, truncated ? 0 : kMaxNewTokens);
    return new_len;
  }

  int64_t rem_input_tokens() const { return rem_input_tokens_; }
  int64_t per_req_token_overhead() const { return per_req_token_overhead_; }
  int64_t granule() const { return granule_; }

 private:
  const SimConfig& c_;
  const ScratchSpec& scratch_;
  const fast::PageInterleaveAllocator& alloc_;
  const PrefixCache& cache_;
  int64_t ps_ = 1, granule_ = 0, per_req_token_overhead_ = 0;
  int64_t rem_input_tokens_ = 0;
  std::optional<int64_t> rem_chunk_tokens_;
  int64_t rem_total_token_offset_ = 0, cur_rem_token_offset_ = 0;
  int64_t block_bound_pages_ = 0, chunk_pages_ = 0;
};

}  // namespace

PrefixCache::Match Simulation::Match(Req& r, bool lock) {
  const int64_t ps = c_.page_size;
  const int64_t match_tokens = r.w->input_tokens - 1;  // SGLang matches at most len - 1: one token is computed
  PrefixCache::Match m = cache_.MatchPrefix(r.fps, match_tokens / ps);
  if (lock) cache_.Lock(m.node);
  return m;
}

void Simulation::SortWaiting() {
  if (c_.schedule_policy != SchedulePolicy::kLpm || waiting_.size() > kLpmQueueLimit) return;  // fcfs: as queued
  // _compute_prefix_matches: every waiting request matched in full (touching the tree as SGLang's match does);
  // those with a short match are checked against the prompts queued before them (in-batch prefix caching).
  const int64_t ps = c_.page_size;
  std::unordered_set<uint64_t> queued_prefixes;  // the waiting-queue tree, page-granular: hashes of page prefixes
  std::vector<std::pair<int64_t, Req*>> keyed;   // (sort key, request)
  for (Req* r : waiting_) {
    const PrefixCache::Match m = cache_.MatchPrefix(r->fps, static_cast<int64_t>(r->fps.size()));
    if (c_.observer) c_.observer->OnMatch(r->id, r->fps, static_cast<int64_t>(r->fps.size()) * ps, m, false);
    const int64_t matched = std::min(m.pages_matched * ps, r->w->input_tokens - 1);
    bool deprioritized = false;
    if (m.pages_matched * ps <= kInBatchCheckThreshold) {
      uint64_t h = 0x6a09e667f3bcc908ull;
      int64_t in_batch = 0;
      for (uint64_t fp : r->fps) {
        h = Mix64(h ^ fp);
        if (!queued_prefixes.count(h)) break;
        in_batch += ps;
      }
      if (in_batch >= kInBatchDeprioritizeThreshold) {
        deprioritized = true;
      } else {
        h = 0x6a09e667f3bcc908ull;
        for (uint64_t fp : r->fps) queued_prefixes.insert(h = Mix64(h ^ fp));
      }
    }
    keyed.push_back({deprioritized ? std::numeric_limits<int64_t>::max() : -matched, r});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) waiting_[i] = keyed[i].second;
}

std::vector<std::pair<Req*, int64_t>> Simulation::FormBatch() {
  std::vector<std::pair<Req*, int64_t>> batch;
  if (waiting_.empty() && chunked_ == nullptr) return batch;
  const int64_t allocatable = c_.max_running_requests - holding_slots_;  // get_num_allocatable_reqs
  if (allocatable <= 0 && chunked_ == nullptr) return batch;
  SortWaiting();
  PrefillAdder adder(c_, scratch_, *alloc_, cache_);
  const int64_t ps = c_.page_size;
  if (chunked_ != nullptr) {
    bool scratch_failed = false, off_page = false;
    const int64_t len = adder.AddChunkedReq(chunked_->done, chunked_->w->input_tokens, &scratch_failed, &off_page);
    if (scratch_failed) {
      Violation(
          StrCat("request ", chunked_->id, ": chunked request exceeds the sharded assembly scratch (SGLang raises)"));
    }
    if (off_page) {
      Violation(StrCat("request ", chunked_->id, ": add_chunked_req's fallback (rem_chunk_tokens ",
                       c_.chunked_prefill_size,
                       ") ends a chunk off the page; SGLang's alloc_extend asserts on the next chunk"));
    }
    batch.push_back({chunked_, len});
    if (chunked_->done + len == chunked_->w->input_tokens) chunked_ = nullptr;  // else still chunked
  }
  size_t admitted = 0;
  head_stop_ = HeadStop{};
  for (Req* r : waiting_) {
    if (static_cast<int64_t>(batch.size()) >= allocatable) break;  // can_run_list holds the chunked request too
    // add_one_req (the chunked request, when there is one, went first)
    if (c_.cp_size > 1 && !batch.empty()) break;  // dsa_prefill_cp_in_seq_split: one request per CP batch
    const PrefixCache::Match m = Match(*r, false);
    const int64_t prefix_len = m.pages_matched * ps;
    const int64_t input_len = r->w->input_tokens;
    const int64_t cand = input_len - prefix_len;
    const int64_t total_tokens = cand + kMaxNewTokens + adder.per_req_token_overhead();
    const std::optional<int64_t>& chunk_limit = adder.rem_chunk_tokens();
    AddResult res = AddResult::kContinue;
    int64_t extend = 0;
    bool chunked = false;
    auto report = [&](bool locked) {
      if (c_.observer) c_.observer->OnMatch(r->id, r->fps, input_len - 1, m, locked);
    };
    if (total_tokens >= adder.RemTotalTokens()) {
      report(false);
      ++r_.no_token_stops;
      if (batch.empty()) head_stop_ = {HeadStop::kKvBudget, total_tokens, adder.RemTotalTokens()};
      break;
    }
    const int64_t input_tokens = adder.CeilPaged(cand);
    if (!chunk_limit && !batch.empty() && input_tokens >= adder.rem_input_tokens()) {
      report(false);
      break;
    }
    cache_.Lock(m.node);  // with self._lock_node(req.last_node)
    bool first_failed = false;
    if (total_tokens >= adder.RemTotalTokens()) {
      res = AddResult::kNoToken;
    } else if (!chunk_limit || input_tokens <= *chunk_limit) {
      if (!adder.ReserveScratch(prefix_len, input_tokens, &first_failed)) {
        res = AddResult::kOther;
        ++r_.scratch_stops;
      } else {
        extend = cand;
        adder.UpdateBudget(input_tokens, kMaxNewTokens);
      }
    } else {
      int64_t trunc = *chunk_limit / ps * ps;
      int64_t now_input_len = (trunc + prefix_len) / ps * ps;
      if (adder.granule()) now_input_len = now_input_len / adder.granule() * adder.granule();
      trunc = now_input_len - prefix_len;
      if (*chunk_limit / ps * ps <= 0 || trunc <= 0) {
        res = AddResult::kOther;
      } else if (!adder.ReserveScratch(prefix_len, trunc, &first_failed)) {
        res = AddResult::kOther;
        ++r_.scratch_stops;
      } else {
        extend = trunc;
        chunked = true;
        adder.UpdateBudget(trunc, 0);
      }
    }
    if (first_failed) {
      Violation(StrCat("request ", r->id,
                       ": cannot fit the sharded assembly scratch even in an empty batch "
                       "(SGLang raises)"));
    }
    if (extend == 0) {      // not admitted: the _lock_node context releases the lock
      if (batch.empty()) {  // kNoToken: the lock took the matched prefix out of the evictable; else the scratch
        head_stop_ = res == AddResult::kNoToken ? HeadStop{HeadStop::kKvBudget, total_tokens, adder.RemTotalTokens()}
                                                : HeadStop{HeadStop::kScratch};
      }
      (void)cache_.Unlock(m.node);
      report(false);
      if (res == AddResult::kNoToken) ++r_.no_token_stops;
      break;
    }
    // Admitted: _req_inc_lock_ref keeps the lock; the match is the request's prefix.
    report(true);
    r->lock_node = m.node;
    r->pages = m.pages;
    r->done = prefix_len;
    r->base = m.pages_matched > 0 ? m.rotation_base : kNewChain;
    r->cached_at_admission = prefix_len;
    batch.push_back({r, extend});
    ++admitted;
    if (chunked) {  // adder.new_chunked_req (page-aligned prefixes: at most one truncation a pass)
      if (chunked_ != nullptr) Violation(StrCat("request ", r->id, ": a second chunked request in one pass"));
      chunked_ = r;
    }
    if (adder.BudgetState() != AddResult::kContinue) {
      if (adder.BudgetState() == AddResult::kNoToken) ++r_.no_token_stops;
      break;
    }
  }
  // The admitted leave the waiting queue (they are its first `admitted` entries, in order).
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(admitted));
  holding_slots_ += static_cast<int64_t>(admitted);
  return batch;
}

}  // namespace kvshard::sim::internal

// The prefill node's event loop (SGLang's event_loop_normal_disagg_prefill): arrivals through the bootstrap
// queue, a scheduling pass (scheduler.cc), the batch's allocation, plans and cost, each chunk cached so others can
// match (cache_unfinished_req) and its KV queued to the decode side, and a request's pages released when its
// transfer is done (release_kv_cache -> cache_finished_req).
#include "sim/simulator.h"

#include <algorithm>
#include <cmath>

#include "core/hash.h"
#include "cpu_fast/cp_split.h"
#include "sim/simulation.h"

namespace kvshard::sim {
namespace internal {
namespace {

// Page fingerprints of a prompt: the (block id, offset) runs each page covers, hashed; without block ids the
// request's own id makes every page unique.
std::vector<uint64_t> Fingerprints(const WorkloadRequest& w, int64_t id, int64_t block_tokens, int64_t ps) {
  const int64_t full = w.input_tokens / ps;
  std::vector<uint64_t> fps(full);
  for (int64_t k = 0; k < full; ++k) {
    if (block_tokens == 0 || w.block_hashes.empty()) {
      fps[k] = Mix64(Mix64(static_cast<uint64_t>(id) ^ 0x5bd1e995ull) ^ static_cast<uint64_t>(k));
      continue;
    }
    uint64_t fp = 0x243f6a8885a308d3ull;
    for (int64_t pos = k * ps; pos < (k + 1) * ps;) {
      const int64_t block = pos / block_tokens, offset = pos % block_tokens;
      const int64_t len = std::min((k + 1) * ps - pos, block_tokens - offset);
      fp =
          Mix64(fp ^ Mix64(static_cast<uint64_t>(w.block_hashes[block])) ^ (static_cast<uint64_t>(offset) << 32 | len));
      pos += len;
    }
    fps[k] = fp;
  }
  return fps;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - (q > 0 ? 1 : 0));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

Distribution Summarize(const std::vector<double>& v) {
  Distribution d;
  for (double x : v) {
    d.total += x;
    d.max = std::max(d.max, x);
  }
  d.p50 = Percentile(v, 0.5);
  d.p90 = Percentile(v, 0.9);
  d.p99 = Percentile(v, 0.99);
  return d;
}

}  // namespace

Status Simulation::Setup() {
  const int64_t n = c_.shard_size, ps = c_.page_size;
  int64_t pages_per_rank;
  if (c_.cache_tokens > 0) {
    pages_per_rank = c_.cache_tokens / (n * ps);
  } else {  // 8x every prompt's pages spread evenly (classes fill unevenly at large N), within the 2^24 pages
    int64_t pages = 0;
    for (const WorkloadRequest& q : w_.requests) pages += (q.input_tokens + ps - 1) / ps;
    pages_per_rank = 8 * ((pages + n - 1) / n) + c_.max_running_requests + 16;
    pages_per_rank = std::min(pages_per_rank, (int64_t{1} << 24) / n - 2);  // page_pos: N * (ppr + 2) <= 2^24
  }
  if (pages_per_rank < 1) {
    return InvalidArgument("cache_tokens: ", c_.cache_tokens,
                           " tokens give less than one page per rank (N * ps = ", n * ps, ")");
  }
  if (n * (pages_per_rank + 2) > (int64_t{1} << 24)) {
    return InvalidArgument(c_.cache_tokens > 0 ? "cache_tokens" : "page_size", ": the pool would have ",
                           n * (pages_per_rank + 1),
                           " logical pages, more than the allocator's 2^24 (use a larger "
                           "page_size or a bounded cache_tokens)");
  }
  for (size_t i = 0; i < w_.requests.size(); ++i) {
    if (w_.requests[i].input_tokens < 1) {  // SGLang needs one token to compute the first output token from
      return InvalidArgument("requests[", i, "].input_length: must be at least 1 token, got 0");
    }
    if (w_.requests[i].input_tokens > c_.context_length) {  // SGLang rejects the request (input too long)
      return InvalidArgument("requests[", i, "].input_length: ", w_.requests[i].input_tokens,
                             " tokens exceed context_length ", c_.context_length);
    }
  }
  scratch_ = NodeScratch(c_);
  AllocatorConfig ac;
  ac.shard_size = n;
  ac.page_size = ps;
  ac.pages_per_rank = pages_per_rank;
  ac.need_sort = c_.need_sort;
  ac.check_last_loc = true;
  KVSHARD_ASSIGN_OR_RETURN(fast::PageInterleaveAllocator a, fast::PageInterleaveAllocator::Create(ac));
  alloc_ = std::make_unique<fast::PageInterleaveAllocator>(std::move(a));
  r_.pool_pages_per_rank = pages_per_rank;
  if (c_.observer) c_.observer->OnStart(ac);
  return Status::Ok();
}

void Simulation::Violation(const std::string& what) {
  if (r_.violations++ == 0) r_.first_violation = StrCat("step ", step_, ": ", what);
}

Status Simulation::FreePages(const std::vector<int64_t>& pages) {
  if (pages.empty()) return Status::Ok();
  std::vector<int64_t> locs;
  locs.reserve(pages.size());
  for (int64_t p : pages) locs.push_back(p * c_.page_size);
  KVSHARD_RETURN_IF_ERROR(alloc_->Free(locs));
  if (c_.observer) c_.observer->OnFree(pages, *alloc_);
  return Status::Ok();
}

void Simulation::CheckConservation(const char* where) {
  int64_t free_pages = 0;
  for (int64_t x : alloc_->class_free_page_counts()) free_pages += x;
  const int64_t total = c_.shard_size * r_.pool_pages_per_rank;
  if (free_pages + own_pages_ + cache_.cached_pages() != total) {
    Violation(StrCat(where, ": ", free_pages, " free + ", own_pages_, " held by requests + ", cache_.cached_pages(),
                     " cached pages != the pool's ", total, " (a page leaked or was freed twice)"));
  }
}

void Simulation::SamplePages() {
  const std::vector<int64_t> counts = alloc_->class_free_page_counts();
  int64_t max = 0, sum = 0;
  for (int64_t free_pages : counts) {
    const int64_t used = r_.pool_pages_per_rank - free_pages;
    max = std::max(max, used);
    sum += used;
  }
  const double mean = static_cast<double>(sum) / counts.size();
  r_.pages_in_use_max = std::max(r_.pages_in_use_max, max);
  in_use_sum_ += mean;
  const double skew = mean > 0 ? max / mean : 1.0;
  r_.pages_in_use_skew_max = std::max(r_.pages_in_use_skew_max, skew);
  skew_sum_ += skew;
  ++samples_;
  if (rec_) rec_->OnPages(counts, r_.pool_pages_per_rank);
}

Status Simulation::RunBatch(const std::vector<std::pair<Req*, int64_t>>& batch, const ExtendPages& out) {
  const int64_t n = c_.shard_size, ps = c_.page_size;
  ExtendBatch eb;
  eb.shard_size = n;
  eb.page_size = ps;
  eb.pages_per_rank = r_.pool_pages_per_rank;
  BatchWork work;
  std::vector<int64_t> extend_lens, prefix_lens;
  int64_t prefix_pages = 0, chunk_pages = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Req& r = *batch[i].first;
    const int64_t chunk = batch[i].second;
    const int64_t base = out.rotation_bases[i];
    if (r.base != kNewChain && r.base != base) Violation(StrCat("request ", r.id, ": rotation base changed"));
    r.base = base;
    const int64_t first = static_cast<int64_t>(r.pages.size());
    r.pages.insert(r.pages.end(), out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
    r.own_pages += out.offsets[i + 1] - out.offsets[i];
    own_pages_ += out.offsets[i + 1] - out.offsets[i];
    for (int64_t k = first; !owners_ && k < static_cast<int64_t>(r.pages.size()); ++k) {
      if (r.pages[k] % n != (base + k) % n) {
        Violation(StrCat("request ", r.id, ": page ", r.pages[k], " at position ", k,
                         " breaks the cyclic owners of base ", base));
        break;
      }
    }
    eb.requests.push_back({r.done, r.done + chunk, r.pages});
    prefix_pages += r.done / ps;
    chunk_pages += (r.done + chunk + ps - 1) / ps - r.done / ps;
    extend_lens.push_back(chunk);
    prefix_lens.push_back(r.done);
    work.context_tokens += r.done + chunk;
    work.attention_pairs += chunk * (r.done + (chunk + 1) / 2);
    r.done += chunk;
  }
  if (c_.observer) {
    std::vector<int64_t> ids;
    for (const auto& [r, chunk] : batch) ids.push_back(r->id);
    c_.observer->OnBatch(ids, eb.requests);
  }
  PlanGather(eb, prefix_pages, chunk_pages, &work);
  work.requests = static_cast<int64_t>(batch.size());
  for (int64_t x : extend_lens) work.extend_tokens += x;
  work.compute_tokens = work.extend_tokens;
  work.staged_bytes_layer = work.extend_tokens * c_.kv_bytes_per_token_layer;
  if (c_.cp_size > 1) {
    if (Status s =
            fast::BuildBatchPageAlignedInSeqSplitPlanInto(extend_lens, prefix_lens, ps, c_.cp_size, 0, &cp_plan_);
        !s.ok()) {
      Violation(StrCat("CP split plan: ", s.message()));
    } else {
      int64_t padded = 0, padding = 0;
      for (size_t q = 0; q < extend_lens.size(); ++q) {
        padded += cp_plan_.request_compute_padded_tokens[q];
        padding += cp_plan_.request_compute_padding_tokens[q];
      }
      r_.cp_compute_tokens += padded;
      r_.cp_padding_tokens += padding;
      work.compute_tokens = padded;
      work.rerange_bytes_layer = padded * c_.kv_bytes_per_token_layer;
      CheckDirectWrites(batch, out);
    }
  }
  gathered_.push_back(static_cast<double>(work.gathered_bytes_layer));
  const BatchTime t = c_.cost.Predict(work, n, c_.cp_size);
  batch_us_.push_back(t.total_us);
  if (rec_) rec_->OnBatch(now_us_, work, t, r_.deferrals, r_.evicted_pages, r_.cached_tokens, r_.hit_blocks);
  now_us_ += t.total_us;
  r_.extend_tokens += work.extend_tokens;
  ++r_.batches;
  busy_us_ += t.total_us;
  for (const auto& [r, chunk] : batch) {
    if (r->scheduled_us < 0) r->scheduled_us = now_us_ - t.total_us;
    if (r->done == r->w->input_tokens) r->prefill_done_us = now_us_;
  }
  return Status::Ok();
}

Status Simulation::CacheUnfinished(Req& r) {
  const int64_t ps = c_.page_size;
  const int64_t full = r.done / ps;  // key_len: the page-aligned part of what is prefilled
  if (full == 0) return Status::Ok();
  const std::vector<uint64_t> fps(r.fps.begin(), r.fps.begin() + full);
  KVSHARD_ASSIGN_OR_RETURN(PrefixCache::InsertResult ins,
                           cache_.Insert(fps, std::vector<int64_t>(r.pages.begin(), r.pages.begin() + full), r.base));
  if (ins.declined) {  // the request keeps its own pages and its lock; the insert's match touched the chain
    ++r_.declined_grafts;
    ++r_.chunk_declined_grafts;
    if (c_.observer) {
      const PrefixCache::Match touched = cache_.MatchPrefix(fps, full);  // the same touch, as a trace record
      c_.observer->OnMatch(r.id, fps, full * ps, touched, false);
    }
    return Status::Ok();
  }
  r_.duplicate_pages += static_cast<int64_t>(ins.freed.size());
  ++r_.chunk_inserts;
  if (c_.observer) {
    c_.observer->OnInsert(r.id, fps, std::vector<int64_t>(r.pages.begin(), r.pages.begin() + full), r.base, ins,
                          cache_.cached_pages());
  }
  if (!ins.freed.empty()) {
    std::vector<int64_t> locs;
    for (int64_t p : ins.freed) locs.push_back(p * ps);
    KVSHARD_RETURN_IF_ERROR(alloc_->Free(locs));
  }
  const int64_t moved = ins.new_pages + static_cast<int64_t>(ins.freed.size());  // now the tree's, or freed
  r.own_pages -= moved;
  own_pages_ -= moved;
  // Re-match: the row takes the tree's pages, the lock moves to the new last node.
  const PrefixCache::Match m = cache_.MatchPrefix(fps, full);
  if (m.pages_matched != full) {
    return Internal("cache_unfinished_req: request ", r.id, " re-matched ", m.pages_matched, " of ", full, " pages");
  }
  std::copy(m.pages.begin(), m.pages.end(), r.pages.begin());
  cache_.Lock(m.node);
  KVSHARD_RETURN_IF_ERROR(cache_.Unlock(r.lock_node));
  if (c_.observer) c_.observer->OnRelock(r.id, fps, full * ps, m);
  r.lock_node = m.node;
  return Status::Ok();
}

void Simulation::SendKv(Req& r) {
  // Each rank sends the pages it owns (1/N of the KV, all layers) over its own link, FIFO behind earlier sends.
  const double bytes_per_rank = static_cast<double>(r.done - r.sent_tokens) *
                                static_cast<double>(c_.kv_bytes_per_token_layer) * static_cast<double>(c_.cost.layers) /
                                static_cast<double>(c_.shard_size);
  const double start = std::max(now_us_, link_free_us_);
  link_free_us_ = start + bytes_per_rank * 8.0 / (c_.kv_transfer_gbps * 1e3);  // Gbit/s = 1e3 bits per us
  r.sent_tokens = r.done;
  if (r.done == r.w->input_tokens) {
    r.transfer_done_us = link_free_us_;
    transferring_.push({r.transfer_done_us, &r});
    if (rec_) rec_->OnPrefillDone(r.id, r.prefill_done_us, r.transfer_done_us);
  }
}

Status Simulation::Complete(Req& r) {
  // SGLang's release_kv_cache -> cache_finished_req: free the partial tail page, insert the full pages (the cache
  // frees duplicates or, declined, the request's pages), release the lock. Two frees, as the engine and a
  // replayed trace make them.
  const int64_t full = static_cast<int64_t>(r.fps.size());
  KVSHARD_RETURN_IF_ERROR(FreePages(std::vector<int64_t>(r.pages.begin() + full, r.pages.end())));
  KVSHARD_ASSIGN_OR_RETURN(PrefixCache::InsertResult ins, cache_.Insert(r.fps, r.pages, r.base));
  r_.declined_grafts += ins.declined;
  r_.duplicate_pages += ins.declined ? 0 : static_cast<int64_t>(ins.freed.size());
  if (c_.observer) {
    c_.observer->OnInsert(r.id, r.fps, std::vector<int64_t>(r.pages.begin(), r.pages.begin() + full), r.base, ins,
                          cache_.cached_pages());
  }
  if (!ins.freed.empty()) {
    std::vector<int64_t> locs;
    for (int64_t p : ins.freed) locs.push_back(p * c_.page_size);
    KVSHARD_RETURN_IF_ERROR(alloc_->Free(locs));
  }
  own_pages_ -= r.own_pages;
  KVSHARD_RETURN_IF_ERROR(cache_.Unlock(r.lock_node));
  if (c_.observer) c_.observer->OnUnlock(r.id);
  --holding_slots_;
  ++finished_;
  const double arrived = static_cast<double>(r.w->arrival_us) * c_.time_scale;
  ttft_ms_.push_back((r.prefill_done_us - arrived) / 1e3);
  queue_ms_.push_back((r.scheduled_us - arrived) / 1e3);
  transfer_ms_.push_back((r.transfer_done_us - r.prefill_done_us) / 1e3);
  if (c_.slo_ttft_ms <= 0 || ttft_ms_.back() <= c_.slo_ttft_ms) ++r_.slo_met;
  r.fps = {};
  r.pages = {};
  return Status::Ok();
}

StatusOr<SimResult> Simulation::Run() {
  KVSHARD_RETURN_IF_ERROR(Setup());
  if (rec_) rec_->Begin(w_, c_, r_.pool_pages_per_rank);
  const int64_t total = static_cast<int64_t>(w_.requests.size()), ps = c_.page_size;
  r_.requests = total;
  size_t next = 0;
  auto arrival = [&](size_t i) { return static_cast<double>(w_.requests[i].arrival_us) * c_.time_scale; };
  auto ready = [&](size_t i) { return arrival(i) + c_.bootstrap_ms * 1e3; };
  Req* pending_chunk = nullptr;  // the chunked request of the last batch: cached and sent at the next pass
  while (finished_ < total && !(c_.observer && c_.observer->Done())) {
    // process_disagg_prefill_inflight_queue: transfers done by now release their requests.
    while (!transferring_.empty() && transferring_.top().first <= now_us_) {
      Req* r = transferring_.top().second;
      transferring_.pop();
      KVSHARD_RETURN_IF_ERROR(Complete(*r));
      ++step_;
      CheckConservation("transfer done");
      if (progress_) progress_(finished_, total);
    }
    // pop_bootstrapped: arrivals whose bootstrap is done join the waiting queue.
    while (next < w_.requests.size() && ready(next) <= now_us_) {
      auto r = std::make_unique<Req>();
      r->id = static_cast<int64_t>(next);
      r->w = &w_.requests[next];
      r->fps = Fingerprints(*r->w, r->id, w_.block_tokens, ps);
      r->ready_us = ready(next);
      r_.input_tokens += r->w->input_tokens;
      r_.hash_blocks += static_cast<int64_t>(r->w->block_hashes.size());
      waiting_.push_back(r.get());
      live_.push_back(std::move(r));
      if (next + 1 == w_.requests.size()) r_.waiting_at_last_arrival = static_cast<int64_t>(waiting_.size());
      ++next;
    }
    r_.max_waiting = std::max(r_.max_waiting, static_cast<int64_t>(waiting_.size()));
    // process_prefill_chunk: the chunked request's prefilled pages are cached and its KV sent.
    if (pending_chunk != nullptr) {
      KVSHARD_RETURN_IF_ERROR(CacheUnfinished(*pending_chunk));
      SendKv(*pending_chunk);
      pending_chunk = nullptr;
    }
    Req* const continuing = chunked_;
    std::vector<std::pair<Req*, int64_t>> batch = FormBatch();
    if (batch.empty()) {
      double t = next < w_.requests.size() ? ready(next) : -1;
      if (!transferring_.empty() && (t < 0 || transferring_.top().first < t)) t = transferring_.top().first;
      if (t < 0) {
        if (!waiting_.empty()) return NotAdmitted({{waiting_.front(), waiting_.front()->w->input_tokens}});
        break;
      }
      now_us_ = std::max(now_us_, t);
      continue;
    }
    ExtendPages out;
    KVSHARD_ASSIGN_OR_RETURN(bool ok, Allocate(batch, &out));
    if (!ok && owners_ && transferring_.empty()) {  // a class-agnostic eviction may have missed the short class
      KVSHARD_ASSIGN_OR_RETURN(ok, EvictUntilAdmitted(batch, &out));
    }
    if (!ok) {  // SGLang's alloc path raises here; the model defers the pass until a transfer frees pages
      ++r_.deferrals;
      if (alloc_->aggregate_free_size() >= NewPages(batch, ps) * ps) ++r_.class_exhausted_deferrals;
      // Undo the pass: the admitted go back to the head of the queue unlocked; a continuing chunk stays chunked.
      for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
        Req* r = it->first;
        if (r == continuing) continue;
        KVSHARD_RETURN_IF_ERROR(cache_.Unlock(r->lock_node));
        if (c_.observer) c_.observer->OnUnlock(r->id);
        r->admitted = false;
        r->lock_node = 0;
        r->pages.clear();
        r->done = 0;
        r->base = kNewChain;
        --holding_slots_;
        waiting_.push_front(r);
      }
      chunked_ = continuing;
      if (transferring_.empty()) return NotAdmitted(batch);
      now_us_ = std::max(now_us_, transferring_.top().first);
      continue;
    }
    for (const auto& [r, chunk] : batch) {
      if (r != continuing) r_.cached_tokens += r->cached_at_admission;
      if (r != continuing && w_.block_tokens > 0) {
        r_.hit_blocks += std::min<int64_t>(static_cast<int64_t>(r->w->block_hashes.size()),
                                           r->cached_at_admission / w_.block_tokens);
      }
      if (rec_ && r != continuing) {
        rec_->OnMatch(r->id, r->cached_at_admission, r->w->input_tokens,
                      static_cast<int64_t>(r->w->block_hashes.size()));
      }
    }
    ++step_;
    KVSHARD_RETURN_IF_ERROR(RunBatch(batch, out));
    // process_batch_result_disagg_prefill: a finished prefill is cached (so others can match) and sent.
    for (const auto& [r, chunk] : batch) {
      if (rec_) rec_->OnChunk(r->id, r->base);
      if (r->done < r->w->input_tokens) {
        pending_chunk = r;
        continue;
      }
      KVSHARD_RETURN_IF_ERROR(CacheUnfinished(*r));
      SendKv(*r);
    }
    CheckConservation("extend batch");
    SamplePages();
  }
  if (Status s = cache_.CheckInvariants(); !s.ok()) Violation(StrCat("prefix cache: ", s.message()));
  CheckConservation("end");
  Summarize();
  return r_;
}

void Simulation::Summarize() {
  r_.simulated_s = now_us_ / 1e6;
  r_.pages_in_use_mean = samples_ ? in_use_sum_ / samples_ : 0;
  r_.pages_in_use_skew_mean = samples_ ? skew_sum_ / samples_ : 0;
  r_.gathered_bytes_layer = internal::Summarize(gathered_);
  r_.batch_time_us = internal::Summarize(batch_us_);
  r_.ttft_ms = internal::Summarize(ttft_ms_);
  r_.queue_ms = internal::Summarize(queue_ms_);
  r_.transfer_ms = internal::Summarize(transfer_ms_);
  if (!w_.requests.empty()) {
    r_.arrival_span_s =
        static_cast<double>(w_.requests.back().arrival_us - w_.requests.front().arrival_us) * c_.time_scale / 1e6;
  }
  r_.busy_s = busy_us_ / 1e6;
  for (const auto& live : live_) r_.prefill_end_s = std::max(r_.prefill_end_s, live->prefill_done_us / 1e6);
  const double first_arrival_s =
      w_.requests.empty() ? 0 : static_cast<double>(w_.requests.front().arrival_us) * c_.time_scale / 1e6;
  const double makespan_s = r_.prefill_end_s - first_arrival_s;
  if (makespan_s > 0) {
    r_.input_tokens_per_s = static_cast<double>(r_.input_tokens) / makespan_s;
    r_.goodput_requests_per_s = static_cast<double>(r_.slo_met) / makespan_s;
  }
  // A trace whose requests all arrive at once has no span: any work at all is a backlog.
  r_.utilization = r_.arrival_span_s > 0 ? r_.busy_s / r_.arrival_span_s : (r_.busy_s > 0 ? 1e300 : 0);
  const double page_bytes =
      static_cast<double>(c_.page_size) * static_cast<double>(c_.kv_bytes_per_token_layer) * c_.cost.layers;
  r_.kv_peak_bytes_per_rank = static_cast<int64_t>(static_cast<double>(r_.pages_in_use_max) * page_bytes);
  r_.kv_pool_bytes_per_rank = static_cast<int64_t>(static_cast<double>(r_.pool_pages_per_rank) * page_bytes);
}

}  // namespace internal

const char* AllocModeName(AllocMode mode) { return mode == AllocMode::kOwners ? "owners" : "rotated"; }

const char* SchedulePolicyName(SchedulePolicy policy) { return policy == SchedulePolicy::kLpm ? "lpm" : "fcfs"; }

ScratchSpec NodeScratch(const SimConfig& c) {
  const int64_t n = c.shard_size, ps = c.page_size;
  const int64_t context_pages = (c.context_length + ps - 1) / ps;
  ScratchSpec s;
  s.max_prefix_tokens = n * ps * ((context_pages + n - 1) / n);
  const int64_t chunk = c.chunked_prefill_size > 0 ? c.chunked_prefill_size : c.context_length;
  s.chunk_tokens = (chunk + ps - 1) / ps * ps;
  return s;
}

Status ValidateSimConfig(const SimConfig& c) {
  if (c.shard_size < 1 || c.shard_size > 4096)
    return InvalidArgument("shard_size: must be in [1, 4096], got ", c.shard_size);
  if (c.page_size < 1 || c.page_size > 4096)
    return InvalidArgument("page_size: must be in [1, 4096], got ", c.page_size);
  if (c.cp_size < 1 || c.cp_size > 1024) return InvalidArgument("cp_size: must be in [1, 1024], got ", c.cp_size);
  if (c.cache_tokens < 0) return InvalidArgument("cache_tokens: must be >= 0, got ", c.cache_tokens);
  if (c.chunked_prefill_size > int64_t{1} << 40) {
    return InvalidArgument("chunked_prefill_size: must be at most 2^40, got ", c.chunked_prefill_size);
  }
  if (c.chunked_prefill_size <= 0 && c.shard_size > 1) {
    return InvalidArgument("chunked_prefill_size: KV sharding (shard_size ", c.shard_size,
                           ") requires chunked prefill sized within the assembly scratch (SGLang), got ",
                           c.chunked_prefill_size);
  }
  if (c.max_prefill_tokens < 1 || c.max_prefill_tokens > int64_t{1} << 40) {
    return InvalidArgument("max_prefill_tokens: must be in [1, 2^40], got ", c.max_prefill_tokens);
  }
  if (c.max_running_requests < 1) return InvalidArgument("max_running_requests: must be >= 1");
  if (c.context_length < 1 || c.context_length > int64_t{1} << 40) {
    return InvalidArgument("context_length: must be in [1, 2^40], got ", c.context_length);
  }
  if (!(c.time_scale >= 0) || !std::isfinite(c.time_scale)) return InvalidArgument("time_scale: must be >= 0");
  if (!(c.kv_transfer_gbps > 0) || !std::isfinite(c.kv_transfer_gbps)) {
    return InvalidArgument("kv_transfer_gbps: must be > 0");
  }
  if (!(c.bootstrap_ms >= 0) || !std::isfinite(c.bootstrap_ms)) return InvalidArgument("bootstrap_ms: must be >= 0");
  if (!(c.slo_ttft_ms >= 0) || !std::isfinite(c.slo_ttft_ms)) return InvalidArgument("slo_ttft_ms: must be >= 0");
  if (c.kv_bytes_per_token_layer < 1) return InvalidArgument("kv_bytes_per_token_layer: must be >= 1");
  if (c.alloc_mode == AllocMode::kOwners && c.cp_size > 1 && c.shard_size % c.cp_size != 0) {
    return InvalidArgument("alloc_mode: owners needs cp_size (", c.cp_size, ") to divide shard_size (", c.shard_size,
                           "): a page's CP owner (page % cp) must follow from its allocator class "
                           "(page % N)");
  }
  return Status::Ok();
}

StatusOr<SimResult> Simulate(const Workload& workload, const SimConfig& config, const SimProgress& progress) {
  return Simulate(workload, config, progress, nullptr);
}

StatusOr<SimResult> Simulate(const Workload& workload, const SimConfig& config, const SimProgress& progress,
                             SimRecord* record) {
  KVSHARD_RETURN_IF_ERROR(ValidateSimConfig(config));
  internal::Simulation sim(workload, config, progress, record);
  return sim.Run();
}

}  // namespace kvshard::sim

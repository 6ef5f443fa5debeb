// The simulation loop: arrivals, chunked-prefill batches admitted by the allocator (defer, evict, retry),
// per-batch plans and cost, decode as a hold time, then the prompt's full pages cached and its tail freed.
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
    pages_per_rank = 8 * ((pages + n - 1) / n) + c_.max_batch_requests + 16;
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

void Simulation::Match(Req& r) {
  const int64_t ps = c_.page_size;
  const PrefixCache::Match m = cache_.MatchPrefix(r.fps, (r.w->input_tokens - 1) / ps);
  r.matched = true;
  r.pages = m.pages;
  r.done = m.pages_matched * ps;
  r.base = m.rotation_base;
  r.lock_node = m.node;
  cache_.Lock(m.node);
  if (c_.observer) c_.observer->OnMatch(r.id, r.fps, r.w->input_tokens, m);
  r_.cached_tokens += r.done;
  if (w_.block_tokens > 0) {
    r_.hit_blocks += std::min<int64_t>(static_cast<int64_t>(r.w->block_hashes.size()), r.done / w_.block_tokens);
  }
  if (rec_) rec_->OnMatch(r.id, r.done, r.w->input_tokens, static_cast<int64_t>(r.w->block_hashes.size()));
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
  for (const auto& [r, chunk] : batch) {
    if (r->done == r->w->input_tokens) {
      r->finish_us = now_us_ + 1e6 * static_cast<double>(r->w->output_tokens) / c_.decode_tokens_per_s;
      decoding_.push({r->finish_us, r});
    }
    if (rec_) rec_->OnChunk(r->id, r->base, r->done == r->w->input_tokens ? r->finish_us : -1);
  }
  return Status::Ok();
}

Status Simulation::Complete(Req& r) {
  // SGLang's cache_finished_req: free the partial tail page, insert the full pages (the cache frees duplicates or,
  // declined, the request's pages), release the lock. Two frees, as the engine and a replayed trace make them.
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
  ++finished_;
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
  while (finished_ < total && !(c_.observer && c_.observer->Done())) {
    while (next < w_.requests.size() && arrival(next) <= now_us_) {
      auto r = std::make_unique<Req>();
      r->id = static_cast<int64_t>(next);
      r->w = &w_.requests[next];
      r->fps = Fingerprints(*r->w, r->id, w_.block_tokens, ps);
      r_.input_tokens += r->w->input_tokens;
      r_.hash_blocks += static_cast<int64_t>(r->w->block_hashes.size());
      waiting_.push_back(r.get());
      live_.push_back(std::move(r));
      ++next;
    }
    while (!decoding_.empty() && decoding_.top().first <= now_us_) {
      Req* r = decoding_.top().second;
      decoding_.pop();
      KVSHARD_RETURN_IF_ERROR(Complete(*r));
      ++step_;
      CheckConservation("completion");
      if (progress_) progress_(finished_, total);
    }
    if (waiting_.empty()) {
      double t = next < w_.requests.size() ? arrival(next) : -1;
      if (!decoding_.empty() && (t < 0 || decoding_.top().first < t)) t = decoding_.top().first;
      if (t < 0) break;
      now_us_ = std::max(now_us_, t);
      continue;
    }
    // Chunked prefill: requests in arrival order, each at most chunk_tokens (page-aligned unless it finishes).
    std::vector<std::pair<Req*, int64_t>> batch;
    int64_t tokens = 0;
    for (Req* r : waiting_) {
      if (static_cast<int64_t>(batch.size()) >= c_.max_batch_requests) break;
      if (!r->matched) Match(*r);
      int64_t chunk = std::min({r->w->input_tokens - r->done, c_.chunk_tokens, c_.max_batch_tokens - tokens});
      if (r->done + chunk < r->w->input_tokens) chunk = chunk / ps * ps;
      if (chunk <= 0) break;
      batch.push_back({r, chunk});
      tokens += chunk;
    }
    if (batch.empty()) {  // the first request's remainder exceeds the batch budget: a page-aligned piece of it
      Req* r = waiting_.front();
      batch.push_back({r, std::min(r->w->input_tokens - r->done, std::max(ps, c_.max_batch_tokens / ps * ps))});
    }
    ExtendPages out;
    KVSHARD_ASSIGN_OR_RETURN(bool ok, Allocate(batch, &out));
    if (!ok && batch.size() > 1) {
      batch.resize(1);
      KVSHARD_ASSIGN_OR_RETURN(ok, Allocate(batch, &out));
    }
    if (!ok && owners_ && decoding_.empty()) {  // a class-agnostic eviction may have missed the short class
      KVSHARD_ASSIGN_OR_RETURN(ok, EvictUntilAdmitted(batch, &out));
    }
    if (!ok) {
      ++r_.deferrals;
      if (alloc_->aggregate_free_size() >= NewPages(batch, ps) * ps) ++r_.class_exhausted_deferrals;
      if (decoding_.empty()) return NotAdmitted(batch);
      now_us_ = std::max(now_us_, decoding_.top().first);
      continue;
    }
    ++step_;
    KVSHARD_RETURN_IF_ERROR(RunBatch(batch, out));
    waiting_.erase(
        std::remove_if(waiting_.begin(), waiting_.end(), [](const Req* r) { return r->done == r->w->input_tokens; }),
        waiting_.end());
    CheckConservation("extend batch");
    SamplePages();
  }
  if (Status s = cache_.CheckInvariants(); !s.ok()) Violation(StrCat("prefix cache: ", s.message()));
  CheckConservation("end");
  r_.simulated_s = now_us_ / 1e6;
  r_.pages_in_use_mean = samples_ ? in_use_sum_ / samples_ : 0;
  r_.pages_in_use_skew_mean = samples_ ? skew_sum_ / samples_ : 0;
  r_.gathered_bytes_layer = Summarize(gathered_);
  r_.batch_time_us = Summarize(batch_us_);
  return r_;
}

}  // namespace internal

const char* AllocModeName(AllocMode mode) { return mode == AllocMode::kOwners ? "owners" : "rotated"; }

Status ValidateSimConfig(const SimConfig& c) {
  if (c.shard_size < 1 || c.shard_size > 4096)
    return InvalidArgument("shard_size: must be in [1, 4096], got ", c.shard_size);
  if (c.page_size < 1 || c.page_size > 4096)
    return InvalidArgument("page_size: must be in [1, 4096], got ", c.page_size);
  if (c.cp_size < 1 || c.cp_size > 1024) return InvalidArgument("cp_size: must be in [1, 1024], got ", c.cp_size);
  if (c.cache_tokens < 0) return InvalidArgument("cache_tokens: must be >= 0, got ", c.cache_tokens);
  if (c.chunk_tokens < c.page_size || c.chunk_tokens % c.page_size != 0) {
    return InvalidArgument("chunk_tokens: must be a positive multiple of page_size (", c.page_size, "), got ",
                           c.chunk_tokens);
  }
  if (c.max_batch_tokens < c.page_size) {
    return InvalidArgument("max_batch_tokens: must be at least page_size (", c.page_size, "), got ",
                           c.max_batch_tokens);
  }
  if (c.max_batch_requests < 1) return InvalidArgument("max_batch_requests: must be >= 1");
  if (!(c.time_scale >= 0) || !std::isfinite(c.time_scale)) return InvalidArgument("time_scale: must be >= 0");
  if (!(c.decode_tokens_per_s > 0) || !std::isfinite(c.decode_tokens_per_s)) {
    return InvalidArgument("decode_tokens_per_s: must be > 0");
  }
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

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

namespace {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - (q > 0 ? 1 : 0));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

}  // namespace

void SetRates(double first_arrival_s, SimResult* r) {
  const double makespan_s = r->prefill_end_s - first_arrival_s;
  if (makespan_s > 0) {
    r->input_tokens_per_s = static_cast<double>(r->input_tokens) / makespan_s;
    r->goodput_requests_per_s = static_cast<double>(r->slo_met) / makespan_s;
  }
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

Status Simulation::Setup() {
  const int64_t n = c_.shard_size, ps = c_.page_size;
  int64_t pages_per_rank;
  if (c_.cache_tokens > 0) {
    pages_per_rank = c_.cache_tokens / (n * ps);
  } else {  // 8x every prompt's pages spread evenly over the nodes and ranks (classes fill unevenly at large N),
            // within the 2^24 pages
    int64_t pages = 0;
    for (const WorkloadRequest& q : w_.requests) pages += (q.input_tokens + ps - 1) / ps;
    pages_per_rank = 8 * ((pages + n * instances_ - 1) / (n * instances_)) + c_.max_running_requests + 16;
    pages_per_rank = std::min(pages_per_rank, (int64_t{1} << 24) / n - 2);  // page_pos: N * (ppr + 2) <= 2^24
  }
  if (pages_per_rank < 1) {
    return InvalidArgument("cache_tokens: ", c_.cache_tokens,
                           " tokens give less than one page per rank (N * ps = ", n * ps, ")");
  }
  if (n * (pages_per_rank + 2) > (int64_t{1} << 24)) {
    return InvalidArgument(c_.cache_tokens > 0 ? "cache_tokens" : "page_size", ": the pool would have ",
                           n * (pages_per_rank + 1), " logical pages, ", n * (pages_per_rank + 2),
                           " with the simulator's spare page a rank, more than the allocator's 2^24 (use a larger "
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
    // Rotated allocation runs a request's pages cyclically over the N ranks: more per rank than a rank has can
    // never be admitted, and is refused before the run (which would take its chunks one by one, time quadratic in
    // the prompt, before failing). The owner plan's classes are checked as it admits (NotAdmitted names the class).
    const int64_t pages = (w_.requests[i].input_tokens + ps - 1) / ps;
    if (c_.alloc_mode == AllocMode::kRotated && (pages + n - 1) / n > pages_per_rank) {
      return InvalidArgument("cache_tokens: request ", i, " (", w_.requests[i].input_tokens,
                             " prompt tokens) can never be admitted: it needs ", pages, " pages, ", (pages + n - 1) / n,
                             " per rank, and the pool has ", pages_per_rank, " per rank");
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
  if (rec_) rec_->Begin(w_, c_, r_.pool_pages_per_rank);
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
  SetRates(first_arrival_s, &r_);
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

RankMemory RankMemoryOf(const SimConfig& c, int64_t pool_pages_per_rank, int64_t pages_in_use_max) {
  RankMemory m;
  const double token_bytes = static_cast<double>(c.kv_bytes_per_token_layer) * static_cast<double>(c.cost.layers);
  const double page_bytes = token_bytes * static_cast<double>(c.page_size);
  m.weight_bytes = c.weight_bytes / c.shard_size;
  m.kv_pool_bytes = static_cast<int64_t>(page_bytes * static_cast<double>(pool_pages_per_rank));
  m.kv_peak_bytes = static_cast<int64_t>(page_bytes * static_cast<double>(pages_in_use_max));
  const ScratchSpec s = NodeScratch(c);
  m.scratch_bytes = (s.max_prefix_tokens + s.chunk_tokens) * c.kv_bytes_per_token_layer * 2;
  if (c.hbm_gib > 0) {
    m.hbm_bytes = static_cast<int64_t>(c.hbm_gib * 1073741824.0);
    m.fits = m.weight_bytes + m.kv_pool_bytes + m.scratch_bytes <= m.hbm_bytes;
    const double room = static_cast<double>(m.hbm_bytes - m.weight_bytes - m.scratch_bytes);
    m.max_cache_tokens = room > 0 ? static_cast<int64_t>(room / page_bytes) * c.page_size * c.shard_size : 0;
  }
  return m;
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
  if (c.chunked_prefill_size > 0 && c.chunked_prefill_size < c.page_size) {  // every request's extend ceils to a page
    return InvalidArgument("chunked_prefill_size: ", c.chunked_prefill_size, " tokens is less than a page (page_size ",
                           c.page_size,
                           "): SGLang's add_one_req ceils every extend to whole pages, so every request exceeds the "
                           "budget and is cut to whole pages of it, which leaves nothing: none would ever be admitted");
  }
  if (c.chunked_prefill_size <= 0 && c.shard_size > 1) {
    return InvalidArgument("chunked_prefill_size: KV sharding (shard_size ", c.shard_size,
                           ") requires chunked prefill sized within the assembly scratch (SGLang), got ",
                           c.chunked_prefill_size);
  }
  if (c.max_prefill_tokens < 1 || c.max_prefill_tokens > int64_t{1} << 40) {
    return InvalidArgument("max_prefill_tokens: must be in [1, 2^40], got ", c.max_prefill_tokens);
  }
  if (c.max_running_requests < 1 || c.max_running_requests > kMaxRunningRequests) {  // it sizes an unbounded pool
    return InvalidArgument("max_running_requests: must be in [1, 2^20], got ", c.max_running_requests);
  }
  if (c.instances < 1 || c.instances > 1024) {
    return InvalidArgument("instances: must be in [1, 1024], got ", c.instances);
  }
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
  if (c.weight_bytes < 0) return InvalidArgument("weight_bytes: must be >= 0");
  if (!(c.hbm_gib >= 0) || !(c.hbm_gib <= 1e6)) return InvalidArgument("hbm_gib: must be in [0, 1e6]");
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

}  // namespace kvshard::sim

// The prefill node's event loop (SGLang's event_loop_normal_disagg_prefill): transfers done release their
// requests, bootstrapped arrivals join the waiting queue, the last pass's chunked request is cached and sent, a
// scheduling pass (scheduler.cc) forms a batch, it is allocated (admission.cc), planned and timed (simulator.cc),
// and each finished prefill is cached so others can match (cache_unfinished_req) and its KV queued to the decode
// side; a request's pages are released when its transfer is done (release_kv_cache -> cache_finished_req).
#include <algorithm>
#include <cmath>

#include "sim/simulation.h"

namespace kvshard::sim::internal {

void Simulation::Offer(const WorkloadRequest* w, int64_t id) {
  auto r = std::make_unique<Req>();
  r->id = id;
  r->w = w;
  r->ready_us = static_cast<double>(w->arrival_us) * c_.time_scale + c_.bootstrap_ms * 1e3;
  inbox_.push_back(r.get());
  live_.push_back(std::move(r));
  ++r_.requests;
}

Status Simulation::RunUntil(double t) {
  const int64_t ps = c_.page_size;
  while (!(c_.observer && c_.observer->Done())) {
    // process_disagg_prefill_inflight_queue: transfers done by now release their requests.
    while (!inflight_.empty() && inflight_.front()->transfer_done_us <= now_us_) {
      Req* r = inflight_.front();
      inflight_.pop_front();
      KVSHARD_RETURN_IF_ERROR(Complete(*r));
      ++step_;
      CheckConservation("transfer done");
    }
    if (now_us_ >= t) return Status::Ok();  // requests arriving at t join before the next pass
    // pop_bootstrapped: arrivals whose bootstrap is done join the waiting queue.
    while (!inbox_.empty() && inbox_.front()->ready_us <= now_us_) {
      Req* r = inbox_.front();
      inbox_.pop_front();
      r->fps = Fingerprints(*r->w, r->id, w_.block_tokens, ps);
      r_.input_tokens += r->w->input_tokens;
      r_.hash_blocks += static_cast<int64_t>(r->w->block_hashes.size());
      waiting_.push_back(r);
      if (r->id == last_request_id_) r_.waiting_at_last_arrival = static_cast<int64_t>(waiting_.size());
    }
    r_.max_waiting = std::max(r_.max_waiting, static_cast<int64_t>(waiting_.size()));
    // process_prefill_chunk: the chunked request's prefilled pages are cached and its KV sent.
    if (pending_chunk_ != nullptr) {
      KVSHARD_RETURN_IF_ERROR(CacheUnfinished(*pending_chunk_));
      SendKv(*pending_chunk_);
      pending_chunk_ = nullptr;
    }
    Req* const continuing = chunked_;
    std::vector<std::pair<Req*, int64_t>> batch = FormBatch();
    if (batch.empty()) {  // idle until the next bootstrap or transfer, or until `t` brings more requests
      double next = inbox_.empty() ? -1 : inbox_.front()->ready_us;
      if (!inflight_.empty() && (next < 0 || inflight_.front()->transfer_done_us < next)) {
        next = inflight_.front()->transfer_done_us;
      }
      if (next < 0) {
        if (std::isinf(t) && !waiting_.empty()) {
          return NotFormed(*waiting_.front());
        }
        if (std::isinf(t)) return Status::Ok();  // drained
        next = t;
      }
      now_us_ = std::max(now_us_, std::min(next, t));
      continue;
    }
    ExtendPages out;
    KVSHARD_ASSIGN_OR_RETURN(bool ok, Allocate(batch, &out));
    if (!ok && owners_ && inflight_.empty()) {  // a class-agnostic eviction may have missed the short class
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
        r->lock_node = 0;
        r->pages.clear();
        r->done = 0;
        r->base = kNewChain;
        --holding_slots_;
        waiting_.push_front(r);
      }
      chunked_ = continuing;
      if (inflight_.empty()) return NotAdmitted(batch);
      now_us_ = std::max(now_us_, std::min(inflight_.front()->transfer_done_us, t));
      continue;
    }
    for (const auto& [r, chunk] : batch) {
      if (r == continuing) continue;
      r_.cached_tokens += r->cached_at_admission;
      if (w_.block_tokens > 0) {
        r_.hit_blocks += std::min<int64_t>(static_cast<int64_t>(r->w->block_hashes.size()),
                                           r->cached_at_admission / w_.block_tokens);
      }
      if (rec_) {
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
        pending_chunk_ = r;
        continue;
      }
      KVSHARD_RETURN_IF_ERROR(CacheUnfinished(*r));
      SendKv(*r);
    }
    CheckConservation("extend batch");
    SamplePages();
  }
  return Status::Ok();
}

StatusOr<SimResult> Simulation::Finish() {
  if (Status s = cache_.CheckInvariants(); !s.ok()) Violation(StrCat("prefix cache: ", s.message()));
  CheckConservation("end");
  Summarize();
  return r_;
}

int64_t Simulation::Outstanding() const {
  return static_cast<int64_t>(inbox_.size() + waiting_.size()) + (chunked_ != nullptr ? 1 : 0);
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
  // The row takes the tree's pages and the lock moves to the new last node (SGLang re-matches; the insert just
  // walked and touched the same path, so its result stands in for the walk).
  const PrefixCache::Match& m = ins.path;
  std::copy(m.pages.begin(), m.pages.end(), r.pages.begin());
  KVSHARD_RETURN_IF_ERROR(cache_.Relock(r.lock_node, m.node));
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
    inflight_.push_back(&r);
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

}  // namespace kvshard::sim::internal

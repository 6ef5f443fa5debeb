// SimRecorder: copies what the simulation loop already computed into SimRecord rows (no extra model work).
#include "sim/recorder.h"

#include <algorithm>

namespace kvshard::sim {

void SimRecorder::Begin(const Workload& w, const SimConfig& c, int64_t pool_pages_per_rank) {
  *out_ = SimRecord{};
  out_->shard_size = c.shard_size;
  out_->page_size = c.page_size;
  out_->cp_size = c.cp_size;
  out_->layers = c.cost.layers;
  out_->pool_pages_per_rank = pool_pages_per_rank;
  out_->has_block_ids = w.block_tokens > 0;
  out_->ranks_recorded = std::min(c.shard_size, SimRecord::kMaxRanks);
  out_->requests.resize(w.requests.size());
  for (size_t i = 0; i < w.requests.size(); ++i) {
    RequestRow& row = out_->requests[i];
    row.request_id = static_cast<int64_t>(i);
    row.arrived_us = static_cast<double>(w.requests[i].arrival_us) * c.time_scale;
    row.prefill_tokens = w.requests[i].input_tokens;
    row.decode_tokens = w.requests[i].output_tokens;
  }
  matched_tokens_ = matched_blocks_ = 0;
}

void SimRecorder::OnMatch(int64_t id, int64_t cached_tokens, int64_t prompt_tokens, int64_t hash_blocks) {
  out_->requests[static_cast<size_t>(id)].cached_tokens = cached_tokens;
  matched_tokens_ += prompt_tokens;
  matched_blocks_ += hash_blocks;
}

void SimRecorder::OnBatch(double start_us, const BatchWork& work, const BatchTime& t, int64_t deferrals,
                          int64_t evicted_pages, int64_t cached_tokens, int64_t hit_blocks) {
  BatchRow b;
  b.batch_id = static_cast<int64_t>(out_->batches.size());
  b.start_us = start_us;
  b.end_us = start_us + t.total_us;
  b.requests = work.requests;
  b.prefill_tokens = work.extend_tokens;
  b.compute_tokens = work.compute_tokens;
  b.cp_padding_tokens = work.compute_tokens - work.extend_tokens;
  b.prefix_pages = work.prefix_pages;
  b.gathered_bytes_layer = work.gathered_bytes_layer;
  b.plan_us = t.plan_us;
  b.gather_us = t.gather_us;
  b.pack_us = t.pack_us;
  b.stage_us = t.stage_us;
  b.compute_us = t.compute_us;
  b.rerange_us = t.rerange_us;
  b.total_us = t.total_us;
  b.deferrals = deferrals;
  b.evicted_pages = evicted_pages;
  b.matched_prompt_tokens = matched_tokens_;
  b.cached_tokens = cached_tokens;
  b.matched_hash_blocks = matched_blocks_;
  b.hit_blocks = hit_blocks;
  out_->batches.push_back(b);
}

void SimRecorder::OnChunk(int64_t id, int64_t base) {
  const BatchRow& b = out_->batches.back();
  RequestRow& row = out_->requests[static_cast<size_t>(id)];
  if (row.chunks++ == 0) row.scheduled_us = b.start_us;
  row.rotation_base = base;
}

void SimRecorder::OnPrefillDone(int64_t id, double prefill_done_us, double transfer_done_us) {
  RequestRow& row = out_->requests[static_cast<size_t>(id)];
  row.prefill_completed_us = prefill_done_us;
  row.completed_us = transfer_done_us;
}

void SimRecorder::OnPages(const std::vector<int64_t>& free_counts, int64_t pages_per_rank) {
  if (out_->batches.empty() || free_counts.empty()) return;
  BatchRow& b = out_->batches.back();
  int64_t lo = pages_per_rank, hi = 0, sum = 0;
  for (size_t k = 0; k < free_counts.size(); ++k) {
    const int64_t used = pages_per_rank - free_counts[k];
    lo = std::min(lo, used);
    hi = std::max(hi, used);
    sum += used;
    if (static_cast<int64_t>(k) < out_->ranks_recorded) out_->rank_pages.push_back(used);
  }
  b.pages_in_use_min = lo;
  b.pages_in_use_max = hi;
  b.pages_in_use_mean = static_cast<double>(sum) / static_cast<double>(free_counts.size());
}

}  // namespace kvshard::sim

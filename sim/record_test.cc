// The SimRecord a run fills: recording changes no result, and its rows add up to the SimResult (a RapidCheck
// property over random workloads and configurations, and the bundled Mooncake trace).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/output_test_util.h"

namespace kvshard::sim {
namespace {

// Empty when `rec` agrees with `r`, else what disagrees.
std::string Disagreement(const SimRecord& rec, const SimResult& r, const SimConfig& c) {
  if (static_cast<int64_t>(rec.requests.size()) != r.requests) return "request rows";
  if (static_cast<int64_t>(rec.batches.size()) != r.batches) return "batch rows";
  if (rec.ranks_recorded != std::min(c.shard_size, SimRecord::kMaxRanks)) return "ranks_recorded";
  if (rec.rank_pages.size() != rec.batches.size() * static_cast<size_t>(rec.ranks_recorded)) return "rank_pages";
  int64_t cached = 0, prompt = 0, chunks = 0;
  double last_completion = 0;
  for (const RequestRow& q : rec.requests) {
    cached += q.cached_tokens;
    prompt += q.prefill_tokens;
    chunks += q.chunks;
    if (q.chunks < 1) return "request " + std::to_string(q.request_id) + " never ran";
    if (!(q.arrived_us <= q.scheduled_us && q.scheduled_us < q.prefill_completed_us &&
          q.prefill_completed_us <= q.completed_us)) {
      return "request " + std::to_string(q.request_id) + " times out of order";
    }
    if (q.rotation_base < 0 || q.rotation_base >= c.shard_size) return "rotation base";
    last_completion = std::max(last_completion, q.completed_us);
  }
  if (cached != r.cached_tokens || prompt != r.input_tokens) return "Σ cached_tokens / prompt tokens";
  if (std::fabs(last_completion / 1e6 - r.simulated_s) > 1e-9 * std::max(1.0, r.simulated_s)) return "last completion";
  int64_t prefill = 0, requests = 0, padding = 0, compute = 0, in_use_max = 0;
  double total_us = 0, mean_sum = 0, prev_end = 0;
  for (size_t i = 0; i < rec.batches.size(); ++i) {
    const BatchRow& b = rec.batches[i];
    prefill += b.prefill_tokens;
    requests += b.requests;
    padding += b.cp_padding_tokens;
    compute += b.compute_tokens;
    total_us += b.total_us;
    mean_sum += b.pages_in_use_mean;
    in_use_max = std::max(in_use_max, b.pages_in_use_max);
    if (b.start_us < prev_end || b.end_us != b.start_us + b.total_us) return "batch " + std::to_string(i) + " times";
    prev_end = b.end_us;
    if (b.deferrals > r.deferrals || b.evicted_pages > r.evicted_pages) return "running counters";
    int64_t lo = INT64_MAX, hi = 0, sum = 0;
    for (int64_t k = 0; k < rec.ranks_recorded; ++k) {
      lo = std::min(lo, rec.RankPages(i, k));
      hi = std::max(hi, rec.RankPages(i, k));
      sum += rec.RankPages(i, k);
    }
    if (lo < b.pages_in_use_min || hi > b.pages_in_use_max) return "rank pages outside min..max";
    if (c.shard_size <= SimRecord::kMaxRanks &&
        (lo != b.pages_in_use_min || hi != b.pages_in_use_max ||
         std::fabs(static_cast<double>(sum) / rec.ranks_recorded - b.pages_in_use_mean) > 1e-9)) {
      return "min/mean/max of the ranks";
    }
  }
  if (prefill != r.extend_tokens) return "Σ num_prefill_tokens";
  if (requests != chunks) return "Σ batch requests != Σ request chunks";
  if (padding != r.cp_padding_tokens) return "Σ cp_padding_tokens";
  if (c.cp_size > 1 && compute != r.cp_compute_tokens) return "Σ compute_tokens";
  if (in_use_max != r.pages_in_use_max) return "pages_in_use_max";
  if (!rec.batches.empty() &&
      std::fabs(mean_sum / rec.batches.size() - r.pages_in_use_mean) > 1e-9 * std::max(1.0, r.pages_in_use_mean)) {
    return "pages_in_use_mean";
  }
  if (std::fabs(total_us - r.batch_time_us.total) > 1e-6 * std::max(1.0, total_us)) return "Σ total_us";
  if (!rec.batches.empty()) {
    const BatchRow& last = rec.batches.back();
    if (last.cached_tokens != r.cached_tokens || last.hit_blocks != r.hit_blocks) return "running hit totals";
    if (last.matched_prompt_tokens != r.input_tokens || last.matched_hash_blocks != r.hash_blocks) return "matched";
  }
  return "";
}

// Every SimResult field the run reports.
std::string ResultText(const SimResult& r) {
  return StrCat(r.requests, ' ', r.batches, ' ', r.extend_tokens, ' ', r.hash_blocks, ' ', r.hit_blocks, ' ',
                r.input_tokens, ' ', r.cached_tokens, ' ', r.deferrals, ' ', r.declined_grafts, ' ', r.evicted_pages,
                ' ', r.duplicate_pages, ' ', r.violations, ' ', r.pool_pages_per_rank, ' ', r.pages_in_use_max, ' ',
                r.pages_in_use_mean, ' ', r.pages_in_use_skew_max, ' ', r.pages_in_use_skew_mean, ' ',
                r.gathered_bytes_layer.total, ' ', r.gathered_bytes_layer.p99, ' ', r.cp_compute_tokens, ' ',
                r.cp_padding_tokens, ' ', r.batch_time_us.total, ' ', r.batch_time_us.p50, ' ', r.simulated_s);
}

RC_GTEST_PROP(RecordProps, RowsAddUpToTheResultAndRecordingChangesNothing, ()) {
  const int n = *rc::gen::inRange(1, 40);
  const int64_t conversations = *rc::gen::inRange(1, 6);
  std::string text;
  int64_t t = 0;
  std::vector<std::vector<int64_t>> convs(conversations);
  for (int i = 0; i < n; ++i) {
    auto& blocks = convs[*rc::gen::inRange<int64_t>(0, conversations)];
    blocks.push_back(*rc::gen::inRange(0, 4) == 0 ? 7 : 100 + i);  // sometimes a block shared across conversations
    const int64_t len = 512 * static_cast<int64_t>(blocks.size()) - *rc::gen::inRange(0, 511);
    std::string ids;
    for (size_t k = 0; k < blocks.size(); ++k) ids += (k ? "," : "") + std::to_string(blocks[k]);
    t += *rc::gen::inRange(0, 200);
    text += StrCat("{\"timestamp\": ", t, ", \"input_length\": ", len,
                   ", \"output_length\": ", *rc::gen::inRange(0, 40), ", \"hash_ids\": [", ids, "]}\n");
  }
  std::istringstream in(text);
  StatusOr<Workload> w = ReadWorkload(in, WorkloadFormat::kMooncake);
  RC_ASSERT(w.ok());
  SimConfig c;
  c.shard_size = *rc::gen::element<int64_t>(1, 2, 3, 4, 8, 20);
  c.page_size = *rc::gen::element<int64_t>(16, 64);
  c.cp_size = *rc::gen::element<int64_t>(1, 1, 2, 4);
  c.chunked_prefill_size = c.page_size * *rc::gen::inRange<int64_t>(1, 40);
  c.max_prefill_tokens = c.page_size * *rc::gen::inRange<int64_t>(1, 80);
  c.max_running_requests = *rc::gen::inRange<int64_t>(1, 8);
  if (*rc::gen::arbitrary<bool>()) c.cache_tokens = c.shard_size * c.page_size * *rc::gen::inRange<int64_t>(60, 200);
  StatusOr<SimResult> plain = Simulate(*w, c);
  SimRecord rec;
  StatusOr<SimResult> recorded = Simulate(*w, c, nullptr, &rec);
  RC_ASSERT(plain.ok() == recorded.ok());
  if (!plain.ok()) {
    RC_ASSERT(plain.status().message() == recorded.status().message());
    RC_DISCARD("the pool is too small for a prompt");
  }
  RC_ASSERT(ResultText(*plain) == ResultText(*recorded));
  const std::string why = Disagreement(rec, *recorded, c);
  if (!why.empty()) RC_FAIL("the record disagrees with the result: " + why);
}

TEST(RecordTest, ManyRanksKeepABoundedNumberOfTracks) {
  const Recorded run = RunRecorded(Conversations(24), SmallConfig(/*shard_size=*/40));
  EXPECT_EQ(run.record.ranks_recorded, SimRecord::kMaxRanks);
  EXPECT_EQ(Disagreement(run.record, run.result, SmallConfig(40)), "");
}

TEST(RecordTest, BundledMooncakeTrace) {
  SimConfig c;  // N = 8, ps = 64
  const Recorded run = RunRecorded(BundledMooncake(), c);
  EXPECT_EQ(run.result.requests, 12031);
  EXPECT_EQ(Disagreement(run.record, run.result, c), "");
}

}  // namespace
}  // namespace kvshard::sim

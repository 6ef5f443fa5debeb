// kvshard simulate --json: a run's result and configuration as one JSON object (also every sweep row's keys).
#include "sim/result_json.h"

namespace kvshard::sim {
namespace {

double Ratio(int64_t a, int64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); }

}  // namespace

bool RunTogether(const SimResult& r) { return r.owner_mismatch_pages == 0 && r.gather_plan_rejections == 0; }

Json DirectWriteJson(const SimResult& r, const SimConfig& c) {
  return Json{{"alloc_mode", AllocModeName(c.alloc_mode)},
              {"pages", r.direct_write_pages},
              {"local_loc_owner_mismatch_pages", r.owner_mismatch_pages},
              {"failed_batches", r.direct_write_failed_batches},
              {"failed_rank_writes", r.direct_write_failed_ranks},
              {"gather_plan_rejections", r.gather_plan_rejections},
              {"class_exhausted_deferrals", r.class_exhausted_deferrals},
              {"run_together", RunTogether(r)}};
}

Json ConfigJson(const SimConfig& c) {
  return Json{{"model", c.model_name},
              {"shard_size", c.shard_size},
              {"page_size", c.page_size},
              {"cp_size", c.cp_size},
              {"cache_tokens", c.cache_tokens},
              {"chunked_prefill_size", c.chunked_prefill_size},
              {"max_prefill_tokens", c.max_prefill_tokens},
              {"max_running_requests", c.max_running_requests},
              {"context_length", c.context_length},
              {"schedule_policy", SchedulePolicyName(c.schedule_policy)},
              {"kv_transfer_gbps", c.kv_transfer_gbps},
              {"bootstrap_ms", c.bootstrap_ms},
              {"instances", c.instances},
              {"hbm_gib", c.hbm_gib},
              {"kv_bytes_per_token_layer", c.kv_bytes_per_token_layer},
              {"router", RouterName(c.router)},
              {"layers", c.cost.layers}};
}

Json ResultJson(const SimResult& r, const SimConfig& c) {
  auto dist = [](const Distribution& d) {
    return Json{{"total", d.total}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}, {"max", d.max}};
  };
  Json j;
  j["requests"] = r.requests;
  j["batches"] = r.batches;
  j["prefix_hit_rate_blocks"] = Ratio(r.hit_blocks, r.hash_blocks);
  j["prefix_hit_rate_tokens"] = Ratio(r.cached_tokens, r.input_tokens);
  j["hash_blocks"] = r.hash_blocks;
  j["hit_blocks"] = r.hit_blocks;
  j["input_tokens"] = r.input_tokens;
  j["cached_tokens"] = r.cached_tokens;
  j["extend_tokens"] = r.extend_tokens;
  j["violations"] = r.violations;
  j["first_violation"] = r.violations ? Json(r.first_violation) : Json(nullptr);
  j["pool_pages_per_rank"] = r.pool_pages_per_rank;
  j["pages_in_use"] = {{"max", r.pages_in_use_max},
                       {"mean", r.pages_in_use_mean},
                       {"skew_max", r.pages_in_use_skew_max},
                       {"skew_mean", r.pages_in_use_skew_mean}};
  j["deferrals"] = r.deferrals;
  j["declined_grafts"] = r.declined_grafts;
  j["duplicate_pages"] = r.duplicate_pages;
  j["evictions"] = r.evicted_pages;
  j["gathered_bytes_per_layer"] = dist(r.gathered_bytes_layer);
  j["cp_padding_fraction"] = Ratio(r.cp_padding_tokens, r.cp_compute_tokens);
  j["batch_time_us"] = dist(r.batch_time_us);
  j["simulated_s"] = r.simulated_s;
  j["cost_model"] = c.cost.source;
  j["prefill_node"] = {{"ttft_ms", dist(r.ttft_ms)},
                       {"queue_ms", dist(r.queue_ms)},
                       {"transfer_ms", dist(r.transfer_ms)},
                       {"input_tokens_per_s", r.input_tokens_per_s},
                       {"slo_ttft_ms", c.slo_ttft_ms > 0 ? Json(c.slo_ttft_ms) : Json(nullptr)},
                       {"slo_met_requests", r.slo_met},
                       {"goodput_requests_per_s", r.goodput_requests_per_s},
                       {"arrival_span_s", r.arrival_span_s},
                       {"busy_s", r.busy_s},
                       {"prefill_end_s", r.prefill_end_s},
                       {"utilization", r.utilization},
                       {"overloaded", Overloaded(r)},
                       {"max_waiting_requests", r.max_waiting},
                       {"waiting_at_last_arrival", r.waiting_at_last_arrival},
                       {"no_token_stops", r.no_token_stops},
                       {"scratch_stops", r.scratch_stops},
                       {"kv_peak_bytes_per_rank", r.kv_peak_bytes_per_rank},
                       {"kv_pool_bytes_per_rank", r.kv_pool_bytes_per_rank}};
  const RankMemory mem = RankMemoryOf(c, r.pool_pages_per_rank, r.pages_in_use_max);
  j["memory_per_rank"] = {{"weight_bytes", mem.weight_bytes},
                          {"kv_pool_bytes", mem.kv_pool_bytes},
                          {"kv_peak_bytes", mem.kv_peak_bytes},
                          {"scratch_bytes", mem.scratch_bytes},
                          {"hbm_bytes", mem.hbm_bytes > 0 ? Json(mem.hbm_bytes) : Json(nullptr)},
                          {"pool_fits", mem.hbm_bytes > 0 ? Json(mem.fits) : Json(nullptr)},
                          {"max_cache_tokens", mem.hbm_bytes > 0 ? Json(mem.max_cache_tokens) : Json(nullptr)}};
  j["config"] = ConfigJson(c);
  if (!r.nodes.empty()) {  // a cluster: each node's own figures
    j["nodes"] = Json::array();
    for (const SimResult& n : r.nodes) {
      j["nodes"].push_back({{"requests", n.requests},
                            {"batches", n.batches},
                            {"prefix_hit_rate_tokens", Ratio(n.cached_tokens, n.input_tokens)},
                            {"utilization", n.utilization},
                            {"overloaded", Overloaded(n)},
                            {"ttft_ms", dist(n.ttft_ms)},
                            {"queue_ms", dist(n.queue_ms)},
                            {"max_waiting_requests", n.max_waiting},
                            {"pages_in_use_max", n.pages_in_use_max},
                            {"kv_peak_bytes_per_rank", n.kv_peak_bytes_per_rank},
                            {"violations", n.violations}});
    }
  }
  if (c.cp_size > 1) {  // CP shared-KV direct writes: only with CP (the output without CP is unchanged)
    j["direct_write"] = DirectWriteJson(r, c);
  }
  return j;
}

}  // namespace kvshard::sim

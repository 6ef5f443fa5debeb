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

Json ResultJson(const SimResult& r, const SimConfig& c) {
  auto dist = [](const Distribution& d) {
    return Json{{"total", d.total}, {"p50", d.p50}, {"p99", d.p99}, {"max", d.max}};
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
  j["config"] = {{"shard_size", c.shard_size},     {"page_size", c.page_size},
                 {"cp_size", c.cp_size},           {"cache_tokens", c.cache_tokens},
                 {"chunk_tokens", c.chunk_tokens}, {"max_batch_tokens", c.max_batch_tokens},
                 {"layers", c.cost.layers}};
  if (c.cp_size > 1) {  // CP shared-KV direct writes: only with CP (the output without CP is unchanged)
    j["direct_write"] = DirectWriteJson(r, c);
  }
  return j;
}

}  // namespace kvshard::sim

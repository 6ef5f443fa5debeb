// The generator's records of a committed batch beyond the alloc: the sharded pool's pipeline (begin, per layer
// writes and reads, end), the gather plan, and one rank's split with the batch's rerange.
#include <string>
#include <vector>

#include "replay/trace_gen_internal.h"

namespace kvshard::replay::trace_gen {

Status Generator::Pipeline(const Json& requests) {
  if (o_.num_layers == 0 || Full()) return Status::Ok();
  KVSHARD_ASSIGN_OR_RETURN(Json begin, Emit(Json{{"op", "begin_shard_extend"}, {"requests", requests}},
                                            {"block_pages", "page_pos", "out_cache_loc", "epoch"}, {}, true));
  if (begin.is_null()) return Status::Ok();  // rejected: no extend in flight
  for (int64_t layer = 0; layer < o_.num_layers; ++layer) {
    if (Full()) return Status::Ok();
    KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "set_kv_buffer"}, {"layer", layer}}, {"owned_counts"}, {}, true).status());
    if (Full()) return Status::Ok();
    const std::vector<std::string> keep =
        layer == 0 ? std::vector<std::string>{"slot", "scratch_rows"} : std::vector<std::string>{"slot"};
    KVSHARD_RETURN_IF_ERROR(Emit(Json{{"op", "get_key_buffer"}, {"layer", layer}}, keep, {}, true).status());
  }
  if (Full()) return Status::Ok();
  return Emit(Json{{"op", "end_shard_extend"}}).status();
}

Status Generator::GatherPlan(const Json& requests) {
  if (Full()) return Status::Ok();
  const int64_t n = o_.shard_size, ps = o_.page_size;
  int64_t block = 0, chunk = 0;
  for (const Json& r : requests) {
    block += CeilDivide(r.at("prefix_len").get<int64_t>() / ps, n);
    chunk += CeilDivide(r.at("seq_len").get<int64_t>(), ps) - r.at("prefix_len").get<int64_t>() / ps;
  }
  int64_t prefix_cap = n * ps * block, chunk_cap = ps * chunk;
  if (o_.edge_heavy && rng_.Percent(10)) {  // one page under a capacity: the plan must be rejected
    if (rng_.Percent(50) && prefix_cap > 0) {
      prefix_cap -= n * ps;
    } else {
      chunk_cap -= ps;
    }
  }
  Json batch{{"shard_size", n},
             {"page_size", ps},
             {"pages_per_rank", o_.pages_per_rank},
             {"max_prefix_tokens", prefix_cap},
             {"chunk_tokens", chunk_cap},
             {"requests", requests}};
  // send_rows follow from send_local_pages (rows p*ps .. p*ps+ps-1): the expect keeps the pages only.
  return Emit(Json{{"op", "gather_plan"}, {"batch", batch}}, {"block_pages", "page_pos", "ranks"}, {"send_rows"})
      .status();
}

StatusOr<Json> Generator::SplitAndRerange(const std::vector<int64_t>& extend, const std::vector<int64_t>& prefix) {
  if (Full()) return Json(nullptr);
  Json split{{"op", "split"},
             {"cp_size", o_.cp_size},
             {"cp_rank", rng_.Uniform(0, o_.cp_size - 1)},
             {"page_size", o_.page_size},
             {"extend_lens", extend},
             {"prefix_lens", prefix}};
  KVSHARD_ASSIGN_OR_RETURN(
      Json answer,
      Emit(split, {"request_split_lists", "request_compute_split_lists", "request_kv_len_prev", "request_kv_len_next",
                   "request_last_token_owner", "request_last_token_local_offset", "compute_padding_enabled"}));
  if (Full()) return answer;
  Json rerange{{"op", "rerange"},
               {"cp_size", o_.cp_size},
               {"page_size", o_.page_size},
               {"extend_lens", extend},
               {"prefix_lens", prefix}};
  KVSHARD_RETURN_IF_ERROR(Emit(rerange, {"max_rank_token", "per_rank_tokens", "source_rows"}).status());
  return answer;
}

}  // namespace kvshard::replay::trace_gen

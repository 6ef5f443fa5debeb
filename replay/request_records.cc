// Request records of a trace: SGLang's request path around its radix cache (cpu_ref/radix_requests.h) on the
// header's allocator. Every answer carries the tree's evictable and protected sizes and the allocator's class
// lists, so a recording of SGLang (props/sglang_radix_test.py) is compared with the reference step by step.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "replay/replayer.h"

namespace kvshard::replay {

Json Replayer::WithRequestState(Json answer, const Json* only) const {
  answer["evictable_size"] = request_path_->tree().evictable_size();
  answer["protected_size"] = request_path_->tree().protected_size();
  if (!only || only->contains("class_free_pages") || only->contains("class_release_pages")) {
    Json free_lists = Json::array(), release_lists = Json::array();
    for (int64_t c = 0; c < allocator_->config().shard_size; ++c) {
      free_lists.push_back(allocator_->free_list(c));
      release_lists.push_back(allocator_->release_list(c));
    }
    answer["class_free_pages"] = std::move(free_lists);
    answer["class_release_pages"] = std::move(release_lists);
  }
  return answer;
}

namespace {

Json BaseJson(int64_t base) { return base == kNewChain ? Json(nullptr) : Json(base); }

}  // namespace

StatusOr<Json> Replayer::RunAdmitReq(const Json& rec, const Json* only) {
  const std::vector<int64_t> tokens = rec.value("tokens", std::vector<int64_t>{});
  const int64_t extend_end = rec.contains("extend_end") ? rec.at("extend_end").get<int64_t>() : -1;
  KVSHARD_ASSIGN_OR_RETURN(const ref::RadixRequests::Admitted a,
                           request_path_->Admit(rec.at("req").get<std::string>(), tokens, extend_end));
  return WithRequestState(Json{{"prefix_len", a.prefix_len}, {"rotation_base", BaseJson(a.rotation_base)}}, only);
}

StatusOr<Json> Replayer::RunAllocReqs(const Json& rec, const Json* only) {
  KVSHARD_ASSIGN_OR_RETURN(const ref::RadixRequests::Allocated a,
                           request_path_->AllocExtend(rec.at("reqs").get<std::vector<std::string>>()));
  return WithRequestState(Json{{"pages", a.pages},
                               {"rotation_bases", a.rotation_bases},
                               {"evicted_tokens", a.evicted_tokens},
                               {"evicted", a.evicted}},
                          only);
}

StatusOr<Json> Replayer::RunCacheReq(const Json& rec, bool finished, const Json* only) {
  const std::string rid = rec.at("req").get<std::string>();
  KVSHARD_ASSIGN_OR_RETURN(const ref::RadixRequests::Cached c,
                           finished ? request_path_->CacheFinished(rid, rec.at("kv_len").get<int64_t>())
                                    : request_path_->CacheUnfinished(rid));
  Json j = {{"rotation_tail_declined", c.rotation_tail_declined},
            {"prefix_len", c.prefix_len},
            {"cache_protected_len", c.cache_protected_len},
            {"freed", c.freed}};
  if (!finished) j["row_pages"] = c.row_pages;
  return WithRequestState(std::move(j), only);
}

StatusOr<Json> Replayer::RunAbortReq(const Json& rec, const Json* only) {
  KVSHARD_RETURN_IF_ERROR(request_path_->Abort(rec.at("req").get<std::string>()));
  return WithRequestState(Json{{"live_requests", request_path_->num_requests()}}, only);
}

StatusOr<Json> Replayer::RunEvictTokens(const Json& rec, const Json* only) {
  const int64_t num_tokens = rec.at("num_tokens").get<int64_t>();
  if (num_tokens < 0) return InvalidArgument("num_tokens: must be >= 0, got ", num_tokens);
  KVSHARD_ASSIGN_OR_RETURN(const int64_t evicted, request_path_->Evict(num_tokens));
  return WithRequestState(Json{{"evicted_tokens", evicted}, {"evicted", request_path_->tree().last_evicted()}}, only);
}

Status Replayer::CheckRequestInvariants() const {
  if (Status s = request_path_->CheckInvariants(); !s.ok()) return Mismatch("invariant: ", s.message());
  return Status::Ok();
}

}  // namespace kvshard::replay

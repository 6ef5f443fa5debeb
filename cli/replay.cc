// Trace replay on the reference: record shapes, one executor per op, expect and invariant checks.
#include "cli/replay.h"

#include <algorithm>
#include <map>
#include <utility>

#include "cli/results.h"
#include "core/pool_json.h"
#include "core/spec.h"
#include "cpu_ref/gather_plan.h"
#include "cpu_ref/placement.h"

namespace kvshard::cli {
namespace {

// The JSON shape of a record field, checked before anything runs (a wrong shape is a malformed trace).
enum class Shape { kInt, kIntList, kBaseList, kObject, kString, kFrees, kBool, kObjectList };
struct FieldShape {
  const char* key;
  Shape shape;
  bool required;
};

bool IsInt(const Json& v) {
  return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
}

bool IsIntList(const Json& v, bool nulls) {
  return v.is_array() && std::all_of(v.begin(), v.end(), [&](const Json& e) { return IsInt(e) || (nulls && e.is_null()); });
}

bool IsFreeSpec(const Json& v) {
  return IsIntList(v, false) || (v.is_object() && v.size() == 1 && v.contains("request") && IsInt(v.at("request")));
}

const char* ShapeText(Shape s) {
  switch (s) {
    case Shape::kInt: return "an integer";
    case Shape::kIntList: return "an array of integers";
    case Shape::kBaseList: return "an array of integers or null";
    case Shape::kObject: return "an object";
    case Shape::kString: return "a string";
    case Shape::kFrees: return "an array of slot arrays or {\"request\": K} objects";
    case Shape::kBool: return "true or false";
    case Shape::kObjectList: return "an array of objects";
  }
  return "?";
}

bool HasShape(const Json& v, Shape s) {
  switch (s) {
    case Shape::kInt: return IsInt(v);
    case Shape::kIntList: return IsIntList(v, false);
    case Shape::kBaseList: return IsIntList(v, true);
    case Shape::kObject: return v.is_object();
    case Shape::kString: return v.is_string();
    case Shape::kFrees: return v.is_array() && std::all_of(v.begin(), v.end(), IsFreeSpec);
    case Shape::kBool: return v.is_boolean();
    case Shape::kObjectList: return v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& e) { return e.is_object(); });
  }
  return false;
}

// Every op's fields. split's are the union over its modes (each mode checks its own required ones).
const std::map<std::string, std::vector<FieldShape>>& OpShapes() {
  static const auto* shapes = new std::map<std::string, std::vector<FieldShape>>{
      {"place", {{"shard_size", Shape::kInt, true}, {"page_size", Shape::kInt, true}, {"rank", Shape::kInt, true},
                 {"locs", Shape::kIntList, true}}},
      {"split", {{"mode", Shape::kString, false}, {"cp_size", Shape::kInt, true}, {"cp_rank", Shape::kInt, false},
                 {"page_size", Shape::kInt, false}, {"extend_lens", Shape::kIntList, false},
                 {"prefix_lens", Shape::kIntList, false}, {"total_len", Shape::kInt, false}}},
      {"rerange", {{"cp_size", Shape::kInt, true}, {"page_size", Shape::kInt, true},
                   {"extend_lens", Shape::kIntList, true}, {"prefix_lens", Shape::kIntList, false}}},
      {"gather_plan", {{"batch", Shape::kObject, true}, {"translate", Shape::kIntList, false}}},
      {"alloc", {{"prefix_lens", Shape::kIntList, true}, {"seq_lens", Shape::kIntList, true},
                 {"rotation_bases", Shape::kBaseList, true}, {"last_locs", Shape::kIntList, true}}},
      {"free", {{"locs", Shape::kIntList, false}, {"request", Shape::kInt, false}}},
      {"free_group", {{"frees", Shape::kFrees, true}}},
      {"match_prefix", {{"tokens", Shape::kIntList, true}, {"lock", Shape::kBool, false}}},
      {"dec_lock_ref", {{"match", Shape::kInt, true}}},
      {"insert", {{"tokens", Shape::kIntList, true}, {"pages", Shape::kIntList, true},
                  {"rotation_base", Shape::kInt, true}}},
      {"evict", {{"num_pages", Shape::kInt, true}}},
      {"begin_shard_extend", {{"requests", Shape::kObjectList, true}}},
      {"set_kv_buffer", {{"layer", Shape::kInt, true}, {"locs", Shape::kIntList, false}}},
      {"get_key_buffer", {{"layer", Shape::kInt, true}, {"locs", Shape::kIntList, false}}},
      {"end_shard_extend", {}},
      {"set_kv_buffer_prefix_valid", {{"layer", Shape::kInt, false}, {"locs", Shape::kIntList, false}}},
      // CP shared-KV direct writes, the page compute owners and seed 003's helpers (cli/replay_cp.cc).
      {"page_owners", {{"cp_size", Shape::kInt, true}, {"cp_rank", Shape::kInt, false},
                       {"page_size", Shape::kInt, true}, {"extend_lens", Shape::kIntList, true},
                       {"prefix_lens", Shape::kIntList, false}}},
      {"cp_direct_write", {{"cp_size", Shape::kInt, true}, {"cp_rank", Shape::kInt, true},
                           {"page_size", Shape::kInt, true}, {"extend_lens", Shape::kIntList, true},
                           {"prefix_lens", Shape::kIntList, false}, {"out_cache_loc", Shape::kIntList, true},
                           {"extend_num_tokens", Shape::kInt, false}}},
      {"cp_seq_idx", {{"cp_chunks_len", Shape::kIntList, true}, {"seqs_len", Shape::kIntList, true}}},
      {"can_cp_split", {{"seq_len", Shape::kInt, true}, {"cp_size", Shape::kInt, true}, {"use_nsa", Shape::kBool, false},
                        {"uses_cp_shared_kv", Shape::kBool, false}, {"is_context_parallel_extend", Shape::kBool, false},
                        {"sglang_cp_draft_shared_kv", Shape::kBool, false}, {"is_draft_extend", Shape::kBool, false},
                        {"extend_seq_lens_cpu", Shape::kIntList, false}, {"extend_prefix_lens_cpu", Shape::kIntList, false},
                        {"page_size", Shape::kInt, false}, {"nsa_prefill_cp_mode", Shape::kString, false},
                        {"enable_nsa_prefill_context_parallel", Shape::kBool, false}}},
      {"cp_local_pair", {{"rows", Shape::kIntList, true}, {"prev_len", Shape::kInt, true},
                         {"next_len", Shape::kInt, true}}},
  };
  return *shapes;
}

// The keys each split mode needs.
Status CheckSplitMode(const Json& rec) {
  const std::string mode = rec.contains("mode") ? rec.at("mode").get<std::string>() : "in-seq";
  std::vector<const char*> keys;
  if (mode == "in-seq") {
    keys = {"cp_rank", "page_size", "extend_lens"};
  } else if (mode == "round-robin") {
    keys = {"cp_rank", "extend_lens"};
  } else if (mode == "token-balanced") {
    keys = {"total_len"};
  } else {
    return InvalidArgument("mode: must be in-seq, round-robin or token-balanced, got ", mode);
  }
  for (const char* key : keys) {
    if (!rec.contains(key)) return InvalidArgument(key, ": missing (needed by split mode ", mode, ")");
  }
  return Status::Ok();
}

Status CheckShape(const Json& rec, const std::string& op) {
  const auto it = OpShapes().find(op);
  if (it == OpShapes().end()) {
    return InvalidArgument("op: unknown op \"", op,
                           "\" (place, split, rerange, gather_plan, alloc, free, free_group, match_prefix, "
                           "dec_lock_ref, insert, evict, begin_shard_extend, set_kv_buffer, get_key_buffer, "
                           "end_shard_extend, set_kv_buffer_prefix_valid, page_owners, cp_direct_write, cp_seq_idx, "
                           "can_cp_split, cp_local_pair)");
  }
  std::vector<std::string> keys;
  for (const FieldShape& f : it->second) keys.push_back(f.key);
  KVSHARD_RETURN_IF_ERROR(CheckRecordKeys(rec, keys));
  for (const FieldShape& f : it->second) {
    if (!rec.contains(f.key)) {
      if (f.required) return InvalidArgument(f.key, ": missing");
      continue;
    }
    if (!HasShape(rec.at(f.key), f.shape)) return InvalidArgument(f.key, ": must be ", ShapeText(f.shape));
  }
  if (op == "free" && rec.contains("locs") == rec.contains("request")) {
    return InvalidArgument("locs: give locs or request, exactly one");
  }
  if (op == "gather_plan" && rec.at("batch").contains("pool_pages_per_rank")) {  // a pre-rename trace is malformed
    StatusOr<ExtendBatch> b = ExtendBatchFromJson(rec.at("batch"));
    return InvalidArgument("batch.", b.status().message());
  }
  if (op == "can_cp_split" && rec.contains("nsa_prefill_cp_mode")) {
    const std::string mode = rec.at("nsa_prefill_cp_mode").get<std::string>();
    if (mode != "in-seq-split" && mode != "round-robin-split") {
      return InvalidArgument("nsa_prefill_cp_mode: must be in-seq-split or round-robin-split, got ", mode);
    }
  }
  return op == "split" ? CheckSplitMode(rec) : Status::Ok();
}

std::vector<int64_t> Ints(const Json& rec, const char* key) {
  return rec.contains(key) ? rec.at(key).get<std::vector<int64_t>>() : std::vector<int64_t>{};
}

int64_t Int(const Json& rec, const char* key, int64_t fallback = 0) {
  return rec.contains(key) ? rec.at(key).get<int64_t>() : fallback;
}

StatusOr<Json> RunPlace(const Json& rec) {
  const PlacementSpec spec{.shard_size = Int(rec, "shard_size"), .page_size = Int(rec, "page_size")};
  KVSHARD_ASSIGN_OR_RETURN(PlacementResult r, ref::PlaceLocs(spec, Int(rec, "rank"), Ints(rec, "locs")));
  return PlacementJson(r);
}

StatusOr<Json> RunSplit(const Json& rec, const Json* only, Impl impl) {
  const std::string mode = rec.contains("mode") ? rec.at("mode").get<std::string>() : "in-seq";
  const std::vector<int64_t> extend = Ints(rec, "extend_lens");
  if (mode == "round-robin") return RoundRobinSplitJson(extend, Int(rec, "cp_size"), Int(rec, "cp_rank"));
  if (mode == "token-balanced") return TokenBalancedSplitJson(Int(rec, "total_len"), Int(rec, "cp_size"));
  const std::vector<int64_t> prefix =
      rec.contains("prefix_lens") ? Ints(rec, "prefix_lens") : std::vector<int64_t>(extend.size(), 0);
  KVSHARD_ASSIGN_OR_RETURN(InSeqSplit s,
                           BuildInSeqSplit(extend, prefix, Int(rec, "page_size"), Int(rec, "cp_size"), Int(rec, "cp_rank"), impl));
  return InSeqSplitJson(s, only);
}

StatusOr<Json> RunRerange(const Json& rec, Impl impl) {
  const std::vector<int64_t> extend = Ints(rec, "extend_lens");
  const std::vector<int64_t> prefix =
      rec.contains("prefix_lens") ? Ints(rec, "prefix_lens") : std::vector<int64_t>(extend.size(), 0);
  KVSHARD_ASSIGN_OR_RETURN(Rerange r, BuildRerange(Int(rec, "cp_size"), Int(rec, "page_size"), extend, prefix, impl));
  return RerangeJson(r);
}

StatusOr<Json> RunGatherPlan(const Json& rec, Impl impl) {
  StatusOr<ExtendBatch> batch = ExtendBatchFromJson(rec.at("batch"));
  if (!batch.ok()) return Status(batch.status().code(), "batch." + batch.status().message());
  KVSHARD_ASSIGN_OR_RETURN(PlanAndRows r, BuildGatherPlanAndRows(*batch, Ints(rec, "translate"), "translate", impl));
  return GatherPlanJson(r.plan, r.rows, rec.contains("translate"));
}

}  // namespace

// Bytes per logical page of the allocator: free and release lists, the allocated flag, the holder table and
// the radix cache's per-page share (an upper estimate; docs/RELIABILITY.md "Limits").
constexpr int64_t kAllocatorBytesPerPage = 64;

std::vector<MemoryTerm> ReplayMemoryTerms(int64_t shard_size, int64_t page_size, int64_t pages_per_rank,
                                          const PoolGeometry* pool) {
  const int64_t pages = SatMul(shard_size, pages_per_rank + 1);
  std::vector<MemoryTerm> terms = {{pages, "logical pages", kAllocatorBytesPerPage}};
  if (pool != nullptr) {
    // Every slot's row in every layer, in the sharded pool and the unsharded baseline (4-byte words); each
    // rank's two scratch buffers of max_prefix_tokens + chunk_tokens + page_size rows.
    const int64_t row_bytes = 4 * pool->row_words;
    terms.push_back({SatMul(SatMul(pages, page_size), pool->num_layers), "KV rows", 2 * row_bytes});
    terms.push_back({SatMul(2 * shard_size, SatAdd(SatAdd(pool->max_prefix_tokens, pool->chunk_tokens), page_size)),
                     "scratch rows", row_bytes});
  }
  return terms;
}

const std::vector<std::string>& TraceHeaderKeys() {
  static const auto* keys = new std::vector<std::string>{"allocator", "pool", "generator"};
  return *keys;
}

StatusOr<std::unique_ptr<Replayer>> Replayer::Create(const Json& header, ReplayOptions options) {
  std::unique_ptr<Replayer> r(new Replayer());
  r->impl_ = options.impl;
  if (header.contains("allocator")) {
    Json script = header.at("allocator");
    if (!script.is_object()) return InvalidArgument("line 1: allocator: must be an object");
    for (const auto& [key, value] : script.items()) {
      if (key == "ops") return InvalidArgument("line 1: allocator.ops: unknown key (records carry the ops)");
    }
    if (!script.contains("check_last_loc")) script["check_last_loc"] = true;
    script["ops"] = Json::array();
    StatusOr<AllocScript> s = AllocScriptFromJson(script);
    if (!s.ok()) return InvalidArgument("line 1: allocator.", s.status().message());
    KVSHARD_RETURN_IF_ERROR(CheckMemory("line 1: allocator", "replay's allocator",
                                        ReplayMemoryTerms(s->shard_size, s->page_size, s->pages_per_rank, nullptr),
                                        options.max_memory));
    KVSHARD_ASSIGN_OR_RETURN(ref::PageInterleaveAllocator a,
                             ref::PageInterleaveAllocator::Create({s->shard_size, s->page_size, s->pages_per_rank,
                                                                   s->need_sort, s->check_last_loc}));
    r->holder_.assign(a.num_logical_pages(), -1);
    r->allocator_.emplace(std::move(a));
    r->cache_ = std::make_unique<ref::RadixCache>(&*r->allocator_);
  }
  if (header.contains("pool")) {
    if (!r->allocator_) return InvalidArgument("line 1: pool: needs the header's \"allocator\" (its geometry)");
    const auto& c = r->allocator_->config();
    StatusOr<PoolGeometry> g = PoolGeometryFromJson(header.at("pool"), c.shard_size, c.page_size, c.pages_per_rank);
    if (!g.ok()) return InvalidArgument("line 1: ", g.status().message());
    KVSHARD_RETURN_IF_ERROR(CheckMemory("line 1: pool", "replay's allocator and pools",
                                        ReplayMemoryTerms(c.shard_size, c.page_size, c.pages_per_rank, &*g),
                                        options.max_memory));
    std::unique_ptr<PoolDataPath> device;
    if (options.backend != Backend::kRef) {
      if (!options.make_device) return Unavailable("--backend: the GPU backend is not built into this binary");
      KVSHARD_ASSIGN_OR_RETURN(device, options.make_device(*g));
    }
    StatusOr<std::unique_ptr<PoolReplay>> pool = PoolReplay::Create(*g, options.backend, std::move(device));
    if (!pool.ok()) return Status(pool.status().code(), StrCat("line 1: ", pool.status().message()));
    r->pool_ = std::move(*pool);
  }
  return r;
}

StatusOr<Json> Replayer::Execute(const TraceRecord& record, const Json* only) {
  const Json& rec = record.json;
  KVSHARD_RETURN_IF_ERROR(CheckShape(rec, record.op));
  if (record.op == "place") return RunPlace(rec);
  if (record.op == "split") return RunSplit(rec, only, impl_);
  if (record.op == "rerange") return RunRerange(rec, impl_);
  if (record.op == "gather_plan") return RunGatherPlan(rec, impl_);
  if (IsCpRecord(record.op)) return RunCpRecord(record.op, rec, impl_);
  if (PoolReplay::Handles(record.op)) {
    if (!pool_) return InvalidArgument(record.op, ": pipeline records need the header's \"pool\"");
    KVSHARD_ASSIGN_OR_RETURN(Json result, pool_->Execute(record.op, rec, only));
    if (record.op == "begin_shard_extend") {  // an extend runs on pages the allocator handed out
      const Json& reqs = rec.at("requests");
      for (size_t i = 0; i < reqs.size(); ++i) {
        const std::vector<int64_t> pages = reqs[i].at("pages").get<std::vector<int64_t>>();
        for (size_t k = 0; k < pages.size(); ++k) {
          if (pages[k] >= 0 && pages[k] < static_cast<int64_t>(holder_.size()) && holder_[pages[k]] == -1) {
            return Mismatch("invariant: requests[", i, "].pages[", k, "]: page ", pages[k],
                            " is free (the allocator has not handed it out)");
          }
        }
      }
    }
    return result;
  }
  if (!allocator_) return InvalidArgument(record.op, ": allocator records need the header's \"allocator\"");
  if (record.op == "alloc") return RunAlloc(rec);
  if (record.op != "free" && record.op != "free_group") return RunRadix(record.op, rec);
  return RunFree(rec, record.op == "free_group");
}

Json Replayer::AllocatorState(const char* op) const {
  Json j;
  j["op"] = op;
  j["class_free_page_counts"] = allocator_->class_free_page_counts();
  j["available_size"] = allocator_->available_size();
  j["aggregate_free_size"] = allocator_->aggregate_free_size();
  return j;
}

StatusOr<Json> Replayer::RunAlloc(const Json& rec) {
  KVSHARD_ASSIGN_OR_RETURN(AllocBatch batch, AllocBatchFromJson(rec, "", allocator_->config().shard_size));
  ref::ExtendPages out;
  KVSHARD_ASSIGN_OR_RETURN(bool ok, allocator_->AllocExtend(batch, &out));
  AllocOpResult result;
  result.ok = ok;
  for (size_t i = 0; i < batch.seq_lens.size(); ++i) {
    const int64_t request = requests_++;
    if (!ok) continue;
    std::vector<int64_t> pages(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
    for (int64_t p : pages) {
      if (holder_[p] != -1) return Mismatch("invariant: page ", p, " handed out while request ", holder_[p], " holds it");
      holder_[p] = request;
      ++held_pages_;
    }
    held_[request] = Held{pages, static_cast<int64_t>(pages.size())};
    result.pages.push_back(std::move(pages));
  }
  if (ok) result.rotation_bases = out.rotation_bases;
  result.class_free_page_counts = allocator_->class_free_page_counts();
  result.available_size = allocator_->available_size();
  result.aggregate_free_size = allocator_->aggregate_free_size();
  Json j = AllocOpResultToJson(result);
  if (ok) {  // every request's owners run cyclically from its resolved base
    const int64_t n = allocator_->config().shard_size, ps = allocator_->config().page_size;
    for (size_t i = 0; i < result.pages.size(); ++i) {
      const int64_t start = out.rotation_bases[i] + batch.prefix_lens[i] / ps;
      for (size_t k = 0; k < result.pages[i].size(); ++k) {
        if (result.pages[i][k] % n != (start + static_cast<int64_t>(k)) % n) {
          return Mismatch("invariant: pages[", i, "][", k, "]: page ", result.pages[i][k],
                          " breaks the cyclic owners of base ", out.rotation_bases[i]);
        }
      }
    }
  }
  return j;
}

StatusOr<std::vector<int64_t>> Replayer::FreeLocs(const Json& spec, const std::string& where) const {
  if (spec.is_array()) return spec.get<std::vector<int64_t>>();
  const int64_t k = spec.at("request").get<int64_t>();
  if (k < 0 || k >= requests_) {
    return InvalidArgument(where, "request: no alloc request ", k, " (the trace has made ", requests_, ")");
  }
  const auto it = held_.find(k);
  if (it == held_.end()) {
    return InvalidArgument(where, "request: alloc request ", k, " holds no pages (freed already, or its alloc deferred)");
  }
  std::vector<int64_t> locs;
  for (int64_t p : it->second.pages) {
    if (holder_[p] == k) locs.push_back(p * allocator_->config().page_size);
  }
  return locs;
}

void Replayer::Release(const std::vector<int64_t>& locs) {
  for (int64_t loc : locs) {
    int64_t& h = holder_[loc / allocator_->config().page_size];
    if (h == -1) continue;
    --held_pages_;
    if (h == kCached) {
      h = -1;
      continue;
    }
    const auto it = held_.find(h);
    if (--it->second.live == 0) held_.erase(it);
    h = -1;
  }
}

StatusOr<Json> Replayer::RunFree(const Json& rec, bool group) {
  if (!group) {
    KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> locs,
                             FreeLocs(rec.contains("locs") ? rec.at("locs") : Json{{"request", rec.at("request")}}, ""));
    KVSHARD_RETURN_IF_ERROR(allocator_->Free(locs));
    Release(locs);
    return AllocatorState("free");
  }
  std::vector<std::vector<int64_t>> frees;
  const Json& specs = rec.at("frees");
  for (size_t f = 0; f < specs.size(); ++f) {
    KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> locs, FreeLocs(specs[f], StrCat("frees[", f, "].")));
    frees.push_back(std::move(locs));
  }
  KVSHARD_RETURN_IF_ERROR(allocator_->FreeGroup(frees));
  for (const auto& locs : frees) Release(locs);
  return AllocatorState("free_group");
}

Status Replayer::CheckAllocatorInvariants(const Json& rec, const Json& result) const {
  (void)rec;
  const auto& c = allocator_->config();
  const std::vector<int64_t> counts = allocator_->class_free_page_counts();
  int64_t free_pages = 0;
  for (int64_t x : counts) free_pages += x;
  if (free_pages + held_pages_ != c.shard_size * c.pages_per_rank) {
    return Mismatch("invariant: ", free_pages, " free + ", held_pages_, " handed-out pages != the pool's ",
                    c.shard_size * c.pages_per_rank);
  }
  const int64_t floor = c.shard_size * c.page_size * *std::min_element(counts.begin(), counts.end());
  if (allocator_->available_size() != floor || floor > allocator_->aggregate_free_size() ||
      allocator_->aggregate_free_size() != c.page_size * free_pages) {
    return Mismatch("invariant: available_size ", allocator_->available_size(), " / aggregate_free_size ",
                    allocator_->aggregate_free_size(), " disagree with the class counts ", ShortJson(result));
  }
  return Status::Ok();
}

Status Replayer::Replay(const TraceRecord& record) {
  ++summary_.records;
  const Json* expect = record.json.contains("expect") ? &record.json.at("expect") : nullptr;
  const bool expect_error = expect && expect->contains("error");
  if (expect_error && (!expect->at("error").is_string() || expect->size() != 1)) {
    return AtLine(record.line, InvalidArgument("expect.error: must be the only key, a string"));
  }
  StatusOr<Json> got = Execute(record, expect_error ? nullptr : expect);
  const std::string where = StrCat("line ", record.line, ": ", record.op, ": ");
  if (!got.ok()) {
    if (got.status().code() == StatusCode::kMismatch) return Mismatch(where, got.status().message());
    Status shape = CheckShape(record.json, record.op);
    if (!shape.ok() || (!expect_error && !expect)) return AtLine(record.line, got.status());
    if (!expect_error) return Mismatch(where, "error: expected success, got \"", got.status().message(), "\"");
    const std::string want = expect->at("error").get<std::string>();
    ++summary_.fields;
    if (got.status().message().find(want) == std::string::npos) {
      return Mismatch(where, "error: expected a message containing \"", want, "\", got \"", got.status().message(),
                      "\"");
    }
    return Status::Ok();
  }
  if (expect_error) {
    return Mismatch(where, "error: expected an error containing \"", expect->at("error").get<std::string>(),
                    "\", got success");
  }
  if (expect) {
    if (auto m = MatchExpect(*expect, *got, &summary_.fields)) {
      return Mismatch(where, m->path, ": expected ", m->expected, ", got ", m->got);
    }
  }
  if (allocator_ && !PoolReplay::Handles(record.op) && record.op != "place" && record.op != "split" &&
      record.op != "rerange" && record.op != "gather_plan" && !IsCpRecord(record.op)) {
    if (Status s = CheckAllocatorInvariants(record.json, *got); !s.ok()) return Mismatch(where, s.message());
    if (Status s = CheckCacheInvariants(); !s.ok()) return Mismatch(where, s.message());
  }
  return Status::Ok();
}

}  // namespace kvshard::cli

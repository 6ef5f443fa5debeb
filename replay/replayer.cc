// Trace replay on the reference: record shapes, the replayer's state from the header, op lookup, the allocator
// records and their invariants (the op table: replay/op_table.cc; expect checks and ReplayStream:
// replay/replay_stream.cc).
#include "replay/replayer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/cyclic_owners.h"
#include "core/pool_json.h"
#include "replay/op_table.h"
#include "replay/records.h"

namespace kvshard::replay {
namespace {

// (The stored values and the array's vector are read directly: nlohmann's get<> and iterators dispatch on the type
// at every element, and these run on every list of every record.)
bool IsInt(const Json& v) {
  if (v.is_number_unsigned()) return v.get_ref<const Json::number_unsigned_t&>() <= static_cast<uint64_t>(INT64_MAX);
  return v.is_number_integer();
}

bool IsIntList(const Json& v, bool nulls) {
  if (!v.is_array()) return false;
  const Json::array_t& elements = v.get_ref<const Json::array_t&>();
  return std::all_of(elements.begin(), elements.end(),
                     [&](const Json& e) { return IsInt(e) || (nulls && e.is_null()); });
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
    case Shape::kStringList: return "an array of strings";
    case Shape::kBase: return "an integer or null";
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
    case Shape::kObjectList:
      return v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& e) { return e.is_object(); });
    case Shape::kStringList:
      return v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& e) { return e.is_string(); });
    case Shape::kBase: return v.is_null() || IsInt(v);
  }
  return false;
}

// The keys each split mode needs.
Status CheckSplitMode(const Json& rec) {
  const std::string mode = rec.contains("mode") ? rec.at("mode").get<std::string>() : "in-seq";
  std::vector<const char*> keys, reads;  // needed, and read besides them (cp_size is required by the row)
  if (mode == "in-seq") {
    keys = {"cp_rank", "page_size", "extend_lens"};
    reads = {"prefix_lens"};
  } else if (mode == "round-robin") {
    keys = {"cp_rank", "extend_lens"};
  } else if (mode == "token-balanced") {
    keys = {"total_len"};
  } else {
    return InvalidArgument("mode: must be in-seq, round-robin or token-balanced, got ", QuoteInput(mode, '\0'));
  }
  for (const char* key : keys) {
    if (!rec.contains(key)) return InvalidArgument(key, ": missing (needed by split mode ", mode, ")");
  }
  for (const char* key : {"cp_rank", "page_size", "extend_lens", "prefix_lens", "total_len"}) {
    const auto is = [&](const char* k) { return std::string(k) == key; };
    if (rec.contains(key) && std::none_of(keys.begin(), keys.end(), is) &&
        std::none_of(reads.begin(), reads.end(), is)) {
      return InvalidArgument(key, ": not read by split mode ", mode, " (a key of another mode)");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckFields(const Json& rec, const ReplayOp& op) {
  KVSHARD_RETURN_IF_ERROR(CheckRecordKeys(rec, [&](const std::string& key) {
    return std::any_of(op.fields.begin(), op.fields.end(), [&](const FieldShape& f) { return key == f.key; });
  }));
  for (const FieldShape& f : op.fields) {
    const auto value = rec.find(f.key);
    if (value == rec.end()) {
      if (f.required) return InvalidArgument(f.key, ": missing");
      continue;
    }
    if (!HasShape(*value, f.shape)) return InvalidArgument(f.key, ": must be ", ShapeText(f.shape));
  }
  const std::string_view name = op.name;
  if (name == "free" && rec.contains("locs") == rec.contains("request")) {
    return InvalidArgument("locs: give locs or request, exactly one");
  }
  if (name == "gather_plan" && rec.at("batch").contains("pool_pages_per_rank")) {  // a pre-rename trace is malformed
    StatusOr<ExtendBatch> b = ExtendBatchFromJson(rec.at("batch"));
    return InvalidArgument("batch.", b.status().message());
  }
  if (Status s = CheckCpChoices(name, rec); !s.ok()) return s;
  if ((name == "can_cp_split" || name == "cal_padded_tokens" || name == "pad_nsa_cache_seqlens") &&
      rec.contains("nsa_prefill_cp_mode")) {
    const std::string mode = rec.at("nsa_prefill_cp_mode").get<std::string>();
    if (mode != "in-seq-split" && mode != "round-robin-split") {
      return InvalidArgument("nsa_prefill_cp_mode: must be in-seq-split or round-robin-split, got ",
                             QuoteInput(mode, '\0'));
    }
  }
  return name == "split" ? CheckSplitMode(rec) : Status::Ok();
}

Status CheckRecord(const Json& rec, const ReplayOp& op, const MemoryBudget& budget) {
  KVSHARD_RETURN_IF_ERROR(CheckFields(rec, op));
  return op.size != nullptr ? op.size(rec, budget) : Status::Ok();
}

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
  r->budget_ = options.budget;
  r->full_invariants_ = options.full_invariants;
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
    KVSHARD_RETURN_IF_ERROR(
        options.budget.Check("line 1: allocator", "replay's allocator",
                             ReplayMemoryTerms(s->shard_size, s->page_size, s->pages_per_rank, nullptr)));
    KVSHARD_ASSIGN_OR_RETURN(ref::PageInterleaveAllocator a,
                             ref::PageInterleaveAllocator::Create(
                                 {s->shard_size, s->page_size, s->pages_per_rank, s->need_sort, s->check_last_loc}));
    r->holder_.assign(a.num_logical_pages(), -1);
    r->allocator_.emplace(std::move(a));
    r->cache_ = std::make_unique<ref::RadixCache>(&*r->allocator_);
  }
  if (header.contains("pool")) {
    if (!r->allocator_) return InvalidArgument("line 1: pool: needs the header's \"allocator\" (its geometry)");
    const auto& c = r->allocator_->config();
    StatusOr<PoolGeometry> g = PoolGeometryFromJson(header.at("pool"), c.shard_size, c.page_size, c.pages_per_rank);
    if (!g.ok()) return InvalidArgument("line 1: ", g.status().message());
    KVSHARD_RETURN_IF_ERROR(options.budget.Check("line 1: pool", "replay's allocator and pools",
                                                 ReplayMemoryTerms(c.shard_size, c.page_size, c.pages_per_rank, &*g)));
    std::unique_ptr<PoolDataPath> device;
    if (options.backend != Backend::kRef) {
      if (!options.make_device) return Unavailable("--backend: the GPU backend is not built into this binary");
      KVSHARD_ASSIGN_OR_RETURN(device, options.make_device(*g));
      // With a device thread the path starts there, while the first records are checked.
      if (!options.device_thread) KVSHARD_RETURN_IF_ERROR(device->Start());
    }
    StatusOr<std::unique_ptr<PoolReplay>> pool =
        PoolReplay::Create(*g, options.backend, std::move(device), options.device_thread);
    if (!pool.ok()) return Annotate(pool.status(), "line 1: ");
    r->pool_ = std::move(*pool);
  }
  return r;
}

StatusOr<const ReplayOp*> Replayer::FindOp(const std::string& name) {
  for (const ReplayOp& op : Ops()) {
    if (name == op.name) return &op;
  }
  std::string names;
  for (const ReplayOp& op : Ops()) names += StrCat(names.empty() ? "" : ", ", op.name);
  return InvalidArgument("op: unknown op ", QuoteInput(name), " (", names, ")");
}

StatusOr<Json> Replayer::Execute(const TraceRecord& record, const Json* only) {
  KVSHARD_ASSIGN_OR_RETURN(const ReplayOp* op, FindOp(record.op));
  return ExecuteOp(*op, record, only);
}

StatusOr<Json> Replayer::ExecuteOp(const ReplayOp& op, const TraceRecord& record, const Json* only,
                                   bool shape_checked) {
  KVSHARD_RETURN_IF_ERROR(BeginOp(op, record, shape_checked));
  if (op.run == nullptr) {  // an op with typed fields: their JSON
    KVSHARD_ASSIGN_OR_RETURN(FieldAnswer fields, op.run_fields(*this, record.json, only));
    return fields.ToJson();
  }
  return op.run(*this, record.json, only);
}

Status Replayer::BeginOp(const ReplayOp& op, const TraceRecord& record, bool shape_checked) {
  if (!shape_checked) KVSHARD_RETURN_IF_ERROR(CheckRecord(record.json, op, budget_));
  if (op.state == OpState::kPipeline && !pool_) {
    return InvalidArgument(record.op, ": pipeline records need the header's \"pool\"");
  }
  if ((op.state == OpState::kAllocator || op.state == OpState::kRequests) && !allocator_) {
    return InvalidArgument(record.op, ": allocator records need the header's \"allocator\"");
  }
  if (op.state == OpState::kAllocator || op.state == OpState::kRequests) {
    const bool requests = op.state == OpState::kRequests;
    if (!request_path_ && requests) request_path_ = std::make_unique<ref::RadixRequests>(&*allocator_);
    if ((requests && (requests_records_ == 0 && allocator_records_ > 0)) || (!requests && requests_records_ > 0)) {
      return InvalidArgument(record.op,
                             ": request records (admit_req, alloc_reqs, cache_*_req, abort_req, "
                             "evict_tokens) and allocator or radix records do not mix in one trace");
    }
    ++(requests ? requests_records_ : allocator_records_);
  }
  return Status::Ok();
}

StatusOr<FieldAnswer> Replayer::RunBeginShardExtend(const Json& rec, const Json* only) {
  std::vector<ExtendRequest> holder;
  StatusOr<const std::vector<ExtendRequest>*> taken = TakeRequests(rec, &holder);
  if (!taken.ok()) return InvalidArgument(taken.status().message());
  const std::vector<ExtendRequest>& requests = **taken;
  KVSHARD_ASSIGN_OR_RETURN(FieldAnswer result, pool_->Begin(requests, only));
  for (size_t i = 0; i < requests.size(); ++i) {  // an extend runs on pages the allocator handed out
    const std::vector<int64_t>& pages = requests[i].pages;
    for (size_t k = 0; k < pages.size(); ++k) {
      if (pages[k] >= 0 && pages[k] < static_cast<int64_t>(holder_.size()) && holder_[pages[k]] == -1) {
        return Mismatch("invariant: requests[", i, "].pages[", k, "]: page ", pages[k],
                        " is free (the allocator has not handed it out)");
      }
    }
  }
  return result;
}

FieldAnswer Replayer::AllocatorState(const char* op) const {
  FieldAnswer a;
  a.Add("op", std::string(op));
  a.Add("class_free_page_counts", allocator_->class_free_page_counts());
  a.Add("available_size", allocator_->available_size());
  a.Add("aggregate_free_size", allocator_->aggregate_free_size());
  return a;
}

StatusOr<FieldAnswer> Replayer::RunAlloc(const Json& rec) {
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
      if (holder_[p] != -1)
        return Mismatch("invariant: page ", p, " handed out while request ", holder_[p], " holds it");
      holder_[p] = request;
      ++held_pages_;
    }
    held_[request] = Held{pages, static_cast<int64_t>(pages.size())};
    result.pages.push_back(std::move(pages));
  }
  if (ok) result.rotation_bases = out.rotation_bases;
  if (ok) {  // every request's owners run cyclically from its resolved base
    const int64_t n = allocator_->config().shard_size, ps = allocator_->config().page_size;
    for (size_t i = 0; i < result.pages.size(); ++i) {
      const int64_t k = FirstNonCyclicPage(result.pages[i], out.rotation_bases[i] + batch.prefix_lens[i] / ps, n);
      if (k >= 0) {
        return Mismatch("invariant: pages[", i, "][", k, "]: page ", result.pages[i][k],
                        " breaks the cyclic owners of base ", out.rotation_bases[i]);
      }
    }
  }
  // AllocOpResultToJson's fields, in its order.
  FieldAnswer a;
  a.Add("op", std::string("alloc"));
  a.Add("ok", ok);
  if (ok) {
    a.Add("rotation_bases", std::move(result.rotation_bases));
    a.Add("pages", std::move(result.pages));
  }
  a.Add("class_free_page_counts", allocator_->class_free_page_counts());
  a.Add("available_size", allocator_->available_size());
  a.Add("aggregate_free_size", allocator_->aggregate_free_size());
  return a;
}

StatusOr<std::vector<int64_t>> Replayer::FreeLocs(const Json& spec) const {
  if (spec.is_array()) return JsonInts(spec);
  const int64_t k = spec.at("request").get<int64_t>();
  if (k < 0 || k >= requests_) {
    return InvalidArgument("request: no alloc request ", k, " (the trace has made ", requests_, ")");
  }
  const auto it = held_.find(k);
  if (it == held_.end()) {
    return InvalidArgument("request: alloc request ", k, " holds no pages (freed already, or its alloc deferred)");
  }
  std::vector<int64_t> locs;
  for (int64_t p : it->second.pages) {
    if (holder_[p] == k) locs.push_back(p * allocator_->config().page_size);
  }
  return locs;
}

void Replayer::Release(const std::vector<int64_t>& locs) {
  const int64_t ps = allocator_->config().page_size;
  auto holder = held_.end();  // the request holding the page before: a request's pages are freed together
  for (int64_t loc : locs) {
    const int64_t page = loc / ps;
    int64_t& h = holder_[page];
    if (h == -1) continue;
    --held_pages_;
    if (h == kCached) {
      if (cache_ && cache_->holds(page)) freed_cached_.push_back(page);
      h = -1;
      continue;
    }
    if (holder == held_.end() || holder->first != h) holder = held_.find(h);
    if (--holder->second.live == 0) {
      held_.erase(holder);
      holder = held_.end();
    }
    h = -1;
  }
}

StatusOr<FieldAnswer> Replayer::RunFree(const Json& rec, bool group) {
  if (!group) {
    KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> locs,
                             FreeLocs(rec.contains("locs") ? rec.at("locs") : rec));  // the record's own "request"
    KVSHARD_RETURN_IF_ERROR(allocator_->Free(locs));
    Release(locs);
    return AllocatorState("free");
  }
  std::vector<std::vector<int64_t>> frees;
  const Json& specs = rec.at("frees");
  for (size_t f = 0; f < specs.size(); ++f) {
    StatusOr<std::vector<int64_t>> locs = FreeLocs(specs[f]);  // its context only on an error
    if (!locs.ok()) return Annotate(locs.status(), "frees[", f, "].");
    frees.push_back(std::move(*locs));
  }
  KVSHARD_RETURN_IF_ERROR(allocator_->FreeGroup(frees));
  for (const auto& locs : frees) Release(locs);
  return AllocatorState("free_group");
}

Status Replayer::CheckAllocatorInvariants() const {
  const auto& c = allocator_->config();
  const std::vector<int64_t> counts = allocator_->class_free_page_counts();
  int64_t free_pages = 0;
  for (int64_t x : counts) free_pages += x;
  if (free_pages + held_pages_ != c.shard_size * c.pages_per_rank) {
    return Mismatch("invariant: ", free_pages, " free + ", held_pages_, " handed-out pages != the pool's ",
                    c.shard_size * c.pages_per_rank);
  }
  const int64_t floor = c.shard_size * c.page_size * *std::min_element(counts.begin(), counts.end());
  const int64_t available = allocator_->available_size(), aggregate = allocator_->aggregate_free_size();
  if (available != floor || floor > aggregate || aggregate != c.page_size * free_pages) {
    return Mismatch("invariant: available_size ", available, " / aggregate_free_size ", aggregate,
                    " disagree with the class counts ", ShortJson(Json(counts)));
  }
  return Status::Ok();
}

}  // namespace kvshard::replay

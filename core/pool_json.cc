// JSON readers/writers for batches, allocator scripts, plans and allocator results.
#include "core/pool_json.h"

#include <string>

#include "core/spec.h"

namespace kvshard {
namespace {

constexpr int64_t kI64Min = INT64_MIN;
constexpr int64_t kI64Max = INT64_MAX;

Status RequireObject(const Json& j, const std::string& where) {
  if (!j.is_object()) {
    return InvalidArgument(where.empty() ? "input" : where.substr(0, where.size() - 1), ": must be a JSON object");
  }
  return Status::Ok();
}

StatusOr<bool> JsonBool(const Json& obj, const std::string& key, const std::string& where, bool fallback) {
  if (!obj.contains(key)) return fallback;
  if (!obj.at(key).is_boolean()) return InvalidArgument(where, key, ": must be true or false");
  return obj.at(key).get<bool>();
}

// A JSON array of arrays of integers.
StatusOr<std::vector<std::vector<int64_t>>> JsonIntListList(const Json& obj, const std::string& key,
                                                            const std::string& where, int64_t lo, int64_t hi) {
  if (!obj.contains(key)) return InvalidArgument(where, key, ": missing");
  const Json& v = obj.at(key);
  if (!v.is_array()) return InvalidArgument(where, key, ": must be an array of integer arrays");
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < v.size(); ++i) {
    Json wrap = Json::object();
    wrap["x"] = v[i];
    auto inner = JsonIntList(wrap, "x", "", lo, hi);
    if (!inner.ok()) {
      // Re-spell "x[3]: ..." / "x: ..." as "where key[i][3]: ...".
      return InvalidArgument(where, key, "[", i, "]", inner.status().message().substr(1));
    }
    out.push_back(std::move(inner).value());
  }
  return out;
}

// rotation_bases: integers or null (kNewChain).
StatusOr<std::vector<int64_t>> JsonBaseList(const Json& obj, const std::string& where, int64_t shard_size) {
  const std::string key = "rotation_bases";
  if (!obj.contains(key)) return InvalidArgument(where, key, ": missing");
  const Json& v = obj.at(key);
  if (!v.is_array()) return InvalidArgument(where, key, ": must be an array of integers or null");
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].is_null()) {
      out.push_back(kNewChain);
      continue;
    }
    if (!v[i].is_number()) return InvalidArgument(where, key, "[", i, "]: must be an integer or null");
    const std::optional<int64_t> plain = JsonInt64(v[i]);  // only anything else builds the element's name
    KVSHARD_ASSIGN_OR_RETURN(
        const int64_t b,
        plain ? StatusOr<int64_t>(*plain) : JsonIntValue(v[i], StrCat(where, key, "[", i, "]"), kI64Min, kI64Max));
    if (b < 0 || b >= shard_size) {
      return InvalidArgument(where, key, "[", i, "]: must be null or in [0, ", shard_size, "), got ", b);
    }
    out.push_back(b);
  }
  return out;
}

}  // namespace

StatusOr<ExtendBatch> ExtendBatchFromJson(const Json& j) {
  KVSHARD_RETURN_IF_ERROR(RequireObject(j, ""));
  ExtendBatch b;
  KVSHARD_ASSIGN_OR_RETURN(b.shard_size, JsonInt(j, "shard_size", "", 1, kMaxShardSize));
  KVSHARD_ASSIGN_OR_RETURN(b.page_size, JsonInt(j, "page_size", "", 1, kMaxPageSize));
  if (j.contains("pool_pages_per_rank")) {
    return InvalidArgument(
        "pool_pages_per_rank: renamed to pages_per_rank, which excludes the trash page "
        "(pages_per_rank = pool_pages_per_rank - 1)");
  }
  KVSHARD_RETURN_IF_ERROR(JsonCheckKeys(
      j, {"shard_size", "page_size", "pages_per_rank", "max_prefix_tokens", "chunk_tokens", "requests"}, ""));
  KVSHARD_ASSIGN_OR_RETURN(b.pages_per_rank, JsonInt(j, "pages_per_rank", "", 0, kMaxPoolLogicalPages - 1));
  KVSHARD_ASSIGN_OR_RETURN(b.max_prefix_tokens, JsonInt(j, "max_prefix_tokens", "", 0, kMaxSlot - 1));
  KVSHARD_ASSIGN_OR_RETURN(b.chunk_tokens, JsonInt(j, "chunk_tokens", "", 0, kMaxSlot - 1));
  if (!j.contains("requests")) return InvalidArgument("requests: missing");
  KVSHARD_ASSIGN_OR_RETURN(b.requests, ExtendRequestsFromJson(j.at("requests")));
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatch(b));
  return b;
}

StatusOr<std::vector<ExtendRequest>> ExtendRequestsFromJson(const Json& reqs) {
  if (!reqs.is_array()) return InvalidArgument("requests: must be an array of objects");
  std::vector<ExtendRequest> requests;
  requests.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string where = StrCat("requests[", i, "].");
    KVSHARD_RETURN_IF_ERROR(RequireObject(reqs[i], where));
    KVSHARD_RETURN_IF_ERROR(JsonCheckKeys(reqs[i], {"prefix_len", "seq_len", "pages"}, where));
    ExtendRequest r;
    KVSHARD_ASSIGN_OR_RETURN(r.prefix_len, JsonInt(reqs[i], "prefix_len", where, 0, kMaxSlot - 1));
    KVSHARD_ASSIGN_OR_RETURN(r.seq_len, JsonInt(reqs[i], "seq_len", where, 0, kMaxSlot - 1));
    if (r.seq_len < r.prefix_len) {
      return InvalidArgument(where, "seq_len: must be >= prefix_len (", r.prefix_len, "), got ", r.seq_len);
    }
    KVSHARD_ASSIGN_OR_RETURN(r.pages, JsonIntList(reqs[i], "pages", where, kI64Min, kI64Max));
    requests.push_back(std::move(r));
  }
  return requests;
}

Json ExtendBatchToJson(const ExtendBatch& b) {
  Json j;
  j["shard_size"] = b.shard_size;
  j["page_size"] = b.page_size;
  j["pages_per_rank"] = b.pages_per_rank;
  j["max_prefix_tokens"] = b.max_prefix_tokens;
  j["chunk_tokens"] = b.chunk_tokens;
  j["requests"] = Json::array();
  for (const ExtendRequest& r : b.requests) {
    Json q;
    q["prefix_len"] = r.prefix_len;
    q["seq_len"] = r.seq_len;
    q["pages"] = r.pages;
    j["requests"].push_back(std::move(q));
  }
  return j;
}

StatusOr<AllocBatch> AllocBatchFromJson(const Json& o, const std::string& where, int64_t shard_size) {
  AllocBatch a;
  KVSHARD_ASSIGN_OR_RETURN(a.prefix_lens, JsonIntList(o, "prefix_lens", where, 0, kMaxSlot - 1));
  KVSHARD_ASSIGN_OR_RETURN(a.seq_lens, JsonIntList(o, "seq_lens", where, 0, kMaxSlot - 1));
  KVSHARD_ASSIGN_OR_RETURN(a.rotation_bases, JsonBaseList(o, where, shard_size));
  // SGLang's alloc_paged_token_slots_extend passes last_loc = -1 for a request with no prefix (a new chain).
  KVSHARD_ASSIGN_OR_RETURN(a.last_locs, JsonIntList(o, "last_locs", where, -1, kMaxSlot - 1));
  const size_t n = a.prefix_lens.size();
  for (const auto& [key, size] : {std::pair<const char*, size_t>{"seq_lens", a.seq_lens.size()},
                                  {"rotation_bases", a.rotation_bases.size()},
                                  {"last_locs", a.last_locs.size()}}) {
    if (size != n) return InvalidArgument(where, key, ": has ", size, " entries, prefix_lens has ", n);
  }
  for (size_t i = 0; i < n; ++i) {
    if (a.last_locs[i] == -1 && a.prefix_lens[i] != 0) {
      return InvalidArgument(where, "last_locs[", i, "]: -1 (no prefix) with prefix_lens[", i, "] = ", a.prefix_lens[i],
                             "; an extension needs its prefix's last slot");
    }
  }
  return a;
}

StatusOr<AllocScript> AllocScriptFromJson(const Json& j) {
  KVSHARD_RETURN_IF_ERROR(RequireObject(j, ""));
  KVSHARD_RETURN_IF_ERROR(
      JsonCheckKeys(j, {"shard_size", "page_size", "pages_per_rank", "need_sort", "check_last_loc", "ops"}, ""));
  AllocScript s;
  KVSHARD_ASSIGN_OR_RETURN(s.shard_size, JsonInt(j, "shard_size", "", 1, kMaxShardSize));
  KVSHARD_ASSIGN_OR_RETURN(s.page_size, JsonInt(j, "page_size", "", 1, kMaxPageSize));
  KVSHARD_ASSIGN_OR_RETURN(s.pages_per_rank,
                           JsonInt(j, "pages_per_rank", "", 0, kMaxPoolLogicalPages / s.shard_size - 1));
  KVSHARD_ASSIGN_OR_RETURN(s.need_sort, JsonBool(j, "need_sort", "", false));
  KVSHARD_ASSIGN_OR_RETURN(s.check_last_loc, JsonBool(j, "check_last_loc", "", false));
  if (!j.contains("ops")) return InvalidArgument("ops: missing");
  const Json& ops = j.at("ops");
  if (!ops.is_array()) return InvalidArgument("ops: must be an array of objects");
  for (size_t k = 0; k < ops.size(); ++k) {
    const std::string where = StrCat("ops[", k, "].");
    KVSHARD_RETURN_IF_ERROR(RequireObject(ops[k], where));
    const Json& o = ops[k];
    if (!o.contains("op")) return InvalidArgument(where, "op: missing");
    if (!o.at("op").is_string()) return InvalidArgument(where, "op: must be \"alloc\", \"free\" or \"free_group\"");
    const std::string name = o.at("op").get<std::string>();
    AllocOp op;
    if (name == "alloc") {
      op.kind = AllocOpKind::kAlloc;
      KVSHARD_RETURN_IF_ERROR(
          JsonCheckKeys(o, {"op", "prefix_lens", "seq_lens", "rotation_bases", "last_locs"}, where));
      KVSHARD_ASSIGN_OR_RETURN(op.alloc, AllocBatchFromJson(o, where, s.shard_size));
    } else if (name == "free") {
      op.kind = AllocOpKind::kFree;
      KVSHARD_RETURN_IF_ERROR(JsonCheckKeys(o, {"op", "locs"}, where));
      KVSHARD_ASSIGN_OR_RETURN(op.locs, JsonIntList(o, "locs", where, 0, kMaxSlot - 1));
    } else if (name == "free_group") {
      op.kind = AllocOpKind::kFreeGroup;
      KVSHARD_RETURN_IF_ERROR(JsonCheckKeys(o, {"op", "frees"}, where));
      KVSHARD_ASSIGN_OR_RETURN(op.frees, JsonIntListList(o, "frees", where, 0, kMaxSlot - 1));
    } else {
      return InvalidArgument(where, "op: must be \"alloc\", \"free\" or \"free_group\", got ", QuoteInput(name));
    }
    s.ops.push_back(std::move(op));
  }
  return s;
}

Json AllocScriptToJson(const AllocScript& s) {
  Json j;
  j["shard_size"] = s.shard_size;
  j["page_size"] = s.page_size;
  j["pages_per_rank"] = s.pages_per_rank;
  j["need_sort"] = s.need_sort;
  j["check_last_loc"] = s.check_last_loc;
  j["ops"] = Json::array();
  for (const AllocOp& op : s.ops) {
    Json o;
    o["op"] = AllocOpName(op.kind);
    if (op.kind == AllocOpKind::kAlloc) {
      o["prefix_lens"] = op.alloc.prefix_lens;
      o["seq_lens"] = op.alloc.seq_lens;
      Json bases = Json::array();
      for (int64_t b : op.alloc.rotation_bases) bases.push_back(b == kNewChain ? Json(nullptr) : Json(b));
      o["rotation_bases"] = bases;
      o["last_locs"] = op.alloc.last_locs;
    } else if (op.kind == AllocOpKind::kFree) {
      o["locs"] = op.locs;
    } else {
      o["frees"] = op.frees;
    }
    j["ops"].push_back(std::move(o));
  }
  return j;
}

Json GatherPlanToJson(const GatherPlan& p) {
  Json j;
  j["block_pages"] = p.block_pages;
  j["n_prefix_slots"] = p.n_prefix_slots;
  j["trash_page"] = p.trash_page;
  j["chunk_base_page"] = p.chunk_base_page;
  Json pos = Json::array();
  for (size_t i = 0; i < p.mapped_pages.size(); ++i) {
    pos.push_back(Json::array({p.mapped_pages[i], p.mapped_scratch_pages[i]}));
  }
  j["page_pos"] = std::move(pos);
  j["ranks"] = Json::array();
  for (const RankSend& r : p.ranks) {
    Json o;
    o["rank"] = r.rank;
    o["send_local_pages"] = r.send_local_pages;
    o["send_rows"] = r.send_rows;
    j["ranks"].push_back(std::move(o));
  }
  return j;
}

Json AllocOpResultToJson(const AllocOpResult& r) {
  Json j;
  j["op"] = AllocOpName(r.kind);
  if (r.kind == AllocOpKind::kAlloc) {
    j["ok"] = r.ok;
    if (r.ok) {
      j["rotation_bases"] = r.rotation_bases;
      j["pages"] = r.pages;
    }
  }
  j["class_free_page_counts"] = r.class_free_page_counts;
  j["available_size"] = r.available_size;
  j["aggregate_free_size"] = r.aggregate_free_size;
  return j;
}

}  // namespace kvshard

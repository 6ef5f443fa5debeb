// JSON writers for the CP plan types; key order follows SGLang's dataclasses.
#include "core/cp_plan_json.h"

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace kvshard {
namespace {

// Each field list below is the one place its struct's JSON fields are named, in SGLang's dataclass order;
// the JSON key is the C++ name (stringified), so keys cannot drift from members. A writer (and any future
// reader) expands the list with one macro per field kind.

// PageAlignedInSeqSplitInfo: M(name) = the member `name`.
#define KVSHARD_SPLIT_INFO_FIELDS(M) \
  M(page_aligned)                    \
  M(page_size)                       \
  M(extend_prefix_len)               \
  M(segment_page_starts)             \
  M(segment_page_ends)               \
  M(extend_valid_tokens)             \
  M(extend_padded_pages)             \
  M(extend_padded_tokens)            \
  M(extend_padding_tokens)

// CPSharedKVBatchPlan: M(name) = the member `name`; A(name) = the accessor `name()` (a field SGLang stores as a
// copy of another, sharing storage here); I(name) = request_split_infos, one RequestSplitInfo() per request.
#define KVSHARD_CP_BATCH_PLAN_FIELDS(M, A, I) \
  M(batch_size)                               \
  M(page_size)                                \
  M(cp_size)                                  \
  M(cp_rank)                                  \
  M(request_token_offsets)                    \
  M(request_padded_token_offsets)             \
  M(request_page_offsets)                     \
  M(request_extend_lens)                      \
  M(request_prefix_lens)                      \
  M(request_padded_pages)                     \
  M(request_padded_tokens)                    \
  M(request_padding_tokens)                   \
  I(request_split_infos)                      \
  M(request_split_lists)                      \
  M(request_zigzag_indices)                   \
  M(request_segment_page_starts)              \
  M(request_segment_page_ends)                \
  M(request_rank_local_tokens)                \
  M(request_rank_local_offsets)               \
  M(request_kv_len_prev)                      \
  M(request_kv_len_next)                      \
  M(request_actual_seq_q_prev)                \
  M(request_actual_seq_q_next)                \
  M(request_last_token_owner)                 \
  M(request_last_token_local_offset)          \
  M(output_collect_mode)                      \
  A(flat_split_list)                          \
  M(flat_zigzag_index)                        \
  M(flat_segment_request_ids)                 \
  M(flat_segment_offsets)                     \
  M(compute_padding_enabled)                  \
  A(request_valid_split_lists)                \
  A(request_valid_segment_page_starts)        \
  A(request_valid_segment_page_ends)          \
  A(request_valid_padded_pages)               \
  A(request_valid_padded_tokens)              \
  A(request_valid_padding_tokens)             \
  A(request_valid_rank_local_tokens)          \
  A(request_valid_rank_local_offsets)         \
  M(request_valid_actual_seq_q_prev)          \
  M(request_valid_actual_seq_q_next)          \
  A(request_valid_seq_q_prev)                 \
  A(request_valid_seq_q_next)                 \
  M(request_valid_query_row_spans)            \
  M(request_compute_split_lists)              \
  M(request_compute_segment_page_starts)      \
  M(request_compute_segment_page_ends)        \
  M(request_compute_padded_pages)             \
  M(request_compute_padded_tokens)            \
  M(request_compute_padding_tokens)           \
  M(request_compute_padded_token_offsets)     \
  M(request_compute_rank_local_tokens)        \
  M(request_compute_rank_local_offsets)       \
  A(request_compute_actual_seq_q_prev)        \
  A(request_compute_actual_seq_q_next)        \
  A(request_compute_seq_q_prev)               \
  A(request_compute_seq_q_next)

// Scalars, strings and lists as themselves.
template <typename T>
Json FieldJson(const T& value) {
  return Json(value);
}

// Tables as SGLang's nested lists.
Json FieldJson(const Int64Table& table) { return table.ToRows(); }

// Row spans as [start, length] pairs, two per request.
Json FieldJson(const std::vector<std::array<RowSpan, 2>>& spans) {
  Json out = Json::array();
  for (const std::array<RowSpan, 2>& req : spans) {
    Json r = Json::array();
    for (const RowSpan& s : req) r.push_back(Json::array({s.start, s.length}));
    out.push_back(r);
  }
  return out;
}

// Writes every PageAlignedInSeqSplitInfo field of `info` into `j`.
void AddSplitInfoFields(const PageAlignedInSeqSplitInfo& info, Json& j) {
#define KVSHARD_MEMBER(name) j[#name] = FieldJson(info.name);
  KVSHARD_SPLIT_INFO_FIELDS(KVSHARD_MEMBER)
#undef KVSHARD_MEMBER
}

// request_split_infos: one info object per request.
Json SplitInfosJson(const CPSharedKVBatchPlan& p) {
  Json infos = Json::array();
  for (int64_t q = 0; q < p.batch_size; ++q) infos.push_back(ToJson(RequestSplitInfo(p, q)));
  return infos;
}

}  // namespace

Json ToJson(const PageAlignedInSeqSplitInfo& info) {
  Json j;
  AddSplitInfoFields(info, j);
  return j;
}

Json ToJson(const CPSharedKVBatchPlan& p) { return ToJson(p, nullptr); }

Json ToJson(const CPSharedKVBatchPlan& p, const Json* only) {
  Json j = Json::object();  // an object even when `only` names no field of the plan (expect then finds it absent)
  ForEachJsonField(p, only, [&j](const char* key, Json value) { j[key] = std::move(value); });
  return j;
}

namespace {

// A field as the visitor's method for its type.
void Visit(PlanFieldVisitor& v, const char* key, bool value) { v.Bool(key, value); }
void Visit(PlanFieldVisitor& v, const char* key, int64_t value) { v.Int(key, value); }
void Visit(PlanFieldVisitor& v, const char* key, const std::string& value) { v.String(key, value); }
void Visit(PlanFieldVisitor& v, const char* key, const Int64List& value) { v.Ints(key, value); }
void Visit(PlanFieldVisitor& v, const char* key, const Int64Table& value) { v.Table(key, value); }
void Visit(PlanFieldVisitor& v, const char* key, const std::vector<std::array<RowSpan, 2>>& value) {
  v.Other(key, FieldJson(value));
}

// Each visited field as its JSON, to `field`.
class JsonFieldVisitor final : public PlanFieldVisitor {
 public:
  explicit JsonFieldVisitor(const std::function<void(const char* key, Json value)>& field) : field_(field) {}
  void Bool(const char* key, bool value) override { field_(key, Json(value)); }
  void Int(const char* key, int64_t value) override { field_(key, Json(value)); }
  void String(const char* key, const std::string& value) override { field_(key, Json(value)); }
  void Ints(const char* key, const Int64List& value) override { field_(key, Json(value)); }
  void Table(const char* key, const Int64Table& value) override { field_(key, FieldJson(value)); }
  void Other(const char* key, Json value) override { field_(key, std::move(value)); }

 private:
  const std::function<void(const char* key, Json value)>& field_;
};

}  // namespace

void ForEachPlanField(const CPSharedKVBatchPlan& p, const Json* only, PlanFieldVisitor& visitor) {
  const auto want = [only](const char* key) { return only == nullptr || only->contains(key); };
#define KVSHARD_MEMBER(name) \
  if (want(#name)) Visit(visitor, #name, p.name);
#define KVSHARD_ACCESSOR(name) \
  if (want(#name)) Visit(visitor, #name, p.name());
#define KVSHARD_SPLIT_INFOS(name) \
  if (want(#name)) visitor.Other(#name, SplitInfosJson(p));
  KVSHARD_CP_BATCH_PLAN_FIELDS(KVSHARD_MEMBER, KVSHARD_ACCESSOR, KVSHARD_SPLIT_INFOS)
#undef KVSHARD_SPLIT_INFOS
#undef KVSHARD_ACCESSOR
#undef KVSHARD_MEMBER
}

void ForEachJsonField(const CPSharedKVBatchPlan& p, const Json* only,
                      const std::function<void(const char* key, Json value)>& field) {
  JsonFieldVisitor visitor(field);
  ForEachPlanField(p, only, visitor);
}

Json ToJson(const NSAContextParallelMetadata& m) {
  Json j;
  j["split_list"] = m.split_list;
  j["split_list_tensor"] = m.split_list_tensor;
  j["split_prefix_tensor"] = m.split_prefix_tensor;
  j["max_rank_len"] = m.max_rank_len;
  j["zigzag_index"] = m.zigzag_index;
  j["per_rank_actual_token"] = m.per_rank_actual_token;
  j["reverse_split_len"] = m.reverse_split_len;
  j["cp_reverse_index"] = m.cp_reverse_index;
  j["kv_len_prev"] = m.kv_len_prev;
  j["kv_len_next"] = m.kv_len_next;
  j["actual_seq_q_prev"] = m.actual_seq_q_prev;
  j["actual_seq_q_next"] = m.actual_seq_q_next;
  j["actual_seq_q_prev_cu_tensor"] = m.actual_seq_q_prev_cu_tensor;
  j["actual_seq_q_next_cu_tensor"] = m.actual_seq_q_next_cu_tensor;
  j["total_seq_lens"] = m.total_seq_lens;
  AddSplitInfoFields(m.info, j);  // request 0's info, inline (SGLang's field order)
  j["batch_size"] = m.batch_size;
  if (m.batch_plan != nullptr) {
    j["request_actual_seq_q_prev_cu_tensor"] = m.request_actual_seq_q_prev_cu_tensor;
    j["request_actual_seq_q_next_cu_tensor"] = m.request_actual_seq_q_next_cu_tensor;
  }
  return j;
}

#undef KVSHARD_CP_BATCH_PLAN_FIELDS
#undef KVSHARD_SPLIT_INFO_FIELDS

}  // namespace kvshard

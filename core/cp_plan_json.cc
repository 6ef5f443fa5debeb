// JSON writers for the CP plan types; key order follows SGLang's dataclasses.
#include "core/cp_plan_json.h"

namespace kvshard {

Json ToJson(const PageAlignedInSeqSplitInfo& info) {
  Json j;
  j["page_aligned"] = info.page_aligned;
  j["page_size"] = info.page_size;
  j["extend_prefix_len"] = info.extend_prefix_len;
  j["segment_page_starts"] = info.segment_page_starts;
  j["segment_page_ends"] = info.segment_page_ends;
  j["extend_valid_tokens"] = info.extend_valid_tokens;
  j["extend_padded_pages"] = info.extend_padded_pages;
  j["extend_padded_tokens"] = info.extend_padded_tokens;
  j["extend_padding_tokens"] = info.extend_padding_tokens;
  return j;
}

Json ToJson(const CPSharedKVBatchPlan& p) {
  Json j;
  j["batch_size"] = p.batch_size;
  j["page_size"] = p.page_size;
  j["cp_size"] = p.cp_size;
  j["cp_rank"] = p.cp_rank;
  j["request_token_offsets"] = p.request_token_offsets;
  j["request_padded_token_offsets"] = p.request_padded_token_offsets;
  j["request_page_offsets"] = p.request_page_offsets;
  j["request_extend_lens"] = p.request_extend_lens;
  j["request_prefix_lens"] = p.request_prefix_lens;
  j["request_padded_pages"] = p.request_padded_pages;
  j["request_padded_tokens"] = p.request_padded_tokens;
  j["request_padding_tokens"] = p.request_padding_tokens;
  Json infos = Json::array();
  for (int64_t q = 0; q < p.batch_size; ++q) infos.push_back(ToJson(RequestSplitInfo(p, q)));
  j["request_split_infos"] = infos;
  j["request_split_lists"] = p.request_split_lists.ToRows();
  j["request_zigzag_indices"] = p.request_zigzag_indices.ToRows();
  j["request_segment_page_starts"] = p.request_segment_page_starts.ToRows();
  j["request_segment_page_ends"] = p.request_segment_page_ends.ToRows();
  j["request_rank_local_tokens"] = p.request_rank_local_tokens;
  j["request_rank_local_offsets"] = p.request_rank_local_offsets;
  j["request_kv_len_prev"] = p.request_kv_len_prev;
  j["request_kv_len_next"] = p.request_kv_len_next;
  j["request_actual_seq_q_prev"] = p.request_actual_seq_q_prev;
  j["request_actual_seq_q_next"] = p.request_actual_seq_q_next;
  j["request_last_token_owner"] = p.request_last_token_owner;
  j["request_last_token_local_offset"] = p.request_last_token_local_offset;
  j["output_collect_mode"] = p.output_collect_mode;
  j["flat_split_list"] = p.flat_split_list();
  j["flat_zigzag_index"] = p.flat_zigzag_index;
  j["flat_segment_request_ids"] = p.flat_segment_request_ids;
  j["flat_segment_offsets"] = p.flat_segment_offsets;
  j["compute_padding_enabled"] = p.compute_padding_enabled;
  j["request_valid_split_lists"] = p.request_valid_split_lists().ToRows();
  j["request_valid_segment_page_starts"] = p.request_valid_segment_page_starts().ToRows();
  j["request_valid_segment_page_ends"] = p.request_valid_segment_page_ends().ToRows();
  j["request_valid_padded_pages"] = p.request_valid_padded_pages();
  j["request_valid_padded_tokens"] = p.request_valid_padded_tokens();
  j["request_valid_padding_tokens"] = p.request_valid_padding_tokens();
  j["request_valid_rank_local_tokens"] = p.request_valid_rank_local_tokens();
  j["request_valid_rank_local_offsets"] = p.request_valid_rank_local_offsets();
  j["request_valid_actual_seq_q_prev"] = p.request_valid_actual_seq_q_prev;
  j["request_valid_actual_seq_q_next"] = p.request_valid_actual_seq_q_next;
  j["request_valid_seq_q_prev"] = p.request_valid_seq_q_prev();
  j["request_valid_seq_q_next"] = p.request_valid_seq_q_next();
  Json spans = Json::array();
  for (const std::array<RowSpan, 2>& req : p.request_valid_query_row_spans) {
    Json r = Json::array();
    for (const RowSpan& s : req) r.push_back(Json::array({s.start, s.length}));
    spans.push_back(r);
  }
  j["request_valid_query_row_spans"] = spans;
  j["request_compute_split_lists"] = p.request_compute_split_lists.ToRows();
  j["request_compute_segment_page_starts"] = p.request_compute_segment_page_starts.ToRows();
  j["request_compute_segment_page_ends"] = p.request_compute_segment_page_ends.ToRows();
  j["request_compute_padded_pages"] = p.request_compute_padded_pages;
  j["request_compute_padded_tokens"] = p.request_compute_padded_tokens;
  j["request_compute_padding_tokens"] = p.request_compute_padding_tokens;
  j["request_compute_padded_token_offsets"] = p.request_compute_padded_token_offsets;
  j["request_compute_rank_local_tokens"] = p.request_compute_rank_local_tokens;
  j["request_compute_rank_local_offsets"] = p.request_compute_rank_local_offsets;
  j["request_compute_actual_seq_q_prev"] = p.request_compute_actual_seq_q_prev();
  j["request_compute_actual_seq_q_next"] = p.request_compute_actual_seq_q_next();
  j["request_compute_seq_q_prev"] = p.request_compute_seq_q_prev();
  j["request_compute_seq_q_next"] = p.request_compute_seq_q_next();
  return j;
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
  j["page_aligned"] = m.info.page_aligned;
  j["page_size"] = m.info.page_size;
  j["extend_prefix_len"] = m.info.extend_prefix_len;
  j["segment_page_starts"] = m.info.segment_page_starts;
  j["segment_page_ends"] = m.info.segment_page_ends;
  j["extend_valid_tokens"] = m.info.extend_valid_tokens;
  j["extend_padded_pages"] = m.info.extend_padded_pages;
  j["extend_padded_tokens"] = m.info.extend_padded_tokens;
  j["extend_padding_tokens"] = m.info.extend_padding_tokens;
  j["batch_size"] = m.batch_size;
  if (m.batch_plan != nullptr) {
    j["request_actual_seq_q_prev_cu_tensor"] = m.request_actual_seq_q_prev_cu_tensor;
    j["request_actual_seq_q_next_cu_tensor"] = m.request_actual_seq_q_next_cu_tensor;
  }
  return j;
}

}  // namespace kvshard

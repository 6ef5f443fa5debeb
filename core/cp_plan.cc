// Flat kernel tables derived from a CPSharedKVBatchPlan (pure functions of the plan).
#include "core/cp_plan.h"

namespace kvshard {

Int64Table Int64Table::FromRows(const std::vector<Int64List>& rows) {
  Int64Table t;
  t.width = rows.empty() ? 0 : static_cast<int64_t>(rows[0].size());
  for (const Int64List& r : rows) t.values.insert(t.values.end(), r.begin(), r.end());
  return t;
}

std::vector<Int64List> Int64Table::ToRows() const {
  std::vector<Int64List> out;
  for (int64_t q = 0; q < rows(); ++q) out.emplace_back((*this)[q].begin(), (*this)[q].end());
  return out;
}

PageAlignedInSeqSplitInfo RequestSplitInfo(const CPSharedKVBatchPlan& plan, int64_t q) {
  PageAlignedInSeqSplitInfo info;
  info.page_aligned = true;
  info.page_size = plan.page_size;
  info.extend_prefix_len = plan.request_prefix_lens[q];
  const auto starts = plan.request_segment_page_starts[q];
  const auto ends = plan.request_segment_page_ends[q];
  info.segment_page_starts.assign(starts.begin(), starts.end());
  info.segment_page_ends.assign(ends.begin(), ends.end());
  info.extend_valid_tokens = plan.request_extend_lens[q];
  info.extend_padded_pages = plan.request_padded_pages[q];
  info.extend_padded_tokens = plan.request_padded_tokens[q];
  info.extend_padding_tokens = plan.request_padding_tokens[q];
  return info;
}

FlatSplitTables FlattenSplitTables(const CPSharedKVBatchPlan& plan, SplitKind kind) {
  const bool compute = kind == SplitKind::kCompute && plan.compute_padding_enabled;
  const Int64Table& lists = compute ? plan.request_compute_split_lists : plan.request_split_lists;
  const Int64List& targets = compute ? plan.request_compute_padded_tokens : plan.request_extend_lens;
  FlatSplitTables t;
  t.batch_size = plan.batch_size;
  t.segments = 2 * plan.cp_size;
  t.split_lens.reserve(plan.batch_size * t.segments);
  t.segment_offsets.reserve(plan.batch_size * t.segments);
  t.input_row_offsets.push_back(0);
  t.target_offsets.push_back(0);
  t.local_row_offsets.push_back(0);
  const int64_t r = plan.cp_rank, mirror = 2 * plan.cp_size - 1 - plan.cp_rank;
  for (int64_t q = 0; q < plan.batch_size; ++q) {
    int64_t cursor = 0;
    for (int64_t len : lists[q]) {
      t.split_lens.push_back(len);
      t.segment_offsets.push_back(cursor);
      cursor += len;
    }
    t.input_row_offsets.push_back(t.input_row_offsets.back() + plan.request_extend_lens[q]);
    t.target_lens.push_back(targets[q]);
    t.target_offsets.push_back(t.target_offsets.back() + targets[q]);
    t.local_row_offsets.push_back(t.local_row_offsets.back() + lists[q][r] + lists[q][mirror]);
  }
  return t;
}

RerangeTables BuildRerangeTables(const Int64Table& split_lists, int64_t cp_size) {
  RerangeTables t;
  t.cp_size = cp_size;
  t.batch_size = split_lists.rows();
  t.rank_request_offsets.reserve(cp_size * t.batch_size);
  for (int64_t rank = 0; rank < cp_size; ++rank) {
    const int64_t mirror = 2 * cp_size - 1 - rank;
    int64_t cursor = 0;
    for (int64_t q = 0; q < t.batch_size; ++q) {
      const auto split = split_lists[q];
      t.rank_request_offsets.push_back(cursor);
      cursor += split[rank] + split[mirror];
    }
    t.per_rank_tokens.push_back(cursor);
  }
  return t;
}

}  // namespace kvshard

// Reference CP split plans: SGLang's planners (seed 003) as spec §4 states them, with int64 limits. The batch
// plan is the single-request splitters applied request by request (the flat-table planner is in cpu_fast/).
#include "cpu_ref/cp_split.h"

#include <algorithm>

#include "cpu_ref/cp_split_internal.h"

namespace kvshard::ref {
namespace internal {

Int64List PrefixOffsets(std::span<const int64_t> lengths) {
  Int64List out(lengths.size());
  int64_t cursor = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    out[i] = cursor;
    cursor += lengths[i];
  }
  return out;
}

Int64List Accumulate(std::span<const int64_t> lengths) {
  Int64List out(lengths.size());
  int64_t cursor = 0;
  for (size_t i = 0; i < lengths.size(); ++i) out[i] = cursor += lengths[i];
  return out;
}

}  // namespace internal

namespace {

// Page units dealt to `segments`: units // S each, +1 for the first units % S.
Int64List UnitCounts(int64_t units, int64_t segments) {
  Int64List counts(segments, units / segments);
  for (int64_t s = 0; s < units % segments; ++s) ++counts[s];
  return counts;
}

// Consecutive page ranges of counts[s] pages from base_page: their first pages and end pages (exclusive).
void PageRanges(const Int64List& counts, int64_t base_page, Int64List* starts, Int64List* ends) {
  int64_t page = base_page;
  for (int64_t count : counts) {
    starts->push_back(page);
    page += count;
    ends->push_back(page);
  }
}

Status ValidateTokens(const char* field, int64_t value) {
  if (value < 0) return InvalidArgument(field, ": must be non-negative, got ", value);
  if (value > kMaxCpTokens) return InvalidArgument(field, ": must be at most 2^48, got ", value);
  return Status::Ok();
}

}  // namespace

StatusOr<Int64List> BuildTokenBalancedInSeqSplitList(int64_t total_len, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateTokens("total_len", total_len));
  const int64_t segments = 2 * cp_size;
  Int64List out(segments, total_len / segments);
  for (int64_t i = 0; i < total_len % segments; ++i) ++out[i];
  return out;
}

StatusOr<InSeqSplit> BuildPageAlignedInSeqSplitList(int64_t total_len, int64_t extend_len, int64_t extend_prefix_len,
                                                    int64_t page_size, int64_t cp_size) {
  if (extend_len < 0) return InvalidArgument("extend_len: must be non-negative, got ", extend_len);
  if (total_len < extend_len) {
    return InvalidArgument("total_len: must be >= extend_len, got total_len=", total_len, " extend_len=", extend_len);
  }
  KVSHARD_ASSIGN_OR_RETURN(Int64List fallback, BuildTokenBalancedInSeqSplitList(total_len, cp_size));
  InSeqSplit out;
  out.info.page_size = page_size;
  out.info.extend_prefix_len = extend_prefix_len;
  if (page_size <= 1 || extend_len <= 0 || extend_prefix_len % page_size != 0) {
    out.split_list = std::move(fallback);
    return out;
  }
  KVSHARD_RETURN_IF_ERROR(ValidatePageSize(page_size));
  if (extend_prefix_len > kMaxCpTokens || extend_prefix_len < -kMaxCpTokens) {
    return InvalidArgument("extend_prefix_len: must be in [-2^48, 2^48], got ", extend_prefix_len);
  }
  const int64_t pages = (extend_len + page_size - 1) / page_size;
  const Int64List counts = UnitCounts(pages, 2 * cp_size);
  PageRanges(counts, internal::FloorDiv(extend_prefix_len, page_size), &out.info.segment_page_starts,
             &out.info.segment_page_ends);
  // A segment's tokens are its pages' valid tokens (only the request's last page can be partial).
  int64_t unit = 0;
  for (int64_t count : counts) {
    out.split_list.push_back(std::min((unit + count) * page_size, extend_len) - std::min(unit * page_size, extend_len));
    unit += count;
  }
  out.split_list.back() += total_len - extend_len;
  out.info.page_aligned = true;
  out.info.extend_valid_tokens = extend_len;
  out.info.extend_padded_pages = pages;
  out.info.extend_padded_tokens = pages * page_size;
  out.info.extend_padding_tokens = pages * page_size - extend_len;
  return out;
}

StatusOr<FullPageUnitSplit> BuildFullPageUnitSplit(int64_t page_units, int64_t extend_prefix_len, int64_t page_size,
                                                   int64_t cp_size) {
  if (page_units < 0) return InvalidArgument("page_units: must be non-negative, got ", page_units);
  KVSHARD_RETURN_IF_ERROR(ValidatePageSize(page_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  if (extend_prefix_len < 0 || extend_prefix_len % page_size != 0) {
    return InvalidArgument("extend_prefix_len: must be non-negative and page-aligned, got extend_prefix_len=",
                           extend_prefix_len, " page_size=", page_size);
  }
  KVSHARD_RETURN_IF_ERROR(ValidateTokens("page_units", page_units));
  KVSHARD_RETURN_IF_ERROR(ValidateTokens("extend_prefix_len", extend_prefix_len));
  FullPageUnitSplit out;
  const Int64List counts = UnitCounts(page_units, 2 * cp_size);
  PageRanges(counts, extend_prefix_len / page_size, &out.segment_page_starts, &out.segment_page_ends);
  for (int64_t count : counts) out.split_list.push_back(count * page_size);
  return out;
}

StatusOr<LastTokenLocation> GetInSeqLastTokenOwnerAndOffset(const Int64List& split_list, int64_t cp_size,
                                                            int64_t actual_token_count) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  if (static_cast<int64_t>(split_list.size()) != 2 * cp_size) {
    return InvalidArgument("split_list: in-seq split_list length must equal 2 * cp_size, got len=", split_list.size(),
                           " cp_size=", cp_size);
  }
  if (actual_token_count <= 0) {
    return InvalidArgument("actual_token_count: must be positive, got ", actual_token_count);
  }
  int64_t total = 0;
  for (int64_t len : split_list) {
    if (len < 0 || len > kMaxCpTokens) return InvalidArgument("split_list: lengths must be in [0, 2^48], got ", len);
    total += len;
  }
  if (actual_token_count > total) {
    return InvalidArgument("actual_token_count: exceeds split capacity: actual=", actual_token_count,
                           " split_total=", total);
  }
  int64_t offset = actual_token_count - 1, segment = 0;
  while (offset >= split_list[segment]) offset -= split_list[segment++];
  if (segment < cp_size) return LastTokenLocation{segment, offset};
  const int64_t owner = 2 * cp_size - segment - 1;  // segment 2N-1-r belongs to rank r, after its segment r
  return LastTokenLocation{owner, split_list[owner] + offset};
}

namespace {

// Request q's checks of the batch planner, in SGLang's order; adds its extend to *total_tokens.
Status ValidateBatchRequest(int64_t q, int64_t extend_len, int64_t prefix_len, int64_t page_size,
                            int64_t* total_tokens) {
  if (extend_len <= 0) {
    return FailFast("batch_gt1_empty_extend", "CP shared-KV batch planning requires positive extend lens. req_id=", q,
                    " extend_len=", extend_len);
  }
  if (prefix_len < 0) return InvalidArgument("prefix_lens[", q, "]: must be non-negative, got ", prefix_len);
  if (prefix_len % page_size != 0) {
    return FailFast("batch_gt1_non_page_aligned_prefix",
                    "CP shared-KV batch planning requires page-aligned prefixes. The radix/HiCache match path "
                    "should floor cache hits to the previous page boundary before planning. req_id=",
                    q, " prefix_len=", prefix_len, " extend_len=", extend_len, " page_size=", page_size);
  }
  if (extend_len > kMaxCpTokens) return InvalidArgument("extend_lens[", q, "]: must be at most 2^48, got ", extend_len);
  if (prefix_len > kMaxCpTokens) return InvalidArgument("prefix_lens[", q, "]: must be at most 2^48, got ", prefix_len);
  *total_tokens += extend_len;
  if (*total_tokens > kMaxCpTokens) return InvalidArgument("extend_lens: total must be at most 2^48");
  return Status::Ok();
}

// The batch planner's checks, in SGLang's order: ValueErrors, per-request checks, then the page-split fallback.
Status ValidateBatchPlanArgs(const Int64List& extend_lens, const Int64List& prefix_lens, int64_t page_size,
                             int64_t cp_size, int64_t cp_rank) {
  if (extend_lens.size() != prefix_lens.size()) {
    return InvalidArgument("prefix_lens: extend_lens and prefix_lens must have the same length, got ",
                           extend_lens.size(), " and ", prefix_lens.size());
  }
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(cp_rank, cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidatePageSize(page_size));
  const int64_t batch = static_cast<int64_t>(extend_lens.size());
  if (batch > kMaxCpSegments / (2 * cp_size)) {
    return InvalidArgument("extend_lens: batch_size * 2 * cp_size must be at most 2^24, got batch_size=", batch);
  }
  int64_t total_tokens = 0;
  for (int64_t q = 0; q < batch; ++q) {
    KVSHARD_RETURN_IF_ERROR(ValidateBatchRequest(q, extend_lens[q], prefix_lens[q], page_size, &total_tokens));
  }
  if (batch > 0 && page_size <= 1) {  // build_page_aligned_in_seq_split_list falls back for every request
    return FailFast("batch_gt1_page_split_fallback",
                    "CP shared-KV batch planning must not use token-balanced fallback. req_id=0 prefix_len=",
                    prefix_lens[0], " extend_len=", extend_lens[0], " page_size=", page_size);
  }
  return Status::Ok();
}

void AppendRow(const Int64List& row, Int64Table* table) {
  table->values.insert(table->values.end(), row.begin(), row.end());
}

// Request q's valid-split fields: split, page ranges, padding, this rank's rows and inclusive kv lengths.
void AppendValidSplit(int64_t q, const InSeqSplit& valid, CPSharedKVBatchPlan* p) {
  const Int64List& v = valid.split_list;
  const int64_t r = p->cp_rank, mirror = 2 * p->cp_size - r - 1;
  const Int64List kv_lens = internal::Accumulate(v);
  AppendRow(v, &p->request_split_lists);
  AppendRow(valid.info.segment_page_starts, &p->request_segment_page_starts);
  AppendRow(valid.info.segment_page_ends, &p->request_segment_page_ends);
  p->request_padded_pages.push_back(valid.info.extend_padded_pages);
  p->request_padded_tokens.push_back(valid.info.extend_padded_tokens);
  p->request_padding_tokens.push_back(valid.info.extend_padding_tokens);
  p->request_rank_local_tokens.push_back(v[r] + v[mirror]);
  p->request_kv_len_prev.push_back(kv_lens[r]);
  p->request_kv_len_next.push_back(kv_lens[mirror]);
  p->request_valid_actual_seq_q_prev.push_back(v[r]);
  p->request_valid_actual_seq_q_next.push_back(v[mirror]);
  for (int64_t offset : internal::PrefixOffsets(v)) p->flat_segment_offsets.push_back(offset);
  p->flat_segment_request_ids.insert(p->flat_segment_request_ids.end(), v.size(), q);
}

// Request q's compute-split fields: compute_pages full page units, their padding and this rank's rows.
void AppendComputeSplit(const FullPageUnitSplit& compute, int64_t compute_pages, int64_t extend_len,
                        CPSharedKVBatchPlan* p) {
  const Int64List& c = compute.split_list;
  const int64_t r = p->cp_rank, mirror = 2 * p->cp_size - r - 1;
  AppendRow(c, &p->request_compute_split_lists);
  AppendRow(compute.segment_page_starts, &p->request_compute_segment_page_starts);
  AppendRow(compute.segment_page_ends, &p->request_compute_segment_page_ends);
  p->request_compute_padded_pages.push_back(compute_pages);
  p->request_compute_padded_tokens.push_back(compute_pages * p->page_size);
  p->request_compute_padding_tokens.push_back(compute_pages * p->page_size - extend_len);
  p->request_compute_rank_local_tokens.push_back(c[r] + c[mirror]);
  p->request_actual_seq_q_prev.push_back(c[r]);
  p->request_actual_seq_q_next.push_back(c[mirror]);
}

// Request q of the batch: its valid split, the compute split of max(pages, N) full page units, the last token
// located in the compute split, and its zigzag segments r and 2N-1-r.
Status AppendRequest(int64_t q, int64_t extend_len, int64_t prefix_len, CPSharedKVBatchPlan* p) {
  const int64_t n = p->cp_size, ps = p->page_size, r = p->cp_rank, mirror = 2 * n - r - 1;
  KVSHARD_ASSIGN_OR_RETURN(const InSeqSplit valid,
                           BuildPageAlignedInSeqSplitList(extend_len, extend_len, prefix_len, ps, n));
  const int64_t compute_pages = std::max(valid.info.extend_padded_pages, n);
  KVSHARD_ASSIGN_OR_RETURN(const FullPageUnitSplit compute, BuildFullPageUnitSplit(compute_pages, prefix_len, ps, n));
  KVSHARD_ASSIGN_OR_RETURN(const LastTokenLocation last,
                           GetInSeqLastTokenOwnerAndOffset(compute.split_list, n, extend_len));
  AppendValidSplit(q, valid, p);
  AppendComputeSplit(compute, compute_pages, extend_len, p);
  p->request_last_token_owner.push_back(last.owner);
  p->request_last_token_local_offset.push_back(last.local_offset);
  p->request_valid_query_row_spans.push_back(
      {RowSpan{0, valid.split_list[r]}, RowSpan{compute.split_list[r], valid.split_list[mirror]}});
  AppendRow({r, mirror}, &p->request_zigzag_indices);
  p->flat_zigzag_index.push_back(q * 2 * n + r);
  p->flat_zigzag_index.push_back(q * 2 * n + mirror);
  return Status::Ok();
}

}  // namespace

StatusOr<CPSharedKVBatchPlan> BuildBatchPageAlignedInSeqSplitPlan(const Int64List& extend_lens,
                                                                  const Int64List& prefix_lens, int64_t page_size,
                                                                  int64_t cp_size, int64_t cp_rank) {
  KVSHARD_RETURN_IF_ERROR(ValidateBatchPlanArgs(extend_lens, prefix_lens, page_size, cp_size, cp_rank));
  CPSharedKVBatchPlan p;
  p.batch_size = static_cast<int64_t>(extend_lens.size());
  p.page_size = page_size;
  p.cp_size = cp_size;
  p.cp_rank = cp_rank;
  p.request_extend_lens = extend_lens;
  p.request_prefix_lens = prefix_lens;
  for (Int64Table* t :
       {&p.request_split_lists, &p.request_segment_page_starts, &p.request_segment_page_ends,
        &p.request_compute_split_lists, &p.request_compute_segment_page_starts, &p.request_compute_segment_page_ends}) {
    t->width = 2 * cp_size;
  }
  p.request_zigzag_indices.width = 2;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    KVSHARD_RETURN_IF_ERROR(AppendRequest(q, extend_lens[q], prefix_lens[q], &p));
  }
  p.request_token_offsets = internal::PrefixOffsets(p.request_extend_lens);
  p.request_padded_token_offsets = internal::PrefixOffsets(p.request_padded_tokens);
  p.request_page_offsets = internal::PrefixOffsets(p.request_padded_pages);
  p.request_rank_local_offsets = internal::PrefixOffsets(p.request_rank_local_tokens);
  p.request_compute_padded_token_offsets = internal::PrefixOffsets(p.request_compute_padded_tokens);
  p.request_compute_rank_local_offsets = internal::PrefixOffsets(p.request_compute_rank_local_tokens);
  // Compute padding: some request's compute padded tokens differ from its valid padded tokens.
  p.compute_padding_enabled = p.request_compute_padded_tokens != p.request_padded_tokens;
  return p;
}

Status BuildBatchPageAlignedInSeqSplitPlanInto(const Int64List& extend_lens, const Int64List& prefix_lens,
                                               int64_t page_size, int64_t cp_size, int64_t cp_rank,
                                               CPSharedKVBatchPlan* plan) {
  KVSHARD_ASSIGN_OR_RETURN(*plan,
                           BuildBatchPageAlignedInSeqSplitPlan(extend_lens, prefix_lens, page_size, cp_size, cp_rank));
  return Status::Ok();
}

}  // namespace kvshard::ref

// Reference CP split plans: a line-by-line model of SGLang's planners (seed 003), with int64 limits.
#include "cpu_ref/cp_split.h"

#include <algorithm>

namespace kvshard::ref {
namespace {

// Exclusive prefix sums (SGLang _prefix_offsets).
Int64List PrefixOffsets(const Int64List& lengths) {
  Int64List out;
  out.reserve(lengths.size());
  int64_t cursor = 0;
  for (int64_t len : lengths) {
    out.push_back(cursor);
    cursor += len;
  }
  return out;
}

// Inclusive prefix sums (itertools.accumulate).
Int64List Accumulate(const Int64List& lengths) {
  Int64List out;
  out.reserve(lengths.size());
  int64_t cursor = 0;
  for (int64_t len : lengths) out.push_back(cursor += len);
  return out;
}

// Python floor division for a positive divisor.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

Status ValidatePageSize(int64_t page_size) {
  if (page_size <= 0) return InvalidArgument("page_size: must be positive, got ", page_size);
  if (page_size > kMaxCpPageSize) return InvalidArgument("page_size: must be at most ", kMaxCpPageSize, ", got ", page_size);
  return Status::Ok();
}

Status ValidateTokens(const char* field, int64_t value) {
  if (value < 0) return InvalidArgument(field, ": must be non-negative, got ", value);
  if (value > kMaxCpTokens) return InvalidArgument(field, ": must be at most 2^48, got ", value);
  return Status::Ok();
}

// Unit counts dealt to 2N segments: units//2N, +1 for the first units%2N.
Int64List DealUnits(int64_t units, int64_t segments) {
  Int64List counts(segments, units / segments);
  for (int64_t i = 0; i < units % segments; ++i) ++counts[i];
  return counts;
}

}  // namespace

Status ValidateCpSize(int64_t cp_size) {
  if (cp_size <= 0) return InvalidArgument("cp_size: must be positive, got ", cp_size);
  if (cp_size > kMaxCpSize) return InvalidArgument("cp_size: must be at most ", kMaxCpSize, ", got ", cp_size);
  return Status::Ok();
}

Status ValidateCpRank(int64_t cp_rank, int64_t cp_size) {
  if (cp_rank < 0 || cp_rank >= cp_size) return InvalidArgument("cp_rank: must be in [0, ", cp_size, "), got ", cp_rank);
  return Status::Ok();
}

StatusOr<Int64List> BuildTokenBalancedInSeqSplitList(int64_t total_len, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateTokens("total_len", total_len));
  return DealUnits(total_len, 2 * cp_size);
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
  const int64_t padded_pages = (extend_len + page_size - 1) / page_size;
  const int64_t full_pages = extend_len / page_size;
  const int64_t tail_tokens = extend_len % page_size;
  const int64_t segments = 2 * cp_size;
  const Int64List units = DealUnits(padded_pages, segments);
  const int64_t base_page = FloorDiv(extend_prefix_len, page_size);
  out.split_list.reserve(segments);
  int64_t cursor = 0;
  for (int64_t count : units) {
    out.info.segment_page_starts.push_back(base_page + cursor);
    // Units before full_pages are whole pages; the (single) unit at full_pages is the partial tail.
    const int64_t whole = std::max<int64_t>(0, std::min(cursor + count, full_pages) - cursor);
    out.split_list.push_back(whole * page_size + (count - whole) * tail_tokens);
    cursor += count;
    out.info.segment_page_ends.push_back(base_page + cursor);
  }
  out.split_list.back() += total_len - extend_len;
  out.info.page_aligned = true;
  out.info.extend_valid_tokens = extend_len;
  out.info.extend_padded_pages = padded_pages;
  out.info.extend_padded_tokens = padded_pages * page_size;
  out.info.extend_padding_tokens = padded_pages * page_size - extend_len;
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
  FullPageUnitSplit out;
  const int64_t base_page = extend_prefix_len / page_size;
  int64_t cursor = 0;
  for (int64_t count : DealUnits(page_units, 2 * cp_size)) {
    out.segment_page_starts.push_back(base_page + cursor);
    cursor += count;
    out.segment_page_ends.push_back(base_page + cursor);
    out.split_list.push_back(count * page_size);
  }
  return out;
}

StatusOr<LastTokenLocation> GetInSeqLastTokenOwnerAndOffset(const Int64List& split_list, int64_t cp_size,
                                                            int64_t actual_token_count) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  const int64_t segments = 2 * cp_size;
  if (static_cast<int64_t>(split_list.size()) != segments) {
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
  int64_t offset = actual_token_count - 1;
  int64_t segment = 0;
  for (; segment < segments; ++segment) {
    if (offset < split_list[segment]) break;
    offset -= split_list[segment];
  }
  if (segment < cp_size) return LastTokenLocation{segment, offset};
  const int64_t owner = segments - segment - 1;
  return LastTokenLocation{owner, split_list[owner] + offset};
}

StatusOr<CPSharedKVBatchPlan> BuildBatchPageAlignedInSeqSplitPlan(const Int64List& extend_lens,
                                                                   const Int64List& prefix_lens, int64_t page_size,
                                                                   int64_t cp_size, int64_t cp_rank) {
  if (extend_lens.size() != prefix_lens.size()) {
    return InvalidArgument("prefix_lens: extend_lens and prefix_lens must have the same length, got ",
                           extend_lens.size(), " and ", prefix_lens.size());
  }
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(cp_rank, cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidatePageSize(page_size));
  const int64_t batch = static_cast<int64_t>(extend_lens.size());
  const int64_t segments = 2 * cp_size;
  if (batch > kMaxCpSegments / segments) {
    return InvalidArgument("extend_lens: batch_size * 2 * cp_size must be at most 2^24, got batch_size=", batch);
  }
  int64_t total_tokens = 0;
  for (int64_t q = 0; q < batch; ++q) {
    const int64_t extend_len = extend_lens[q], prefix_len = prefix_lens[q];
    if (extend_len <= 0) {
      return FailFast("batch_gt1_empty_extend",
                      "CP shared-KV batch planning requires positive extend lens. req_id=", q,
                      " extend_len=", extend_len);
    }
    if (prefix_len < 0) return InvalidArgument("prefix_lens[", q, "]: must be non-negative, got ", prefix_len);
    if (prefix_len % page_size != 0) {
      return FailFast("batch_gt1_non_page_aligned_prefix",
                      "CP shared-KV batch planning requires page-aligned prefixes. The radix/HiCache match path "
                      "should floor cache hits to the previous page boundary before planning. req_id=", q,
                      " prefix_len=", prefix_len, " extend_len=", extend_len, " page_size=", page_size);
    }
    if (extend_len > kMaxCpTokens) return InvalidArgument("extend_lens[", q, "]: must be at most 2^48, got ", extend_len);
    if (prefix_len > kMaxCpTokens) return InvalidArgument("prefix_lens[", q, "]: must be at most 2^48, got ", prefix_len);
    total_tokens += extend_len;
    if (total_tokens > kMaxCpTokens) return InvalidArgument("extend_lens: total must be at most 2^48");
  }
  CPSharedKVBatchPlan p;
  p.batch_size = batch;
  p.page_size = page_size;
  p.cp_size = cp_size;
  p.cp_rank = cp_rank;
  p.request_extend_lens = extend_lens;
  p.request_prefix_lens = prefix_lens;
  const int64_t mirror = segments - cp_rank - 1;
  for (int64_t q = 0; q < batch; ++q) {
    const int64_t extend_len = extend_lens[q], prefix_len = prefix_lens[q];
    KVSHARD_ASSIGN_OR_RETURN(InSeqSplit split,
                             BuildPageAlignedInSeqSplitList(extend_len, extend_len, prefix_len, page_size, cp_size));
    if (!split.info.page_aligned) {
      return FailFast("batch_gt1_page_split_fallback",
                      "CP shared-KV batch planning must not use token-balanced fallback. req_id=", q,
                      " prefix_len=", prefix_len, " extend_len=", extend_len, " page_size=", page_size);
    }
    const Int64List& valid = split.split_list;
    const PageAlignedInSeqSplitInfo& info = split.info;
    const int64_t compute_pages = std::max(info.extend_padded_pages, cp_size);
    KVSHARD_ASSIGN_OR_RETURN(FullPageUnitSplit compute,
                             BuildFullPageUnitSplit(compute_pages, prefix_len, page_size, cp_size));
    KVSHARD_ASSIGN_OR_RETURN(LastTokenLocation last,
                             GetInSeqLastTokenOwnerAndOffset(compute.split_list, cp_size, extend_len));
    const Int64List prefix_sum = Accumulate(valid);
    const int64_t rank_local_tokens = valid[cp_rank] + valid[mirror];
    const int64_t compute_rank_local_tokens = compute.split_list[cp_rank] + compute.split_list[mirror];

    p.request_split_infos.push_back(info);
    p.request_split_lists.push_back(valid);
    p.request_zigzag_indices.push_back({cp_rank, mirror});
    p.request_segment_page_starts.push_back(info.segment_page_starts);
    p.request_segment_page_ends.push_back(info.segment_page_ends);
    p.request_padded_pages.push_back(info.extend_padded_pages);
    p.request_padded_tokens.push_back(info.extend_padded_tokens);
    p.request_padding_tokens.push_back(info.extend_padding_tokens);
    p.request_rank_local_tokens.push_back(rank_local_tokens);
    p.request_kv_len_prev.push_back(prefix_sum[cp_rank]);
    p.request_kv_len_next.push_back(prefix_sum[mirror]);
    p.request_actual_seq_q_prev.push_back(compute.split_list[cp_rank]);
    p.request_actual_seq_q_next.push_back(compute.split_list[mirror]);
    p.request_last_token_owner.push_back(last.owner);
    p.request_last_token_local_offset.push_back(last.local_offset);
    p.request_valid_split_lists.push_back(valid);
    p.request_valid_segment_page_starts.push_back(info.segment_page_starts);
    p.request_valid_segment_page_ends.push_back(info.segment_page_ends);
    p.request_valid_padded_pages.push_back(info.extend_padded_pages);
    p.request_valid_padded_tokens.push_back(info.extend_padded_tokens);
    p.request_valid_padding_tokens.push_back(info.extend_padding_tokens);
    p.request_valid_rank_local_tokens.push_back(rank_local_tokens);
    p.request_valid_actual_seq_q_prev.push_back(valid[cp_rank]);
    p.request_valid_actual_seq_q_next.push_back(valid[mirror]);
    p.request_valid_seq_q_prev.push_back(valid[cp_rank]);
    p.request_valid_seq_q_next.push_back(valid[mirror]);
    p.request_valid_query_row_spans.push_back({{0, valid[cp_rank]}, {compute.split_list[cp_rank], valid[mirror]}});
    p.request_compute_padded_pages.push_back(compute_pages);
    p.request_compute_padded_tokens.push_back(compute_pages * page_size);
    p.request_compute_padding_tokens.push_back(compute_pages * page_size - extend_len);
    p.request_compute_rank_local_tokens.push_back(compute_rank_local_tokens);
    p.request_compute_actual_seq_q_prev.push_back(compute.split_list[cp_rank]);
    p.request_compute_actual_seq_q_next.push_back(compute.split_list[mirror]);
    p.request_compute_seq_q_prev.push_back(compute.split_list[cp_rank]);
    p.request_compute_seq_q_next.push_back(compute.split_list[mirror]);
    p.request_compute_split_lists.push_back(std::move(compute.split_list));
    p.request_compute_segment_page_starts.push_back(std::move(compute.segment_page_starts));
    p.request_compute_segment_page_ends.push_back(std::move(compute.segment_page_ends));
    int64_t cursor = 0;
    for (int64_t s = 0; s < segments; ++s) {
      p.flat_split_list.push_back(valid[s]);
      p.flat_segment_request_ids.push_back(q);
      p.flat_segment_offsets.push_back(cursor);
      cursor += valid[s];
    }
    p.flat_zigzag_index.push_back(q * segments + cp_rank);
    p.flat_zigzag_index.push_back(q * segments + mirror);
  }
  p.request_token_offsets = PrefixOffsets(p.request_extend_lens);
  p.request_padded_token_offsets = PrefixOffsets(p.request_padded_tokens);
  p.request_page_offsets = PrefixOffsets(p.request_padded_pages);
  p.request_rank_local_offsets = PrefixOffsets(p.request_rank_local_tokens);
  p.output_collect_mode = "narrow_last_token";
  for (int64_t q = 0; q < batch; ++q) {
    if (p.request_compute_padded_tokens[q] != p.request_valid_padded_tokens[q]) p.compute_padding_enabled = true;
  }
  p.request_valid_rank_local_offsets = PrefixOffsets(p.request_valid_rank_local_tokens);
  p.request_compute_padded_token_offsets = PrefixOffsets(p.request_compute_padded_tokens);
  p.request_compute_rank_local_offsets = PrefixOffsets(p.request_compute_rank_local_tokens);
  return p;
}

StatusOr<NSAContextParallelMetadata> BuildBatchMetadataFromPlan(const CPSharedKVBatchPlan& plan) {
  if (plan.batch_size <= 0 || plan.request_split_lists.empty()) {
    return InvalidArgument("extend_lens: the batch needs at least one request (SGLang's metadata indexes request 0)");
  }
  const Int64Table& comm = plan.compute_padding_enabled ? plan.request_compute_split_lists : plan.request_split_lists;
  const int64_t n = plan.cp_size;
  NSAContextParallelMetadata m;
  for (int64_t rank = 0; rank < n; ++rank) {
    int64_t tokens = 0;
    for (const Int64List& split : comm) tokens += split[rank] + split[2 * n - rank - 1];
    m.per_rank_actual_token.push_back(tokens);
  }
  const int64_t max_rank_token =
      m.per_rank_actual_token.empty() ? 0 : *std::max_element(m.per_rank_actual_token.begin(), m.per_rank_actual_token.end());
  m.max_rank_len.assign(n, max_rank_token);
  const Int64List empty;
  const Int64List& first_split = comm.empty() ? empty : comm[0];
  const Int64List& first_valid = !plan.request_valid_split_lists.empty() ? plan.request_valid_split_lists[0]
                                 : !plan.request_split_lists.empty()      ? plan.request_split_lists[0]
                                                                          : empty;
  const Int64List first_valid_prefix = Accumulate(first_valid);
  const int64_t first_mirror = 2 * n - plan.cp_rank - 1;
  m.split_list = first_split;
  for (const Int64List& split : comm) m.split_list_tensor.insert(m.split_list_tensor.end(), split.begin(), split.end());
  m.split_prefix_tensor = PrefixOffsets(m.split_list_tensor);
  m.zigzag_index = plan.request_zigzag_indices.empty() ? Int64List{} : plan.request_zigzag_indices[0];
  m.kv_len_prev = first_valid_prefix.empty() ? 0 : first_valid_prefix[plan.cp_rank];
  m.kv_len_next = first_valid_prefix.empty() ? 0 : first_valid_prefix[first_mirror];
  m.actual_seq_q_prev = first_split.empty() ? 0 : first_split[plan.cp_rank];
  m.actual_seq_q_next = first_split.empty() ? 0 : first_split[first_mirror];
  m.actual_seq_q_prev_cu_tensor = {0, m.actual_seq_q_prev};
  m.actual_seq_q_next_cu_tensor = {0, m.actual_seq_q_next};
  if (!first_split.empty()) {
    for (int64_t i = 0; i < n; ++i) {
      m.reverse_split_len.push_back(first_split[i]);
      m.reverse_split_len.push_back(first_split[2 * n - i - 1]);
    }
    for (int64_t i = 0; i < 2 * n; i += 2) m.cp_reverse_index.push_back(i);
    for (int64_t i = 2 * n - 1; i > 0; i -= 2) m.cp_reverse_index.push_back(i);
  }
  m.total_seq_lens = max_rank_token * n;
  if (!plan.request_split_infos.empty()) {
    m.info = plan.request_split_infos[0];
  } else {
    m.info = PageAlignedInSeqSplitInfo{};
  }
  m.info.page_aligned = true;
  m.info.page_size = plan.page_size;
  m.batch_size = plan.batch_size;
  m.has_batch_plan = true;
  m.batch_plan = plan;
  m.request_actual_seq_q_prev_cu_tensor = {0};
  m.request_actual_seq_q_next_cu_tensor = {0};
  for (int64_t v : Accumulate(plan.request_actual_seq_q_prev)) m.request_actual_seq_q_prev_cu_tensor.push_back(v);
  for (int64_t v : Accumulate(plan.request_actual_seq_q_next)) m.request_actual_seq_q_next_cu_tensor.push_back(v);
  return m;
}

StatusOr<NSAContextParallelMetadata> BuildScalarCPMetadata(const InSeqSplit& split, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(cp_rank, cp_size));
  const Int64List& s = split.split_list;
  const int64_t segments = 2 * cp_size;
  if (static_cast<int64_t>(s.size()) != segments) {
    return InvalidArgument("split_list: must have 2 * cp_size entries, got ", s.size());
  }
  for (int64_t len : s) {
    if (len < 0 || len > kMaxCpTokens) return InvalidArgument("split_list: lengths must be in [0, 2^48], got ", len);
  }
  NSAContextParallelMetadata m;
  m.split_list = s;
  m.split_list_tensor = s;
  m.split_prefix_tensor = PrefixOffsets(s);
  m.zigzag_index = {cp_rank, segments - cp_rank - 1};
  for (int64_t i = 0; i < cp_size; ++i) m.per_rank_actual_token.push_back(s[i] + s[segments - i - 1]);
  const int64_t max_rank_token = *std::max_element(m.per_rank_actual_token.begin(), m.per_rank_actual_token.end());
  m.max_rank_len.assign(cp_size, max_rank_token);
  m.total_seq_lens = max_rank_token * cp_size;
  for (int64_t i = 0; i < cp_size; ++i) {
    m.reverse_split_len.push_back(s[i]);
    m.reverse_split_len.push_back(s[segments - i - 1]);
  }
  for (int64_t i = 0; i < segments; i += 2) m.cp_reverse_index.push_back(i);
  for (int64_t i = segments - 1; i > 0; i -= 2) m.cp_reverse_index.push_back(i);
  const Int64List prefix_sum = Accumulate(s);
  m.kv_len_prev = prefix_sum[cp_rank];
  m.kv_len_next = prefix_sum[segments - cp_rank - 1];
  m.actual_seq_q_prev = s[cp_rank];
  m.actual_seq_q_next = s[segments - cp_rank - 1];
  m.actual_seq_q_prev_cu_tensor = {0, m.actual_seq_q_prev};
  m.actual_seq_q_next_cu_tensor = {0, m.actual_seq_q_next};
  m.info = split.info;
  m.batch_size = 1;
  return m;
}

StatusOr<NSAContextParallelMetadata> PrepareInputDpWithCpDsa(const CPPrepareInput& in) {
  if (in.uses_cp_shared_kv) {
    if (!in.page_size.has_value()) {
      return FailFast("cp_shared_missing_page_size",
                      "CP shared-KV batch planning requires token_to_kv_pool.page_size");
    }
    KVSHARD_ASSIGN_OR_RETURN(
        CPSharedKVBatchPlan plan,
        BuildBatchPageAlignedInSeqSplitPlan(in.extend_lens, in.prefix_lens, *in.page_size, in.cp_size, in.cp_rank));
    return BuildBatchMetadataFromPlan(plan);
  }
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(in.cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(in.cp_rank, in.cp_size));
  InSeqSplit split;
  KVSHARD_ASSIGN_OR_RETURN(split.split_list, BuildTokenBalancedInSeqSplitList(in.kv_len, in.cp_size));
  split.info.page_size = in.page_size.value_or(0) != 0 ? *in.page_size : 1;
  split.info.extend_prefix_len = 0;
  return BuildScalarCPMetadata(split, in.cp_size, in.cp_rank);
}

StatusOr<RoundRobinQSeqs> RoundRobinSplitQSeqs(const Int64List& extend_lens, int64_t cp_size, int64_t cp_rank) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  KVSHARD_RETURN_IF_ERROR(ValidateCpRank(cp_rank, cp_size));
  RoundRobinQSeqs out;
  int64_t extra = 0;
  for (size_t q = 0; q < extend_lens.size(); ++q) {
    if (extend_lens[q] < 0 || extend_lens[q] > kMaxCpTokens) {
      return InvalidArgument("extend_lens[", q, "]: must be in [0, 2^48], got ", extend_lens[q]);
    }
    // |extra| < cp_size, and len may be negative after a zero-length request: Python floor semantics.
    const int64_t len = extend_lens[q] + extra;
    const int64_t q_len = FloorDiv(len, cp_size) + (len - FloorDiv(len, cp_size) * cp_size > cp_rank ? 1 : 0);
    if (q_len > 0) {
      out.q_lens.push_back(q_len);
      out.bs_idx.push_back(static_cast<int64_t>(q));
    }
    extra = len - q_len * cp_size;
  }
  return out;
}

StatusOr<std::vector<LastTokenLocation>> RoundRobinLastTokenLocations(const Int64List& extend_lens, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  std::vector<LastTokenLocation> out;
  int64_t offset = 0;
  for (size_t q = 0; q < extend_lens.size(); ++q) {
    const int64_t len = extend_lens[q];
    if (len <= 0) {
      return FailFast("batch_gt1_empty_extend", "round-robin last-token collect got non-positive req_len=", len);
    }
    if (len > kMaxCpTokens || offset + len > kMaxCpTokens) {
      return InvalidArgument("extend_lens[", q, "]: total must be at most 2^48");
    }
    const int64_t global_last = offset + len - 1;
    out.push_back({global_last % cp_size, global_last / cp_size});
    offset += len;
  }
  return out;
}

}  // namespace kvshard::ref

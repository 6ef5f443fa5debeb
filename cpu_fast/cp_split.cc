// Fast CP batch split plan: the reference's arithmetic written straight into flat per-request tables (no
// per-request allocation), segment tables in closed form, divisions by page size and segment count through a
// reciprocal (a 64-bit idiv per request dominates otherwise).
#include "cpu_fast/cp_split.h"

#include <algorithm>
#include <span>

#include "core/cp_limits.h"
#include "cpu_fast/divide.h"

namespace kvshard::fast {
namespace {

// Deals `units` page units to `segments` as units//S each (= base), +1 for the first units%S (= remainder):
// segment page starts/ends from base_page and full-page token counts (units * page_size).
void DealPageUnits(int64_t base, int64_t remainder, int64_t base_page, int64_t segments, int64_t page_size,
                   int64_t* split, int64_t* starts, int64_t* ends) {
  // Closed form per segment (no loop-carried state), so the loop vectorizes.
  for (int64_t s = 0; s < segments; ++s) {
    const int64_t count = base + (s < remainder ? 1 : 0);
    const int64_t start = base_page + s * base + std::min(s, remainder);
    starts[s] = start;
    ends[s] = start + count;
    split[s] = count * page_size;
  }
}

// Where token actual-1 (1 <= actual <= sum(split)) lives: (owner rank, row within its request-local rows).
struct LastToken {
  int64_t owner = 0;
  int64_t local_offset = 0;
};

LastToken LocateLastToken(std::span<const int64_t> split, int64_t cp_size, int64_t actual) {
  const int64_t segments = 2 * cp_size;
  int64_t offset = actual - 1;
  int64_t segment = 0;
  for (; segment < segments; ++segment) {
    if (offset < split[segment]) break;
    offset -= split[segment];
  }
  if (segment < cp_size) return {segment, offset};
  const int64_t owner = segments - segment - 1;
  return {owner, split[owner] + offset};
}

// Exclusive prefix sums into *out (reusing its storage).
void PrefixOffsetsInto(std::span<const int64_t> lengths, Int64List* out) {
  out->resize(lengths.size());
  int64_t cursor = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    (*out)[i] = cursor;
    cursor += lengths[i];
  }
}

}  // namespace

StatusOr<CPSharedKVBatchPlan> BuildBatchPageAlignedInSeqSplitPlan(const Int64List& extend_lens,
                                                                  const Int64List& prefix_lens, int64_t page_size,
                                                                  int64_t cp_size, int64_t cp_rank) {
  CPSharedKVBatchPlan plan;
  KVSHARD_RETURN_IF_ERROR(
      BuildBatchPageAlignedInSeqSplitPlanInto(extend_lens, prefix_lens, page_size, cp_size, cp_rank, &plan));
  return plan;
}

Status BuildBatchPageAlignedInSeqSplitPlanInto(const Int64List& extend_lens, const Int64List& prefix_lens,
                                               int64_t page_size, int64_t cp_size, int64_t cp_rank,
                                               CPSharedKVBatchPlan* out) {
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
    if (extend_len > kMaxCpTokens)
      return InvalidArgument("extend_lens[", q, "]: must be at most 2^48, got ", extend_len);
    if (prefix_len > kMaxCpTokens)
      return InvalidArgument("prefix_lens[", q, "]: must be at most 2^48, got ", prefix_len);
    total_tokens += extend_len;
    if (total_tokens > kMaxCpTokens) return InvalidArgument("extend_lens: total must be at most 2^48");
  }
  if (batch > 0 && page_size <= 1) {  // build_page_aligned_in_seq_split_list falls back for every request
    return FailFast("batch_gt1_page_split_fallback",
                    "CP shared-KV batch planning must not use token-balanced fallback. req_id=0 prefix_len=",
                    prefix_lens[0], " extend_len=", extend_lens[0], " page_size=", page_size);
  }
  CPSharedKVBatchPlan& p = *out;
  p.compute_padding_enabled = false;
  p.batch_size = batch;
  p.page_size = page_size;
  p.cp_size = cp_size;
  p.cp_rank = cp_rank;
  p.request_extend_lens = extend_lens;
  p.request_prefix_lens = prefix_lens;
  const int64_t mirror = segments - cp_rank - 1;
  const size_t b = static_cast<size_t>(batch), bs = static_cast<size_t>(batch * segments);
  for (Int64Table* t :
       {&p.request_split_lists, &p.request_segment_page_starts, &p.request_segment_page_ends,
        &p.request_compute_split_lists, &p.request_compute_segment_page_starts, &p.request_compute_segment_page_ends}) {
    t->width = segments;
    t->values.resize(bs);
  }
  p.request_zigzag_indices.width = 2;
  p.request_zigzag_indices.values.resize(2 * b);
  for (Int64List* l :
       {&p.request_padded_pages, &p.request_padded_tokens, &p.request_padding_tokens, &p.request_rank_local_tokens,
        &p.request_kv_len_prev, &p.request_kv_len_next, &p.request_actual_seq_q_prev, &p.request_actual_seq_q_next,
        &p.request_last_token_owner, &p.request_last_token_local_offset, &p.request_valid_actual_seq_q_prev,
        &p.request_valid_actual_seq_q_next, &p.request_compute_padded_pages, &p.request_compute_padded_tokens,
        &p.request_compute_padding_tokens, &p.request_compute_rank_local_tokens}) {
    l->resize(b);
  }
  p.request_valid_query_row_spans.resize(b);
  p.flat_zigzag_index.resize(2 * b);
  p.flat_segment_request_ids.resize(bs);
  p.flat_segment_offsets.resize(bs);
  const Divider by_page(page_size), by_segments(segments);
  for (int64_t q = 0; q < batch; ++q) {
    const int64_t extend_len = extend_lens[q], prefix_len = prefix_lens[q];
    const std::span<int64_t> valid = p.request_split_lists[q];
    const std::span<int64_t> compute = p.request_compute_split_lists[q];
    // Valid split: padded_pages page units, the last one partial when the extend ends mid-page.
    const int64_t full_pages = by_page.Div(extend_len);
    const int64_t tail_tokens = extend_len - full_pages * page_size;
    const int64_t padded_pages = full_pages + (tail_tokens > 0 ? 1 : 0);
    const int64_t base_page = by_page.Div(prefix_len);
    const int64_t base = by_segments.Div(padded_pages), remainder = padded_pages - base * segments;
    DealPageUnits(base, remainder, base_page, segments, page_size, valid.data(),
                  p.request_segment_page_starts[q].data(), p.request_segment_page_ends[q].data());
    if (tail_tokens != 0) valid[base > 0 ? segments - 1 : remainder - 1] -= page_size - tail_tokens;
    // Compute split: max(pages, N) full page units; fewer pages than N deal one unit to each of N segments.
    const int64_t compute_pages = std::max(padded_pages, cp_size);
    const bool padded = compute_pages != padded_pages;
    DealPageUnits(padded ? 0 : base, padded ? cp_size : remainder, base_page, segments, page_size, compute.data(),
                  p.request_compute_segment_page_starts[q].data(), p.request_compute_segment_page_ends[q].data());
    const LastToken last = LocateLastToken(compute, cp_size, extend_len);
    // Request-local prefix sums of the valid split in closed form: the tokens before segment s are the pages
    // dealt before it, capped at the extend (only the last page is partial).
    int64_t* offsets = p.flat_segment_offsets.data() + q * segments;
    for (int64_t s = 0; s < segments; ++s) {
      offsets[s] = std::min((s * base + std::min(s, remainder)) * page_size, extend_len);
    }
    std::fill_n(p.flat_segment_request_ids.data() + q * segments, segments, q);
    const int64_t kv_prev = offsets[cp_rank] + valid[cp_rank];  // inclusive prefix sums
    const int64_t kv_next = offsets[mirror] + valid[mirror];
    p.request_zigzag_indices[q][0] = cp_rank;
    p.request_zigzag_indices[q][1] = mirror;
    p.request_padded_pages[q] = padded_pages;
    p.request_padded_tokens[q] = padded_pages * page_size;
    p.request_padding_tokens[q] = padded_pages * page_size - extend_len;
    p.request_rank_local_tokens[q] = valid[cp_rank] + valid[mirror];
    p.request_kv_len_prev[q] = kv_prev;
    p.request_kv_len_next[q] = kv_next;
    p.request_actual_seq_q_prev[q] = compute[cp_rank];
    p.request_actual_seq_q_next[q] = compute[mirror];
    p.request_last_token_owner[q] = last.owner;
    p.request_last_token_local_offset[q] = last.local_offset;
    p.request_valid_actual_seq_q_prev[q] = valid[cp_rank];
    p.request_valid_actual_seq_q_next[q] = valid[mirror];
    p.request_valid_query_row_spans[q] = {RowSpan{0, valid[cp_rank]}, RowSpan{compute[cp_rank], valid[mirror]}};
    p.request_compute_padded_pages[q] = compute_pages;
    p.request_compute_padded_tokens[q] = compute_pages * page_size;
    p.request_compute_padding_tokens[q] = compute_pages * page_size - extend_len;
    p.request_compute_rank_local_tokens[q] = compute[cp_rank] + compute[mirror];
    p.flat_zigzag_index[2 * q] = q * segments + cp_rank;
    p.flat_zigzag_index[2 * q + 1] = q * segments + mirror;
    if (padded) p.compute_padding_enabled = true;
  }
  PrefixOffsetsInto(p.request_extend_lens, &p.request_token_offsets);
  PrefixOffsetsInto(p.request_padded_tokens, &p.request_padded_token_offsets);
  PrefixOffsetsInto(p.request_padded_pages, &p.request_page_offsets);
  PrefixOffsetsInto(p.request_rank_local_tokens, &p.request_rank_local_offsets);
  p.output_collect_mode = "narrow_last_token";
  PrefixOffsetsInto(p.request_compute_padded_tokens, &p.request_compute_padded_token_offsets);
  PrefixOffsetsInto(p.request_compute_rank_local_tokens, &p.request_compute_rank_local_offsets);
  return Status::Ok();
}

}  // namespace kvshard::fast

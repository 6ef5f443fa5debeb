// Properties of the CP split plans (spec §4, §6; seed 003): exact partitions, no cut pages, compute covers
// valid, inclusive kv lens, last-token owner, rank-independence, communication bounds, round-robin counts.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/cp_plan_json.h"
#include "cpu_ref/cp_split.h"
#include "props/cp_generators.h"

namespace kvshard::props {
namespace {

using ref::BuildBatchPageAlignedInSeqSplitPlan;

CPSharedKVBatchPlan PlanFor(const CPBatchCase& c, int64_t rank) {
  StatusOr<CPSharedKVBatchPlan> p =
      BuildBatchPageAlignedInSeqSplitPlan(c.extend_lens, c.prefix_lens, c.page_size, c.cp_size, rank);
  RC_ASSERT(p.ok());
  return *p;
}

int64_t Sum(std::span<const int64_t> v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

RC_GTEST_PROP(CPSplitProps, ValidSplitsPartitionEachExtend, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = PlanFor(c, *rc::gen::inRange<int64_t>(0, c.cp_size));
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const auto split = p.request_split_lists[q];
    RC_ASSERT(static_cast<int64_t>(split.size()) == 2 * c.cp_size);
    RC_ASSERT(Sum(split) == c.extend_lens[q]);
    RC_ASSERT(std::all_of(split.begin(), split.end(), [](int64_t x) { return x >= 0; }));
    const auto starts = p.request_segment_page_starts[q], ends = p.request_segment_page_ends[q];
    const int64_t first_page = c.prefix_lens[q] / c.page_size;
    const int64_t pages = (c.extend_lens[q] + c.page_size - 1) / c.page_size;
    RC_ASSERT(starts[0] == first_page);
    RC_ASSERT(ends.back() == first_page + pages);
    for (int64_t s = 0; s + 1 < 2 * c.cp_size; ++s) RC_ASSERT(ends[s] == starts[s + 1]);
    RC_ASSERT(p.request_padded_pages[q] == pages);
    RC_ASSERT(p.request_padding_tokens[q] == pages * c.page_size - c.extend_lens[q]);
  }
}

// Every page of the extend lies in exactly one segment, and a segment's tokens are its pages' tokens.
RC_GTEST_PROP(CPSplitProps, PageAlignedBoundariesNeverCutAPage, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = PlanFor(c, 0);
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const Int64List seg = SegmentOfPosition(p.request_split_lists[q]);
    const int64_t first_page = c.prefix_lens[q] / c.page_size;
    std::vector<int64_t> page_segment;
    for (int64_t t = 0; t < c.extend_lens[q]; ++t) {
      const int64_t page = (c.prefix_lens[q] + t) / c.page_size - first_page;
      if (page == static_cast<int64_t>(page_segment.size())) page_segment.push_back(seg[t]);
      RC_ASSERT(page_segment[page] == seg[t]);  // a page never spans two segments
      const auto starts = p.request_segment_page_starts[q], ends = p.request_segment_page_ends[q];
      RC_ASSERT(starts[seg[t]] <= page + first_page && page + first_page < ends[seg[t]]);
    }
    // Only the request's last page may be partial: every boundary before the end is page-aligned.
    int64_t cursor = 0;
    for (int64_t len : p.request_split_lists[q]) {
      cursor += len;
      RC_ASSERT(cursor == c.extend_lens[q] || cursor % c.page_size == 0);
    }
  }
}

RC_GTEST_PROP(CPSplitProps, ComputeSplitsCoverValidSplits, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = PlanFor(c, *rc::gen::inRange<int64_t>(0, c.cp_size));
  bool any_padding = false;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const auto valid = p.request_split_lists[q], compute = p.request_compute_split_lists[q];
    for (int64_t s = 0; s < 2 * c.cp_size; ++s) {
      RC_ASSERT(compute[s] >= valid[s]);
      RC_ASSERT(compute[s] % c.page_size == 0);
      if (valid[s] > 0) RC_ASSERT(p.request_compute_segment_page_starts[q][s] == p.request_segment_page_starts[q][s]);
    }
    const int64_t pages = p.request_padded_pages[q];
    RC_ASSERT(p.request_compute_padded_pages[q] == std::max(pages, c.cp_size));
    RC_ASSERT(Sum(compute) == p.request_compute_padded_tokens[q]);
    RC_ASSERT(p.request_compute_padding_tokens[q] == p.request_compute_padded_tokens[q] - c.extend_lens[q]);
    any_padding = any_padding || pages < c.cp_size;
  }
  RC_ASSERT(p.compute_padding_enabled == any_padding);
}

// kv_len_prev/next are the valid tokens up to and including segment r / 2N-1-r (counted token by token);
// the q lengths are the compute (actual_*) and valid (valid_*) segment sizes.
RC_GTEST_PROP(CPSplitProps, KvLensAreInclusivePrefixCounts, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const int64_t r = *rc::gen::inRange<int64_t>(0, c.cp_size), mirror = 2 * c.cp_size - 1 - r;
  const CPSharedKVBatchPlan p = PlanFor(c, r);
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const Int64List seg = SegmentOfPosition(p.request_split_lists[q]);
    const int64_t upto_r = std::count_if(seg.begin(), seg.end(), [&](int64_t s) { return s <= r; });
    const int64_t upto_mirror = std::count_if(seg.begin(), seg.end(), [&](int64_t s) { return s <= mirror; });
    RC_ASSERT(p.request_kv_len_prev[q] == upto_r);
    RC_ASSERT(p.request_kv_len_next[q] == upto_mirror);
    const int64_t in_r = std::count(seg.begin(), seg.end(), r), in_mirror = std::count(seg.begin(), seg.end(), mirror);
    RC_ASSERT(p.request_valid_actual_seq_q_prev[q] == in_r);
    RC_ASSERT(p.request_valid_actual_seq_q_next[q] == in_mirror);
    RC_ASSERT(p.request_rank_local_tokens[q] == in_r + in_mirror);
    RC_ASSERT(p.request_actual_seq_q_prev[q] == p.request_compute_split_lists[q][r]);
    RC_ASSERT(p.request_actual_seq_q_next[q] == p.request_compute_split_lists[q][mirror]);
    RC_ASSERT(p.request_valid_query_row_spans[q][0] == (RowSpan{0, in_r}));
    RC_ASSERT(p.request_valid_query_row_spans[q][1] == (RowSpan{p.request_compute_split_lists[q][r], in_mirror}));
  }
}

// The owner's compute rows of the request (segment r then 2N-1-r of the compute split) hold the last valid
// token at request_last_token_local_offset.
RC_GTEST_PROP(CPSplitProps, LastTokenOwnerHoldsTheLastValidToken, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = PlanFor(c, 0);
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const int64_t owner = p.request_last_token_owner[q];
    RC_ASSERT(owner >= 0 && owner < c.cp_size);
    const auto compute = p.request_compute_split_lists[q];
    Int64List starts = {0};
    for (int64_t len : compute) starts.push_back(starts.back() + len);
    Int64List local_positions;  // request positions of the owner's compute rows, in local order
    for (int64_t s : {owner, 2 * c.cp_size - 1 - owner}) {
      for (int64_t i = starts[s]; i < starts[s + 1]; ++i) local_positions.push_back(i);
    }
    const int64_t offset = p.request_last_token_local_offset[q];
    RC_ASSERT(offset >= 0 && offset < static_cast<int64_t>(local_positions.size()));
    RC_ASSERT(local_positions[offset] == c.extend_lens[q] - 1);
  }
}

// Every field except the rank-specific ones is the same whichever rank builds the plan.
RC_GTEST_PROP(CPSplitProps, PlanIdenticalOnEveryRankExceptRankFields, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  static const std::set<std::string> kRankFields = {
      "cp_rank", "request_zigzag_indices", "request_rank_local_tokens", "request_rank_local_offsets",
      "request_kv_len_prev", "request_kv_len_next", "request_actual_seq_q_prev", "request_actual_seq_q_next",
      "flat_zigzag_index", "request_valid_rank_local_tokens", "request_valid_rank_local_offsets",
      "request_valid_actual_seq_q_prev", "request_valid_actual_seq_q_next", "request_valid_seq_q_prev",
      "request_valid_seq_q_next", "request_valid_query_row_spans", "request_compute_rank_local_tokens",
      "request_compute_rank_local_offsets", "request_compute_actual_seq_q_prev",
      "request_compute_actual_seq_q_next", "request_compute_seq_q_prev", "request_compute_seq_q_next"};
  Json base = ToJson(PlanFor(c, 0));
  for (const std::string& k : kRankFields) base.erase(k);
  RC_ASSERT(base.size() == 57u - kRankFields.size());
  for (int64_t r = 1; r < c.cp_size; ++r) {
    Json j = ToJson(PlanFor(c, r));
    for (const std::string& k : kRankFields) j.erase(k);
    RC_ASSERT(j == base);
  }
}

// Communication rows of every rank fit max_rank_token (compute splits when compute padding is on), valid rows
// never exceed them, and the communication metadata is the same on every rank.
RC_GTEST_PROP(CPSplitProps, CommunicationRowsWithinMaxRankToken, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const NSAContextParallelMetadata m0 = ref::BuildBatchMetadataFromPlan(PlanFor(c, 0)).value();
  const int64_t max_rank_token = m0.max_rank_token();
  RC_ASSERT(static_cast<int64_t>(m0.per_rank_actual_token.size()) == c.cp_size);
  RC_ASSERT(*std::max_element(m0.per_rank_actual_token.begin(), m0.per_rank_actual_token.end()) == max_rank_token);
  RC_ASSERT(m0.total_seq_lens == max_rank_token * c.cp_size);
  const CPSharedKVBatchPlan& p = *m0.batch_plan;
  const RerangeTables valid = BuildRerangeTables(p.request_split_lists, c.cp_size);
  const RerangeTables compute = BuildRerangeTables(p.request_compute_split_lists, c.cp_size);
  for (int64_t r = 0; r < c.cp_size; ++r) {
    RC_ASSERT(valid.per_rank_tokens[r] <= max_rank_token);
    RC_ASSERT(valid.per_rank_tokens[r] <= compute.per_rank_tokens[r]);
    RC_ASSERT(m0.per_rank_actual_token[r] ==
              (p.compute_padding_enabled ? compute.per_rank_tokens[r] : valid.per_rank_tokens[r]));
    const NSAContextParallelMetadata m = ref::BuildBatchMetadataFromPlan(PlanFor(c, r)).value();
    RC_ASSERT(m.per_rank_actual_token == m0.per_rank_actual_token);
    RC_ASSERT(m.max_rank_len == m0.max_rank_len);
    RC_ASSERT(m.split_list_tensor == m0.split_list_tensor);
    RC_ASSERT(m.zigzag_index == (Int64List{r, 2 * c.cp_size - 1 - r}));
  }
}

RC_GTEST_PROP(CPSplitProps, FlatFieldsFlattenTheRequestTables, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const int64_t r = *rc::gen::inRange<int64_t>(0, c.cp_size);
  const CPSharedKVBatchPlan p = PlanFor(c, r);
  const int64_t segments = 2 * c.cp_size;
  int64_t token_offset = 0, local_offset = 0;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    RC_ASSERT(p.request_token_offsets[q] == token_offset);
    RC_ASSERT(p.request_rank_local_offsets[q] == local_offset);
    token_offset += c.extend_lens[q];
    local_offset += p.request_rank_local_tokens[q];
    int64_t cursor = 0;
    for (int64_t s = 0; s < segments; ++s) {
      RC_ASSERT(p.flat_split_list()[q * segments + s] == p.request_split_lists[q][s]);
      RC_ASSERT(p.flat_segment_request_ids[q * segments + s] == q);
      RC_ASSERT(p.flat_segment_offsets[q * segments + s] == cursor);
      cursor += p.request_split_lists[q][s];
    }
    RC_ASSERT(p.flat_zigzag_index[2 * q] == q * segments + r);
    RC_ASSERT(p.flat_zigzag_index[2 * q + 1] == q * segments + segments - 1 - r);
  }
  const FlatSplitTables t = FlattenSplitTables(p, SplitKind::kCompute);
  RC_ASSERT(t.split_lens == (p.compute_padding_enabled ? p.request_compute_split_lists.values : p.flat_split_list()));
  RC_ASSERT(t.local_row_offsets.back() == Sum(p.compute_padding_enabled ? p.request_compute_rank_local_tokens
                                                                        : p.request_rank_local_tokens));
}

RC_GTEST_PROP(CPSplitProps, TokenBalancedSplitIsBalancedPartition, ()) {
  const int64_t n = *GenCpSize();
  const int64_t total = *rc::gen::inRange<int64_t>(0, 5000);
  const Int64List s = ref::BuildTokenBalancedInSeqSplitList(total, n).value();
  RC_ASSERT(static_cast<int64_t>(s.size()) == 2 * n);
  RC_ASSERT(Sum(s) == total);
  RC_ASSERT(std::is_sorted(s.rbegin(), s.rend()));
  RC_ASSERT(s.front() - s.back() <= 1);
}

// ps = 1, a non-page-aligned prefix or an empty extend make the batch planner fail with SGLang's tag, and the
// page-aligned splitter fall back to the token-balanced split.
RC_GTEST_PROP(CPSplitProps, FallbackInputsFailWithTags, ()) {
  CPBatchCase c = *GenCPBatchCase(1);
  const int64_t q = *rc::gen::inRange<int64_t>(0, static_cast<int64_t>(c.extend_lens.size()));
  const int64_t kind = *rc::gen::inRange<int64_t>(0, 3);
  std::string tag;
  if (kind == 0) {
    c.page_size = 1;  // every prefix is aligned at ps = 1
    tag = "batch_gt1_page_split_fallback";
  } else if (kind == 1 && c.page_size > 1) {
    c.prefix_lens[q] += *rc::gen::inRange<int64_t>(1, c.page_size);
    tag = "batch_gt1_non_page_aligned_prefix";
  } else {
    c.extend_lens[q] = 0;
    tag = "batch_gt1_empty_extend";
  }
  const Status s = BuildBatchPageAlignedInSeqSplitPlan(c.extend_lens, c.prefix_lens, c.page_size, c.cp_size, 0).status();
  RC_ASSERT(s.message().rfind("[CP_SHARED_KV_FAIL_FAST][" + tag + "] ", 0) == 0);
  const ref::InSeqSplit split = ref::BuildPageAlignedInSeqSplitList(c.extend_lens[q], c.extend_lens[q], c.prefix_lens[q],
                                                                     c.page_size, c.cp_size).value();
  RC_ASSERT(!split.info.page_aligned);
  RC_ASSERT(split.split_list == ref::BuildTokenBalancedInSeqSplitList(c.extend_lens[q], c.cp_size).value());
}

// Round-robin q lengths (with the carried remainder) equal a token-by-token count of t % N == r.
RC_GTEST_PROP(CPSplitProps, RoundRobinQLensEqualBruteForce, ()) {
  const int64_t n = *GenCpSize();
  const Int64List lens = *rc::gen::container<Int64List>(
      *rc::gen::inRange<size_t>(0, 9),
      rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(0)}, {4, rc::gen::inRange<int64_t>(0, 40)}}));
  int64_t total_q = 0;
  for (int64_t r = 0; r < n; ++r) {
    const ref::RoundRobinQSeqs got = ref::RoundRobinSplitQSeqs(lens, n, r).value();
    Int64List want_q, want_idx;
    int64_t offset = 0;
    for (size_t i = 0; i < lens.size(); ++i) {
      int64_t count = 0;
      for (int64_t t = offset; t < offset + lens[i]; ++t) count += t % n == r;
      offset += lens[i];
      if (count > 0) {
        want_q.push_back(count);
        want_idx.push_back(static_cast<int64_t>(i));
      }
    }
    RC_ASSERT(got.q_lens == want_q);
    RC_ASSERT(got.bs_idx == want_idx);
    total_q += Sum(got.q_lens);
  }
  RC_ASSERT(total_q == Sum(lens));
}

}  // namespace
}  // namespace kvshard::props

// Properties of the CP split plans (spec §4, §6; seed 003): exact partitions, no cut pages, compute covers
// valid, inclusive kv lens, last-token owner, rank-independence, communication bounds, round-robin counts, the
// single-request splitter equal to the batch plan at bs = 1, and the batch metadata recomputed from its plan.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/cp_plan_json.h"
#include "cpu_ref/cp_split.h"
#include "props/cp_generators.h"
#include "props/property.h"

namespace kvshard::props {
namespace {

using ref::BuildBatchPageAlignedInSeqSplitPlan;

int64_t Sum(std::span<const int64_t> v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

KVSHARD_PROP(CPSplitProps, ValidSplitsPartitionEachExtend, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = RankPlan(c, *rc::gen::inRange<int64_t>(0, c.cp_size));
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
KVSHARD_PROP(CPSplitProps, PageAlignedBoundariesNeverCutAPage, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = RankPlan(c, 0);
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

KVSHARD_PROP(CPSplitProps, ComputeSplitsCoverValidSplits, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = RankPlan(c, *rc::gen::inRange<int64_t>(0, c.cp_size));
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
KVSHARD_PROP(CPSplitProps, KvLensAreInclusivePrefixCounts, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const int64_t r = *rc::gen::inRange<int64_t>(0, c.cp_size), mirror = 2 * c.cp_size - 1 - r;
  const CPSharedKVBatchPlan p = RankPlan(c, r);
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
KVSHARD_PROP(CPSplitProps, LastTokenOwnerHoldsTheLastValidToken, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = RankPlan(c, 0);
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
KVSHARD_PROP(CPSplitProps, PlanIdenticalOnEveryRankExceptRankFields, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  static const std::set<std::string> kRankFields = {"cp_rank",
                                                    "request_zigzag_indices",
                                                    "request_rank_local_tokens",
                                                    "request_rank_local_offsets",
                                                    "request_kv_len_prev",
                                                    "request_kv_len_next",
                                                    "request_actual_seq_q_prev",
                                                    "request_actual_seq_q_next",
                                                    "flat_zigzag_index",
                                                    "request_valid_rank_local_tokens",
                                                    "request_valid_rank_local_offsets",
                                                    "request_valid_actual_seq_q_prev",
                                                    "request_valid_actual_seq_q_next",
                                                    "request_valid_seq_q_prev",
                                                    "request_valid_seq_q_next",
                                                    "request_valid_query_row_spans",
                                                    "request_compute_rank_local_tokens",
                                                    "request_compute_rank_local_offsets",
                                                    "request_compute_actual_seq_q_prev",
                                                    "request_compute_actual_seq_q_next",
                                                    "request_compute_seq_q_prev",
                                                    "request_compute_seq_q_next"};
  Json base = ToJson(RankPlan(c, 0));
  for (const std::string& k : kRankFields) base.erase(k);
  RC_ASSERT(base.size() == 57u - kRankFields.size());
  for (int64_t r = 1; r < c.cp_size; ++r) {
    Json j = ToJson(RankPlan(c, r));
    for (const std::string& k : kRankFields) j.erase(k);
    RC_ASSERT(j == base);
  }
}

// Communication rows of every rank fit max_rank_token (compute splits when compute padding is on), valid rows
// never exceed them, and the communication metadata is the same on every rank.
KVSHARD_PROP(CPSplitProps, CommunicationRowsWithinMaxRankToken, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const NSAContextParallelMetadata m0 = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, 0)));
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
    const NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, r)));
    RC_ASSERT(m.per_rank_actual_token == m0.per_rank_actual_token);
    RC_ASSERT(m.max_rank_len == m0.max_rank_len);
    RC_ASSERT(m.split_list_tensor == m0.split_list_tensor);
    RC_ASSERT(m.zigzag_index == (Int64List{r, 2 * c.cp_size - 1 - r}));
  }
}

KVSHARD_PROP(CPSplitProps, FlatFieldsFlattenTheRequestTables, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const int64_t r = *rc::gen::inRange<int64_t>(0, c.cp_size);
  const CPSharedKVBatchPlan p = RankPlan(c, r);
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
  RC_ASSERT(t.local_row_offsets.back() ==
            Sum(p.compute_padding_enabled ? p.request_compute_rank_local_tokens : p.request_rank_local_tokens));
}

KVSHARD_PROP(CPSplitProps, TokenBalancedSplitIsBalancedPartition, ()) {
  const int64_t n = *GenCpSize();
  const int64_t total = *rc::gen::inRange<int64_t>(0, 5000);
  const Int64List s = RC_VALUE(ref::BuildTokenBalancedInSeqSplitList(total, n));
  RC_ASSERT(static_cast<int64_t>(s.size()) == 2 * n);
  RC_ASSERT(Sum(s) == total);
  RC_ASSERT(std::is_sorted(s.rbegin(), s.rend()));
  RC_ASSERT(s.front() - s.back() <= 1);
}

// ps = 1, a non-page-aligned prefix or an empty extend make the batch planner fail with SGLang's tag, and the
// page-aligned splitter fall back to the token-balanced split.
KVSHARD_PROP(CPSplitProps, FallbackInputsFailWithTags, ()) {
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
  const Status s =
      BuildBatchPageAlignedInSeqSplitPlan(c.extend_lens, c.prefix_lens, c.page_size, c.cp_size, 0).status();
  RC_ASSERT(s.message().rfind("[CP_SHARED_KV_FAIL_FAST][" + tag + "] ", 0) == 0);
  const ref::InSeqSplit split = RC_VALUE(ref::BuildPageAlignedInSeqSplitList(c.extend_lens[q], c.extend_lens[q],
                                                                             c.prefix_lens[q], c.page_size, c.cp_size));
  RC_ASSERT(!split.info.page_aligned);
  RC_ASSERT(split.split_list == RC_VALUE(ref::BuildTokenBalancedInSeqSplitList(c.extend_lens[q], c.cp_size)));
}

// Round-robin q lengths (with the carried remainder) equal a token-by-token count of t % N == r.
KVSHARD_PROP(CPSplitProps, RoundRobinQLensEqualBruteForce, ()) {
  const int64_t n = *GenCpSize();
  const Int64List lens = *rc::gen::container<Int64List>(
      *rc::gen::inRange<size_t>(0, 9),
      rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(0)}, {4, rc::gen::inRange<int64_t>(0, 40)}}));
  int64_t total_q = 0;
  for (int64_t r = 0; r < n; ++r) {
    const ref::RoundRobinQSeqs got = RC_VALUE(ref::RoundRobinSplitQSeqs(lens, n, r));
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

Int64List Row(std::span<const int64_t> row) { return Int64List(row.begin(), row.end()); }

// The single-request splitter (SGLang build_page_aligned_in_seq_split_list) equals the bs = 1 batch plan in every
// corresponding field, and the plan's compute split and last token are SGLang's single-request helpers on it;
// exactly where the splitter falls back, the batch planner fails with the tag naming why.
KVSHARD_PROP(CPSplitProps, SingleRequestSplitEqualsBatchPlanAtBs1, ()) {
  const SingleSplitCase c = *GenSingleSplitCase();
  const int64_t n = c.cp_size, ps = c.page_size, r = *rc::gen::inRange<int64_t>(0, n);
  const ref::InSeqSplit split =
      RC_VALUE(ref::BuildPageAlignedInSeqSplitList(c.extend_len, c.extend_len, c.prefix_len, ps, n));
  const StatusOr<CPSharedKVBatchPlan> built =
      BuildBatchPageAlignedInSeqSplitPlan({c.extend_len}, {c.prefix_len}, ps, n, r);
  RC_CLASSIFY(!split.info.page_aligned, "fallback");
  RC_CLASSIFY(n == 1, "N=1");
  RC_CLASSIFY(c.extend_len % ps != 0, "partial last page");
  RC_CLASSIFY(c.prefix_len == 0, "empty prefix");
  RC_CLASSIFY(split.info.page_aligned && split.info.extend_padded_pages < n, "compute padding");
  // Trailing padding (total_len > extend_len) lengthens only the last segment and leaves the page metadata alone.
  const ref::InSeqSplit padded =
      RC_VALUE(ref::BuildPageAlignedInSeqSplitList(c.extend_len + c.padding, c.extend_len, c.prefix_len, ps, n));
  RC_ASSERT(ToJson(padded.info) == ToJson(split.info));
  if (!split.info.page_aligned) {
    PageAlignedInSeqSplitInfo fallback;
    fallback.page_size = ps;
    fallback.extend_prefix_len = c.prefix_len;
    RC_ASSERT(ToJson(split.info) == ToJson(fallback));
    RC_ASSERT(split.split_list == RC_VALUE(ref::BuildTokenBalancedInSeqSplitList(c.extend_len, n)));
    RC_ASSERT(padded.split_list == RC_VALUE(ref::BuildTokenBalancedInSeqSplitList(c.extend_len + c.padding, n)));
    const std::string tag = c.extend_len <= 0        ? "batch_gt1_empty_extend"
                            : c.prefix_len % ps != 0 ? "batch_gt1_non_page_aligned_prefix"
                                                     : "batch_gt1_page_split_fallback";
    RC_ASSERT(!built.ok());
    RC_ASSERT(built.status().message().rfind("[CP_SHARED_KV_FAIL_FAST][" + tag + "] ", 0) == 0);
    return;
  }
  Int64List want_padded = split.split_list;
  want_padded.back() += c.padding;
  RC_ASSERT(padded.split_list == want_padded);
  const CPSharedKVBatchPlan p = RC_VALUE(built);
  RC_ASSERT(p.batch_size == 1);
  RC_ASSERT(Row(p.request_split_lists[0]) == split.split_list);
  RC_ASSERT(p.flat_split_list() == split.split_list);
  RC_ASSERT(Row(p.request_segment_page_starts[0]) == split.info.segment_page_starts);
  RC_ASSERT(Row(p.request_segment_page_ends[0]) == split.info.segment_page_ends);
  RC_ASSERT(p.request_padded_pages[0] == split.info.extend_padded_pages);
  RC_ASSERT(p.request_padded_tokens[0] == split.info.extend_padded_tokens);
  RC_ASSERT(p.request_padding_tokens[0] == split.info.extend_padding_tokens);
  RC_ASSERT(p.request_extend_lens[0] == split.info.extend_valid_tokens);
  RC_ASSERT(p.request_prefix_lens[0] == split.info.extend_prefix_len);
  RC_ASSERT(ToJson(RequestSplitInfo(p, 0)) == ToJson(split.info));
  // The compute split is max(pages, N) full page units from the same first page; the last token is located in it.
  const int64_t compute_pages = std::max(split.info.extend_padded_pages, n);
  const ref::FullPageUnitSplit full = RC_VALUE(ref::BuildFullPageUnitSplit(compute_pages, c.prefix_len, ps, n));
  RC_ASSERT(Row(p.request_compute_split_lists[0]) == full.split_list);
  RC_ASSERT(Row(p.request_compute_segment_page_starts[0]) == full.segment_page_starts);
  RC_ASSERT(Row(p.request_compute_segment_page_ends[0]) == full.segment_page_ends);
  RC_ASSERT(p.request_compute_padded_pages[0] == compute_pages);
  RC_ASSERT(p.request_compute_padded_tokens[0] == compute_pages * ps);
  RC_ASSERT(p.request_compute_padding_tokens[0] == compute_pages * ps - c.extend_len);
  RC_ASSERT(p.compute_padding_enabled == (compute_pages != split.info.extend_padded_pages));
  const ref::LastTokenLocation last = RC_VALUE(ref::GetInSeqLastTokenOwnerAndOffset(full.split_list, n, c.extend_len));
  RC_ASSERT(p.request_last_token_owner[0] == last.owner);
  RC_ASSERT(p.request_last_token_local_offset[0] == last.local_offset);
}

// Every scalar and list BuildBatchMetadataFromPlan derives, recomputed from the plan's own fields as SGLang's
// _build_batch_metadata_from_plan does: communication splits = compute splits iff compute padding is enabled,
// else valid splits; kv lens from request 0's valid split; the plan itself kept unchanged.
KVSHARD_PROP(CPSplitProps, BatchMetadataRecomputedFromItsPlan, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const int64_t n = c.cp_size, segments = 2 * n;
  for (int64_t r = 0; r < n; ++r) {
    const CPSharedKVBatchPlan p = RankPlan(c, r);
    const NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(p));
    if (r == 0) RC_CLASSIFY(p.compute_padding_enabled, "compute padding");
    const Int64Table& comm = p.compute_padding_enabled ? p.request_compute_split_lists : p.request_split_lists;
    Int64List per_rank(n, 0);
    for (int64_t q = 0; q < p.batch_size; ++q) {
      for (int64_t k = 0; k < n; ++k) per_rank[k] += comm[q][k] + comm[q][segments - 1 - k];
    }
    const int64_t max_rank = *std::max_element(per_rank.begin(), per_rank.end());
    RC_ASSERT(m.per_rank_actual_token == per_rank);
    RC_ASSERT(m.max_rank_len == Int64List(n, max_rank));
    RC_ASSERT(m.max_rank_token() == max_rank);
    RC_ASSERT(m.total_seq_lens == max_rank * n);
    RC_ASSERT(m.split_list_tensor == comm.values);
    Int64List split_prefix;
    int64_t cursor = 0;
    for (int64_t v : comm.values) {
      split_prefix.push_back(cursor);
      cursor += v;
    }
    RC_ASSERT(m.split_prefix_tensor == split_prefix);
    // Request 0's scalar fields: its communication split, zigzag, inclusive valid prefix sums.
    const Int64List first = Row(comm[0]);
    const int64_t mirror = segments - 1 - r;
    RC_ASSERT(m.split_list == first);
    RC_ASSERT(m.zigzag_index == Row(p.request_zigzag_indices[0]));
    RC_ASSERT(m.zigzag_index == (Int64List{r, mirror}));
    int64_t kv_prev = 0, kv_next = 0;
    for (int64_t s = 0; s < segments; ++s) {
      kv_prev += s <= r ? p.request_split_lists[0][s] : 0;
      kv_next += s <= mirror ? p.request_split_lists[0][s] : 0;
    }
    RC_ASSERT(m.kv_len_prev == kv_prev);
    RC_ASSERT(m.kv_len_next == kv_next);
    RC_ASSERT(m.actual_seq_q_prev == first[r]);
    RC_ASSERT(m.actual_seq_q_next == first[mirror]);
    RC_ASSERT(m.actual_seq_q_prev_cu_tensor == (Int64List{0, first[r]}));
    RC_ASSERT(m.actual_seq_q_next_cu_tensor == (Int64List{0, first[mirror]}));
    Int64List reverse_split_len, cp_reverse_index;
    for (int64_t i = 0; i < n; ++i) {
      reverse_split_len.push_back(first[i]);
      reverse_split_len.push_back(first[segments - 1 - i]);
    }
    for (int64_t i = 0; i < segments; i += 2) cp_reverse_index.push_back(i);
    for (int64_t i = segments - 1; i > 0; i -= 2) cp_reverse_index.push_back(i);
    RC_ASSERT(m.reverse_split_len == reverse_split_len);
    RC_ASSERT(m.cp_reverse_index == cp_reverse_index);
    RC_ASSERT(ToJson(m.info) == ToJson(RequestSplitInfo(p, 0)));
    RC_ASSERT(m.info.page_aligned);
    RC_ASSERT(m.batch_size == p.batch_size);
    Int64List prev_cu = {0}, next_cu = {0};
    for (int64_t q = 0; q < p.batch_size; ++q) {
      prev_cu.push_back(prev_cu.back() + p.request_actual_seq_q_prev[q]);
      next_cu.push_back(next_cu.back() + p.request_actual_seq_q_next[q]);
    }
    RC_ASSERT(m.request_actual_seq_q_prev_cu_tensor == prev_cu);
    RC_ASSERT(m.request_actual_seq_q_next_cu_tensor == next_cu);
    RC_ASSERT(m.batch_plan != nullptr);
    RC_ASSERT(ToJson(*m.batch_plan) == ToJson(p));
  }
}

}  // namespace
}  // namespace kvshard::props

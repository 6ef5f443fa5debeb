// Literal cases for the CP split planners: seed 003 docstrings (the 4-rank block0..block7 zigzag), spec §4,
// and plans printed by SGLang's build_batch_page_aligned_in_seq_split_plan for the same inputs.
#include "cpu_ref/cp_split.h"

#include <gtest/gtest.h>

#include "core/cp_plan_json.h"

namespace kvshard::ref {
namespace {

using L = Int64List;

bool HasTag(const Status& s, const std::string& tag) {
  return s.message().find("[CP_SHARED_KV_FAIL_FAST][" + tag + "]") == 0;
}

TEST(CpSplitTest, TokenBalancedSplit) {
  EXPECT_EQ(BuildTokenBalancedInSeqSplitList(10, 2).value(), (L{3, 3, 2, 2}));
  EXPECT_EQ(BuildTokenBalancedInSeqSplitList(3, 4).value(), (L{1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(BuildTokenBalancedInSeqSplitList(0, 1).value(), (L{0, 0}));
  EXPECT_EQ(BuildTokenBalancedInSeqSplitList(1, 0).status().message(), "cp_size: must be positive, got 0");
  EXPECT_EQ(BuildTokenBalancedInSeqSplitList(-1, 2).status().message(), "total_len: must be non-negative, got -1");
}

TEST(CpSplitTest, PageAlignedSplitDealsPagesAndKeepsTheTailLast) {
  // 37 tokens, ps 4, prefix 16 (page 4), N 2: 10 pages dealt [3,3,2,2]; last page holds 1 token.
  InSeqSplit s = BuildPageAlignedInSeqSplitList(37, 37, 16, 4, 2).value();
  EXPECT_EQ(s.split_list, (L{12, 12, 8, 5}));
  EXPECT_TRUE(s.info.page_aligned);
  EXPECT_EQ(s.info.segment_page_starts, (L{4, 7, 10, 12}));
  EXPECT_EQ(s.info.segment_page_ends, (L{7, 10, 12, 14}));
  EXPECT_EQ(s.info.extend_padded_pages, 10);
  EXPECT_EQ(s.info.extend_padded_tokens, 40);
  EXPECT_EQ(s.info.extend_padding_tokens, 3);
  // total_len > extend_len: the padding goes to the last segment.
  EXPECT_EQ(BuildPageAlignedInSeqSplitList(40, 37, 16, 4, 2).value().split_list, (L{12, 12, 8, 8}));
  // Fewer pages than segments: surplus segments get zero tokens (no fallback).
  EXPECT_EQ(BuildPageAlignedInSeqSplitList(5, 5, 0, 4, 2).value().split_list, (L{4, 1, 0, 0}));
}

TEST(CpSplitTest, PageAlignedSplitFallsBackToTokenBalanced) {
  for (auto [ps, extend, prefix] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 10, 0}, {0, 10, 0}, {4, 0, 0}, {4, 10, 2}}) {
    InSeqSplit s = BuildPageAlignedInSeqSplitList(10, extend, prefix, ps, 2).value();
    EXPECT_FALSE(s.info.page_aligned);
    EXPECT_EQ(s.split_list, (L{3, 3, 2, 2}));
    EXPECT_TRUE(s.info.segment_page_starts.empty());
    EXPECT_EQ(s.info.page_size, ps);
    EXPECT_EQ(s.info.extend_prefix_len, prefix);
  }
  EXPECT_EQ(BuildPageAlignedInSeqSplitList(3, 5, 0, 4, 2).status().message(),
            "total_len: must be >= extend_len, got total_len=3 extend_len=5");
}

TEST(CpSplitTest, FullPageUnitSplitUsesWholePages) {
  FullPageUnitSplit s = BuildFullPageUnitSplit(2, 8, 4, 2).value();
  EXPECT_EQ(s.split_list, (L{4, 4, 0, 0}));
  EXPECT_EQ(s.segment_page_starts, (L{2, 3, 4, 4}));
  EXPECT_EQ(s.segment_page_ends, (L{3, 4, 4, 4}));
  EXPECT_FALSE(BuildFullPageUnitSplit(2, 6, 4, 2).ok());
}

TEST(CpSplitTest, LastTokenOwnerAndOffset) {
  // Segment < N: owner is the segment, offset within it.
  EXPECT_EQ(GetInSeqLastTokenOwnerAndOffset({4, 4, 0, 0}, 2, 5).value(), (LastTokenLocation{1, 0}));
  // Segment >= N: owner 2N-1-s, offset after the owner's first segment.
  EXPECT_EQ(GetInSeqLastTokenOwnerAndOffset({12, 12, 8, 8}, 2, 37).value(), (LastTokenLocation{0, 16}));
  EXPECT_EQ(GetInSeqLastTokenOwnerAndOffset({12, 12, 8, 8}, 2, 25).value(), (LastTokenLocation{1, 12}));
  EXPECT_FALSE(GetInSeqLastTokenOwnerAndOffset({1, 1, 1, 1}, 2, 5).ok());
  EXPECT_FALSE(GetInSeqLastTokenOwnerAndOffset({1, 1, 1, 1}, 2, 0).ok());
  EXPECT_FALSE(GetInSeqLastTokenOwnerAndOffset({1, 1, 1}, 2, 1).ok());
}

// SGLang's plan for extend_lens=[5,37,3], prefix_lens=[0,16,8], page_size=4, cp_size=2, cp_rank=1.
TEST(CpSplitTest, BatchPlanMatchesSGLangLiteral) {
  CPSharedKVBatchPlan p = BuildBatchPageAlignedInSeqSplitPlan({5, 37, 3}, {0, 16, 8}, 4, 2, 1).value();
  EXPECT_EQ(p.batch_size, 3);
  EXPECT_EQ(p.request_token_offsets, (L{0, 5, 42}));
  EXPECT_EQ(p.request_padded_token_offsets, (L{0, 8, 48}));
  EXPECT_EQ(p.request_page_offsets, (L{0, 2, 12}));
  EXPECT_EQ(p.request_padded_pages, (L{2, 10, 1}));
  EXPECT_EQ(p.request_padding_tokens, (L{3, 3, 1}));
  EXPECT_EQ(p.request_split_lists, (Int64Table::FromRows({{4, 1, 0, 0}, {12, 12, 8, 5}, {3, 0, 0, 0}})));
  EXPECT_EQ(p.request_zigzag_indices, (Int64Table::FromRows({{1, 2}, {1, 2}, {1, 2}})));
  EXPECT_EQ(p.request_segment_page_starts, (Int64Table::FromRows({{0, 1, 2, 2}, {4, 7, 10, 12}, {2, 3, 3, 3}})));
  EXPECT_EQ(p.request_segment_page_ends, (Int64Table::FromRows({{1, 2, 2, 2}, {7, 10, 12, 14}, {3, 3, 3, 3}})));
  EXPECT_EQ(p.request_rank_local_tokens, (L{1, 20, 0}));
  EXPECT_EQ(p.request_rank_local_offsets, (L{0, 1, 21}));
  EXPECT_EQ(p.request_kv_len_prev, (L{5, 24, 3}));  // inclusive prefix sums at segment r
  EXPECT_EQ(p.request_kv_len_next, (L{5, 32, 3}));
  EXPECT_EQ(p.request_actual_seq_q_prev, (L{4, 12, 4}));  // from the COMPUTE split
  EXPECT_EQ(p.request_actual_seq_q_next, (L{0, 8, 0}));
  EXPECT_EQ(p.request_last_token_owner, (L{1, 0, 0}));
  EXPECT_EQ(p.request_last_token_local_offset, (L{0, 16, 2}));
  EXPECT_EQ(p.flat_split_list(), (L{4, 1, 0, 0, 12, 12, 8, 5, 3, 0, 0, 0}));
  EXPECT_EQ(p.flat_zigzag_index, (L{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(p.flat_segment_request_ids, (L{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(p.flat_segment_offsets, (L{0, 4, 5, 5, 0, 12, 24, 32, 0, 3, 3, 3}));
  EXPECT_TRUE(p.compute_padding_enabled);
  EXPECT_EQ(p.request_valid_actual_seq_q_prev, (L{1, 12, 0}));
  EXPECT_EQ(p.request_valid_query_row_spans,
            (std::vector<std::array<RowSpan, 2>>{{{{0, 1}, {4, 0}}}, {{{0, 12}, {12, 8}}}, {{{0, 0}, {4, 0}}}}));
  EXPECT_EQ(p.request_compute_split_lists, (Int64Table::FromRows({{4, 4, 0, 0}, {12, 12, 8, 8}, {4, 4, 0, 0}})));
  EXPECT_EQ(p.request_compute_segment_page_starts,
            (Int64Table::FromRows({{0, 1, 2, 2}, {4, 7, 10, 12}, {2, 3, 4, 4}})));
  EXPECT_EQ(p.request_compute_padded_pages, (L{2, 10, 2}));
  EXPECT_EQ(p.request_compute_padding_tokens, (L{3, 3, 5}));
  EXPECT_EQ(p.request_compute_padded_token_offsets, (L{0, 8, 48}));
  EXPECT_EQ(p.request_compute_rank_local_tokens, (L{4, 20, 4}));
  EXPECT_EQ(p.request_compute_rank_local_offsets, (L{0, 4, 24}));
  EXPECT_EQ(p.output_collect_mode, "narrow_last_token");

  NSAContextParallelMetadata m = BuildBatchMetadataFromPlan(p).value();
  EXPECT_EQ(m.per_rank_actual_token, (L{28, 28}));  // compute splits: padding is on
  EXPECT_EQ(m.max_rank_len, (L{28, 28}));
  EXPECT_EQ(m.total_seq_lens, 56);
  EXPECT_EQ(m.split_list, (L{4, 4, 0, 0}));
  EXPECT_EQ(m.kv_len_prev, 5);
  EXPECT_EQ(m.actual_seq_q_prev, 4);
  EXPECT_EQ(m.reverse_split_len, (L{4, 0, 4, 0}));
  EXPECT_EQ(m.cp_reverse_index, (L{0, 2, 3, 1}));
  EXPECT_EQ(m.request_actual_seq_q_prev_cu_tensor, (L{0, 4, 16, 20}));
}

TEST(CpSplitTest, JsonUsesSGLangFieldNames) {
  CPSharedKVBatchPlan p = BuildBatchPageAlignedInSeqSplitPlan({5}, {0}, 4, 2, 0).value();
  Json j = ToJson(p);
  EXPECT_EQ(j.size(), 57u);  // every CPSharedKVBatchPlan field
  EXPECT_EQ(j["request_split_infos"][0]["segment_page_starts"], Json::parse("[0,1,2,2]"));
  EXPECT_EQ(j["request_valid_query_row_spans"], Json::parse("[[[0,4],[4,0]]]"));
  EXPECT_EQ(j.begin().key(), "batch_size");
}

// Seed docstring, DP_ATTENT_TP == CP_SIZE == 4: rank r holds block r and block 7-r; the rerange order
// block0 | block7 | block1 | block6 | ... is undone by cp_reverse_index.
TEST(CpSplitTest, ScalarMetadataFourRankZigzagPicture) {
  for (int64_t r = 0; r < 4; ++r) {
    NSAContextParallelMetadata m = PrepareInputDpWithCpDsa({.kv_len = 80, .cp_rank = r, .cp_size = 4}).value();
    EXPECT_EQ(m.split_list, (L(8, 10)));
    EXPECT_EQ(m.zigzag_index, (L{r, 7 - r}));
    EXPECT_EQ(m.per_rank_actual_token, (L{20, 20, 20, 20}));
    EXPECT_EQ(m.cp_reverse_index, (L{0, 2, 4, 6, 7, 5, 3, 1}));
    EXPECT_EQ(m.kv_len_prev, 10 * (r + 1));
    EXPECT_EQ(m.kv_len_next, 10 * (8 - r));
    EXPECT_FALSE(m.info.page_aligned);
    EXPECT_EQ(m.info.page_size, 1);
  }
  NSAContextParallelMetadata m = PrepareInputDpWithCpDsa({.kv_len = 13, .cp_rank = 1, .cp_size = 2}).value();
  EXPECT_EQ(m.split_list, (L{4, 3, 3, 3}));
  EXPECT_EQ(m.reverse_split_len, (L{4, 3, 3, 3}));
  EXPECT_EQ(m.per_rank_actual_token, (L{7, 6}));
  EXPECT_EQ(m.max_rank_len, (L{7, 7}));
  EXPECT_EQ(m.kv_len_prev, 7);
  EXPECT_EQ(m.kv_len_next, 10);
}

TEST(CpSplitTest, BatchPlanFailFastTags) {
  EXPECT_TRUE(HasTag(BuildBatchPageAlignedInSeqSplitPlan({4, 0}, {0, 0}, 4, 2, 0).status(), "batch_gt1_empty_extend"));
  EXPECT_TRUE(HasTag(BuildBatchPageAlignedInSeqSplitPlan({4, 4}, {0, 6}, 4, 2, 0).status(),
                     "batch_gt1_non_page_aligned_prefix"));
  EXPECT_TRUE(HasTag(BuildBatchPageAlignedInSeqSplitPlan({4}, {0}, 1, 2, 0).status(), "batch_gt1_page_split_fallback"));
  EXPECT_EQ(BuildBatchPageAlignedInSeqSplitPlan({4}, {0}, 4, 0, 0).status().message(),
            "cp_size: must be positive, got 0");
  EXPECT_EQ(BuildBatchPageAlignedInSeqSplitPlan({4}, {0}, 4, 2, 2).status().message(),
            "cp_rank: must be in [0, 2), got 2");
  EXPECT_EQ(BuildBatchPageAlignedInSeqSplitPlan({4}, {0}, 0, 2, 0).status().message(),
            "page_size: must be positive, got 0");
  EXPECT_EQ(BuildBatchPageAlignedInSeqSplitPlan({4}, {-4}, 4, 2, 0).status().message(),
            "prefix_lens[0]: must be non-negative, got -4");
  EXPECT_FALSE(BuildBatchPageAlignedInSeqSplitPlan({4}, {0, 0}, 4, 2, 0).ok());
  EXPECT_FALSE(BuildBatchPageAlignedInSeqSplitPlan({int64_t{1} << 62}, {0}, 4, 2, 0).ok());
  EXPECT_TRUE(
      HasTag(PrepareInputDpWithCpDsa({.uses_cp_shared_kv = true, .extend_lens = {4}, .prefix_lens = {0}}).status(),
             "cp_shared_missing_page_size"));
  // An empty batch plans (SGLang too) but has no metadata.
  EXPECT_FALSE(BuildBatchMetadataFromPlan(BuildBatchPageAlignedInSeqSplitPlan({}, {}, 4, 2, 0).value()).ok());
}

TEST(CpSplitTest, RoundRobinQLensCarryTheRemainder) {
  // Flattened tokens 0..8 of [5, 3, 1] on 2 ranks: rank 0 gets 0,2,4 | 6 | 8; rank 1 gets 1,3 | 5,7 | -.
  RoundRobinQSeqs r0 = RoundRobinSplitQSeqs({5, 3, 1}, 2, 0).value();
  EXPECT_EQ(r0.q_lens, (L{3, 1, 1}));
  EXPECT_EQ(r0.bs_idx, (L{0, 1, 2}));
  RoundRobinQSeqs r1 = RoundRobinSplitQSeqs({5, 3, 1}, 2, 1).value();
  EXPECT_EQ(r1.q_lens, (L{2, 2}));
  EXPECT_EQ(r1.bs_idx, (L{0, 1}));
  // A zero-length request after a negative carry (Python floor semantics).
  RoundRobinQSeqs z = RoundRobinSplitQSeqs({1, 0, 2}, 2, 1).value();
  EXPECT_EQ(z.q_lens, (L{1}));
  EXPECT_EQ(z.bs_idx, (L{2}));
  RoundRobinQSeqs z0 = RoundRobinSplitQSeqs({1, 0, 2}, 2, 0).value();
  EXPECT_EQ(z0.q_lens, (L{1, 1}));
  EXPECT_EQ(z0.bs_idx, (L{0, 2}));
  EXPECT_FALSE(RoundRobinSplitQSeqs({-1}, 2, 0).ok());
}

TEST(CpSplitTest, RoundRobinLastTokens) {
  std::vector<LastTokenLocation> locs = RoundRobinLastTokenLocations({5, 3, 1}, 4).value();
  EXPECT_EQ(locs, (std::vector<LastTokenLocation>{{0, 1}, {3, 1}, {0, 2}}));
  EXPECT_TRUE(HasTag(RoundRobinLastTokenLocations({5, 0}, 4).status(), "batch_gt1_empty_extend"));
}

TEST(CpSplitTest, FlatTablesFollowTheSplitKind) {
  CPSharedKVBatchPlan p = BuildBatchPageAlignedInSeqSplitPlan({5, 37, 3}, {0, 16, 8}, 4, 2, 1).value();
  FlatSplitTables c = FlattenSplitTables(p, SplitKind::kCompute);
  EXPECT_EQ(c.split_lens, (L{4, 4, 0, 0, 12, 12, 8, 8, 4, 4, 0, 0}));
  EXPECT_EQ(c.target_lens, (L{8, 40, 8}));
  EXPECT_EQ(c.local_row_offsets, (L{0, 4, 24, 28}));
  FlatSplitTables v = FlattenSplitTables(p, SplitKind::kValid);
  EXPECT_EQ(v.split_lens, p.flat_split_list());
  EXPECT_EQ(v.segment_offsets, p.flat_segment_offsets);
  EXPECT_EQ(v.input_row_offsets, (L{0, 5, 42, 45}));
  EXPECT_EQ(v.local_row_offsets, (L{0, 1, 21, 21}));
  RerangeTables t = BuildRerangeTables(p.request_split_lists, 2);
  EXPECT_EQ(t.rank_request_offsets, (L{0, 4, 21, 0, 1, 21}));
  EXPECT_EQ(t.per_rank_tokens, (L{24, 21}));
}

}  // namespace
}  // namespace kvshard::ref

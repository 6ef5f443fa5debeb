// Worked examples of the seed 003 CP helpers: pair split by prev/next lengths, embedding padding, NSA seq lens,
// calculate_cp_seq_idx (values from running SGLang's function) and the can_cp_split gates with their tags.
#include "cpu_ref/cp_helpers.h"

#include <gtest/gtest.h>

#include "cpu_ref/cp_split.h"

namespace kvshard::ref {
namespace {

HostTensor Rows(const Int64List& ids) {
  HostTensor t = HostTensor::Zeros(static_cast<int64_t>(ids.size()), 1);
  for (size_t i = 0; i < ids.size(); ++i) t.data[i] = static_cast<uint8_t>(ids[i]);
  return t;
}

TEST(CpHelpersTest, LocalPairSplitsByMetadataLengthsNotHalves) {
  // cp 2, ps 4, extend 10: split [4,4,2,0]; rank 1 holds segment 1 (4 rows) then segment 2 (2 rows).
  const NSAContextParallelMetadata m =
      BuildScalarCPMetadata(BuildPageAlignedInSeqSplitList(10, 10, 0, 4, 2).value(), 2, 1).value();
  ASSERT_EQ(m.actual_seq_q_prev, 4);
  ASSERT_EQ(m.actual_seq_q_next, 2);
  const auto [prev, next] =
      SplitInSeqCpLocalPair(Rows({4, 5, 6, 7, 8, 9}), m.actual_seq_q_prev, m.actual_seq_q_next).value();
  EXPECT_EQ(prev, Rows({4, 5, 6, 7}));
  EXPECT_EQ(next, Rows({8, 9}));
  EXPECT_EQ(SplitInSeqCpLocalPair(Rows({1, 2, 3}), 1, 1, "q").status().message(),
            "q local in-seq CP length mismatch: actual=3, expected=2, prev_len=1, next_len=1");
}

TEST(CpHelpersTest, EmbeddingPaddingToMaxRankLen) {
  NSAContextParallelMetadata m;
  EXPECT_FALSE(GetCpLocalEmbeddingPaddedTokenCount(nullptr, 3).has_value());
  EXPECT_FALSE(GetCpLocalEmbeddingPaddedTokenCount(&m, 3).has_value());
  m.max_rank_len = {5, 5};
  EXPECT_EQ(GetCpLocalEmbeddingPaddedTokenCount(&m, 3), 5);
  EXPECT_FALSE(GetCpLocalEmbeddingPaddedTokenCount(&m, 6).has_value());
  EXPECT_EQ(PadCpLocalInputIdsForEmbedding(&m, {7, 8, 9}, -1).value(), (Int64List{7, 8, 9, -1, -1}));
  EXPECT_EQ(PadCpLocalInputIdsForEmbedding(&m, {1, 2, 3, 4, 5}).value(), (Int64List{1, 2, 3, 4, 5}));
  EXPECT_FALSE(PadCpLocalInputIdsForEmbedding(&m, {1, 2, 3, 4, 5, 6}).has_value());
}

TEST(CpHelpersTest, NsaSeqlensClampAndPad) {
  EXPECT_EQ(ComputeNsaSeqlens({1, 2048, 5000}, 2048), (Int64List{1, 2048, 2048}));
  CpForwardState b;
  b.extend_seq_lens_cpu = Int64List{7};
  const CpServerArgs in_seq;
  EXPECT_EQ(PadNsaCacheSeqlens(b, in_seq, 4, {3, 4}).value(), (Int64List{3, 4}));  // neither padding applies
  b.global_num_tokens_cpu = Int64List{7, 10};
  b.attention_dp_rank = 1;
  EXPECT_EQ(PadNsaCacheSeqlens(b, in_seq, 4, {3}).value(), (Int64List{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  b.attention_dp_size = 2;  // an extend batch with DP 2: SUM_LEN, this DP rank's ceil_align(7, 4) = 8
  b.attention_dp_rank = 0;
  EXPECT_EQ(CalPaddedTokens(b, in_seq, 4).value(), 8);
  b.is_extend_in_batch = false;  // 2 * (8 + 12) >= 12 * 2: MAX_LEN, max(ceil_align(7,4), ceil_align(10,4)) = 12
  EXPECT_EQ(CalPaddedTokens(b, in_seq, 4).value(), 12);
  EXPECT_TRUE(DpPaddingModeIsMaxLen(false, {8, 12}, 2));
  EXPECT_FALSE(DpPaddingModeIsMaxLen(false, {0, 12}, 4));  // 2 * 12 < 12 * 4: SUM_LEN
  CpServerArgs rr;
  rr.nsa_prefill_cp_mode = "round-robin-split";
  EXPECT_EQ(CalPaddedTokens(b, rr, 4).value(), 3);  // round robin: ceil(12 / 4)
  b.global_num_tokens_cpu.reset();
  EXPECT_FALSE(PadNsaCacheSeqlens(b, rr, 4, {3}).ok());  // round-robin padding needs global_num_tokens_cpu
}

TEST(CpHelpersTest, CalculateCpSeqIdxMatchesSglang) {
  using S = std::vector<std::vector<CpSeqSpan>>;
  EXPECT_EQ(CalculateCpSeqIdx({4, 4, 4}, {3, 6, 3}).value(),
            (S{{{0, 0, 3}, {1, 0, 1}}, {{1, 1, 5}}, {{1, 5, 6}, {2, 0, 3}}}));
  EXPECT_EQ(CalculateCpSeqIdx({0, 5, 2}, {0, 3, 0, 4}).value(),
            (S{{{0, 0, 0}}, {{1, 0, 3}, {2, 0, 0}, {3, 0, 2}}, {{3, 2, 4}}}));
  EXPECT_EQ(CalculateCpSeqIdx({3, 3}, {2}).value(), (S{{{0, 0, 2}}, {}}));
}

TEST(CpHelpersTest, CanCpSplitGates) {
  const CpServerArgs in_seq;
  CpForwardState b;
  b.extend_seq_lens_cpu = Int64List{8};
  EXPECT_TRUE(CanCpSplit(8, 2, true, b, in_seq).value());    // 8 // 4 = 2, 8 >= 2 tokens
  EXPECT_FALSE(CanCpSplit(3, 2, true, b, in_seq).value());   // 3 // 4 = 0
  EXPECT_FALSE(CanCpSplit(8, 1, true, b, in_seq).value());   // N = 1
  EXPECT_FALSE(CanCpSplit(8, 2, false, b, in_seq).value());  // not NSA
  b.extend_seq_lens_cpu = Int64List{1};
  EXPECT_FALSE(CanCpSplit(8, 2, true, b, in_seq).value());  // fewer than N extend tokens
  // Shared KV: one extend token and valid plan inputs suffice.
  b.uses_cp_shared_kv = true;
  b.extend_prefix_lens_cpu = Int64List{4};
  b.page_size = 4;
  EXPECT_TRUE(CanCpSplit(1, 2, true, b, in_seq).value());
  b.extend_seq_lens_cpu = Int64List{0};
  EXPECT_FALSE(CanCpSplit(1, 2, true, b, in_seq).value());
  b.is_context_parallel_extend = false;
  b.extend_seq_lens_cpu = Int64List{3};
  EXPECT_FALSE(CanCpSplit(3, 2, true, b, in_seq).value());
  b.sglang_cp_draft_shared_kv = b.is_draft_extend = true;  // shared-KV draft extend counts as CP extend
  EXPECT_TRUE(CanCpSplit(3, 2, true, b, in_seq).value());
  // Round robin: divisibility, and never with shared KV.
  CpServerArgs rr;
  rr.nsa_prefill_cp_mode = "round-robin-split";
  EXPECT_EQ(CanCpSplit(3, 2, true, b, rr).status().message(),
            "[CP_SHARED_KV_FAIL_FAST][round_robin_unsupported] CP shared KV only supports in-seq zigzag split. "
            "op=can_cp_split nsa_prefill_cp_mode=round-robin-split");
  CpForwardState plain;
  plain.extend_seq_lens_cpu = Int64List{6};
  EXPECT_TRUE(CanCpSplit(6, 2, true, plain, rr).value());
  EXPECT_EQ(CanCpSplit(7, 2, true, plain, rr).status().message(),
            "seq_len: 7 is not divisible by cp_size 2 when nsa_prefill_cp_mode is round-robin-split");
  EXPECT_TRUE(CanNsaPrefillCpRoundRobinSplit(plain, rr, 2).value());
  EXPECT_FALSE(CanNsaPrefillCpRoundRobinSplit(plain, in_seq, 2).value());
}

// SGLang reads a negative seq_len (a negative extend summed) with floor division instead of rejecting it; a
// shared-KV batch then fails on its negative extend (values from running SGLang's can_cp_split).
TEST(CpHelpersTest, CanCpSplitNegativeSeqLenAsSglang) {
  const CpServerArgs in_seq;
  CpForwardState b;
  b.extend_seq_lens_cpu = Int64List{5};
  EXPECT_TRUE(CanCpSplit(-3, 2, true, b, in_seq).value());  // -3 // 4 = -1 != 0
  b.uses_cp_shared_kv = true;
  b.extend_seq_lens_cpu = Int64List{2, -5};
  b.extend_prefix_lens_cpu = Int64List{0, 0};
  b.page_size = 4;
  EXPECT_NE(CanCpSplit(-3, 2, true, b, in_seq).status().message().find("[cp_split_negative_len]"), std::string::npos);
}

TEST(CpHelpersTest, SharedKVPlanInputTags) {
  CpForwardState b;
  b.uses_cp_shared_kv = true;
  b.extend_seq_lens_cpu = Int64List{4, 2};
  b.extend_prefix_lens_cpu = Int64List{0, 4};
  EXPECT_EQ(ValidateCpSharedKVCpSplitPlanInputs(b, 2).status().message(),
            "[CP_SHARED_KV_FAIL_FAST][cp_split_missing_page_plan_inputs] CP shared KV NSA in-seq split requires "
            "extend lengths, prefix lengths, and token_to_kv_pool.page_size before planning. "
            "extend_seq_lens_cpu=[4, 2] extend_prefix_lens_cpu=[0, 4] page_size=0 cp_size=2");
  b.page_size = 4;
  EXPECT_TRUE(ValidateCpSharedKVCpSplitPlanInputs(b, 2).value());
  EXPECT_FALSE(ValidateCpSharedKVCpSplitPlanInputs(b, 1).value());
  b.extend_prefix_lens_cpu = Int64List{0};
  EXPECT_NE(ValidateCpSharedKVCpSplitPlanInputs(b, 2).status().message().find("[cp_split_length_mismatch]"),
            std::string::npos);
  b.extend_prefix_lens_cpu = Int64List{0, -4};
  EXPECT_NE(ValidateCpSharedKVCpSplitPlanInputs(b, 2).status().message().find(
                "[cp_split_negative_len] "
                "CP shared KV NSA in-seq split received a negative length. req_id=1 prefix_len=-4 extend_len=2"),
            std::string::npos);
  b.extend_prefix_lens_cpu = Int64List{0, 6};
  EXPECT_NE(ValidateCpSharedKVCpSplitPlanInputs(b, 2).status().message().find("[cp_split_non_page_aligned_prefix]"),
            std::string::npos);
}

}  // namespace
}  // namespace kvshard::ref

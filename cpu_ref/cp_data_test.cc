// Literal cases for CP data movement: the seed's block0..block7 and token0..token19 pictures (4 ranks),
// split-by-plan padding rules, valid-row selection, reranges and last-token collection, with error tags.
#include "cpu_ref/cp_data.h"

#include <cstring>

#include <gtest/gtest.h>

#include "cpu_ref/cp_collect.h"
#include "cpu_ref/cp_split.h"

namespace kvshard::ref {
namespace {

using L = Int64List;

// Rows whose first 8 bytes are the given ids (rest: a byte pattern of the id), width >= 8.
HostTensor Rows(const L& ids, int64_t width = 12) {
  HostTensor t = HostTensor::Zeros(static_cast<int64_t>(ids.size()), width);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(t.row(i), &ids[i], 8);
    for (int64_t b = 8; b < width; ++b) t.row(i)[b] = static_cast<uint8_t>(ids[i] * 7 + b);
  }
  return t;
}

// The ids of a tensor made by Rows (a zero row reads as 0).
L Ids(const HostTensor& t) {
  L out;
  for (int64_t i = 0; i < t.rows; ++i) {
    int64_t v;
    std::memcpy(&v, t.row(i), 8);
    out.push_back(v);
  }
  return out;
}

L Range(int64_t begin, int64_t end) {
  L out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

L Cat(std::initializer_list<L> parts) {
  L out;
  for (const L& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

bool HasTag(const Status& s, const std::string& tag) {
  return s.message().find("[CP_SHARED_KV_FAIL_FAST][" + tag + "]") == 0;
}

// Seed docstring (4 ranks): rank r holds block r and block 7-r; the gather reads
// block0|block7|block1|block6|block2|block5|block3|block4 and the rerange restores block0..block7.
TEST(CpDataTest, FourRankZigzagBlocksRoundTrip) {
  const int64_t n = 4, len = 8 * 5;  // eight blocks of 5 tokens
  const HostTensor x = Rows(Range(100, 100 + len));
  std::vector<HostTensor> local;
  NSAContextParallelMetadata m;
  for (int64_t r = 0; r < n; ++r) {
    m = PrepareInputDpWithCpDsa({.kv_len = len, .cp_rank = r, .cp_size = n}).value();
    InSeqSplit split{m.split_list, m.info};
    // cp_split_and_rebuild_data: split by split_list, take zigzag_index segments.
    HostTensor rows;
    rows.row_bytes = x.row_bytes;
    L starts = {0};
    for (int64_t s : m.split_list) starts.push_back(starts.back() + s);
    L ids;
    for (int64_t seg : m.zigzag_index) {
      for (int64_t i = starts[seg]; i < starts[seg + 1]; ++i) ids.push_back(100 + i);
    }
    EXPECT_EQ(ids, Cat({Range(100 + 5 * r, 105 + 5 * r), Range(100 + 5 * (7 - r), 105 + 5 * (7 - r))}));
    local.push_back(Rows(ids));
  }
  HostTensor gathered = AllGatherPadded(local, m.total_seq_lens).value();
  EXPECT_EQ(Ids(gathered), Cat({Range(100, 105), Range(135, 140), Range(105, 110), Range(130, 135), Range(110, 115),
                                Range(125, 130), Range(115, 120), Range(120, 125)}));
  EXPECT_EQ(InSeqAllGatherRerange(gathered, m).value(), x);
}

// Seed docstring (round-robin, 4 ranks): rank r holds tokens r, r+4, r+8, ...; the restore interleaves them.
TEST(CpDataTest, RoundRobinTokensRoundTrip) {
  const HostTensor x = Rows(Range(0, 20));
  std::vector<HostTensor> local;
  for (int64_t r = 0; r < 4; ++r) local.push_back(RoundRobinSplitData(x, 4, r).value());
  EXPECT_EQ(Ids(local[0]), (L{0, 4, 8, 12, 16}));
  EXPECT_EQ(Ids(local[3]), (L{3, 7, 11, 15, 19}));
  EXPECT_EQ(RoundRobinRestore(ConcatRows(local).value(), 4).value(), x);
  EXPECT_FALSE(RoundRobinRestore(Rows(Range(0, 6)), 4).ok());
  EXPECT_EQ(Ids(RoundRobinCollectLastToken(local, {7, 13}).value()), (L{6, 19}));
}

// Plan [5,37,3] / [0,16,8], ps 4, N 2 (compute padding on: request 2 has 1 page < N).
class BatchPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int64_t r = 0; r < 2; ++r)
      plans.push_back(BuildBatchPageAlignedInSeqSplitPlan({5, 37, 3}, {0, 16, 8}, 4, 2, r).value());
  }
  std::vector<CPSharedKVBatchPlan> plans;
  const HostTensor x = Rows(Range(1, 46));  // token ids 1..45 (0 marks padding)
};

TEST_F(BatchPlanTest, ValidSplitTakesRequestLocalSegments) {
  // Rank 1, valid: req0 seg1 = token 4 (id 5), seg2 empty; req1 seg1 = 12..23, seg2 = 24..31; req2 nothing.
  HostTensor v = SplitTensorByCPBatchPlan(x, plans[1], SplitMode::kData, SplitKind::kValid).value();
  EXPECT_EQ(Ids(v), Cat({{5}, Range(6 + 12, 6 + 24), Range(6 + 24, 6 + 32)}));
}

TEST_F(BatchPlanTest, ComputeSplitPadsWithZerosOrPositions) {
  // Rank 1, compute: req0 seg1 = [4,8) -> id 5 + 3 zero rows; req1 12..31; req2 seg1 = rows [4,8) all padding.
  HostTensor c = SplitTensorByCPBatchPlan(x, plans[1], SplitMode::kData, SplitKind::kCompute).value();
  EXPECT_EQ(Ids(c), Cat({{5, 0, 0, 0}, Range(18, 38), {0, 0, 0, 0}}));
  // Position mode continues last + 1 (request 2's positions 43,44,45 -> pads 46..).
  HostTensor pos =
      SplitTensorByCPBatchPlan(Rows(Range(1, 46), 8), plans[1], SplitMode::kPosition, SplitKind::kCompute).value();
  EXPECT_EQ(Ids(pos), Cat({{5, 6, 7, 8}, Range(18, 38), {47, 48, 49, 50}}));
  EXPECT_TRUE(HasTag(SplitTensorByCPBatchPlan(x, plans[1], SplitMode::kPosition, SplitKind::kCompute).status(),
                     "batch_gt1_position_padding_rank"));
  // The valid rows of the compute split are exactly the valid split.
  EXPECT_EQ(SelectCPLocalValidRowsForCacheWrite(c, plans[1]).value(),
            SplitTensorByCPBatchPlan(x, plans[1], SplitMode::kData, SplitKind::kValid).value());
  EXPECT_TRUE(HasTag(SelectCPLocalValidRowsForCacheWrite(x, plans[1]).status(), "cache_write_valid_selector_shape"));
}

// cp_split_and_rebuild_data's scalar path: 11 tokens on 2 ranks split [3, 3, 3, 2]; rank 1 holds segments 1 and 2.
TEST(CpDataTest, ScalarSplitAndRebuildTakesTheZigzagSegments) {
  const NSAContextParallelMetadata m = PrepareInputDpWithCpDsa({.kv_len = 11, .cp_rank = 1, .cp_size = 2}).value();
  ASSERT_EQ(m.split_list, (L{3, 3, 3, 2}));
  EXPECT_EQ(Ids(CpSplitAndRebuildScalar(Rows(Range(0, 11)), m).value()), (L{3, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(CpSplitAndRebuildScalar(Rows(Range(0, 10)), m).ok());  // the split must cover every row
}

// _pad_cp_request_tensor_for_split on its own (values from running SGLang's function): zero rows, positions
// continuing the last one, and its three tags.
TEST(CpDataTest, PadRequestTensorForSplitMatchesSglang) {
  EXPECT_EQ(PadCPRequestTensorForSplit(HostTensor::FromInt64s({8, 9, 10}), 5, SplitMode::kPosition, 0)->Int64s(),
            (L{8, 9, 10, 11, 12}));
  EXPECT_EQ(Ids(PadCPRequestTensorForSplit(Rows({4, 5}), 4, SplitMode::kData, 0).value()), (L{4, 5, 0, 0}));
  EXPECT_EQ(Ids(PadCPRequestTensorForSplit(Rows({4, 5}), 2, SplitMode::kPosition, 0).value()), (L{4, 5}));
  EXPECT_TRUE(HasTag(PadCPRequestTensorForSplit(Rows({4, 5}), 1, SplitMode::kData, 3).status(),
                     "batch_gt1_compute_padding_len_mismatch"));
  EXPECT_TRUE(HasTag(PadCPRequestTensorForSplit(Rows({}), 2, SplitMode::k1d, 0).status(),
                     "batch_gt1_compute_padding_empty_request"));
  EXPECT_TRUE(HasTag(PadCPRequestTensorForSplit(Rows({4, 5}), 3, SplitMode::kPosition, 0).status(),
                     "batch_gt1_position_padding_rank"));  // 12-byte rows: not a 1-D position tensor
}

TEST_F(BatchPlanTest, InputLengthRules) {
  // Trailing rows are dropped for compute splits within the compute/static allowance, else rejected.
  HostTensor longer = Rows(Range(1, 50));
  EXPECT_EQ(SplitTensorByCPBatchPlan(longer, plans[0], SplitMode::kData, SplitKind::kCompute).value(),
            SplitTensorByCPBatchPlan(x, plans[0], SplitMode::kData, SplitKind::kCompute).value());
  Status s = SplitTensorByCPBatchPlan(longer, plans[0], SplitMode::kData, SplitKind::kValid).status();
  EXPECT_TRUE(HasTag(s, "batch_gt1_split_input_len_mismatch"));
  EXPECT_NE(s.message().find("input tokens=49 expected=45"), std::string::npos);
  s = SplitTensorByCPBatchPlan(Rows(Range(1, 40)), plans[0], SplitMode::kData, SplitKind::kCompute).status();
  EXPECT_EQ(s.message(),
            "[CP_SHARED_KV_FAIL_FAST][batch_gt1_split_input_len_mismatch] input tokens=39 expected=45 max_compute=56");
  CPSharedKVBatchPlan broken = plans[0];
  broken.request_zigzag_indices.values.resize(broken.request_zigzag_indices.values.size() - 2);
  EXPECT_TRUE(HasTag(SplitTensorByCPBatchPlan(x, broken, SplitMode::kData, SplitKind::kValid).status(),
                     "batch_gt1_missing_split_metadata"));
  broken = plans[0];
  broken.request_compute_padded_tokens[0] = 4;
  EXPECT_TRUE(HasTag(SplitTensorByCPBatchPlan(x, broken, SplitMode::kData, SplitKind::kCompute).status(),
                     "batch_gt1_compute_padding_len_mismatch"));
  broken = plans[0];
  broken.request_compute_padded_tokens[0] = 12;
  EXPECT_TRUE(HasTag(SplitTensorByCPBatchPlan(x, broken, SplitMode::kData, SplitKind::kCompute).status(),
                     "batch_gt1_split_target_len_mismatch"));
  EXPECT_EQ(ParseSplitMode("2d").status().message(), "mode: unsupported CP batch split mode='2d'");
}

TEST_F(BatchPlanTest, BatchRerangeRestoresRequestOrder) {
  const NSAContextParallelMetadata m = BuildBatchMetadataFromPlan(plans[0]).value();
  EXPECT_EQ(m.max_rank_token(), 28);  // from the compute splits
  std::vector<HostTensor> local;
  for (int64_t r = 0; r < 2; ++r) {
    HostTensor c = SplitTensorByCPBatchPlan(x, plans[r], SplitMode::kData, SplitKind::kCompute).value();
    local.push_back(SelectCPLocalValidRowsForCacheWrite(c, plans[r]).value());
  }
  EXPECT_EQ(local[0].rows, 24);
  EXPECT_EQ(local[1].rows, 21);
  HostTensor gathered = AllGatherPadded(local, m.total_seq_lens).value();
  EXPECT_EQ(gathered.rows, 56);
  EXPECT_EQ(BatchInSeqAllGatherRerange(gathered, m, 2).value(), x);
  L rows = BatchRerangeSourceRows(plans[0].request_split_lists, 2, 28).value();
  EXPECT_EQ(L(rows.begin(), rows.begin() + 6), (L{0, 1, 2, 3, 28, 4}));  // req0: seg0 on rank 0, seg1 on rank 1
  // Error reasons.
  EXPECT_NE(BatchInSeqAllGatherRerange(Rows(Range(0, 10)), m, 2).status().message().find("reason=input_rows_short"),
            std::string::npos);
  EXPECT_NE(BatchRerangeSourceRows(plans[0].request_split_lists, 2, 23)
                .status()
                .message()
                .find("reason=rank_payload_exceeds_max"),
            std::string::npos);
  NSAContextParallelMetadata one =
      BuildBatchMetadataFromPlan(BuildBatchPageAlignedInSeqSplitPlan({5}, {0}, 4, 2, 0).value()).value();
  EXPECT_NE(BatchInSeqAllGatherRerange(gathered, one, 2).status().message().find("reason=not_batch"),
            std::string::npos);
}

// An output over 32 MiB takes the streaming-store copy path; odd row widths exercise its unaligned head and tail.
TEST(CpDataTest, LargeBatchRerangeMatchesSourceRows) {
  const CPSharedKVBatchPlan plan =
      BuildBatchPageAlignedInSeqSplitPlan({5000, 3001, 1003}, {64, 0, 128}, 64, 4, 0).value();
  const NSAContextParallelMetadata m = BuildBatchMetadataFromPlan(plan).value();
  for (int64_t width : {int64_t{4096}, int64_t{4101}}) {
    HostTensor gathered = HostTensor::Zeros(m.total_seq_lens, width);
    for (size_t i = 0; i < gathered.data.size(); ++i) gathered.data[i] = static_cast<uint8_t>(i * 131 + i / 4099);
    const HostTensor out = BatchInSeqAllGatherRerange(gathered, m, 4).value();
    ASSERT_GE(out.data.size(), size_t{32} << 20);
    const L rows = BatchRerangeSourceRows(plan.request_split_lists, 4, m.max_rank_token()).value();
    ASSERT_EQ(out.rows, static_cast<int64_t>(rows.size()));
    for (int64_t i = 0; i < out.rows; ++i) {
      ASSERT_EQ(std::memcmp(out.row(i), gathered.row(rows[i]), width), 0) << "row " << i << " width " << width;
    }
  }
}

TEST_F(BatchPlanTest, LastTokensComeFromTheComputeRows) {
  std::vector<HostTensor> hidden;
  for (int64_t r = 0; r < 2; ++r) {
    hidden.push_back(SplitTensorByCPBatchPlan(x, plans[r], SplitMode::kData, SplitKind::kCompute).value());
  }
  // Last tokens: ids 5, 42, 45.
  EXPECT_EQ(Ids(InSeqCollectLastTokenBatch(hidden, plans).value()), (L{5, 42, 45}));
  hidden[0].rows -= 2;
  hidden[0].data.resize(hidden[0].rows * hidden[0].row_bytes);
  EXPECT_TRUE(HasTag(InSeqCollectLastTokenBatch(hidden, plans).status(), "batch_gt1_last_token_oob"));
}

TEST(CpDataTest, TrimAndAllGatherShapes) {
  HostTensor g = AllGatherPadded({Rows({1, 2}), Rows({3})}, 4).value();
  EXPECT_EQ(Ids(g), (L{1, 2, 3, 0}));
  EXPECT_EQ(Ids(TrimCPRankPaddingAfterAllGather(g, {2, 2}, {2, 1}).value()), (L{1, 2, 3}));
  EXPECT_FALSE(AllGatherPadded({Rows({1, 2, 3}), Rows({3})}, 4).ok());
  EXPECT_FALSE(TrimCPRankPaddingAfterAllGather(g, {2, 3}, {2, 1}).ok());
  HostTensor bad = Rows({1});
  bad.data.pop_back();
  EXPECT_FALSE(ValidateHostTensor(bad, "x").ok());
}

TEST(CpDataTest, ScalarLastTokenCollection) {
  // 13 tokens on 2 ranks: split [4,3,3,3]; token 12 is in segment 3 -> rank 0 at local row 4 + 2.
  std::vector<HostTensor> hidden = {Rows({0, 1, 2, 3, 10, 11, 12}), Rows({4, 5, 6, 7, 8, 9})};
  EXPECT_EQ(Ids(InSeqCollectLastTokenScalar(hidden, {4, 3, 3, 3}, 13).value()), (L{12}));
}

}  // namespace
}  // namespace kvshard::ref

// MemoryBudget: the refusal line, the saturating sizes, and each table's figure at its boundary (one byte under
// the cap passes, the cap exactly passes, one byte over is refused).
#include "core/memory_budget.h"

#include <gtest/gtest.h>

namespace kvshard {
namespace {

TEST(MemoryBudgetTest, RefusalNamesTheFieldTheTermsAndTheCap) {
  const Status s = MemoryBudget(1000).Check("extend_lens", "rerange plan", {{40, "segments", 192}, {0, "rows", 8}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "extend_lens: the rerange plan would need 7.5 KiB (40 segments x 192 B), over --max-memory 1000 B");
  EXPECT_TRUE(MemoryBudget(7680).Check("f", "w", 40, "segments", 192).ok());
  EXPECT_FALSE(MemoryBudget(7679).Check("f", "w", 40, "segments", 192).ok());
}

TEST(MemoryBudgetTest, AShareChecksItsPartAndNamesTheSplit) {
  const MemoryBudget share = MemoryBudget(4096).Share(4, "--jobs");
  EXPECT_EQ(share.max_memory(), 1024);
  EXPECT_TRUE(share.Check("f", "w", 1, "rows", 1024).ok());
  EXPECT_EQ(share.Check("f", "w", 1, "rows", 1025).message(),
            "f: the w would need 1.0 KiB (1 rows x 1025 B), over --max-memory 4 KiB / --jobs 4 = 1 KiB");
  EXPECT_EQ(share.Lines()(33).message(),
            "record: the line held in memory would need 1.0 KiB (33 line bytes x 32 B), over --max-memory 4 KiB / "
            "--jobs 4 = 1 KiB");
  EXPECT_EQ(share.Workload().held(30, 0).message(),
            "requests: the workload held in memory would need 1.4 KiB (30 requests x 48 B), over --max-memory 4 KiB / "
            "--jobs 4 = 1 KiB");
  // One part is the budget itself, its refusals as ever.
  EXPECT_EQ(MemoryBudget(4096).Share(1, "--jobs").Check("f", "w", 1, "rows", 4097).message(),
            "f: the w would need 4.0 KiB (1 rows x 4097 B), over --max-memory 4 KiB");
  EXPECT_EQ(MemoryBudget(4096).Share(3, "--jobs").max_memory(), 1365);
}

TEST(MemoryBudgetTest, SizesSaturateInsteadOfOverflowing) {
  EXPECT_EQ(TotalTokens({INT64_MAX, INT64_MAX, -5, 0}), int64_t{1} << 62);
  EXPECT_EQ(TotalTokens({3, -1, 4}), 7);
  EXPECT_EQ(TotalPages({1, 16, 17, 0, -3}, 16), 1 + 1 + 2);
  EXPECT_EQ(TotalPages({5}, 0), 5);  // a page size the model refuses is counted as 1
  EXPECT_EQ(CpSegments(3, 4), 24);
  EXPECT_EQ(CpSegments(int64_t{1} << 40, int64_t{1} << 30), int64_t{1} << 62);
  EXPECT_EQ(CpSegments(2, 0), 4);
}

TEST(MemoryBudgetTest, EachTableAtItsBoundary) {
  // 2 requests over 4 ranks: 16 segments x 192 B = 3072 B; with the JSON 16 x 320 B = 5120 B.
  EXPECT_TRUE(MemoryBudget(3072).SplitPlan("f", 2, 4, false).ok());
  EXPECT_FALSE(MemoryBudget(3071).SplitPlan("f", 2, 4, false).ok());
  EXPECT_TRUE(MemoryBudget(5120).SplitPlan("f", 2, 4, true).ok());
  EXPECT_FALSE(MemoryBudget(5119).SplitPlan("f", 2, 4, true).ok());
  EXPECT_EQ(MemoryBudget(1).SplitPlan("f", 2, 4, true).message(),
            "f: the split plan and its JSON would need 5 KiB (16 segments x 320 B), over --max-memory 1 B");
  // Page owners: the plan first, then 10 pages x 96 B.
  EXPECT_TRUE(MemoryBudget(3072).PageOwners("f", 2, 10, 4).ok());
  EXPECT_FALSE(MemoryBudget(959).PageOwners("f", 1, 10, 1).ok());
  EXPECT_NE(MemoryBudget(1000).PageOwners("f", 1, 11, 1).message().find("page owner plan"), std::string::npos);
  // Round-robin: ceil(7 / 2) = 4 rows x 48 B.
  EXPECT_TRUE(MemoryBudget(192).RoundRobinSplit("f", 7, 2).ok());
  EXPECT_FALSE(MemoryBudget(191).RoundRobinSplit("f", 7, 2).ok());
  // Rerange with source rows: 1 request, 2 ranks: 4 segments x 192 B, then 100 + 4 x 16 padded rows x 32 B.
  EXPECT_TRUE(MemoryBudget(164 * 64).Rerange("f", 1, 100, 16, 2, true, false).ok());
  const Status rows = MemoryBudget(164 * 64 - 1).Rerange("f", 1, 100, 16, 2, true, false);
  EXPECT_EQ(rows.message(),
            "f: the rerange source rows would need 10.2 KiB (164 rows x 64 B), over --max-memory 10.2 KiB");
  EXPECT_TRUE(MemoryBudget(768).Rerange("f", 1, 100, 16, 2, false, false).ok());   // the streamed command: plan only
  EXPECT_FALSE(MemoryBudget(3999).Rerange("f", 1, 100, 16, 2, false, true).ok());  // 100 rows x 40 B on the GPU
  // Placement: 3 slots x 64 B, or x 256 B with the JSON; a computed list: 10 values x 48 B.
  EXPECT_TRUE(MemoryBudget(192).Placement("f", 3, false).ok());
  EXPECT_FALSE(MemoryBudget(767).Placement("f", 3, true).ok());
  EXPECT_TRUE(MemoryBudget(480).ValueList("f", "padded rows", 10).ok());
  EXPECT_FALSE(MemoryBudget(479).ValueList("f", "padded rows", 10).ok());
}

TEST(MemoryBudgetTest, GatherPlanCountsRowsPagesAndThePageTable) {
  ExtendBatch b;
  b.shard_size = 2;
  b.page_size = 4;
  b.pages_per_rank = 8;
  b.max_prefix_tokens = 64;
  b.chunk_tokens = 16;
  b.requests.push_back({.prefix_len = 8, .seq_len = 12, .pages = {2, 3, 4}});
  // block_pages 1, send pages 2, rows 8; 3 request pages; 2 * 10 page_pos entries.
  const int64_t need = 8 * 8 + 2 * 16 + 3 * 96 + 20 * 24;
  EXPECT_TRUE(MemoryBudget(need).GatherPlan("batch", b, false, false).ok());
  const Status s = MemoryBudget(need - 1).GatherPlan("batch", b, false, false);
  EXPECT_EQ(s.message(),
            "batch: the gather plan would need 864 B (8 send rows x 8 B + 2 send pages x 16 B + 3 request pages x 96 B "
            "+ 20 page_pos entries x 24 B), over --max-memory 863 B");
  b.page_size = 0;  // a batch the model refuses is left to its error
  EXPECT_TRUE(MemoryBudget(1).GatherPlan("batch", b, true, true).ok());
}

}  // namespace
}  // namespace kvshard

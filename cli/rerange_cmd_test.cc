// Tests of `kvshard rerange`: SGLang's goldens, JSON fields, the table, errors and backends.
#include "cli/cli_test_util.h"
#include "core/json.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

constexpr char kRerange[] = "rerange --cp-size 2 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8";

TEST(RerangeCmdTest, SourceRowsAndPadding) {
  const Json j = JsonOf(std::string(kRerange) + " --json");
  EXPECT_EQ(j["max_rank_token"], 28);
  EXPECT_EQ(j["per_rank_tokens"], Json({24, 21}));
  const std::vector<int64_t> rows = j["source_rows"].get<std::vector<int64_t>>();
  ASSERT_GE(rows.size(), 7u);
  EXPECT_EQ(std::vector<int64_t>(rows.begin(), rows.begin() + 7), (std::vector<int64_t>{0, 1, 2, 3, 28, 4, 5}));
  EXPECT_TRUE(j.contains("compute_padding_enabled") && j.contains("per_rank_actual_token"));
  CliResult table = RunCli(Words(kRerange));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.rfind("rerange: cp_size=2 page_size=4 max_rank_token=28", 0), 0u) << table.out;
  for (const char* line : {"  rank    block rows       valid     padding\n",
                           "     0        [0,28)          24           4\n", "  [4,5) <- [28,29)\n"}) {
    EXPECT_NE(table.out.find(line), std::string::npos) << line << " not in:\n" << table.out;
  }
}

TEST(RerangeCmdTest, Errors) {
  ExpectFailures({
      {"rerange --cp-size 2 --page-size 1 --extend-lens 5", "[CP_SHARED_KV_FAIL_FAST][batch_gt1_page_split_fallback] "},
      {"rerange --cp-size 2 --page-size 4 --extend-lens 0", "[CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend] "},
      {"rerange --cp-size 2 --extend-lens 5", "--page-size: required"},
      {"rerange --cp-size 0 --page-size 4 --extend-lens 5", "--cp-size: must be positive, got 0"},
      {std::string(kRerange) + ",", "--prefix-lens: trailing comma"},
      {std::string(kRerange) + " --cp-rank 1", "rerange: unrecognised option '--cp-rank'"},
      {std::string(kRerange) + " --backend GPU", "--backend: must be ref, gpu or diff, got 'GPU'"},
  });
}

TEST(RerangeCmdTest, MatchesSglangGoldens) { EXPECT_EQ(CheckCpGoldens("rerange"), 2); }

// The fast host paths (cpu_fast/) print the same goldens.
TEST(RerangeCmdTest, FastImplMatchesSglangGoldens) {
  EXPECT_EQ(CheckCpGoldens("rerange", {"--impl", "fast"}), 2);
}

TEST(RerangeCmdTest, GpuBackends) { ExpectGpuBackendsMatchReference(std::string(kRerange) + " --json"); }

}  // namespace
}  // namespace kvshard::cli

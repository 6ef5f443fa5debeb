// Tests of `kvshard rerange`: SGLang's goldens, JSON fields, the table, errors and backends.
#include "cli/cli_test_util.h"
#include "cli/memory_limit.h"
#include "replay/results.h"
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
      {"rerange --cp-size 0 --page-size 4 --extend-lens 5", "--cp-size: must be in [1, 65536], got 0"},
      {std::string(kRerange) + ",", "--prefix-lens: trailing comma"},
      {std::string(kRerange) + " --cp-rank 1", "rerange: unrecognised option '--cp-rank'"},
      {std::string(kRerange) + " --backend GPU", "--backend: must be ref, gpu or diff, got 'GPU'"},
  });
}

TEST(RerangeCmdTest, MatchesSglangGoldens) { EXPECT_EQ(CheckCpGoldens("rerange"), 2); }

// The fast host paths (cpu_fast/) print the same goldens.
TEST(RerangeCmdTest, FastImplMatchesSglangGoldens) { EXPECT_EQ(CheckCpGoldens("rerange", {"--impl", "fast"}), 2); }

// The streamed --json is byte-identical to the in-memory JSON (RerangeJson, which replay still uses).
TEST(RerangeCmdTest, StreamedJsonIsByteIdenticalToTheJsonTree) {
  struct Case {
    int64_t cp_size, page_size;
    std::vector<int64_t> extend, prefix;
  };
  for (const Case& c : std::vector<Case>{{2, 4, {5, 37, 3}, {0, 16, 8}},
                                         {4, 16, {100, 7, 64, 33, 1}, {0, 16, 32, 48, 0}},
                                         {8, 64, {130}, {128}},
                                         {3, 2, {1, 1}, {0, 0}},
                                         {1, 1, {9}, {0}},
                                         {16, 4, {3, 200, 17, 64}, {0, 4, 8, 0}}}) {
    const auto join = [](const std::vector<int64_t>& v) {
      std::string t;
      for (int64_t x : v) t += (t.empty() ? "" : ",") + std::to_string(x);
      return t;
    };
    const std::string line = "rerange --json --cp-size " + std::to_string(c.cp_size) + " --page-size " +
                             std::to_string(c.page_size) + " --extend-lens " + join(c.extend) + " --prefix-lens " +
                             join(c.prefix);
    const CliResult got = RunCli(Words(line));
    StatusOr<replay::Rerange> want = replay::BuildRerange(c.cp_size, c.page_size, c.extend, c.prefix);
    if (!want.ok()) {
      EXPECT_EQ(got.exit_code, 2) << line;
      continue;
    }
    ASSERT_EQ(got.exit_code, 0) << line << ": " << got.err;
    std::ostringstream tree;
    PrintJson(replay::RerangeJson(*want), tree);
    EXPECT_EQ(got.out, tree.str()) << line;
  }
}

// Sizes inside the model's limits but past --max-memory are exit 2 before anything is allocated; the ref
// table and JSON stream, so a 2^48-token rerange prints its table in flat memory.
TEST(RerangeCmdTest, MaxMemory) {
  ExpectFailures({
      {"rerange --cp-size 2 --page-size 16 --extend-lens 281474976710656 --backend gpu",
       "--extend-lens: the rerange rows on the GPU path would need 10 PiB (281474976710656 rows x 40 B), over "
       "--max-memory 4 GiB"},
      {"rerange --cp-size 4 --page-size 16 --extend-lens 100,7,64,33,1 --max-memory 1000",
       "--extend-lens: the rerange plan would need 7.5 KiB (40 segments x 192 B), over --max-memory 1000 B"},
      {std::string(kRerange) + " --max-memory 0", "--max-memory: must be in [1, 2^50], got 0"},
  });
  EXPECT_EQ(RunCli(Words("rerange --cp-size 4 --page-size 16 --extend-lens 100,7,64,33,1 --max-memory 7680")).exit_code,
            0);
  const CliResult huge = RunCli(Words("rerange --cp-size 2 --page-size 16 --extend-lens 281474976710656"));
  ASSERT_EQ(huge.exit_code, 0) << huge.err;
  EXPECT_NE(huge.out.find("  [211106232532992,281474976710656) <- [70368744177664,140737488355328)\n"),
            std::string::npos)
      << huge.out;
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(512), "512 B");
}

TEST(RerangeCmdTest, GpuBackends) { ExpectGpuBackendsMatchReference(std::string(kRerange) + " --json"); }

}  // namespace
}  // namespace kvshard::cli

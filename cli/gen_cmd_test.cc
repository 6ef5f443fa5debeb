// kvshard gen: byte-identical for the same options, different for another seed, replays clean (plain and
// edge-heavy), and rejects bad options with one line.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

TEST(GenCmdTest, SameSeedSameBytesAndReplaysClean) {
  const CliResult a = RunCli({"gen", "--seed", "5", "--records", "400"});
  const CliResult b = RunCli({"gen", "--seed", "5", "--records", "400"});
  const CliResult c = RunCli({"gen", "--seed", "6", "--records", "400"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), '\n'), 401);
  const CliResult r = RunCli({"replay", "-"}, a.out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("replayed 400 records"), std::string::npos) << r.out;
}

TEST(GenCmdTest, EdgeHeavyTracesReachRejectionsAndReplayClean) {
  for (const char* seed : {"1", "2", "3"}) {
    const CliResult g = RunCli({"gen", "--seed", seed, "--records", "600", "--edge-heavy", "--need-sort", "--shard-size",
                                "3", "--page-size", "4", "--cp-size", "2", "--pages-per-rank", "8"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("\"expect\":{\"error\":"), std::string::npos) << "no rejected record with seed " << seed;
    EXPECT_NE(g.out.find("\"ok\":false"), std::string::npos) << "no deferred batch with seed " << seed;
    const CliResult r = RunCli({"replay", "-"}, g.out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST(GenCmdTest, BadOptionsExitTwo) {
  ExpectFailures({{"gen --records -1", "--records: must be non-negative", 2},
                  {"gen --batch-size 0", "--batch-size: must be in [1, 4096]", 2},
                  {"gen --share-percent 101", "--share-percent: must be in [0, 100]", 2},
                  {"gen --shard-size 0", "--shard-size: must be in [1,", 2}});
}

}  // namespace
}  // namespace kvshard::cli

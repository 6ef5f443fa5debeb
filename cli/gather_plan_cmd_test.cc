// Tests of `kvshard gather-plan`: the spec §3 goldens, --translate, standard input, errors and backends.
#include "cli/cli_test_util.h"
#include "core/json.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

constexpr char kBatch[] = "testdata/gather_plan/spec3_batch_n4_ps16.json";

// A spec §3 batch with one request of the given JSON fields.
std::string Batch(const std::string& request) {
  return R"({"shard_size":4,"page_size":16,"pages_per_rank":32,"max_prefix_tokens":4096,"chunk_tokens":512,)"
         R"("requests":[)" +
         request + "]}";
}

TEST(GatherPlanCmdTest, MatchesTheGoldens) {
  const std::string args = "gather-plan --batch " + RunfilePath(kBatch) + " --translate 0,336,400,1000";
  CliResult json = RunCli(Words(args + " --json"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out, ReadRunfile("testdata/gather_plan/spec3_batch_n4_ps16.golden.json"));
  CliResult table = RunCli(Words(args));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out, ReadRunfile("testdata/gather_plan/spec3_batch_n4_ps16.golden.txt"));
  EXPECT_NE(table.out.find("rank 1:  2<-21/5  3<-pad"), std::string::npos);
  CliResult from_stdin = RunCli(Words("gather-plan --batch - --translate 0,336,400,1000 --json"), ReadRunfile(kBatch));
  EXPECT_EQ(from_stdin.out, json.out);
  // The fast host planner (cpu_fast/) prints the same goldens and the same errors.
  EXPECT_EQ(RunCli(Words(args + " --json --impl fast")).out, json.out);
  EXPECT_EQ(RunCli(Words(args + " --impl fast")).out, table.out);
  const CliResult bad =
      RunCli(Words("gather-plan --batch " + RunfilePath(kBatch) + " --translate 99999999 --impl fast"));
  EXPECT_EQ(bad.err, RunCli(Words("gather-plan --batch " + RunfilePath(kBatch) + " --translate 99999999")).err);
  EXPECT_EQ(bad.exit_code, 2);
}

TEST(GatherPlanCmdTest, ScratchRowsOnlyWithTranslate) {
  const Json j = JsonOf("gather-plan --json --batch " + RunfilePath(kBatch));
  EXPECT_TRUE(j.contains("ranks"));
  EXPECT_FALSE(j.contains("scratch_rows"));
}

TEST(GatherPlanCmdTest, BadInputIsOneLineNamingTheField) {
  ExpectFailures({
      {"gather-plan", "--batch: required"},
      {"gather-plan --batch /no/such.json", "--batch: /no/such.json: cannot open file"},
  });
  ExpectFailures(
      {
          {"gather-plan --batch - --translate 1,x", "--translate[1]: not an integer: 'x'"},
          {"gather-plan --batch - --translate 2176", "--translate[0]: must be in [0, 2176)"},
          {"gather-plan --batch - --translate 1,", "--translate: trailing comma"},
          {"gather-plan --batch - --translate ''", "--translate: must list at least one value"},
          {"gather-plan --batch - --backend cpu", "--backend: must be ref, gpu or diff, got 'cpu'"},
      },
      ReadRunfile(kBatch));
  ExpectFailures({{"gather-plan --batch -", "--batch: standard input: not valid JSON"}}, "{");
  ExpectFailures({{"gather-plan --batch -", "--batch: requests[0].seq_len: must be >= prefix_len (32), got 16"}},
                 Batch(R"({"prefix_len":32,"seq_len":16,"pages":[4]})"));
  ExpectFailures({{"gather-plan --batch -", "--batch: requests[0].prefix_len: must be an integer"}},
                 Batch(R"({"prefix_len":"0","seq_len":16,"pages":[4]})"));
}

TEST(GatherPlanCmdTest, StrictBatches) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  ExpectFailures({
      {"gather-plan --batch " + dir, "--batch: " + dir + ": is a directory, not a file"},
      {"gather-plan --batch /dev/null", "--batch: /dev/null: is a device, not a regular file"},
  });
  ExpectFailures({{"gather-plan --batch -", "--batch: requests[0].pages: duplicate key"}},
                 Batch(R"({"prefix_len":0,"seq_len":16,"pages":[4],"pages":[5]})"));
  ExpectFailures({{"gather-plan --batch -", "--batch: requests[0].page: unknown key"}},
                 Batch(R"({"prefix_len":0,"seq_len":16,"page":[4]})"));
  ExpectFailures(
      {{"gather-plan --batch -",
        "--batch: requests[0].pages[0]: out of range (must be in [-9223372036854775808, 9223372036854775807]), "
        "got 18446744073709551615"}},
      Batch(R"({"prefix_len":0,"seq_len":16,"pages":[18446744073709551615]})"));
}

// A batch written before the rename (pool_pages_per_rank counted the trash page) is refused with one line that
// says what changed, never read with the old meaning.
TEST(GatherPlanCmdTest, PreRenamePoolKeyIsRefusedSayingWhatChanged) {
  std::string batch = ReadRunfile(kBatch);
  const std::string key = "\"pages_per_rank\": 32";
  ASSERT_NE(batch.find(key), std::string::npos);
  batch.replace(batch.find(key), key.size(), "\"pool_pages_per_rank\": 33");
  const CliResult r = RunCli(Words("gather-plan --batch -"), batch);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "kvshard: error: --batch: pool_pages_per_rank: renamed to pages_per_rank, which excludes the trash page "
            "(pages_per_rank = pool_pages_per_rank - 1)\n");
}

TEST(GatherPlanCmdTest, GpuBackends) {
  ExpectGpuBackendsMatchReference("gather-plan --json --translate 0,336,400 --batch " + RunfilePath(kBatch));
}

}  // namespace
}  // namespace kvshard::cli

// Tests of `kvshard split`: SGLang's goldens for the three modes, tables, and errors (SGLang's fail-fast tags
// kept, flag-level ranges naming the flag).
#include "cli/cli_test_util.h"
#include "replay/results.h"
#include "core/json.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

constexpr char kInSeq[] = "split --cp-size 2 --cp-rank 1 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8";

TEST(SplitCmdTest, MatchesSglangGoldens) { EXPECT_EQ(CheckCpGoldens("split"), 5); }

// The fast host paths (cpu_fast/) print the same goldens.
TEST(SplitCmdTest, FastImplMatchesSglangGoldens) { EXPECT_EQ(CheckCpGoldens("split", {"--impl", "fast"}), 5); }

TEST(SplitCmdTest, InSeqJsonCarriesThePlanAndItsMetadata) {
  const Json j = JsonOf(std::string(kInSeq) + " --json");
  for (const char* key : {"batch_size", "request_split_lists", "request_compute_split_lists", "output_collect_mode",
                          "compute_padding_enabled", "nsa_cp_metadata"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["output_collect_mode"], "narrow_last_token");
  EXPECT_EQ(j["request_valid_query_row_spans"][1], Json::parse("[[0,12],[12,8]]"));
  EXPECT_EQ(j["request_split_infos"][1]["extend_padding_tokens"], 3);
  EXPECT_EQ(JsonOf("split --cp-size 2 --page-size 4 --extend-lens 5,6 --json"),
            JsonOf("split --cp-size 2 --page-size 4 --extend-lens 5,6 --prefix-lens 0,0 --json"));
}

TEST(SplitCmdTest, Tables) {
  CliResult in_seq = RunCli(Words(kInSeq));
  ASSERT_EQ(in_seq.exit_code, 0) << in_seq.err;
  EXPECT_EQ(in_seq.out.rfind("in-seq split: cp_size=2 cp_rank=1 page_size=4 batch_size=3", 0), 0u) << in_seq.out;
  EXPECT_NE(in_seq.out.find("last token: rank 0 local offset 16"), std::string::npos);
  EXPECT_NE(in_seq.out.find("[7,10)"), std::string::npos);
  EXPECT_EQ(RunCli(Words("split --mode round-robin --cp-size 2 --cp-rank 1 --extend-lens 5,3,1")).out,
            "round-robin split: cp_size=2 cp_rank=1 (token t -> rank t % 2)\nq_lens=[2,2]\nbs_idx=[0,1]\n");
  EXPECT_EQ(RunCli(Words("split --mode token-balanced --cp-size 2 --total-len 10")).out,
            "token-balanced split: total_len=10 cp_size=2\nsplit_list=[3,3,2,2]\n");
}

TEST(SplitCmdTest, ModelErrorsKeepSglangTags) {
  const std::string b = "split --cp-size 2 --page-size ";
  ExpectFailures({
      {b + "4 --extend-lens 5,0", "[CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend] "},
      {b + "4 --extend-lens 5 --prefix-lens 3", "[CP_SHARED_KV_FAIL_FAST][batch_gt1_non_page_aligned_prefix] "},
      {b + "1 --extend-lens 5", "[CP_SHARED_KV_FAIL_FAST][batch_gt1_page_split_fallback] "},
      {b + "4 --extend-lens 5 --cp-rank 2", "--cp-rank: must be in [0, 2), got 2"},
      {b + "4 --extend-lens 5 --prefix-lens -4", "--prefix-lens[0]: must be non-negative, got -4"},
      {b + "4 --extend-lens 5,6 --prefix-lens 0", "--prefix-lens: extend_lens and prefix_lens must have the same"},
      {b + "4 --extend-lens ''", "--extend-lens: the batch needs at least one request"},
      {b + "4 --extend-lens 999999999999999999", "--extend-lens[0]: must be at most 2^48"},
      {"split --mode round-robin --cp-size 2 --extend-lens 1,-1", "--extend-lens[1]: must be in [0, 2^48], got -1"},
  });
}

TEST(SplitCmdTest, FlagErrorsNameTheFlag) {
  const std::string b = "split --cp-size 2 --page-size 4 --extend-lens ";
  ExpectFailures({
      {"split --cp-size 0 --page-size 4 --extend-lens 5", "--cp-size: must be in [1, 65536], got 0"},
      {"split --cp-size 2x --page-size 4 --extend-lens 5", "--cp-size: not an integer: '2x'"},
      {"split --cp-size 2 --page-size 0 --extend-lens 5", "--page-size: must be in [1, 2^20], got 0"},
      // The model's limits, shown in --help as the flags' ranges.
      {"split --cp-size 65537 --page-size 4 --extend-lens 5", "--cp-size: must be in [1, 65536], got 65537"},
      {"split --cp-size 2 --page-size 1048577 --extend-lens 5", "--page-size: must be in [1, 2^20], got 1048577"},
      {b + "5 --cp-rank -1", "--cp-rank: must be non-negative, got -1"},
      {b + "99999999999999999999", "--extend-lens[0]: integer out of range"},
      {b + "5,x", "--extend-lens[1]: not an integer: 'x'"},
      {b + "5,", "--extend-lens: trailing comma"},
      {"split --mode token-balanced --cp-size 2 --total-len -1", "--total-len: must be in [0, 2^48], got -1"},
      {"split --page-size 4 --extend-lens 5", "--cp-size: required"},
      {"split --cp-size 2 --extend-lens 5", "--page-size: required"},
      {"split --mode token-balanced --cp-size 2", "--total-len: required"},
      {"split --mode zig --cp-size 2", "--mode: must be in-seq, round-robin, token-balanced or owners, got 'zig'"},
      {"split --cp-size 2 --bogus 1", "split: unrecognised option '--bogus'"},
  });
}

// The streamed --json (field by field) is byte-identical to printing the whole JSON tree, at the edges:
// one request, N = 1, partial pages, prefixes, compute padding, empty-looking lists.
TEST(SplitCmdTest, StreamedJsonIsByteIdenticalToTheJsonTree) {
  struct Case {
    int64_t cp_size, cp_rank, page_size;
    std::vector<int64_t> extend, prefix;
  };
  const auto join = [](const std::vector<int64_t>& v) {
    std::string t;
    for (int64_t x : v) t += (t.empty() ? "" : ",") + std::to_string(x);
    return t;
  };
  for (const Case& c : std::vector<Case>{{2, 1, 4, {5, 37, 3}, {0, 16, 8}},
                                         {4, 2, 16, {100, 7, 64, 33, 1}, {0, 16, 32, 48, 0}},
                                         {8, 5, 64, {130}, {128}},
                                         {3, 0, 2, {1, 1}, {0, 0}},
                                         {1, 0, 1, {9}, {0}},
                                         {16, 15, 4, {3, 200, 17, 64}, {0, 4, 8, 0}}}) {
    const std::string line = "split --json --cp-size " + std::to_string(c.cp_size) + " --cp-rank " +
                             std::to_string(c.cp_rank) + " --page-size " + std::to_string(c.page_size) +
                             " --extend-lens " + join(c.extend) + " --prefix-lens " + join(c.prefix);
    const CliResult got = RunCli(Words(line));
    StatusOr<replay::InSeqSplit> want = replay::BuildInSeqSplit(c.extend, c.prefix, c.page_size, c.cp_size, c.cp_rank);
    if (!want.ok()) {
      EXPECT_EQ(got.exit_code, 2) << line;
      continue;
    }
    ASSERT_EQ(got.exit_code, 0) << line << ": " << got.err;
    std::ostringstream tree;
    PrintJson(replay::InSeqSplitJson(*want), tree);
    EXPECT_EQ(got.out, tree.str()) << line;
  }
}

// Sizes inside the model's limits but past --max-memory are exit 2 with the bytes they imply, before any
// allocation (16,384 requests x cp 512 --json took 12 GB and 64 s; round-robin of 2^48 tokens threw bad_alloc).
TEST(SplitCmdTest, MaxMemory) {
  std::string many = "split --cp-size 512 --page-size 16 --json --extend-lens 64";
  for (int i = 1; i < 16384; ++i) many += ",64";
  ExpectFailures({
      {many,
       "--extend-lens: the split plan and its JSON would need 5 GiB (16777216 segments x 320 B), over "
       "--max-memory 4 GiB"},
      {"split --mode round-robin --cp-size 2 --extend-lens 281474976710656",
       "--extend-lens: the round-robin split would need 6 PiB (140737488355328 rows x 48 B), over --max-memory 4 GiB"},
      {"split --cp-size 4 --page-size 4 --extend-lens 37 --max-memory 1000",
       "--extend-lens: the split plan would need 1.5 KiB (8 segments x 192 B), over --max-memory 1000 B"},
  });
  EXPECT_EQ(RunCli(Words("split --cp-size 4 --page-size 4 --extend-lens 37 --max-memory 1536")).exit_code, 0);
  EXPECT_EQ(RunCli(Words("split --mode round-robin --cp-size 2 --extend-lens 5,3 --max-memory 192")).exit_code, 0);
  EXPECT_EQ(RunCli(Words("split --mode round-robin --cp-size 2 --extend-lens 5,3 --max-memory 191")).exit_code, 2);
}

}  // namespace
}  // namespace kvshard::cli

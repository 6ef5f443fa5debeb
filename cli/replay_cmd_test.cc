// kvshard replay: the spec-examples trace replays clean; a corrupted expect is reported at its line and field;
// --keep-going counts every mismatch; every kind of malformed line exits 2 naming its line.
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

const char kTrace[] = "testdata/traces/spec_examples.jsonl";

// The spec-examples trace with the first occurrence of `from` on line `line` (1-based) replaced by `to`.
std::string Edited(int line, const std::string& from, const std::string& to) {
  std::string text = ReadRunfile(kTrace);
  size_t at = 0;
  for (int l = 1; l < line; ++l) at = text.find('\n', at) + 1;
  const size_t hit = text.find(from, at);
  EXPECT_LT(hit, text.find('\n', at)) << "'" << from << "' is not on line " << line;
  return text.replace(hit, from.size(), to);
}

TEST(ReplayCmdTest, SpecExamplesReplayClean) {
  const CliResult r = RunCli({"replay", RunfilePath(kTrace)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("replayed 12 records,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 mismatches"), std::string::npos) << r.out;
  const Json j = JsonOf("replay - --json", ReadRunfile(kTrace));
  EXPECT_EQ(j["records"], 12);
  EXPECT_EQ(j["mismatches"], 0);
  EXPECT_TRUE(j["first_mismatch"].is_null());
  EXPECT_GT(j["fields_checked"].get<int64_t>(), 50);
}

TEST(ReplayCmdTest, CorruptedExpectIsReportedAtItsLineAndField) {
  const CliResult r = RunCli({"replay", "-"}, Edited(4, "[11, 12, 13,", "[11, 12, 99,"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "kvshard: mismatch: line 4: alloc: pages[0][2]: expected 99, got 13\n");
  const CliResult e = RunCli({"replay", "-"}, Edited(10, "batch_gt1_empty_extend", "batch_gt1_page_split_fallback"));
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_EQ(e.err.rfind("kvshard: mismatch: line 10: split: error: expected a message containing "
                        "\"batch_gt1_page_split_fallback\", got \"[CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend]",
                        0),
            0u)
      << e.err;
}

TEST(ReplayCmdTest, KeepGoingReportsEveryMismatch) {
  std::string text = Edited(4, "[11, 12, 13,", "[11, 12, 99,");
  text.replace(text.find("\"max_rank_token\": 8"), 19, "\"max_rank_token\": 9");
  const CliResult r = RunCli({"replay", "-", "--keep-going"}, text);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("mismatch: line 4: alloc: pages[0][2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mismatch: line 12: rerange: max_rank_token: expected 9, got 8"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.rfind("kvshard: mismatch: 2 mismatches in 12 records; first: line 4:", 0), 0u) << r.err;
}

TEST(ReplayCmdTest, MalformedTracesExitTwoNamingTheLine) {
  const std::string header = "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, "
                             "\"pages_per_rank\": 4, \"need_sort\": false}}\n";
  const std::pair<std::string, std::string> cases[] = {
      {"", "line 1: kvshard_trace: the trace is empty"},
      {"{\"kvshard_trace\": 7}\n", "line 1: kvshard_trace: this build reads version 1, got 7"},
      {"{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 0}}\n", "line 1: allocator.shard_size: must be in"},
      {header + "{\"op\": \"evict\"}\n", "line 2: op: unknown op \"evict\""},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0, \"locs\": [1], \"x\": 1}\n",
       "line 2: x: unknown key for op \"place\""},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0}\n", "line 2: locs: missing"},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0, \"locs\": [\"1\"]}\n",
       "line 2: locs: must be an array of integers"},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0, \"locs\": [-1]}\n",
       "line 2: locs[0]: "},
      {header + "\n", "line 2: record: empty line"},
      {header + "{\"op\": \"free\"\n", "line 2: record: not valid JSON"},
      {header + "{\"op\": \"free\", \"locs\": [4], \"request\": 0}\n", "line 2: locs: give locs or request, exactly one"},
      {header + "{\"op\": \"free_group\", \"frees\": [[4], {\"req\": 0}]}\n", "line 2: frees: must be an array of"},
      {header + "{\"op\": \"free\", \"request\": 3}\n", "line 2: request: no alloc request 3"},
      {header + "{\"op\": \"split\", \"cp_size\": 2, \"cp_rank\": 0, \"page_size\": 4, \"extend_lens\": [0]}\n",
       "line 2: [CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend]"},
      {header + "{\"op\": \"split\", \"mode\": \"token-balanced\", \"cp_size\": 2}\n",
       "line 2: total_len: missing (needed by split mode token-balanced)"},
      {header + "{\"op\": \"rerange\", \"cp_size\": 2, \"page_size\": 4, \"extend_lens\": [3], \"expect\": []}\n",
       "line 2: expect: must be an object"},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0, \"locs\": [1], "
                "\"expect\": {\"error\": 3}}\n",
       "line 2: expect.error: must be the only key, a string"},
      {header + "{\"op\": \"gather_plan\", \"batch\": {\"shard_size\": 2, \"page_size\": 4, "
                "\"pool_pages_per_rank\": 5, \"max_prefix_tokens\": 0, \"chunk_tokens\": 0, \"requests\": []}, "
                "\"expect\": {}}\n",
       "line 2: batch.pool_pages_per_rank: renamed to pages_per_rank"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"alloc\", \"prefix_lens\": [0], \"seq_lens\": [1], \"rotation_bases\": [null], "
       "\"last_locs\": [0]}\n",
       "line 2: alloc: allocator records need the header's \"allocator\""},
  };
  for (const auto& [text, want] : cases) EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, text), 2, want)) << text;
  EXPECT_TRUE(FailsWith(RunCli({"replay", "/nonexistent.jsonl"}), 2, "--trace: /nonexistent.jsonl: cannot open file"));
}

TEST(ReplayCmdTest, AnExpectedErrorThatDoesNotHappenIsAMismatch) {
  const std::string text = "{\"kvshard_trace\": 1}\n{\"op\": \"split\", \"cp_size\": 2, \"cp_rank\": 0, \"page_size\": 4, "
                           "\"extend_lens\": [3], \"expect\": {\"error\": \"batch_gt1_empty_extend\"}}\n";
  const CliResult r = RunCli({"replay", "-"}, text);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "kvshard: mismatch: line 2: split: error: expected an error containing \"batch_gt1_empty_extend\", "
                   "got success\n");
}

}  // namespace
}  // namespace kvshard::cli

// kvshard replay: the spec-examples trace replays clean; a corrupted expect is reported at its line and field;
// --keep-going counts every mismatch; every kind of malformed line exits 2 naming its line; every checked-in trace
// replays clean. The pool pipeline's records and the GPU backends: replay_pipeline_cmd_test.cc.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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

// --read-threads changes how many threads parse ahead, never what is reported: the same output and exit for a
// trace with mismatches (--keep-going) and one with a malformed line; out of range names the flag (exit 2).
TEST(ReplayCmdTest, ReadThreadsChangeNothingReported) {
  std::string text = Edited(4, "[11, 12, 13,", "[11, 12, 99,");
  text.replace(text.find("\"max_rank_token\": 8"), 19, "\"max_rank_token\": 9");
  const std::string malformed = Edited(9, "\"op\": \"", "\"op\": \"x");
  for (const std::string& trace : {text, malformed}) {
    const CliResult want = RunCli({"replay", "-", "--keep-going", "--read-threads", "1"}, trace);
    EXPECT_NE(want.exit_code, 0);
    for (const char* threads : {"2", "4", "16"}) {
      const CliResult r = RunCli({"replay", "-", "--keep-going", "--read-threads", threads}, trace);
      EXPECT_EQ(r.exit_code, want.exit_code) << threads;
      EXPECT_EQ(r.out, want.out) << threads;
      EXPECT_EQ(r.err, want.err) << threads;
    }
  }
  for (const char* bad : {"0", "17"}) {
    const CliResult r = RunCli({"replay", RunfilePath(kTrace), "--read-threads", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_EQ(r.err.rfind("kvshard: error: --read-threads: must be in [1, 16]", 0), 0u) << r.err;
  }
}

// --timing ends the summary with the host's threads (the reader threads asked for, and CPU seconds that are numbers)
// and the replay's wall and release seconds; the rest of the line is the one without it. Not with --json.
TEST(ReplayCmdTest, TimingEndsTheSummaryWithTheHostsThreads) {
  const CliResult plain = RunCli({"replay", RunfilePath(kTrace)});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_FALSE(plain.out.empty());
  const std::string summary = plain.out.substr(0, plain.out.size() - 1);  // without its newline
  for (const char* threads : {"1", "3"}) {
    const CliResult r = RunCli({"replay", RunfilePath(kTrace), "--timing", "--read-threads", threads});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(summary + "; checking thread CPU ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(std::string(" s for the ") + threads + " reader threads (their CPU "), std::string::npos)
        << r.out;
    double cpu = -1, waited = -1, readers_cpu = -1, replay = -1, release = -1;
    int n = -1;
    long long judged = -1, stateless = -1;
    ASSERT_EQ(std::sscanf(r.out.c_str() + summary.size(),
                          "; checking thread CPU %lf s, waited %lf s for the %d reader threads (their CPU %lf s; they "
                          "judged %lld of the %lld stateless records); replay %lf s wall, released in %lf s",
                          &cpu, &waited, &n, &readers_cpu, &judged, &stateless, &replay, &release),
              8)
        << r.out;
    EXPECT_GE(cpu, 0);
    EXPECT_GE(waited, 0);
    EXPECT_EQ(n, std::stoi(threads));
    EXPECT_GE(readers_cpu, 0);
    EXPECT_GT(stateless, 0);  // the trace's plan records
    EXPECT_GE(judged, 0);
    EXPECT_LE(judged, stateless);
    EXPECT_GE(replay, 0);
    EXPECT_GE(release, 0);
    const std::string end = " s\n";  // the summary ends there
    EXPECT_EQ(r.out.substr(r.out.size() - std::min(r.out.size(), end.size())), end) << r.out;
  }
  const CliResult json = RunCli({"replay", RunfilePath(kTrace), "--timing", "--json"});
  EXPECT_EQ(json.exit_code, 2);
  EXPECT_EQ(json.err, "kvshard: error: --timing: not with --json (it ends the summary line)\n");
}

// A page the radix cache holds, freed by an allocator record: the check of what the record changed finds it, and so
// does the whole walk (--full-invariants); a clean trace passes both.
TEST(ReplayCmdTest, FreeingACachedPageBreaksAnInvariantWithAndWithoutTheFullWalk) {
  const std::string trace =
      "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, \"pages_per_rank\": 8, "
      "\"need_sort\": false}}\n"
      "{\"op\": \"alloc\", \"prefix_lens\": [0], \"seq_lens\": [10], \"rotation_bases\": [null], \"last_locs\": [0], "
      "\"expect\": {\"pages\": [[2, 3, 4]]}}\n"
      "{\"op\": \"insert\", \"tokens\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], \"pages\": [2, 3, 4], \"rotation_base\": 0, "
      "\"expect\": {\"new_pages\": 2}}\n";
  for (const char* full : {"", "--full-invariants"}) {
    std::vector<std::string> args = {"replay", "-"};
    if (*full) args.push_back(full);
    const CliResult clean = RunCli(args, trace + "{\"op\": \"free\", \"locs\": [16]}\n");
    EXPECT_EQ(clean.exit_code, 0) << full << clean.err;
    const CliResult r = RunCli(args, trace + "{\"op\": \"free\", \"locs\": [12]}\n");
    EXPECT_EQ(r.exit_code, 1) << full;
    EXPECT_EQ(r.err, "kvshard: mismatch: line 4: free: invariant: page 3 is cached but was freed\n") << full;
  }
}

TEST(ReplayCmdTest, MalformedTracesExitTwoNamingTheLine) {
  const std::string header =
      "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, "
      "\"pages_per_rank\": 4, \"need_sort\": false}}\n";
  const std::pair<std::string, std::string> cases[] = {
      {"", "line 1: kvshard_trace: the trace is empty"},
      {"{\"kvshard_trace\": 7}\n", "line 1: kvshard_trace: this build reads version 1, got 7"},
      {"{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 0}}\n", "line 1: allocator.shard_size: must be in"},
      {header + "{\"op\": \"spill\"}\n", "line 2: op: unknown op \"spill\""},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0, \"locs\": [1], \"x\": 1}\n",
       "line 2: x: unknown key for op \"place\""},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0}\n", "line 2: locs: missing"},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0, \"locs\": [\"1\"]}\n",
       "line 2: locs: must be an array of integers"},
      {header + "{\"op\": \"place\", \"shard_size\": 2, \"page_size\": 4, \"rank\": 0, \"locs\": [-1]}\n",
       "line 2: locs[0]: "},
      {header + "\n", "line 2: record: empty line"},
      {header + "{\"op\": \"free\"\n", "line 2: record: not valid JSON"},
      {header + "{\"op\": \"free\", \"locs\": [4], \"request\": 0}\n",
       "line 2: locs: give locs or request, exactly one"},
      {header + "{\"op\": \"free_group\", \"frees\": [[4], {\"req\": 0}]}\n", "line 2: frees: must be an array of"},
      {header + "{\"op\": \"free\", \"request\": 3}\n", "line 2: request: no alloc request 3"},
      {header + "{\"op\": \"free_group\", \"frees\": [[], {\"request\": 3}]}\n",
       "line 2: frees[1].request: no alloc request 3"},
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
      // Seed 003's data and NSA helper records: a missing input, a choice outside its list, a wrong shape.
      {header + "{\"op\": \"cp_split_rows\", \"cp_size\": 2, \"page_size\": 4, \"extend_lens\": [3]}\n",
       "line 2: rows: missing"},
      {header + "{\"op\": \"cp_split_rows\", \"cp_size\": 2, \"page_size\": 4, \"extend_lens\": [3], "
                "\"rows\": [1, 2, 3], \"mode\": \"2d\"}\n",
       "line 2: mode: unsupported value \"2d\""},
      {header + "{\"op\": \"cp_last_tokens\", \"cp_size\": 2, \"extend_lens\": [3], \"rows\": [1, 2, 3], "
                "\"mode\": \"zigzag\"}\n",
       "line 2: mode: unsupported value \"zigzag\""},
      {header + "{\"op\": \"cp_pad_request\", \"rows\": [1, 2, 3], \"target_len\": 4, \"row_width\": 2}\n",
       "line 2: row_width: must be in [1, 64] and divide the 3 values of rows"},
      {header + "{\"op\": \"cal_padded_tokens\", \"cp_size\": 2}\n", "line 2: global_num_tokens_cpu: missing"},
      {header + "{\"op\": \"pad_nsa_cache_seqlens\", \"cp_size\": 2, \"nsa_cache_seqlens\": [1], "
                "\"nsa_prefill_cp_mode\": \"ring\"}\n",
       "line 2: nsa_prefill_cp_mode: must be in-seq-split or round-robin-split, got ring"},
      {header + "{\"op\": \"compute_nsa_seqlens\", \"seq_lens\": [1], \"nsa_index_topk\": true}\n",
       "line 2: nsa_index_topk: must be an integer"},
      {header + "{\"op\": \"cp_prepare_metadata\", \"kv_len\": 8, \"cp_size\": 2, \"uses_cp_shared_kv\": 1}\n",
       "line 2: uses_cp_shared_kv: must be true or false"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"alloc\", \"prefix_lens\": [0], \"seq_lens\": [1], \"rotation_bases\": "
       "[null], "
       "\"last_locs\": [0]}\n",
       "line 2: alloc: allocator records need the header's \"allocator\""},
  };
  for (const auto& [text, want] : cases)
    EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, text), 2, "--trace: " + want)) << text;
  EXPECT_TRUE(FailsWith(RunCli({"replay", "/nonexistent.jsonl"}), 2, "--trace: /nonexistent.jsonl: cannot open file"));
}

// --max-memory bounds a trace line as it is read (32 B per byte), so one huge line never fills memory.
TEST(ReplayCmdTest, MaxMemoryBoundsALineAsItIsRead) {
  const std::string header =
      "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, "
      "\"pages_per_rank\": 4, \"need_sort\": false}}\n";
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-", "--max-memory", "1000"}, header), 2,
                        "--trace: line 1: record: the line held in memory would need 3.4 KiB (109 line bytes x 32 B), "
                        "over --max-memory 1000 B"));
  const std::string huge_line = header + std::string(200000, ' ') + "{}\n";
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-", "--max-memory", "3000000"}, huge_line), 2,
                        "--trace: line 2: record: the line held in memory would need 4 MiB (131072 line bytes x 32 B), "
                        "over --max-memory 2.9 MiB"));
}

TEST(ReplayCmdTest, AnExpectedErrorThatDoesNotHappenIsAMismatch) {
  const std::string text =
      "{\"kvshard_trace\": 1}\n{\"op\": \"split\", \"cp_size\": 2, \"cp_rank\": 0, \"page_size\": 4, "
      "\"extend_lens\": [3], \"expect\": {\"error\": \"batch_gt1_empty_extend\"}}\n";
  const CliResult r = RunCli({"replay", "-"}, text);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "kvshard: mismatch: line 2: split: error: expected an error containing \"batch_gt1_empty_extend\", "
            "got success\n");
}

// The first integer leaf of `j` (depth first) incremented; false when there is none.
bool BumpFirstInt(Json& j) {
  if (j.is_number_integer()) {
    j = j.get<int64_t>() + 1;
    return true;
  }
  if (j.is_array() || j.is_object()) {
    for (auto& v : j) {
      if (BumpFirstInt(v)) return true;
    }
  }
  return false;
}

// Every trace in testdata/traces/ replays clean, and a corrupted expect on any of up to 25 of its lines (spread
// over the trace) is the first mismatch, reported at that line.
TEST(ReplayCmdTest, EveryTestdataTraceReplaysCleanAndCatchesCorruptionAtItsLine) {
  int traces = 0;
  for (const auto& entry : std::filesystem::directory_iterator(RunfilePath("testdata/traces"))) {
    if (entry.path().extension() != ".jsonl") continue;
    ++traces;
    const std::string name = "testdata/traces/" + entry.path().filename().string();
    const CliResult clean = RunCli({"replay", RunfilePath(name)});
    EXPECT_EQ(clean.exit_code, 0) << name << ": " << clean.err;
    EXPECT_NE(clean.out.find(" 0 mismatches"), std::string::npos) << name << ": " << clean.out;
    const CliResult fast = RunCli({"replay", RunfilePath(name), "--impl", "fast"});  // cpu_fast/ plans agree
    EXPECT_EQ(fast.exit_code, 0) << name << ": " << fast.err;
    EXPECT_EQ(fast.out, clean.out) << name;
    const std::vector<std::string> lines = Lines(ReadRunfile(name));
    std::vector<size_t> with_expect;
    for (size_t i = 1; i < lines.size(); ++i) {
      const Json rec = Json::parse(lines[i]);
      if (rec.contains("expect") && !rec.at("expect").contains("error")) {
        Json e = rec.at("expect");
        if (BumpFirstInt(e)) with_expect.push_back(i);
      }
    }
    ASSERT_FALSE(with_expect.empty()) << name << " checks nothing";
    const size_t step = std::max<size_t>(1, with_expect.size() / 25);
    for (size_t k = 0; k < with_expect.size(); k += step) {
      std::vector<std::string> edited = lines;
      Json rec = Json::parse(edited[with_expect[k]]);
      BumpFirstInt(rec["expect"]);
      edited[with_expect[k]] = rec.dump();
      const CliResult r = RunCli({"replay", "-"}, Joined(edited));
      const std::string at = "kvshard: mismatch: line " + std::to_string(with_expect[k] + 1) + ": ";
      EXPECT_EQ(r.exit_code, 1) << name << " line " << with_expect[k] + 1;
      EXPECT_EQ(r.err.rfind(at, 0), 0u) << name << ": " << r.err;
    }
  }
  EXPECT_GE(traces, 2);
}

}  // namespace
}  // namespace kvshard::cli

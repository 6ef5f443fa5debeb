// kvshard simulate: the JSON contract, the summary, format detection, standard input and bad input (exit 2).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

const char kTwoTurns[] =
    "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [7, 8, 9]}\n"
    "{\"timestamp\": 1000, \"input_length\": 1500, \"output_length\": 5, \"hash_ids\": [7, 8, 10]}\n";

// A file path under the test's temporary directory (an --emit-trace target that must not be written).
std::string TempPathForEmit() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/never_written.jsonl";
}

TEST(SimulateCmdTest, JsonCarriesTheContractKeys) {
  const Json j =
      JsonOf("simulate - --format mooncake --shard-size 8 --page-size 64 --cache-tokens 0 --json", kTwoTurns);
  for (const char* key :
       {"requests", "prefix_hit_rate_blocks", "prefix_hit_rate_tokens", "violations", "pages_in_use", "deferrals",
        "declined_grafts", "evictions", "gathered_bytes_per_layer", "cp_padding_fraction", "batch_time_us"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["requests"], 2);
  EXPECT_EQ(j["violations"], 0);
  EXPECT_DOUBLE_EQ(j["prefix_hit_rate_blocks"].get<double>(), 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(j["prefix_hit_rate_tokens"].get<double>(), 1024.0 / 2600.0);
  for (const char* key : {"max", "mean", "skew_max", "skew_mean"}) EXPECT_TRUE(j["pages_in_use"].contains(key)) << key;
  for (const char* key : {"total", "p50", "p99"}) {
    EXPECT_TRUE(j["gathered_bytes_per_layer"].contains(key)) << key;
    EXPECT_TRUE(j["batch_time_us"].contains(key)) << key;
  }
  // 16 prefix pages of 64 tokens x 1152 bytes gathered by the second batch, on N = 8 (2 pages per owner).
  EXPECT_EQ(j["gathered_bytes_per_layer"]["max"].get<double>(), 8.0 * 2 * 64 * 1152);
}

TEST(SimulateCmdTest, SummaryAndDetection) {
  const CliResult r = RunCli({"simulate", "-", "--shard-size", "4", "--cp-size", "2"}, kTwoTurns);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("simulated 2 requests"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prefix hit rate: 0.333 of hash blocks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CP compute padding"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("invariant violations: 0"), std::string::npos) << r.out;
  const Json azure = JsonOf("simulate " + RunfilePath("testdata/workloads/azure2023_AzureLLMInferenceTrace_code.csv") +
                            " --json --quiet");
  EXPECT_EQ(azure["requests"], 8819);
  EXPECT_EQ(azure["prefix_hit_rate_tokens"], 0.0);  // no prefix information: nothing is shared
  EXPECT_EQ(azure["violations"], 0);
}

TEST(SimulateCmdTest, BadInputExitsTwoNamingLineAndField) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"simulate", "-", "--format", "mooncake"}, "--workload: line 1: "},
      {{"simulate", "-", "--page-size", "0"}, "--page-size: must be in [1, 4096]"},
      {{"simulate", "-", "--chunked-prefill-size", "-1"},
       "--chunked-prefill-size: KV sharding (--shard-size 8) requires chunked prefill"},
      {{"simulate", "-", "--time-scale", "x"}, "--time-scale: not a real number"},
      {{"simulate", "-", "--kv-transfer-gbps", "0"}, "--kv-transfer-gbps: must be > 0"},
      {{"simulate", "-", "--instances", "2", "--plots", "p"}, "--plots: records one node; not with --instances 2"},
      {{"simulate", "-", "--router", "least-loaded"},
       "--router: applies only with --instances above 1 (one prefill node has no router)"},
      {{"simulate", "-", "--router", "round-robin", "--sweep", "shard-size=1,2"},
       "--router: applies only with --instances above 1 (one prefill node has no router)"},
      {{"simulate", "-", "--model", "gpt-5"}, "--model: unknown preset \"gpt-5\" (presets: deepseek-v3,"},
      {{"simulate", "-", "--model", "/nonexistent.json"}, "--model: /nonexistent.json: cannot open file"},
      {{"simulate", "-", "--format", "csv"}, "--format: must be"},
      {{"simulate", "/nonexistent.jsonl"}, "--workload: /nonexistent.jsonl: cannot open file"},
      {{"simulate"}, "--workload: required"},
  };
  for (const auto& [args, want] : cases) {
    EXPECT_TRUE(FailsWith(RunCli(args, "{\"timestamp\": 0}\n"), 2, want)) << args[2 % args.size()];
  }
  const std::string bad_line = std::string(kTwoTurns) +
                               "{\"timestamp\": 5, \"input_length\": -1, \"output_length\": 1, "
                               "\"hash_ids\": []}\n";
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-"}, bad_line), 2, "--workload: line 3: input_length: "));
  // A bounded pool too small for one prompt: exit 2 naming --cache-tokens.
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--cache-tokens", "512", "--shard-size", "4"}, kTwoTurns), 2,
                        "--cache-tokens: "));
}

// --max-memory bounds the workload as it is read: a line (32 B per byte, checked while the line is read, so one
// huge line never fills memory) and the requests kept (48 B each + 8 B per block hash, checked every 4096).
TEST(SimulateCmdTest, HelpShowsTheRealFlagsRanges) {
  const CliResult r = RunCli({"simulate", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"--time-scale REAL in [0, 1e+06] (=1)", "--kv-transfer-gbps REAL in (0, 1e+06] (=400)",
                           "--bootstrap-ms REAL in [0, 1e+09] (=0)", "--slo-ttft-ms REAL in [0, 1e+12] (=0)",
                           "--hbm-gib REAL in [0, 1e+06] (=139)"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " not in:\n" << r.out;
  }
  // The bounds the help prints are the ones the flags check.
  EXPECT_EQ(RunCli({"simulate", "-", "--slo-ttft-ms", "1e12"}, kTwoTurns).exit_code, 0);
  EXPECT_NE(RunCli({"simulate", "-", "--slo-ttft-ms", "1.1e12"}, kTwoTurns)
                .err.find("--slo-ttft-ms: must be >= 0 and <= 1e+12"),
            std::string::npos);
}

TEST(SimulateCmdTest, MaxMemoryBoundsTheWorkloadAsItIsRead) {
  const std::string line = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}\n";
  EXPECT_TRUE(
      FailsWith(RunCli({"simulate", "-", "--max-memory", "2000"}, line), 2,
                "--workload: line 1: record: the line held in memory would need 2.3 KiB (73 line bytes x 32 B), "
                "over --max-memory 2.0 KiB"));
  std::string huge = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0";
  while (huge.size() < 300000) huge += ", 1";
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--max-memory", "4000000"}, line + huge + "]}\n"), 2,
                        "--workload: line 2: record: the line held in memory would need 4 MiB (131072 line bytes x "
                        "32 B), over --max-memory 3.8 MiB"));
  std::string many;
  for (int i = 0; i < 5000; ++i) many += line;
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--max-memory", "200000"}, many), 2,
                        "--workload: line 4096: requests: the workload held in memory would need 224 KiB (4096 "
                        "requests x 48 B + 4096 block hashes x 8 B), over --max-memory 195.3 KiB"));
  EXPECT_EQ(RunCli({"simulate", "-", "--max-memory", "300000", "--quiet"}, many).exit_code, 0);
}

TEST(SimulateCmdTest, AllocModeReportsDirectWritesAndTheirCost) {
  // Without CP: no direct_write key, and the output does not depend on --alloc-mode.
  const Json plain = JsonOf("simulate - --shard-size 4 --json", kTwoTurns);
  EXPECT_FALSE(plain.contains("direct_write"));
  EXPECT_EQ(JsonOf("simulate - --shard-size 4 --json --alloc-mode owners", kTwoTurns), plain);
  const Json rotated = JsonOf("simulate - --shard-size 4 --cp-size 4 --json", kTwoTurns);
  ASSERT_TRUE(rotated.contains("direct_write")) << rotated;
  const Json& r = rotated["direct_write"];
  EXPECT_EQ(r["alloc_mode"], "rotated");
  EXPECT_GT(r["local_loc_owner_mismatch_pages"].get<int64_t>(), 0);
  EXPECT_GT(r["failed_batches"].get<int64_t>(), 0);
  EXPECT_EQ(r["gather_plan_rejections"], 0);
  EXPECT_EQ(r["run_together"], false);
  const Json owners = JsonOf("simulate - --shard-size 4 --cp-size 4 --alloc-mode owners --json", kTwoTurns);
  const Json& o = owners["direct_write"];
  EXPECT_EQ(o["alloc_mode"], "owners");
  EXPECT_EQ(o["local_loc_owner_mismatch_pages"], 0);
  EXPECT_EQ(o["failed_rank_writes"], 0);
  EXPECT_EQ(o["pages"], r["pages"]);
  EXPECT_EQ(o["gather_plan_rejections"], 1);  // the second turn's 16 cached pages follow the CP owners
  EXPECT_EQ(o["run_together"], false);
  for (const char* key : {"pages", "failed_batches", "failed_rank_writes", "class_exhausted_deferrals"}) {
    EXPECT_TRUE(o.contains(key)) << key;
  }
  const CliResult summary =
      RunCli({"simulate", "-", "--shard-size", "4", "--cp-size", "4", "--alloc-mode", "owners"}, kTwoTurns);
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("CP shared-KV direct writes (--alloc-mode owners): 0 of "), std::string::npos)
      << summary.out;
  EXPECT_NE(summary.out.find("SGLang's prefix gather rejects 1 batches"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("KV sharding with direct writes: does not run together"), std::string::npos);
  // One turn without any prefix: owner-plan allocation runs together with KV sharding.
  const Json one =
      JsonOf("simulate - --shard-size 4 --cp-size 2 --alloc-mode owners --json",
             "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [7, 8, 9]}\n");
  EXPECT_EQ(one["direct_write"]["run_together"], true) << one;
}

TEST(SimulateCmdTest, AllocModeBadInputExitsTwoNamingTheFlag) {
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--alloc-mode", "cyclic"}, kTwoTurns), 2, "--alloc-mode: must be"));
  EXPECT_TRUE(
      FailsWith(RunCli({"simulate", "-", "--shard-size", "8", "--cp-size", "3", "--alloc-mode", "owners"}, kTwoTurns),
                2, "--alloc-mode: owners needs --cp-size (3) to divide --shard-size (8)"));
  EXPECT_TRUE(
      FailsWith(RunCli({"simulate", "-", "--cp-size", "2", "--alloc-mode", "owners", "--emit-trace", TempPathForEmit()},
                       kTwoTurns),
                2, "--alloc-mode: owners cannot be emitted with --emit-trace"));
}

// A fresh directory under the test's temporary directory.
std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(path);
  return path;
}

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

TEST(SimulateCmdTest, OutputFilesAreWritten) {
  const std::string dir = TempPath("simulate_outputs");
  const std::string timeline = dir + "/trace.json", csv = dir + "/csv", plots = dir + "/nested/plots";
  std::filesystem::create_directories(dir);
  const CliResult r = RunCli(
      {"simulate", "-", "--shard-size", "4", "--cp-size", "2", "--timeline", timeline, "--csv", csv, "--plots", plots},
      kTwoTurns);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("simulated 2 requests"), std::string::npos) << r.out;  // the summary as without the flags
  const Json trace = Json::parse(FileText(timeline), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(trace.is_discarded());
  int slices = 0, counters = 0;
  for (const Json& e : trace["traceEvents"]) {
    slices += e["ph"] == "X";
    counters += e["ph"] == "C";
  }
  EXPECT_GT(slices, 0);
  EXPECT_EQ(counters, 2 * (4 + 1));  // two batches: each rank's counter and the min/mean/max one
  const std::string requests = FileText(csv + "/requests.csv");
  EXPECT_EQ(requests.rfind("request_id,arrived_at,", 0), 0u) << requests;
  EXPECT_EQ(std::count(requests.begin(), requests.end(), '\n'), 3);
  const std::string batches = FileText(csv + "/batches.csv");
  EXPECT_EQ(std::count(batches.begin(), batches.end(), '\n'), 3);
  EXPECT_EQ(FileText(csv + "/rank_pages.csv").rfind("batch_id,end,rank_0,rank_1,rank_2,rank_3\n", 0), 0u);
  for (const char* svg : {"pages_in_use.svg", "prefix_hit_rate.svg", "gathered_bytes.svg", "cp_padding.svg"}) {
    const std::string text = FileText(plots + "/" + svg);
    EXPECT_NE(text.find("<svg xmlns="), std::string::npos) << svg;
    EXPECT_NE(text.find("</svg>"), std::string::npos) << svg;
  }
  // An existing directory is reused (files overwritten).
  EXPECT_EQ(RunCli({"simulate", "-", "--csv", csv, "--json"}, kTwoTurns).exit_code, 0);
}

TEST(SimulateCmdTest, BadOutputPathsExitTwoNamingTheFlag) {
  const std::string dir = TempPath("simulate_bad_outputs");
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/a_file";
  std::ofstream(file) << "x";
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--csv", file}, kTwoTurns), 2,
                        "--csv: " + file + ": exists and is not a directory"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--plots", file}, kTwoTurns), 2,
                        "--plots: " + file + ": exists and is not a directory"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--plots", file + "/sub"}, kTwoTurns), 2,
                        "--plots: " + file + "/sub: cannot create directory"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--timeline", dir}, kTwoTurns), 2,
                        "--timeline: '" + dir + "': needs a file name, not a directory"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--timeline", dir + "/missing/t.json"}, kTwoTurns), 2,
                        "--timeline: " + dir + "/missing/t.json: cannot open for writing"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--csv", ""}, kTwoTurns), 2, "--csv: needs a directory name"));
}

TEST(SimulateCmdTest, EmitTraceReplaysCleanThroughTheReplayCommand) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string path = dir + "/emitted.jsonl";
  const std::string mooncake = RunfilePath("testdata/workloads/mooncake_conversation_trace.jsonl");
  // The first 40 batches of the bundled Mooncake trace on a bounded pool, with a two-layer pipeline.
  const Json j = JsonOf("simulate " + mooncake +
                        " --shard-size 4 --page-size 64 --cache-tokens 2000000 --quiet --json "
                        "--emit-trace " +
                        path + " --emit-max-batches 40 --emit-layers 2");
  ASSERT_TRUE(j.contains("emitted_trace")) << j.dump();
  const Json& e = j["emitted_trace"];
  EXPECT_EQ(e["path"], path);
  EXPECT_EQ(e["batches"], 40);
  EXPECT_EQ(e["truncated"], true);
  EXPECT_EQ(e["bytes"], static_cast<int64_t>(std::filesystem::file_size(path)));
  EXPECT_EQ(j["requests"], 12031);  // the summary is still the whole workload's
  const CliResult r = RunCli({"replay", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("replayed " + std::to_string(e["records"].get<int64_t>()) + " records"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" 0 mismatches"), std::string::npos) << r.out;
  // The text summary names the trace; a small workload without a pipeline replays clean too.
  const CliResult s = RunCli({"simulate", "-", "--shard-size", "4", "--emit-trace", path}, kTwoTurns);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("trace: " + path + ": "), std::string::npos) << s.out;
  EXPECT_EQ(RunCli({"replay", path}).exit_code, 0);
}

TEST(SimulateCmdTest, EmitTraceBadInputExitsTwoNamingTheFlag) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--emit-trace", dir}, kTwoTurns), 2,
                        "--emit-trace: " + dir + " is a directory"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--emit-trace", dir + "/no/such/dir/t.jsonl"}, kTwoTurns), 2,
                        "--emit-trace: "));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--emit-layers", "2"}, kTwoTurns), 2,
                        "--emit-layers: needs --emit-trace FILE"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--emit-max-batches", "-1"}, kTwoTurns), 2, "--emit-max-batches"));
}

// Outputs never destroy inputs, never name one file twice, and appear whole or not at all; "-" is standard output.
TEST(SimulateCmdTest, OutputPathsNeverDestroyInputsOrEachOther) {
  const std::string dir = TempPath("simulate_output_paths");
  std::filesystem::create_directories(dir);
  const std::string workload = dir + "/w.jsonl", link = dir + "/link.jsonl";
  std::ofstream(workload) << kTwoTurns;
  std::filesystem::remove(link);
  std::filesystem::create_symlink(workload, link);
  const auto size = [](const std::string& p) { return std::filesystem::file_size(p); };
  const uintmax_t before = size(workload);
  EXPECT_TRUE(FailsWith(RunCli({"simulate", workload, "--timeline", workload}), 2,
                        "--timeline: " + workload + " is the input of --workload (" + workload +
                            "); writing it would destroy the input"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", workload, "--emit-trace", link}), 2,
                        "--emit-trace: " + link + " is the input of --workload"));
  EXPECT_EQ(size(workload), before);
  const std::string out = dir + "/out.json";
  std::filesystem::remove(out);
  EXPECT_TRUE(FailsWith(RunCli({"simulate", workload, "--timeline", out, "--emit-trace", dir + "/./out.json"}), 2,
                        "--emit-trace: " + dir + "/./out.json is also the output of --timeline (" + out + ")"));
  EXPECT_FALSE(std::filesystem::exists(out));  // refused before anything was opened
  EXPECT_TRUE(FailsWith(RunCli({"simulate", workload, "--timeline", "-", "--emit-trace", "-"}), 2,
                        "--emit-trace: standard output (-) is taken by --timeline"));
  // A run that fails leaves an existing output as it was, and creates no new one (no empty file, no temporary).
  std::ofstream(out) << "old";
  EXPECT_TRUE(FailsWith(RunCli({"simulate", workload, "--emit-trace", out, "--alloc-mode", "owners", "--cp-size", "2"}),
                        2, "--alloc-mode"));
  EXPECT_TRUE(FailsWith(RunCli({"simulate", "-", "--emit-trace", out}, "{\"timestamp\": 0}\n"), 2, "--workload"));
  EXPECT_EQ(size(out), 3u);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.path().filename().string()[0] == '.';
  EXPECT_EQ(files, 0u) << "a temporary file was left behind";
  // "-": the trace goes to standard output, the summary to standard error.
  const CliResult r = RunCli({"simulate", workload, "--emit-trace", "-", "--quiet"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\"kvshard_trace\":1", 0), 0u) << r.out.substr(0, 200);
  EXPECT_EQ(RunCli({"replay", "-"}, r.out).exit_code, 0);
}

}  // namespace
}  // namespace kvshard::cli

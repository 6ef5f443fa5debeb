// kvshard simulate --sweep: rows equal single runs of the same configurations, the order is the product's
// whatever the thread count, per-row errors, the CSV, and bad --sweep syntax (exit 2 naming --sweep).
#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"
#include "cli/sim_sweep.h"

namespace kvshard::cli {
namespace {

// The first `n` requests of the bundled Mooncake conversation trace.
std::string MooncakePrefix(int n) {
  std::istringstream all(ReadRunfile("testdata/workloads/mooncake_conversation_trace.jsonl"));
  std::string text, line;
  for (int i = 0; i < n && std::getline(all, line); ++i) text += line + "\n";
  return text;
}

const char kTwoTurns[] =
    "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [7, 8, 9]}\n"
    "{\"timestamp\": 1000, \"input_length\": 1500, \"output_length\": 5, \"hash_ids\": [7, 8, 10]}\n";

TEST(SimSweepTest, RowsEqualSingleRunsInTheProductsOrder) {
  const std::string workload = MooncakePrefix(400);
  const std::string sweep =
      "simulate - --quiet --json --cp-size 2 --sweep shard-size=4,8,64 --sweep page-size=16,64 "
      "--sweep cache-tokens=0,3000000";
  const Json j = JsonOf(sweep + " --threads 2", workload);
  ASSERT_EQ(j["rows"].size(), 12u) << j.dump();
  EXPECT_EQ(j["configurations"], 12);
  EXPECT_EQ(j["sweep"]["page-size"], Json::parse("[16, 64]"));
  size_t i = 0;
  bool evicted = false;
  for (int64_t n : {4, 8, 64}) {
    for (int64_t ps : {16, 64}) {
      for (int64_t cache : {0, 3000000}) {
        Json row = j["rows"][i];
        EXPECT_EQ(row["index"], i);
        EXPECT_EQ(row["sweep"], (Json{{"shard-size", n}, {"page-size", ps}, {"cache-tokens", cache}}));
        row.erase("index");
        row.erase("sweep");
        const Json single = JsonOf(StrCat("simulate - --quiet --json --cp-size 2 --shard-size ", n, " --page-size ", ps,
                                          " --cache-tokens ", cache),
                                   workload);
        EXPECT_EQ(row, single) << "row " << i;
        evicted |= single["evictions"].get<int64_t>() > 0;
        ++i;
      }
    }
  }
  EXPECT_TRUE(evicted) << "the bounded pool should evict somewhere, so rows differ in more than the config";
}

TEST(SimSweepTest, OutputDoesNotDependOnTheThreadCount) {
  const std::string workload = MooncakePrefix(200);
  for (const std::string format : {"", " --json"}) {
    const std::string line = "simulate - --quiet --sweep page-size=64,16,32 --sweep shard-size=2,8" + format;
    const CliResult one = RunCli(Words(line + " --threads 1"), workload);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    for (const std::string threads : {"2", "5", "64"}) {
      const CliResult many = RunCli(Words(line + " --threads " + threads), workload);
      EXPECT_EQ(many.exit_code, 0) << many.err;
      EXPECT_EQ(many.out, one.out) << line << " --threads " << threads;
    }
  }
  const CliResult table = RunCli(Words("simulate - --quiet --sweep page-size=64,16 --sweep shard-size=2"), workload);
  EXPECT_NE(table.out.find("page-size  shard-size  requests"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("  ok\n"), std::string::npos) << table.out;
}

TEST(SimSweepTest, AnInvalidOrFailingConfigurationIsARowNotAnAbort) {
  // The second prompt (1500 tokens) is longer than row 1's context only.
  const CliResult r = RunCli(Words("simulate - --json --sweep context-length=4096,1200,2048"), kTwoTurns);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "kvshard: error: --sweep: bad input in 1 of 3 configurations; first, row 1: requests[1].input_length: "
            "1500 tokens exceed --context-length 1200\n");
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["requests"], 2);
  EXPECT_EQ(j["rows"][1]["exit_code"], 2);
  EXPECT_EQ(j["rows"][1]["config"]["context_length"], 1200);
  EXPECT_FALSE(j["rows"][1].contains("requests"));
  EXPECT_EQ(j["rows"][2]["requests"], 2);
  // A pool too small for a prompt fails that row alone; the table says so.
  const CliResult t = RunCli(Words("simulate - --shard-size 4 --sweep cache-tokens=0,512"), kTwoTurns);
  EXPECT_EQ(t.exit_code, 2);
  EXPECT_NE(t.err.find("first, row 1: --cache-tokens: "), std::string::npos) << t.err;
  EXPECT_NE(t.out.find("  ok\n"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("error: --cache-tokens: request"), std::string::npos) << t.out;
}

TEST(SimSweepTest, CsvHasOneLinePerRow) {
  const std::string path = StrCat(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp", "/sweep.csv");
  const CliResult r =
      RunCli(Words("simulate - --quiet --json --sweep context-length=4096,1200 --sweep shard-size=2,4 --csv " + path),
             kTwoTurns);
  EXPECT_EQ(r.exit_code, 2) << r.err;  // the two context-length 1200 rows
  const Json j = Json::parse(r.out);
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].rfind("index,context-length,shard-size,requests,batches,prefix_hit_rate_blocks,", 0), 0u)
      << lines[0];
  EXPECT_NE(lines[0].find(",pages_in_use.max,"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].substr(lines[0].size() - 16), ",error,exit_code") << lines[0];
  EXPECT_EQ(lines[1].rfind("0,4096,2,2,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[1].substr(lines[1].size() - 3), ",,0") << lines[1];
  EXPECT_EQ(lines[3].rfind("2,1200,2,", 0), 0u) << lines[3];
  EXPECT_NE(lines[3].find(",requests[1].input_length: 1500 tokens exceed --context-length 1200,2"), std::string::npos)
      << lines[3];
  // A figure's cell is the JSON's value, in the header's column (row 1 has no quoted cells).
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    return cells;
  };
  const std::vector<std::string> header = split(lines[0]), row1 = split(lines[2]);
  const auto col = std::find(header.begin(), header.end(), "batch_time_us.p99") - header.begin();
  ASSERT_LT(col, static_cast<long>(row1.size()));
  EXPECT_EQ(row1[col], j["rows"][1]["batch_time_us"]["p99"].dump());
}

TEST(SimSweepTest, PlotsCompareTheConfigurations) {
  // Two instance counts per time scale (--router applies: the sweep gives more than one node): one line per time scale
  // over the instance counts (TTFT: p50 and p99; the utilization chart adds the line at 1), each line one point per
  // instance count.
  const std::string dir = StrCat(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp", "/sweep_plots");
  const CliResult r = RunCli(
      Words("simulate - --quiet --sweep time-scale=0.5,1 --sweep instances=1,2 --router least-loaded --plots " + dir),
      kTwoTurns);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto read = [&](const std::string& name) {
    std::ifstream in(dir + "/" + name);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  auto count = [](const std::string& svg, const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  const std::string ttft = read("sweep_ttft.svg"), util = read("sweep_utilization.svg");
  EXPECT_EQ(count(ttft, "<polyline"), 4u) << ttft;
  EXPECT_EQ(count(util, "<polyline"), 3u) << util;
  EXPECT_NE(ttft.find("time-scale=0.500000 p99"), std::string::npos) << ttft;
  EXPECT_NE(util.find("1: overloaded above"), std::string::npos);
  EXPECT_NE(util.find(">instances<"), std::string::npos);  // the last axis is numeric: its values are x
}

TEST(SimSweepTest, ExitStatusFromTheRows) {
  const Json ok = {{"index", 0}, {"violations", 0}, {"first_violation", nullptr}};
  const Json violated = {{"index", 1}, {"violations", 2}, {"first_violation", "step 7: pages leaked"}};
  const Json bad = {{"index", 2}, {"error", "--cache-tokens: too small"}, {"exit_code", 2}};
  EXPECT_TRUE(SweepStatus({ok, ok}).ok());
  const Status v = SweepStatus({ok, violated});
  EXPECT_EQ(ExitCodeFor(v), 1);
  EXPECT_EQ(v.message(), "invariant violated in 1 of 2 configurations; first, row 1: step 7: pages leaked");
  const Status b = SweepStatus({violated, bad, ok});
  EXPECT_EQ(ExitCodeFor(b), 2);  // bad input wins over a violation
  EXPECT_EQ(b.message(), "--sweep: bad input in 1 of 3 configurations; first, row 2: --cache-tokens: too small");
}

TEST(SimSweepTest, BadSweepSyntaxExitsTwoNamingSweep) {
  ExpectFailures(
      {
          {"simulate - --sweep shard-size", "--sweep: 'shard-size': want FLAG=V1,V2,..."},
          {"simulate - --sweep =8", "--sweep: '=8': want FLAG=V1,V2,..."},
          {"simulate - --sweep bogus=1,2", "--sweep: unknown flag 'bogus' (sweepable: shard-size, page-size,"},
          {"simulate - --sweep format=auto", "--sweep: unknown flag 'format'"},
          {"simulate - --sweep shard-size=8,,64", "--sweep: shard-size: empty value in '8,,64'"},
          {"simulate - --sweep shard-size=8,", "--sweep: shard-size: empty value in '8,'"},
          {"simulate - --sweep shard-size=0", "--sweep: shard-size=0: must be in [1, 4096], got 0"},
          {"simulate - --sweep shard-size=8x", "--sweep: shard-size=8x: "},
          {"simulate - --sweep time-scale=fast", "--sweep: time-scale=fast: not a real number"},
          {"simulate - --sweep shard-size=8 --sweep shard-size=16", "--sweep: shard-size swept twice"},
          {"simulate - --sweep shard-size=8 --shard-size 4", "--sweep: shard-size is also given as --shard-size"},
          {"simulate - --sweep shard-size=8 --threads 0", "--threads: must be in [1, 1024]"},
          {"simulate - --sweep shard-size=8 --csv /nonexistent/dir/x.csv",
           "--csv: /nonexistent/dir/x.csv: cannot open for writing"},
          {"simulate /nonexistent.jsonl --sweep shard-size=8", "--workload: /nonexistent.jsonl: cannot open file"},
          {"simulate - --sweep shard-size=8 --timeline t.json", "--timeline: not with --sweep"},
          {"simulate - --sweep shard-size=8 --emit-trace t.jsonl", "--emit-trace: not with --sweep"},
      },
      kTwoTurns);
}

TEST(SimSweepTest, AllocModeSweepsWithDirectWriteColumns) {
  const Json j = JsonOf("simulate - --json --cp-size 2 --shard-size 4 --sweep alloc-mode=rotated,owners", kTwoTurns);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["sweep"]["alloc-mode"], Json::array({"rotated", "owners"}));
  EXPECT_EQ(j["rows"][0]["direct_write"]["alloc_mode"], "rotated");
  EXPECT_EQ(j["rows"][1]["direct_write"]["alloc_mode"], "owners");
  EXPECT_EQ(j["rows"][1]["direct_write"]["local_loc_owner_mismatch_pages"], 0);
  EXPECT_GT(j["rows"][0]["direct_write"]["local_loc_owner_mismatch_pages"].get<int64_t>(), 0);
  const CliResult table = RunCli(
      {"simulate", "-", "--cp-size", "2", "--shard-size", "4", "--sweep", "alloc-mode=rotated,owners"}, kTwoTurns);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("dw_fail_pages"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("gather_rejects"), std::string::npos) << table.out;
  // Without CP rows the table keeps its columns.
  const CliResult plain = RunCli({"simulate", "-", "--sweep", "shard-size=2,4"}, kTwoTurns);
  EXPECT_EQ(plain.out.find("dw_fail_pages"), std::string::npos) << plain.out;
  // A cp that does not divide N in owners mode is that row's error.
  const CliResult bad =
      RunCli(Words("simulate - --json --alloc-mode owners --shard-size 4 --sweep cp-size=2,3"), kTwoTurns);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  const Json rows = Json::parse(bad.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(rows["rows"][0].contains("error"));
  EXPECT_NE(rows["rows"][1]["error"].get<std::string>().find("--alloc-mode: owners needs --cp-size (3)"),
            std::string::npos);
  ExpectFailures({{"simulate - --sweep alloc-mode=rotated,cyclic", "--sweep: alloc-mode=cyclic"}}, kTwoTurns);
}

TEST(SimSweepTest, EveryRowUsesTheCalibration) {
  const std::string file = RunfilePath("testdata/calibration/h200.json");
  const Json j = JsonOf("simulate - --json --calibration " + file + " --sweep shard-size=2,4", kTwoTurns);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const Json& row : j["rows"]) {
    EXPECT_NE(row["cost_model"].get<std::string>().find("calibrated on NVIDIA H200"), std::string::npos) << row;
  }
}

}  // namespace
}  // namespace kvshard::cli

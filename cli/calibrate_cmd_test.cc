// kvshard calibrate: the bundled H200 calibration's table and JSON, a calibrated simulation, bad input (exit 2).
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

TEST(CalibrateCmdTest, TableAndJsonOfTheBundledCalibration) {
  const std::string file = RunfilePath("testdata/calibration/h200.json");
  const CliResult r = RunCli({"calibrate", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# device: NVIDIA H200"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compute_dense"), std::string::npos) << r.out;
  const Json j = JsonOf("calibrate " + file + " --json");
  ASSERT_TRUE(j["fits"].is_array());
  for (const Json& f : j["fits"]) {
    EXPECT_GE(f["rows"].get<int64_t>(), 2) << f.dump();
    EXPECT_GE(f["us_per_unit"].get<double>(), 0) << f.dump();
    EXPECT_GE(f["latency_us"].get<double>(), 0) << f.dump();
  }
  // The built-in name (the help says so) shows the same file.
  const CliResult builtin = RunCli({"calibrate", "h200"});
  ASSERT_EQ(builtin.exit_code, 0) << builtin.err;
  EXPECT_EQ(builtin.out, r.out);
  EXPECT_NE(RunCli({"calibrate", "--help"}).out.find("h200 the built-in"), std::string::npos);
}

TEST(CalibrateCmdTest, SimulateWithTheCalibrationSaysSo) {
  const char two[] =
      "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [7, 8, 9]}\n"
      "{\"timestamp\": 1000, \"input_length\": 1500, \"output_length\": 5, \"hash_ids\": [7, 8, 10]}\n";
  const std::string file = RunfilePath("testdata/calibration/h200.json");
  const Json physical = JsonOf("simulate - --json --calibration none", two);
  const Json calibrated = JsonOf("simulate - --json --calibration " + file, two);
  const Json builtin = JsonOf("simulate - --json", two);  // the default: the same H200 calibration, built in
  EXPECT_EQ(builtin["cost_model"], "calibrated on NVIDIA H200 (built in, testdata/calibration/h200.json)");
  EXPECT_EQ(builtin["batch_time_us"], calibrated["batch_time_us"]);
  EXPECT_EQ(physical["cost_model"], "physical limits (uncalibrated)");
  EXPECT_NE(calibrated["cost_model"].get<std::string>().find("calibrated on NVIDIA H200"), std::string::npos);
  EXPECT_NE(physical["batch_time_us"]["total"], calibrated["batch_time_us"]["total"]);
  // The cost model moves the clock, not the pool: the same batches and hits either way.
  EXPECT_EQ(physical["batches"], calibrated["batches"]);
  EXPECT_EQ(physical["cached_tokens"], calibrated["cached_tokens"]);
}

TEST(CalibrateCmdTest, BadInputExitsTwo) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"calibrate"}, "--calibration: required"},
      {{"calibrate", "-"}, "--calibration: not valid JSON"},
      {{"calibrate", "/nonexistent.json"}, "--calibration: /nonexistent.json: cannot open file"},
      {{"simulate", "-", "--calibration", "/nonexistent.json"}, "--calibration: /nonexistent.json: cannot open file"},
  };
  for (const auto& [args, want] : cases) {
    const CliResult r = RunCli(args, "{");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err << " vs " << want;
  }
}

}  // namespace
}  // namespace kvshard::cli

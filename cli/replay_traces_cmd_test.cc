// kvshard replay A B C: several traces replayed in turn by one process. Each summary line names its trace and a
// last line totals them; errors and mismatches name the trace; under --backend gpu the driver starts once. --jobs N
// replays up to N at once and prints what one at a time prints, the traces sharing --max-memory.
// props/replay_traces_props_test.cc checks on arbitrary traces that each is answered as a replay of it alone, and
// that --jobs changes nothing printed.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

const char kRadix[] = "testdata/traces/radix_requests.jsonl";
const char kSpec[] = "testdata/traces/spec_examples.jsonl";
const char kPool[] = "testdata/traces/pool_pipeline.jsonl";

// `text` written to a file of the test's temporary directory; its path.
std::string TempTrace(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(testing::TempDir()) / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(ReplayTracesCmdTest, EachSummaryNamesItsTraceAndALastLineTotalsThem) {
  const std::string radix = RunfilePath(kRadix), spec = RunfilePath(kSpec), pool = RunfilePath(kPool);
  const CliResult r = RunCli({"replay", radix, spec, pool});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, radix + ": replayed 7 records, 34 fields checked, 0 mismatches\n" + spec +
                       ": replayed 12 records, 69 fields checked, 0 mismatches\n" + pool +
                       ": replayed 25 records, 84 fields checked, 132 KV rows compared, 0 mismatches\n"
                       "replayed 3 traces: 44 records, 187 fields checked, 132 KV rows compared, 0 mismatches\n");
  EXPECT_EQ(r.err, "");
  // The flag form, and the same trace twice (the second replay starts from a fresh model).
  const CliResult f = RunCli({"replay", "--trace", radix, "--more-traces", radix});
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(f.out, radix + ": replayed 7 records, 34 fields checked, 0 mismatches\n" + radix +
                       ": replayed 7 records, 34 fields checked, 0 mismatches\n"
                       "replayed 2 traces: 14 records, 68 fields checked, 0 mismatches\n");
  // A name with a control byte stays on its line, escaped as in error messages.
  const std::string odd = TempTrace("odd\nname.jsonl", ReadRunfile(kRadix));
  const CliResult o = RunCli({"replay", radix, odd});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("odd\\nname.jsonl: replayed 7 records"), std::string::npos) << o.out;
  EXPECT_EQ(Lines(o.out).size(), 3u) << o.out;
  // One trace prints what it always did: no name, no total.
  EXPECT_EQ(RunCli({"replay", radix}).out, "replayed 7 records, 34 fields checked, 0 mismatches\n");
}

TEST(ReplayTracesCmdTest, AMismatchEndsTheCommandUnlessKeepGoing) {
  const std::string radix = RunfilePath(kRadix), spec = RunfilePath(kSpec);
  std::string text = ReadRunfile(kRadix);
  text.replace(text.find("\"prefix_len\": 0"), 15, "\"prefix_len\": 3");
  const std::string bad = TempTrace("prefix3.jsonl", text);
  const CliResult r = RunCli({"replay", radix, bad, spec});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, radix + ": replayed 7 records, 34 fields checked, 0 mismatches\n");  // spec is not replayed
  EXPECT_EQ(r.err, "kvshard: mismatch: " + bad + ": line 2: admit_req: prefix_len: expected 3, got 0\n");
  const CliResult k = RunCli({"replay", radix, bad, spec, "--keep-going"});
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_NE(k.out.find("mismatch: " + bad + ": line 2: admit_req: prefix_len: expected 3, got 0\n"), std::string::npos)
      << k.out;
  EXPECT_NE(k.out.find(spec + ": replayed 12 records"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("replayed 3 traces: 26 records, "), std::string::npos) << k.out;
  EXPECT_EQ(k.err.rfind("kvshard: mismatch: 1 mismatches in 26 records of 3 traces; first: " + bad + ": line 2:", 0),
            0u)
      << k.err;
  const CliResult jr = RunCli({"replay", radix, bad, spec, "--json", "--keep-going"});
  EXPECT_EQ(jr.exit_code, 1);
  const Json j = Json::parse(jr.out);
  ASSERT_EQ(j["traces"].size(), 3u) << j.dump();
  EXPECT_EQ(j["traces"][1]["trace"], bad);
  EXPECT_EQ(j["traces"][1]["mismatches"], 1);
  EXPECT_EQ(j["records"], 26);
  EXPECT_EQ(j["first_mismatch"], bad + ": line 2: admit_req: prefix_len: expected 3, got 0");
}

TEST(ReplayTracesCmdTest, AnErrorEndsTheCommandNamingTheTrace) {
  const std::string radix = RunfilePath(kRadix), spec = RunfilePath(kSpec);
  const std::string bad = TempTrace("no_op.jsonl", "{\"kvshard_trace\": 1}\n{\"op\": 5}\n");
  const CliResult m = RunCli({"replay", radix, bad, spec});
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_EQ(m.out, radix + ": replayed 7 records, 34 fields checked, 0 mismatches\n");
  EXPECT_EQ(m.err, "kvshard: error: --trace: " + bad + ": line 2: op: missing or not a string\n");
  // --json: standard output stays one document, the error its last member.
  const CliResult jr = RunCli({"replay", radix, bad, "--json"});
  EXPECT_EQ(jr.exit_code, 2);
  const Json j = Json::parse(jr.out);
  EXPECT_EQ(j["traces"].size(), 1u) << j.dump();
  EXPECT_EQ(j["error"], "--trace: " + bad + ": line 2: op: missing or not a string");
  const CliResult n = RunCli({"replay", radix, "/no/such/trace.jsonl"});
  EXPECT_EQ(n.exit_code, 2);
  EXPECT_EQ(n.err, "kvshard: error: --trace: /no/such/trace.jsonl: cannot open file\n");
  // A truncated last record (a recorder killed mid-write) ends it too, after every complete record was checked.
  std::string cut = ReadRunfile(kRadix);
  cut.resize(cut.size() - 10);
  const std::string truncated = TempTrace("cut.jsonl", cut);
  const CliResult t = RunCli({"replay", truncated, radix});
  EXPECT_EQ(t.exit_code, 2);
  EXPECT_EQ(t.out, "");
  EXPECT_EQ(t.err.rfind("kvshard: error: --trace: " + truncated + ": line 8: truncated last record", 0), 0u) << t.err;
  const CliResult s = RunCli({"replay", radix, "-"}, ReadRunfile(kRadix));
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_EQ(s.err, "kvshard: error: --trace: - (standard input) only as the one trace of the command\n");
}

TEST(ReplayTracesCmdTest, JobsPrintWhatOneAtATimePrints) {
  const std::string radix = RunfilePath(kRadix), spec = RunfilePath(kSpec), pool = RunfilePath(kPool);
  std::string text = ReadRunfile(kRadix);
  text.replace(text.find("\"prefix_len\": 0"), 15, "\"prefix_len\": 3");
  const std::string bad = TempTrace("jobs_prefix3.jsonl", text);
  const std::string malformed = TempTrace("jobs_no_op.jsonl", "{\"kvshard_trace\": 1}\n{\"op\": 5}\n");
  const std::vector<std::vector<std::string>> commands = {
      {"replay", radix, spec, pool, pool, spec},          {"replay", radix, bad, spec, pool},
      {"replay", radix, bad, spec, pool, "--keep-going"}, {"replay", pool, radix, bad, spec, "--json", "--keep-going"},
      {"replay", pool, malformed, radix, spec},           {"replay", pool, radix, malformed, "--json"},
      {"replay", radix, "/no/such/trace.jsonl", spec},
  };
  for (const std::vector<std::string>& args : commands) {
    const CliResult one = RunCli(args);
    for (const char* jobs : {"2", "4", "64"}) {
      std::vector<std::string> with = args;
      with.insert(with.end(), {"--jobs", jobs});
      const CliResult r = RunCli(with);
      EXPECT_EQ(r.exit_code, one.exit_code) << args[2] << " --jobs " << jobs;
      EXPECT_EQ(r.out, one.out) << args[2] << " --jobs " << jobs;
      EXPECT_EQ(r.err, one.err) << args[2] << " --jobs " << jobs;
    }
  }
}

// The traces that replay at once share --max-memory: each is held to its part, and a refusal says so.
TEST(ReplayTracesCmdTest, JobsShareMaxMemory) {
  const std::string pool = RunfilePath(kPool);
  const CliResult alone = RunCli({"replay", pool, pool, pool, "--max-memory", "30000"});
  EXPECT_EQ(alone.exit_code, 0) << alone.err;
  const CliResult shared = RunCli({"replay", pool, pool, pool, "--max-memory", "30000", "--jobs", "3"});
  EXPECT_EQ(shared.exit_code, 2);
  EXPECT_EQ(shared.out, "");
  EXPECT_EQ(shared.err, "kvshard: error: --trace: " + pool +
                            ": line 17: record: the line held in memory would need 11.6 KiB (370 line bytes x 32 B), "
                            "over --max-memory 29.3 KiB / --jobs 3 = 9.8 KiB\n");
  // --jobs past the number of traces: as many at once as there are traces.
  const CliResult two = RunCli({"replay", pool, pool, "--max-memory", "20000", "--jobs", "3"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_EQ(two.err, "kvshard: error: --trace: " + pool +
                         ": line 17: record: the line held in memory would need 11.6 KiB (370 line bytes x 32 B), "
                         "over --max-memory 19.5 KiB / --jobs 2 = 9.8 KiB\n");
  EXPECT_EQ(RunCli({"replay", pool, pool, "--max-memory", "20000"}).exit_code, 0);
}

TEST(ReplayTracesCmdTest, JobsRefusedWhereAReplayTakesEveryGpu) {
  const std::string pool = RunfilePath(kPool);
  const CliResult r = RunCli({"replay", pool, pool, "--backend", "gpu", "--gpus", "2", "--jobs", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "kvshard: error: --jobs: one trace at a time with --gpus 2 (each replay drives every GPU through NCCL)\n");
  EXPECT_EQ(RunCli({"replay", pool, "--jobs", "0"}).exit_code, 2);
  EXPECT_EQ(RunCli({"replay", pool, "--jobs", "65"}).exit_code, 2);
}

// Under --backend gpu the process starts the CUDA driver once: the traces after the first find it started (the
// set-up's "driver" part is 0.00 s), and each is checked on the device as alone.
TEST(ReplayTracesCmdTest, GpuBackendStartsTheDriverOnce) {
  const std::string pool = RunfilePath(kPool);
  const CliResult r = RunCli({"replay", pool, pool, pool, "--backend", "gpu"});
  if (r.exit_code == 3) {
    EXPECT_NE(r.err.find("--backend gpu: "), std::string::npos) << r.err;
    GTEST_SKIP() << "no GPU here: " << r.err;
  }
  EXPECT_EQ(r.exit_code, 0) << r.err;
  size_t at = 0;
  for (int trace = 0; trace < 3; ++trace) {
    at = r.out.find(pool + ": replayed 25 records, 84 fields checked, 132 KV rows compared, 0 mismatches", at);
    ASSERT_NE(at, std::string::npos) << r.out;
    double setup = -1, driver = -1;
    const size_t setup_at = r.out.find("(set-up ", at);
    ASSERT_NE(setup_at, std::string::npos) << r.out;
    ASSERT_EQ(std::sscanf(r.out.c_str() + setup_at, "(set-up %lf s: driver %lf,", &setup, &driver), 2) << r.out;
    if (trace > 0) {
      EXPECT_EQ(driver, 0.0) << r.out;
    }
    at = setup_at;
  }
  EXPECT_NE(r.out.find("replayed 3 traces: 75 records, 252 fields checked, 396 KV rows compared, 0 mismatches\n"),
            std::string::npos)
      << r.out;
  const CliResult d = RunCli({"replay", pool, pool, "--backend", "diff"});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("replayed 2 traces: 50 records, 168 fields checked, 528 KV rows compared, 0 mismatches\n"),
            std::string::npos)
      << d.out;
  // --jobs: the traces at once, each on the device with paths of its own, counted as alone.
  for (const char* backend : {"gpu", "diff"}) {
    const CliResult j = RunCli({"replay", pool, pool, pool, pool, "--backend", backend, "--jobs", "3"});
    EXPECT_EQ(j.exit_code, 0) << j.err;
    const std::vector<std::string> lines = Lines(j.out);
    ASSERT_EQ(lines.size(), 5u) << j.out;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(lines[i].rfind(pool + ": replayed 25 records, 84 fields checked, " +
                                   (std::string(backend) == "gpu" ? "132" : "264") + " KV rows compared, 0 mismatches",
                               0),
                0u)
          << j.out;
    }
    EXPECT_EQ(lines[4], std::string("replayed 4 traces: 100 records, 336 fields checked, ") +
                            (std::string(backend) == "gpu" ? "528" : "1056") + " KV rows compared, 0 mismatches")
        << j.out;
  }
}

}  // namespace
}  // namespace kvshard::cli

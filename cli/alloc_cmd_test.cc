// Tests of `kvshard alloc`: the spec §2 goldens (JSON and table), standard input, and malformed scripts.
#include "cli/cli_test_util.h"
#include "core/json.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

constexpr char kScript[] = "testdata/alloc/spec2_script_n4_ps16.json";

// A script with spec §2's geometry and the given ops (JSON text).
std::string Script(const std::string& ops) {
  return R"({"shard_size":4,"page_size":16,"pages_per_rank":32,"ops":[)" + ops + "]}";
}

TEST(AllocCmdTest, MatchesTheGoldens) {
  CliResult json = RunCli({"alloc", "--script", RunfilePath(kScript), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out, ReadRunfile("testdata/alloc/spec2_script_n4_ps16.golden.json"));
  CliResult table = RunCli({"alloc", "--script", RunfilePath(kScript)});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out, ReadRunfile("testdata/alloc/spec2_script_n4_ps16.golden.txt"));
  EXPECT_NE(table.out.find("pages [11,12,13,14,15,16,17,18,19]"), std::string::npos);
  EXPECT_EQ(RunCli(Words("alloc --script - --json"), ReadRunfile(kScript)).out, json.out);
}

TEST(AllocCmdTest, OneResultPerOp) {
  const std::string op = R"({"op":"alloc","prefix_lens":[0],"seq_lens":[40],"rotation_bases":[1],"last_locs":[0]})";
  const Json j = JsonOf("alloc --script - --json", Script(op));
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_TRUE(j["results"][0].contains("aggregate_free_size"));
}

TEST(AllocCmdTest, MalformedInputIsOneLineNamingTheField) {
  ExpectFailures({
      {"alloc", "--script: required"},
      {"alloc --script /no/such.json", "--script: /no/such.json: cannot open file"},
  });
  const std::string alloc = R"({"op":"alloc","prefix_lens":[0],"seq_lens":[40],"rotation_bases":[7],"last_locs":[0]})";
  const std::vector<std::pair<std::string, std::string>> scripts = {
      {"{\"shard_size\":", "--script: standard input: not valid JSON"},
      {R"({"shard_size":4})", "--script: page_size: missing"},
      {Script(alloc), "--script: ops[0].rotation_bases[0]: must be null or in [0, 4), got 7"},
      {Script(R"({"op":"free","locs":[64]})"), "--script: ops[0].locs[0]: page 4 (slot 64) is not allocated"},
      {Script(R"({"op":"evict"})"), R"(--script: ops[0].op: must be "alloc", "free" or "free_group", got "evict")"},
  };
  for (const auto& [script, error] : scripts) ExpectFailures({{"alloc --script -", error}}, script);
}

TEST(AllocCmdTest, StrictScripts) {
  const std::string head = R"({"shard_size":4,"page_size":16,"pages_per_rank":32,)";
  const std::string free = R"({"op":"free","locs":[]})";
  const std::vector<std::pair<std::string, std::string>> scripts = {
      // A misspelt flag used to leave need_sort false silently.
      {head + R"("need_srot":true,"ops":[]})", "--script: need_srot: unknown key"},
      {Script(free + "," + free + "," + free + R"(,{"op":"free","locs":[],"need_srot":true})"),
       "--script: ops[3].need_srot: unknown key"},
      {Script(R"({"op":"alloc","prefix_lens":[0],"seq_lens":[40],"rotation_bases":[1],"last_locs":[0],"locs":[]})"),
       "--script: ops[0].locs: unknown key"},
      // The last of a repeated key used to win.
      {head + R"("need_sort":true,"need_sort":false,"ops":[]})", "--script: need_sort: duplicate key"},
      {Script(R"({"op":"free","locs":[1],"locs":[2]})"), "--script: ops[0].locs: duplicate key"},
      {Script(R"({"op":"free","locs":[18446744073709551615]})"),
       "--script: ops[0].locs[0]: out of range (must be in [0, 281474976710655]), got 18446744073709551615"},
  };
  for (const auto& [script, error] : scripts) ExpectFailures({{"alloc --script -", error}}, script);
}

// --json is written per op; with no ops it is what PrintJson of {"results": []} prints.
TEST(AllocCmdTest, StreamedJsonOfNoOps) {
  const CliResult r = RunCli(Words("alloc --script - --json"), Script(""));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ostringstream tree;
  PrintJson(Json{{"results", Json::array()}}, tree);
  EXPECT_EQ(r.out, tree.str());
}

TEST(AllocCmdTest, ScriptMustBeARegularFile) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  ExpectFailures({
      {"alloc --script " + dir, "--script: " + dir + ": is a directory, not a file"},
      {"alloc --script /dev/null", "--script: /dev/null: is a device, not a regular file"},
  });
}

}  // namespace
}  // namespace kvshard::cli

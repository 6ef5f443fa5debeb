// kvshard replay on recordings of a running engine: a record's "meta" rides along with its mismatch and changes no
// answer; a truncated last record is reported after every complete record was checked (exit 2, or 1 when a
// mismatch came before it); --json (with --keep-going too) prints one JSON document listing each mismatch as an
// object.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

const char kTrace[] = "testdata/traces/spec_examples.jsonl";  // header + 12 records, lines 2-13

// The trace with line `line` (1-based) of its text edited: the first `from` replaced by `to`.
std::string Edited(std::string text, int line, const std::string& from, const std::string& to) {
  std::vector<std::string> lines = Lines(text);
  std::string& l = lines.at(line - 1);
  const size_t at = l.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' is not on line " << line;
  if (at != std::string::npos) l.replace(at, from.size(), to);
  return Joined(lines);
}

// Two mismatches: line 4's pages[0][2] (99 for 13) and line 12's max_rank_token (9 for 8).
std::string TwoMismatches() {
  return Edited(Edited(ReadRunfile(kTrace), 4, "[11, 12, 13,", "[11, 12, 99,"), 12, "\"max_rank_token\": 8",
                "\"max_rank_token\": 9");
}

// Every record of `text` with a "meta" object added (after its other keys).
std::string WithMeta(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  for (size_t i = 1; i < lines.size(); ++i) {
    lines[i].pop_back();  // the closing brace
    lines[i] += ", \"meta\": {\"rids\": [\"req-" + std::to_string(i) +
                "\"], \"rank\": 0, \"step\": " + std::to_string(10 * i) + ", \"time\": 1.5}}";
  }
  return Joined(lines);
}

// The text cut `keep` bytes into its last line (no newline after).
std::string CutInLastLine(const std::string& text, size_t keep) {
  const size_t last = text.rfind('\n', text.size() - 2) + 1;
  return text.substr(0, last + keep);
}

// A file under the test's temporary directory holding `text`.
std::string TempFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(ReplayMetaTest, MetaChangesNoAnswerAndRidesAlongWithAMismatch) {
  const std::string clean = ReadRunfile(kTrace);
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, {"--json"}, {"--keep-going"}, {"--keep-going", "--json"}}) {
    std::vector<std::string> args = {"replay", "-"};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult plain = RunCli(args, clean);
    const CliResult meta = RunCli(args, WithMeta(clean));
    EXPECT_EQ(meta.exit_code, 0) << meta.err;
    EXPECT_EQ(meta.out, plain.out);
    EXPECT_EQ(meta.err, plain.err);
  }
  const CliResult r = RunCli({"replay", "-"}, WithMeta(TwoMismatches()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "kvshard: mismatch: line 4: alloc: pages[0][2]: expected 99, got 13 "
            "meta={\"rids\":[\"req-3\"],\"rank\":0,\"step\":30,\"time\":1.5}\n");
  const CliResult k = RunCli({"replay", "-", "--keep-going"}, WithMeta(TwoMismatches()));
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_NE(k.out.find("mismatch: line 12: rerange: max_rank_token: expected 9, got 8 "
                       "meta={\"rids\":[\"req-11\"],\"rank\":0,\"step\":110,\"time\":1.5}\n"),
            std::string::npos)
      << k.out;
}

TEST(ReplayMetaTest, MetaThatIsNoObjectIsMalformed) {
  const std::string header = Lines(ReadRunfile(kTrace))[0] + "\n";
  const std::pair<std::string, std::string> cases[] = {
      {"{\"op\": \"free\", \"locs\": [], \"meta\": [\"rid\"]}\n", "line 2: meta: must be an object"},
      {"{\"op\": \"free\", \"locs\": [], \"meta\": null}\n", "line 2: meta: must be an object"},
      {"{\"op\": \"free\", \"locs\": [], \"meta\": {}}\n{\"op\": \"free\", \"locs\": [], \"meta\": 7}\n",
       "line 3: meta: must be an object"},
      {"{\"op\": \"free\", \"locs\": [], \"meta\": {\"a\": \"" + std::string(70000, 'x') + "\"}}\n",
       "line 2: meta: must be at most 65536 bytes as compact JSON, got 70008"},
  };
  for (const auto& [records, want] : cases) {
    EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, header + records), 2, "--trace: " + want)) << records;
  }
}

TEST(ReplayTruncatedTest, ATruncatedLastRecordIsReportedAfterEveryCompleteOne) {
  const std::string text = ReadRunfile(kTrace);
  const std::string cut = CutInLastLine(text, 40);
  const std::string want =
      "kvshard: error: --trace: line 13: truncated last record (no newline, not valid JSON); 11 records before it "
      "checked, 0 mismatches\n";
  for (const std::string& input : {std::string("-"), TempFile("cut.jsonl", cut)}) {  // stdin and a file
    const CliResult r = RunCli({"replay", input}, cut);
    EXPECT_EQ(r.exit_code, 2) << input;
    EXPECT_EQ(r.out, "") << input;
    EXPECT_EQ(r.err, want) << input;
    const CliResult k = RunCli({"replay", input, "--keep-going"}, cut);
    EXPECT_EQ(k.exit_code, 2);
    EXPECT_EQ(k.err, want);
  }
  // --json still prints the answer, naming the truncated line.
  const CliResult j = RunCli({"replay", "-", "--json"}, cut);
  EXPECT_EQ(j.exit_code, 2);
  EXPECT_EQ(j.err, want);
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["records"], 11);
  EXPECT_EQ(doc["mismatches"], 0);
  EXPECT_EQ(doc["truncated_line"], 13);
  EXPECT_EQ(doc["mismatch_list"], Json::array());
  // Only the newline missing: a whole record, replayed as the last one.
  const CliResult whole = RunCli({"replay", "-"}, text.substr(0, text.size() - 1));
  EXPECT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_NE(whole.out.find("replayed 12 records,"), std::string::npos) << whole.out;
}

TEST(ReplayTruncatedTest, OnlyABrokenLastLineWithoutItsNewlineIsTruncated) {
  const std::string text = ReadRunfile(kTrace);
  const std::string cut_line = Lines(CutInLastLine(text, 40)).back();
  std::vector<std::string> lines = Lines(text);
  // The same broken text with its newline: the usual malformed record.
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, CutInLastLine(text, 40) + "\n"), 2,
                        "--trace: line 13: record: not valid JSON"));
  // In the middle of the trace, with or without a last newline.
  lines[6] = cut_line;
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, Joined(lines)), 2, "--trace: line 7: record: not valid JSON"));
  const std::string joined = Joined(lines);
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, joined.substr(0, joined.size() - 1)), 2,
                        "--trace: line 7: record: not valid JSON"));
  // A last line without its newline that is JSON but no record stays malformed.
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, Joined(Lines(text)) + "[1, 2]"), 2,
                        "--trace: line 14: record: must be a JSON object"));
}

TEST(ReplayTruncatedTest, AMismatchBeforeTheCutWins) {
  const std::string cut = CutInLastLine(TwoMismatches(), 40);
  const CliResult r = RunCli({"replay", "-"}, cut);  // stops at the first mismatch
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "kvshard: mismatch: line 4: alloc: pages[0][2]: expected 99, got 13\n");
  const CliResult k = RunCli({"replay", TempFile("cut2.jsonl", cut), "--keep-going"});
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_EQ(k.err,
            "kvshard: mismatch: 2 mismatches in 11 records; first: line 4: alloc: pages[0][2]: expected 99, got 13; "
            "line 13: truncated last record (no newline, not valid JSON); 11 records before it checked, 2 "
            "mismatches\n");
  EXPECT_NE(k.out.find("mismatch: line 12: rerange: max_rank_token"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("replayed 11 records,"), std::string::npos) << k.out;
  const CliResult j = RunCli({"replay", "-", "--keep-going", "--json"}, cut);
  EXPECT_EQ(j.exit_code, 1);
  const Json doc = Json::parse(j.out);
  EXPECT_EQ(doc["mismatches"], 2);
  EXPECT_EQ(doc["mismatch_list"].size(), 2u);
  EXPECT_EQ(doc["truncated_line"], 13);
}

TEST(ReplayJsonTest, KeepGoingJsonIsOneDocumentListingEachMismatchAsAnObject) {
  const CliResult r = RunCli({"replay", "-", "--keep-going", "--json"}, WithMeta(TwoMismatches()));
  EXPECT_EQ(r.exit_code, 1);
  const Json doc = Json::parse(r.out);  // throws (and fails the test) unless stdout is one JSON document
  const Json meta4 = Json::parse(R"({"rids": ["req-3"], "rank": 0, "step": 30, "time": 1.5})");
  const Json want = Json::parse(R"([
    {"line": 4, "op": "alloc", "field": "pages[0][2]", "expected": 99, "got": 13,
     "message": "line 4: alloc: pages[0][2]: expected 99, got 13 meta={\"rids\":[\"req-3\"],\"rank\":0,\"step\":30,\"time\":1.5}",
     "meta": {"rids": ["req-3"], "rank": 0, "step": 30, "time": 1.5}},
    {"line": 12, "op": "rerange", "field": "max_rank_token", "expected": 9, "got": 8,
     "message": "line 12: rerange: max_rank_token: expected 9, got 8 meta={\"rids\":[\"req-11\"],\"rank\":0,\"step\":110,\"time\":1.5}",
     "meta": {"rids": ["req-11"], "rank": 0, "step": 110, "time": 1.5}}
  ])");
  EXPECT_EQ(doc["mismatch_list"], want) << r.out;
  EXPECT_EQ(doc["mismatch_list"][0]["meta"], meta4);
  EXPECT_EQ(doc["records"], 12);
  EXPECT_EQ(doc["mismatches"], 2);
  EXPECT_GT(doc["fields_checked"].get<int64_t>(), 50);
  EXPECT_EQ(doc["first_mismatch"], want[0]["message"]);
  EXPECT_TRUE(doc["truncated_line"].is_null());
  EXPECT_EQ(r.err.rfind("kvshard: mismatch: 2 mismatches in 12 records; first: line 4:", 0), 0u) << r.err;
  // Without --keep-going the list holds the first mismatch; without a mismatch it is empty.
  const Json first = Json::parse(RunCli({"replay", "-", "--json"}, WithMeta(TwoMismatches())).out);
  EXPECT_EQ(first["mismatch_list"], Json::array({want[0]}));
  const Json clean = Json::parse(RunCli({"replay", "-", "--keep-going", "--json"}, ReadRunfile(kTrace)).out);
  EXPECT_EQ(clean["mismatch_list"], Json::array());
  EXPECT_EQ(clean["mismatches"], 0);
  EXPECT_TRUE(clean["first_mismatch"].is_null());
}

// The structured form comes from the same checks as the text: rejections ("error"), a key the answer lacks (no
// "got"), whole values where a list's length differs, invariants.
TEST(ReplayJsonTest, EveryKindOfMismatchHasItsObject) {
  std::string text = ReadRunfile(kTrace);
  text = Edited(text, 10, "batch_gt1_empty_extend", "batch_gt1_page_split_fallback");
  text = Edited(text, 9, "\"request_split_lists\"", "\"request_split_list\"");
  text = Edited(text, 11, "[1, 1, 2]", "[1, 1]");
  text = Edited(text, 13, "\"expect\": {", "\"expect\": {\"error\": \"x\"}, \"was\": {");
  text = Edited(text, 13, ", \"was\"", ", \"meta\"");
  const CliResult r = RunCli({"replay", "-", "--keep-going", "--json"}, text);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const Json list = Json::parse(r.out)["mismatch_list"];
  ASSERT_EQ(list.size(), 4u) << r.out;
  EXPECT_EQ(list[0]["line"], 9);
  EXPECT_EQ(list[0]["field"], "request_split_list");
  EXPECT_FALSE(list[0].contains("got"));
  EXPECT_EQ(list[0]["message"], "line 9: split: request_split_list: expected [[4,1,0,0],[3,0,0,0]], got (absent)");
  EXPECT_EQ(list[1]["field"], "error");
  EXPECT_EQ(list[1]["expected"], "batch_gt1_page_split_fallback");
  EXPECT_EQ(list[1]["got"].get<std::string>().rfind("[CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend]", 0), 0u);
  EXPECT_EQ(list[2]["field"], "q_lens");
  EXPECT_EQ(list[2]["expected"], Json::parse("[1, 1]"));
  EXPECT_EQ(list[2]["got"], Json::parse("[1, 1, 2]"));
  EXPECT_EQ(list[3]["line"], 13);
  EXPECT_EQ(list[3]["field"], "error");
  EXPECT_EQ(list[3]["expected"], "x");
  EXPECT_FALSE(list[3].contains("got"));
  EXPECT_EQ(list[3]["meta"], Json::parse(R"({"owner": [0, 1, 0], "filter_local": [0, 24]})"));
  // An invariant: an extend over a page the allocator never handed out.
  std::vector<std::string> pool = Lines(ReadRunfile("testdata/traces/pool_pipeline.jsonl"));
  pool[3].replace(pool[3].find("[2, 3, 4]"), 9, "[2, 3, 6]");
  const CliResult inv = RunCli({"replay", "-", "--json"}, Joined(pool));
  EXPECT_EQ(inv.exit_code, 1);
  const Json obj = Json::parse(inv.out)["mismatch_list"].at(0);
  EXPECT_EQ(obj["field"], "invariant");
  EXPECT_EQ(obj["message"],
            "line 4: begin_shard_extend: invariant: requests[0].pages[2]: page 6 is free (the allocator has not handed "
            "it out)");
}

// A malformed line after listed mismatches stops the replay (exit 2); standard output is still one document.
TEST(ReplayJsonTest, AMalformedLineAfterListedMismatchesClosesTheDocument) {
  std::vector<std::string> lines = Lines(TwoMismatches());
  lines.push_back("{\"op\": \"spill\"}");
  const CliResult r = RunCli({"replay", "-", "--keep-going", "--json"}, Joined(lines));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("kvshard: error: --trace: line 14: op: unknown op \"spill\"", 0), 0u) << r.err;
  const Json doc = Json::parse(r.out);
  EXPECT_EQ(doc["mismatch_list"].size(), 2u);
  EXPECT_EQ(doc["error"].get<std::string>().rfind("line 14: op: unknown op", 0), 0u);
  // Refused before any mismatch: nothing on standard output.
  lines.erase(lines.begin() + 1, lines.end() - 1);
  const CliResult early = RunCli({"replay", "-", "--keep-going", "--json"}, Joined(lines));
  EXPECT_EQ(early.exit_code, 2);
  EXPECT_EQ(early.out, "");
}

}  // namespace
}  // namespace kvshard::cli

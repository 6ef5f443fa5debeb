// kvshard gen: byte-identical for the same options, different for another seed, replays clean (plain and
// edge-heavy), exercises the sharded-pool pipeline and the radix cache (every op, prefix hits, declined grafts,
// evictions), keeps the old trace shape with --layers 0 --no-radix, and rejects bad options with one line.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

const char* const kPipelineOps[] = {"begin_shard_extend", "set_kv_buffer", "get_key_buffer", "end_shard_extend"};
const char* const kRadixOps[] = {"match_prefix", "dec_lock_ref", "insert", "evict"};

bool HasOp(const std::string& trace, const std::string& op) {
  return trace.find("{\"op\":\"" + op + "\"") != std::string::npos;
}

// True when some record's expect has `"key":V` with V an integer other than 0.
bool HasNonZero(const std::string& trace, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  for (size_t at = trace.find(needle); at != std::string::npos; at = trace.find(needle, at + 1)) {
    const char c = trace[at + needle.size()];
    if (c >= '1' && c <= '9') return true;
  }
  return false;
}

TEST(GenCmdTest, SameSeedSameBytesAndReplaysClean) {
  const CliResult a = RunCli({"gen", "--seed", "5", "--records", "400"});
  const CliResult b = RunCli({"gen", "--seed", "5", "--records", "400"});
  const CliResult c = RunCli({"gen", "--seed", "6", "--records", "400"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), '\n'), 401);
  const CliResult r = RunCli({"replay", "-"}, a.out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("replayed 400 records"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV rows compared"), std::string::npos) << r.out;  // the reads were checked
}

TEST(GenCmdTest, DefaultHeaderHasThePoolAndTheOptions) {
  const CliResult g = RunCli({"gen", "--seed", "9", "--records", "10", "--row-words", "3"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const Json header = Json::parse(Lines(g.out).at(0));
  ASSERT_TRUE(header.contains("pool")) << header.dump();
  const Json& pool = header.at("pool");
  EXPECT_EQ(pool.at("num_layers"), 2);
  EXPECT_EQ(pool.at("row_words"), 3);
  EXPECT_EQ(pool.at("max_prefix_tokens").get<int64_t>() % (4 * 16), 0);
  EXPECT_EQ(pool.at("chunk_tokens").get<int64_t>() % 16, 0);
  EXPECT_GE(pool.at("chunk_tokens").get<int64_t>(), 8 * 512);  // eight new 512-token requests fit
  // The payload seed follows the seed.
  const CliResult other = RunCli({"gen", "--seed", "10", "--records", "10"});
  EXPECT_NE(Json::parse(Lines(other.out).at(0)).at("pool").at("payload_seed"), pool.at("payload_seed"));
  EXPECT_EQ(header.at("generator").at("layers"), 2);
  EXPECT_EQ(header.at("generator").at("radix"), true);
}

// Every pipeline and radix op appears, the cache is hit, declines a graft and evicts, and the trace replays clean.
TEST(GenCmdTest, PipelineAndRadixTracesReachEveryOpAndReplayClean) {
  for (const char* seed : {"1", "2", "3"}) {
    for (const bool edge : {false, true}) {
      std::vector<std::string> args = {"gen", "--seed",      seed, "--records",   "1500", "--pages-per-rank",
                                       "24",  "--max-len",   "96", "--page-size", "4",    "--layers",
                                       "3",   "--row-words", "2"};
      if (edge) args.insert(args.end(), {"--edge-heavy", "--need-sort", "--shard-size", "3", "--cp-size", "2"});
      const CliResult g = RunCli(args);
      ASSERT_EQ(g.exit_code, 0) << g.err;
      const std::string what = std::string("seed ") + seed + (edge ? " edge-heavy" : "");
      for (const char* op : kPipelineOps) EXPECT_TRUE(HasOp(g.out, op)) << "no " << op << " with " << what;
      for (const char* op : kRadixOps) EXPECT_TRUE(HasOp(g.out, op)) << "no " << op << " with " << what;
      for (const char* op : {"alloc", "free", "free_group", "gather_plan", "split", "rerange", "place"}) {
        EXPECT_TRUE(HasOp(g.out, op)) << "no " << op << " with " << what;
      }
      EXPECT_TRUE(HasNonZero(g.out, "prefix_len")) << "no prefix hit with " << what;
      EXPECT_NE(g.out.find("\"declined\":true"), std::string::npos) << "no declined graft with " << what;
      EXPECT_TRUE(HasNonZero(g.out, "evicted_pages")) << "no eviction with " << what;
      EXPECT_TRUE(HasNonZero(g.out, "block_pages")) << "no prefix gather with " << what;
      EXPECT_NE(g.out.find("{\"op\":\"get_key_buffer\",\"layer\":2,"), std::string::npos) << what;
      for (const std::string& line : Lines(g.out)) {  // the serving loop is never rejected, only CP/edge plans
        if (line.find("\"expect\":{\"error\"") == std::string::npos) continue;
        EXPECT_TRUE(line.rfind("{\"op\":\"gather_plan\"", 0) == 0 || line.rfind("{\"op\":\"split\"", 0) == 0 ||
                    line.rfind("{\"op\":\"rerange\"", 0) == 0)
            << what << ": " << line.substr(0, 300);
      }
      const CliResult r = RunCli({"replay", "-"}, g.out);
      EXPECT_EQ(r.exit_code, 0) << what << ": " << r.err;
      EXPECT_NE(r.out.find("replayed 1500 records"), std::string::npos) << r.out;
    }
  }
}

TEST(GenCmdTest, SameSeedSameBytesWithEveryOption) {
  const std::vector<std::string> args = {
      "gen", "--seed",       "77", "--records",       "600", "--edge-heavy", "--need-sort", "--layers",
      "3",   "--row-words",  "5",  "--shard-size",    "2",   "--page-size",  "3",           "--pages-per-rank",
      "12",  "--batch-size", "5",  "--share-percent", "70"};
  const CliResult a = RunCli(args);
  const CliResult b = RunCli(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  std::vector<std::string> other = args;
  other[2] = "78";
  EXPECT_NE(RunCli(other).out, a.out);
  EXPECT_EQ(RunCli({"replay", "-"}, a.out).exit_code, 0);
}

// --layers 0 --no-radix writes no pool, no pipeline and no radix record; --layers only adds the pipeline
// records after each committed alloc, leaving every other record as it was.
TEST(GenCmdTest, PipelineRecordsOnlyAddToTheOldShape) {
  const CliResult old_shape = RunCli({"gen", "--seed", "4", "--records", "500", "--layers", "0", "--no-radix"});
  const CliResult piped = RunCli({"gen", "--seed", "4", "--records", "500", "--layers", "2", "--no-radix"});
  ASSERT_EQ(old_shape.exit_code, 0) << old_shape.err;
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(Lines(old_shape.out).at(0).find("\"pool\""), std::string::npos);
  for (const char* op : kPipelineOps) EXPECT_FALSE(HasOp(old_shape.out, op)) << op;
  for (const char* op : kRadixOps) {
    EXPECT_FALSE(HasOp(old_shape.out, op)) << op;
    EXPECT_FALSE(HasOp(piped.out, op)) << op;
  }
  std::vector<std::string> kept;
  const std::vector<std::string> piped_lines = Lines(piped.out);
  for (size_t i = 1; i < piped_lines.size(); ++i) {
    if (std::none_of(std::begin(kPipelineOps), std::end(kPipelineOps), [&](const char* op) {
          return piped_lines[i].rfind(std::string("{\"op\":\"") + op + "\"", 0) == 0;
        })) {
      kept.push_back(piped_lines[i]);
    }
  }
  const std::vector<std::string> old_lines = Lines(old_shape.out);
  ASSERT_LT(kept.size(), old_lines.size() - 1);  // the pipeline records took some of the 500
  ASSERT_GT(kept.size(), 100u);
  for (size_t i = 0; i < kept.size(); ++i) ASSERT_EQ(kept[i], old_lines[i + 1]) << "record " << i;
  EXPECT_EQ(RunCli({"replay", "-"}, old_shape.out).exit_code, 0);
}

TEST(GenCmdTest, EdgeHeavyTracesReachRejectionsAndReplayClean) {
  for (const char* seed : {"1", "2", "3"}) {
    const CliResult g = RunCli({"gen", "--seed", seed, "--records", "600", "--edge-heavy", "--need-sort",
                                "--shard-size", "3", "--page-size", "4", "--cp-size", "2", "--pages-per-rank", "8"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("\"expect\":{\"error\":"), std::string::npos) << "no rejected record with seed " << seed;
    EXPECT_NE(g.out.find("\"ok\":false"), std::string::npos) << "no deferred batch with seed " << seed;
    const CliResult r = RunCli({"replay", "-"}, g.out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

// A corrupted expect of a generated pipeline or radix record is reported at its line.
TEST(GenCmdTest, CorruptedPipelineAndRadixExpectIsReportedAtItsLine) {
  const CliResult g = RunCli({"gen", "--seed", "3", "--records", "300"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const std::vector<std::string> lines = Lines(g.out);
  int corrupted = 0;
  for (const char* op :
       {"begin_shard_extend", "set_kv_buffer", "get_key_buffer", "match_prefix", "insert", "dec_lock_ref"}) {
    const std::string head = std::string("{\"op\":\"") + op + "\"";
    for (size_t i = 1; i < lines.size(); ++i) {
      if (lines[i].rfind(head, 0) != 0) continue;
      std::vector<std::string> bad = lines;
      const size_t e = bad[i].find("\"expect\":{");
      const size_t digit = bad[i].find_first_of("0123456789", e);
      ASSERT_NE(digit, std::string::npos) << lines[i];
      bad[i].insert(digit, "7");
      std::string text;
      for (const std::string& l : bad) text += l + "\n";
      const CliResult r = RunCli({"replay", "-"}, text);
      EXPECT_EQ(r.exit_code, 1) << op << ": " << r.err;
      EXPECT_EQ(r.err.rfind("kvshard: mismatch: line " + std::to_string(i + 1) + ": " + op + ": ", 0), 0u) << r.err;
      ++corrupted;
      break;
    }
  }
  EXPECT_EQ(corrupted, 6);
}

TEST(GenCmdTest, CpRecordsReachEveryOpReplayCleanAndACorruptedExpectExitsOne) {
  const CliResult plain = RunCli({"gen", "--seed", "3", "--records", "300"});
  const CliResult g = RunCli({"gen", "--seed", "3", "--records", "300", "--cp-records", "--edge-heavy"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, RunCli({"gen", "--seed", "3", "--records", "300", "--cp-records", "--edge-heavy"}).out);
  EXPECT_EQ(plain.out.find("cp_direct_write"), std::string::npos);  // off by default: old traces keep their bytes
  for (const char* op : {"page_owners", "cp_direct_write", "cp_seq_idx", "can_cp_split", "cp_local_pair"}) {
    EXPECT_TRUE(HasOp(g.out, op)) << op;
  }
  EXPECT_NE(g.out.find("reason=local_loc_owner_mismatch"), std::string::npos);      // the rotated pages fail ...
  EXPECT_NE(g.out.find("\"cp_local_physical_out_cache_loc\""), std::string::npos);  // ... owner-class pages pass
  const CliResult r = RunCli({"replay", "-"}, g.out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("replayed 300 records"), std::string::npos) << r.out;
  EXPECT_EQ(RunCli({"replay", "-", "--impl", "fast"}, g.out).out, r.out);
  // Change the first CP record's expect: exit 1 naming its line and op.
  std::vector<std::string> lines = Lines(g.out);
  for (size_t i = 1; i < lines.size(); ++i) {
    Json rec = Json::parse(lines[i]);
    if (rec["op"] != "page_owners") continue;
    rec["expect"]["page_owner_plan"][0] = rec["expect"]["page_owner_plan"][0].get<int64_t>() + 1;
    lines[i] = rec.dump();
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    const CliResult bad = RunCli({"replay", "-"}, text);
    EXPECT_EQ(bad.exit_code, 1) << bad.err;
    EXPECT_EQ(
        bad.err.rfind("kvshard: mismatch: line " + std::to_string(i + 1) + ": page_owners: page_owner_plan[0]: ", 0),
        0u)
        << bad.err;
    break;
  }
}

// --allocator-only: alloc, free and free_group records only (the replay benchmark's allocator trace), the header says
// so, and it replays clean; with a pipeline or CP records it is refused.
TEST(GenCmdTest, AllocatorOnlyTracesHoldOnlyAllocatorRecords) {
  const CliResult r = RunCli(Words("gen --seed 3 --records 400 --allocator-only"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 401u);
  EXPECT_NE(lines[0].find("\"allocator_only\":true"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("\"pool\""), std::string::npos) << lines[0];
  for (const char* op : {"alloc", "free", "free_group"}) EXPECT_TRUE(HasOp(r.out, op)) << op;
  for (size_t i = 1; i < lines.size(); ++i) {
    const bool allocator = lines[i].rfind("{\"op\":\"alloc\"", 0) == 0 || lines[i].rfind("{\"op\":\"free\"", 0) == 0 ||
                           lines[i].rfind("{\"op\":\"free_group\"", 0) == 0;
    ASSERT_TRUE(allocator) << "line " << i + 1 << ": " << lines[i].substr(0, 80);
  }
  const CliResult replay = RunCli({"replay", "-"}, r.out);
  EXPECT_EQ(replay.exit_code, 0) << replay.err;
  ExpectFailures(
      {{"gen --allocator-only --layers 2", "--allocator-only: writes only allocator records", 2},
       {"gen --allocator-only --cp-records",
        "--allocator-only: writes only allocator records: needs --layers 0, --no-radix and no --cp-records", 2}});
}

TEST(GenCmdTest, BadOptionsExitTwo) {
  ExpectFailures(
      {{"gen --records -1", "--records: must be non-negative", 2},
       {"gen --batch-size 0", "--batch-size: must be in [1, 4096]", 2},
       {"gen --share-percent 101", "--share-percent: must be in [0, 100]", 2},
       {"gen --shard-size 0", "--shard-size: must be in [1,", 2},
       {"gen --layers -1", "--layers: must be in [0, 4096]", 2},
       {"gen --layers 4097", "--layers: must be in [0, 4096]", 2},
       {"gen --row-words 0", "--row-words: must be in [1, 4096]", 2},
       {"gen --max-len 1048577", "--max-len: must be at most 1048576 with the radix cache", 2},
       {"gen --batch-size 4096 --max-len 4096", "--layers: the pipeline's pool does not fit", 2},
       // Past --max-memory before the model's own 1 GB bound on the pools is reached.
       {"gen --batch-size 4096 --max-len 65536",
        "--max-len: the generator's allocator and pools would need 8.0 GiB (1028 logical pages x 64 B + "
        "32896 KV rows x 32 B + 537002112 scratch rows x 16 B + 1 generator state x 16777216 B), over "
        "--max-memory 4 GiB",
        2},
       // The flag named is one given behind the largest term (was always --layers).
       {"gen --row-words 4096 --max-memory 100000000",
        "--row-words: the generator's allocator and pools would need 4.1 GiB (1028 logical pages x 64 B + "
        "32896 KV rows x 32768 B + 200832 scratch rows x 16384 B + 1 generator state x 16777216 B), over "
        "--max-memory 95.4 MiB",
        2},
       {"gen --layers 4096 --row-words 8 --max-memory 100000000", "--layers: the generator's", 2},
       {"gen --pages-per-rank 100000 --layers 0 --max-memory 10000000", "--pages-per-rank: the generator's", 2}});
  // The same options are fine without the radix cache or without the pipeline.
  EXPECT_EQ(RunCli(Words("gen --max-len 4294967296 --no-radix --records 30")).exit_code, 0);
  EXPECT_EQ(RunCli(Words("gen --batch-size 4096 --max-len 65536 --layers 0 --records 3")).exit_code, 0);
}

}  // namespace
}  // namespace kvshard::cli

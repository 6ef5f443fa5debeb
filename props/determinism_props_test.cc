// Determinism (docs/RELIABILITY.md): the same seed and options give byte-identical output run to run — `kvshard
// gen` traces, split / rerange / gather-plan plans, replay reports, simulate reports and their files — and the
// output does not depend on the thread count (simulate --sweep) or on which CP rank builds the shared plan.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/trace_gen.h"
#include "core/json.h"
#include "core/pool_json.h"
#include "props/cp_generators.h"
#include "props/pool_generators.h"
#include "props/kvshard_run.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

namespace fs = std::filesystem;

std::string Joined(const std::vector<std::string>& args) {
  std::string s = "kvshard";
  for (const std::string& a : args) s += " " + a;
  return s;
}

// Runs `args` twice and requires the same status, stdout and stderr, byte for byte; returns the first run.
Output RunTwice(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  const Output a = Kvshard(args, stdin_text);
  const Output b = Kvshard(args, stdin_text);
  if (!(a == b)) {
    RC_FAIL(Joined(args) + ": two runs differ (exit " + std::to_string(a.exit_code) + " vs " +
            std::to_string(b.exit_code) + ", " + std::to_string(a.out.size()) + " vs " + std::to_string(b.out.size()) +
            " bytes of stdout)");
  }
  return a;
}

std::string ListArg(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// The `kvshard gen` command line of `o` (the flags cli/gen_cmd.cc maps onto TraceGenOptions).
std::vector<std::string> GenArgs(const replay::TraceGenOptions& o) {
  std::vector<std::string> a = {"gen",
                                "--seed",
                                std::to_string(o.seed),
                                "--records",
                                std::to_string(o.records),
                                "--shard-size",
                                std::to_string(o.shard_size),
                                "--page-size",
                                std::to_string(o.page_size),
                                "--pages-per-rank",
                                std::to_string(o.pages_per_rank),
                                "--cp-size",
                                std::to_string(o.cp_size),
                                "--batch-size",
                                std::to_string(o.batch_size),
                                "--max-len",
                                std::to_string(o.max_len),
                                "--share-percent",
                                std::to_string(o.share_percent),
                                "--layers",
                                std::to_string(o.num_layers),
                                "--row-words",
                                std::to_string(o.row_words)};
  if (o.need_sort) a.push_back("--need-sort");
  if (o.edge_heavy) a.push_back("--edge-heavy");
  if (!o.radix) a.push_back("--no-radix");
  return a;
}

// A fresh directory under the test's temporary directory.
fs::path FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : fs::temp_directory_path().string()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Every regular file under `dir` (relative path -> bytes).
std::map<std::string, std::string> Files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    files[fs::relative(e.path(), dir).string()] = buf.str();
  }
  return files;
}

TEST(DeterminismProps, GenTracesAreByteIdentical) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        replay::TraceGenOptions o = ArbitraryTraceGenOptions();
        o.seed &= INT64_MAX;  // --seed is a non-negative int64
        const std::vector<std::string> args = GenArgs(o);
        const Output r = RunTwice(args);
        RC_ASSERT(r.exit_code == 0);
        // The command prints what the library generates, and --out writes the same bytes.
        std::ostringstream lib;
        RC_ASSERT_OK(replay::GenerateTrace(o, lib));
        RC_ASSERT(r.out == lib.str());
        const fs::path dir = FreshDir("gen");
        std::vector<std::string> to_file = args;
        to_file.insert(to_file.end(), {"--out", (dir / "t.jsonl").string()});
        RC_ASSERT(Kvshard(to_file).exit_code == 0);
        RC_ASSERT(Files(dir).at("t.jsonl") == r.out);
        // Another seed gives another trace (the seed is in the header, and drives the records).
        replay::TraceGenOptions other = o;
        other.seed = o.seed ^ 1;
        RC_ASSERT(Kvshard(GenArgs(other)).out != r.out);
      },
      rc::detail::configuration().testParams));
}

// split (every rank, table and JSON), rerange and gather-plan print the same bytes twice; every rank of a split
// builds the same batch-wide plan (only its own rank's fields differ).
TEST(DeterminismProps, PlansAreByteIdenticalAndRankIndependent) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        const CPBatchCase c = *GenCPBatchCase();
        const std::vector<std::string> base = {
            "--cp-size",     std::to_string(c.cp_size), "--page-size",   std::to_string(c.page_size),
            "--extend-lens", ListArg(c.extend_lens),    "--prefix-lens", ListArg(c.prefix_lens)};
        const std::vector<std::string> shared_keys = {"batch_size",
                                                      "page_size",
                                                      "cp_size",
                                                      "request_token_offsets",
                                                      "request_padded_token_offsets",
                                                      "request_split_lists",
                                                      "request_valid_split_lists",
                                                      "request_compute_split_lists",
                                                      "flat_split_list",
                                                      "request_last_token_owner",
                                                      "request_last_token_local_offset",
                                                      "compute_padding_enabled"};
        Json rank0;
        for (int64_t rank = 0; rank < c.cp_size; ++rank) {
          std::vector<std::string> args = {"split", "--cp-rank", std::to_string(rank)};
          args.insert(args.end(), base.begin(), base.end());
          RC_ASSERT(RunTwice(args).exit_code == 0);
          args.push_back("--json");
          const Output r = RunTwice(args);
          RC_ASSERT(r.exit_code == 0);
          const Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
          RC_ASSERT(j.is_object() && j.contains("cp_rank") && j["cp_rank"] == rank);
          if (rank == 0) rank0 = j;
          for (const std::string& key : shared_keys) {
            RC_ASSERT(j.contains(key));
            if (j[key] != rank0[key]) RC_FAIL("split: rank " + std::to_string(rank) + " differs from rank 0 in " + key);
          }
        }
        std::vector<std::string> rerange = {"rerange"};
        rerange.insert(rerange.end(), base.begin(), base.end());
        RC_ASSERT(RunTwice(rerange).exit_code == 0);
        rerange.push_back("--json");
        RC_ASSERT(RunTwice(rerange).exit_code == 0);

        const ExtendBatch batch = DrawValidBatch();
        const std::string batch_json = ExtendBatchToJson(batch).dump();
        std::vector<int64_t> locs;
        for (const auto& req : batch.requests) {
          if (!req.pages.empty()) locs.push_back(req.pages.back() * batch.page_size);
        }
        std::vector<std::string> gather = {"gather-plan", "--batch", "-"};
        if (!locs.empty()) gather.insert(gather.end(), {"--translate", ListArg(locs)});
        const Output table = RunTwice(gather, batch_json);
        gather.push_back("--json");
        const Output json = RunTwice(gather, batch_json);
        RC_ASSERT(json.exit_code == 0);
        RC_ASSERT(table.exit_code == 0);
      },
      rc::detail::configuration().testParams));
}

// `replay` reports (the summary, --json, --keep-going) of a generated trace, byte for byte.
TEST(DeterminismProps, ReplayReportsAreByteIdentical) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        replay::TraceGenOptions o = ArbitraryTraceGenOptions();
        o.records = *rc::gen::inRange<int64_t>(0, 60);
        std::ostringstream trace;
        RC_ASSERT_OK(replay::GenerateTrace(o, trace));
        for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
                 {"replay", "-"}, {"replay", "-", "--json"}, {"replay", "-", "--keep-going", "--impl", "fast"}}) {
          RC_ASSERT(RunTwice(args, trace.str()).exit_code == 0);
        }
      },
      rc::detail::configuration().testParams));
}

// A small Mooncake workload: documents of 512-token blocks shared by prefix, prompts ending anywhere in their
// last block, arrivals from simultaneous to seconds apart.
std::string DrawMooncakeWorkload() {
  const int64_t requests = *rc::gen::inRange<int64_t>(1, 25);
  const int64_t docs = *rc::gen::inRange<int64_t>(1, 4);
  std::string text;
  int64_t ms = 0;
  for (int64_t i = 0; i < requests; ++i) {
    const int64_t d = *rc::gen::inRange<int64_t>(0, docs);
    const int64_t blocks = *rc::gen::inRange<int64_t>(1, 5);
    std::vector<int64_t> ids;
    for (int64_t b = 0; b + 1 < blocks; ++b) ids.push_back(d * 100 + b);
    ids.push_back(*rc::gen::arbitrary<bool>() ? d * 100 + blocks - 1 : 10000 + i);
    const int64_t input = 512 * (blocks - 1) + *rc::gen::inRange<int64_t>(1, 513);
    ms += *rc::gen::element<int64_t>(0, 0, 10, 1000, 30000);
    text += "{\"timestamp\": " + std::to_string(ms) + ", \"input_length\": " + std::to_string(input) +
            ", \"output_length\": " + std::to_string(*rc::gen::inRange<int64_t>(0, 200)) + ", \"hash_ids\": [" +
            ListArg(ids) + "]}\n";
  }
  return text;
}

// Simulation is the heaviest case: a tenth of the configured count (at least 20).
rc::detail::TestParams SimulateParams() { return FractionOfCases(10, 20); }

// simulate's report (table and --json) and its files (--timeline, --csv, --plots, --emit-trace), twice.
TEST(DeterminismProps, SimulateReportsAndFilesAreByteIdentical) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        const std::string workload = DrawMooncakeWorkload();
        const int64_t ps = *rc::gen::element<int64_t>(16, 64, 128);
        const std::vector<std::string> config = {"simulate",
                                                 "-",
                                                 "--quiet",
                                                 "--shard-size",
                                                 std::to_string(*rc::gen::element<int64_t>(1, 2, 4, 8)),
                                                 "--page-size",
                                                 std::to_string(ps),
                                                 "--cp-size",
                                                 std::to_string(*rc::gen::element<int64_t>(1, 2, 4)),
                                                 "--cache-tokens",
                                                 std::to_string(*rc::gen::element<int64_t>(0, 0, 4096, 20000)),
                                                 "--chunked-prefill-size",
                                                 std::to_string(ps * *rc::gen::inRange<int64_t>(1, 33))};
        const Output table = RunTwice(config, workload);
        std::vector<std::string> json = config;
        json.push_back("--json");
        const Output j = RunTwice(json, workload);
        RC_ASSERT(table.exit_code == j.exit_code);
        RC_CLASSIFY(table.exit_code == 2, "pool too small for a prompt");
        std::map<std::string, std::string> first;
        for (const char* name : {"a", "b"}) {
          const fs::path dir = FreshDir(std::string("simulate_") + name);
          std::vector<std::string> files = config;
          files.insert(files.end(), {"--timeline", (dir / "timeline.json").string(), "--csv", (dir / "csv").string(),
                                     "--plots", (dir / "plots").string(), "--emit-trace",
                                     (dir / "trace.jsonl").string(), "--emit-layers", "1"});
          const Output r = Kvshard(files, workload);
          RC_ASSERT(r.exit_code == table.exit_code);
          // The report is the table's, plus (on success) one line naming the emitted trace, whose path differs per run.
          const size_t trace_line = r.out.rfind("\ntrace: ");
          RC_ASSERT((trace_line != std::string::npos) == (r.exit_code == 0));
          RC_ASSERT(r.out.substr(0, trace_line == std::string::npos ? r.out.size() : trace_line + 1) == table.out);
          const std::map<std::string, std::string> got = Files(dir);
          if (first.empty()) {
            first = got;
            RC_ASSERT(table.exit_code == 2 || first.size() >= 4u);
          } else if (got != first) {
            for (const auto& [path, bytes] : first) {
              if (!got.contains(path) || got.at(path) != bytes) RC_FAIL("simulate: " + path + " differs between runs");
            }
            RC_FAIL("simulate: the second run wrote other files");
          }
        }
      },
      SimulateParams()));
}

// simulate --sweep prints the same rows whatever the thread count.
TEST(DeterminismProps, SweepRowsDoNotDependOnTheThreadCount) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        const std::string workload = DrawMooncakeWorkload();
        const std::vector<std::string> base = {
            "simulate", "-",
            "--quiet",  "--json",
            "--sweep",  "shard-size=1,4,8",
            "--sweep",  "page-size=16,64",
            "--sweep",  "cache-tokens=0," + std::to_string(*rc::gen::inRange<int64_t>(1, 40000))};
        std::vector<std::string> one = base, three = base;
        one.insert(one.end(), {"--threads", "1"});
        three.insert(three.end(), {"--threads", "3"});
        const Output a = Kvshard(one, workload);
        const Output b = Kvshard(three, workload);
        RC_ASSERT(a.exit_code == b.exit_code);
        RC_ASSERT(a.err == b.err);
        RC_ASSERT(a.out == b.out);
        const Json rows = Json::parse(a.out, nullptr, /*allow_exceptions=*/false);
        RC_ASSERT(rows.is_object() && rows.contains("rows") && rows["rows"].size() == 12u);
      },
      SimulateParams()));
}

}  // namespace
}  // namespace kvshard::props

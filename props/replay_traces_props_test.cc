// `kvshard replay A B C` (several traces, one process): each trace is answered as a replay of it alone — the same
// lines, named by their trace, the same verdict — the first error or mismatch (without --keep-going) ends the
// command with that trace's status, and the last line (or the --json totals) adds the traces up. Nothing a trace
// leaves behind (the model, the pools, the device path) reaches the next. With --jobs N, up to N traces replay at
// once and the command prints, byte for byte, what it prints one trace at a time.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/json.h"
#include "props/kvshard_run.h"
#include "props/property.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

namespace fs = std::filesystem;

// A `kvshard gen` trace of arbitrary options, and at most one of: an expected value changed (a mismatch), a record
// without its op (a malformed line, exit 2), the last record cut before its newline (a truncated trace).
std::string ArbitraryTraceText() {
  replay::TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(0, 60);
  std::ostringstream gen;
  RC_ASSERT(replay::GenerateTrace(o, gen).ok());
  std::vector<std::string> lines = Lines(gen.str());
  const int damage = *rc::gen::weightedElement<int>({{4, 0}, {4, 1}, {1, 2}, {1, 3}});
  if (damage == 1 || damage == 2) {  // on a record line (the header is line 1)
    const size_t at = lines.size() > 1 ? *rc::gen::inRange<size_t>(1, lines.size()) : 0;
    std::string& line = lines[at];
    if (damage == 2 && line.rfind("{\"op\":", 0) == 0) line.replace(1, 4, "\"oq\"");
    const size_t expect = line.find("\"expect\":");
    const size_t digit =
        damage == 1 && expect != std::string::npos ? line.find_first_of("0123456789", expect) : std::string::npos;
    if (digit != std::string::npos) line[digit] = static_cast<char>('1' + (line[digit] - '0') % 9);  // never '0'
  }
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  if (damage == 3 && !text.empty()) text.resize(text.size() - 1 - lines.back().size() / 2);
  return text;
}

// `line` of a lone replay's output as the several-trace replay prints it for `path`.
std::string Named(const std::string& line, const std::string& path) {
  const std::string mismatch = "mismatch: ";
  if (line.rfind(mismatch, 0) == 0) return mismatch + path + ": " + line.substr(mismatch.size());
  return path + ": " + line;
}

// `s` with the first `from` after `at` replaced by `to` (unchanged when there is none).
std::string ReplacedOnce(std::string s, const std::string& from, const std::string& to, size_t at = 0) {
  const size_t hit = s.find(from, at);
  if (hit != std::string::npos) s.replace(hit, from.size(), to);
  return s;
}

// A lone replay's stderr line as the several-trace replay ends with it for `path`.
std::string NamedError(const std::string& err, const std::string& path) {
  const std::string mismatch = "kvshard: mismatch: ", error = "kvshard: error: --trace: ";
  if (err.rfind(error, 0) == 0) return error + path + ": " + err.substr(error.size());
  if (err.rfind(mismatch, 0) != 0) return err;
  if (err.find(" mismatches in ") != std::string::npos && err.find("; first: ") != std::string::npos) {
    return ReplacedOnce(err, "; first: ", "; first: " + path + ": ");  // --keep-going's count, or a truncated trace
  }
  return mismatch + path + ": " + err.substr(mismatch.size());
}

// The counts a lone replay's summary line gives ("replayed R records, F fields checked, [K KV rows compared, ]M
// mismatches").
struct Counts {
  long long records = 0, fields = 0, rows = 0, mismatches = 0;
};

Counts SummaryCounts(const std::string& line) {
  Counts c;
  RC_ASSERT(std::sscanf(line.c_str(), "replayed %lld records, %lld fields checked", &c.records, &c.fields) == 2);
  const size_t rows = line.find(" KV rows compared");
  if (rows != std::string::npos) std::sscanf(line.c_str() + line.rfind(", ", rows) + 2, "%lld", &c.rows);
  std::sscanf(line.c_str() + line.rfind(", ") + 2, "%lld", &c.mismatches);
  return c;
}

TEST(ReplayTracesProps, SeveralTracesAreEachAnsweredAsAlone) {
  const fs::path dir = fs::path(testing::TempDir()) / "replay_traces_props";
  fs::create_directories(dir);
  const int64_t cases = CheckProperty(
      CurrentTestId(),
      [&] {
        const int k = *rc::gen::inRange(1, 5);
        const bool keep_going = *rc::gen::arbitrary<bool>();
        std::vector<std::string> paths, texts;
        for (int i = 0; i < k; ++i) {
          // A trace may come twice: the second replay must not see the first's state.
          if (i > 0 && *rc::gen::inRange(0, 5) == 0) {
            paths.push_back(paths[*rc::gen::inRange<size_t>(0, paths.size())]);
            continue;
          }
          const std::string path = (dir / ("t" + std::to_string(i) + ".jsonl")).string();
          std::ofstream(path, std::ios::binary) << ArbitraryTraceText();
          paths.push_back(path);
        }
        std::vector<std::string> flags =
            keep_going ? std::vector<std::string>{"--keep-going"} : std::vector<std::string>{};
        std::vector<std::string> args = {"replay"};
        args.insert(args.end(), paths.begin(), paths.end());
        args.insert(args.end(), flags.begin(), flags.end());
        const Output all = Kvshard(args);
        std::vector<std::string> want_lines;
        std::string want_err;
        int want_exit = 0;
        Counts total;
        std::string first;  // the first mismatch's text, named
        bool stopped = false;
        std::string lone_err;  // the last lone replay's stderr
        for (const std::string& path : paths) {
          std::vector<std::string> lone_args = {"replay", path};
          lone_args.insert(lone_args.end(), flags.begin(), flags.end());
          const Output lone = Kvshard(lone_args);
          RC_ASSERT(lone.exit_code >= 0 && lone.exit_code <= 2);
          lone_err = lone.err;
          const std::vector<std::string> lone_lines = Lines(lone.out);
          for (const std::string& line : lone_lines) want_lines.push_back(k > 1 ? Named(line, path) : line);
          if (!lone_lines.empty() && lone_lines.back().rfind("replayed ", 0) == 0) {
            const Counts c = SummaryCounts(lone_lines.back());
            total.records += c.records;
            total.fields += c.fields;
            total.rows += c.rows;
            total.mismatches += c.mismatches;
          }
          if (first.empty() && lone.exit_code == 1) {
            const std::string e = NamedError(lone.err, path);
            const size_t at = e.find("; first: ");
            first = at != std::string::npos ? e.substr(at + 9) : e.substr(std::string("kvshard: mismatch: ").size());
            if (first.find("; line ") != std::string::npos && first.find("truncated") != std::string::npos) {
              first = first.substr(0, first.find("; line "));
            }
            if (!first.empty() && first.back() == '\n') first.pop_back();
          }
          const bool truncated = lone.err.find("truncated last record") != std::string::npos;
          if (lone.exit_code == 2 || (lone.exit_code == 1 && (!keep_going || truncated))) {
            want_exit = lone.exit_code;
            want_err = NamedError(lone.err, path);
            stopped = true;
            break;
          }
          if (lone.exit_code == 1) want_exit = 1;
        }
        if (!stopped && k > 1) {
          want_lines.push_back("replayed " + std::to_string(k) + " traces: " + std::to_string(total.records) +
                               " records, " + std::to_string(total.fields) + " fields checked, " +
                               (total.rows > 0 ? std::to_string(total.rows) + " KV rows compared, " : "") +
                               std::to_string(total.mismatches) + " mismatches");
          if (want_exit == 1) {
            want_err = "kvshard: mismatch: " + std::to_string(total.mismatches) + " mismatches in " +
                       std::to_string(total.records) + " records of " + std::to_string(k) + " traces; first: " + first +
                       "\n";
          }
        }
        if (k == 1) want_err = lone_err;  // one trace: exactly what it printed before several were possible
        RC_TAG(k, keep_going, want_exit);
        RC_ASSERT(all.exit_code == want_exit);
        RC_ASSERT(Lines(all.out) == want_lines);
        RC_ASSERT(all.err == want_err);
      },
      FractionOfCases(2, 50));
  RecordPropertyCases(cases);
  fs::remove_all(dir);
}

// With --json the several traces are one document: each trace's element is its lone answer led by its "trace", and
// the totals add them up; a malformed trace closes the document with its error.
TEST(ReplayTracesProps, SeveralTracesAreOneJsonDocument) {
  const fs::path dir = fs::path(testing::TempDir()) / "replay_traces_json_props";
  fs::create_directories(dir);
  const int64_t cases = CheckProperty(
      CurrentTestId(),
      [&] {
        const int k = *rc::gen::inRange(2, 5);
        const bool keep_going = *rc::gen::arbitrary<bool>();
        std::vector<std::string> paths;
        for (int i = 0; i < k; ++i) {
          const std::string path = (dir / ("t" + std::to_string(i) + ".jsonl")).string();
          std::ofstream(path, std::ios::binary) << ArbitraryTraceText();
          paths.push_back(path);
        }
        std::vector<std::string> args = {"replay"};
        args.insert(args.end(), paths.begin(), paths.end());
        args.push_back("--json");
        if (keep_going) args.push_back("--keep-going");
        const Output all = Kvshard(args);
        Json want_traces = Json::array();
        int64_t records = 0, mismatches = 0;
        int want_exit = 0;
        std::string error;
        for (const std::string& path : paths) {
          std::vector<std::string> lone_args = {"replay", path, "--json"};
          if (keep_going) lone_args.push_back("--keep-going");
          const Output lone = Kvshard(lone_args);
          if (!lone.out.empty()) {
            Json doc = Json::parse(lone.out);
            Json element = {{"trace", path}};
            for (auto it = doc.begin(); it != doc.end(); ++it) element[it.key()] = it.value();
            want_traces.push_back(element);
            records += doc["records"].get<int64_t>();
            mismatches += doc["mismatches"].get<int64_t>();
          }
          const bool truncated = lone.err.find("truncated last record") != std::string::npos;
          if (lone.exit_code == 2) error = NamedError(lone.err, path).substr(std::string("kvshard: error: ").size());
          if (lone.exit_code != 0) want_exit = lone.exit_code;
          if (lone.exit_code == 2 || (lone.exit_code == 1 && (!keep_going || truncated))) break;
        }
        RC_TAG(k, keep_going, want_exit);
        RC_ASSERT(all.exit_code == want_exit);
        if (want_traces.empty()) {  // the first trace refused before anything was printed
          RC_ASSERT(all.out.empty());
          return;
        }
        const Json doc = Json::parse(all.out);
        RC_ASSERT(doc["traces"] == want_traces);
        RC_ASSERT(doc["records"].get<int64_t>() == records);
        RC_ASSERT(doc["mismatches"].get<int64_t>() == mismatches);
        if (!error.empty()) {
          if (error.back() == '\n') error.pop_back();
          RC_ASSERT(doc["error"] == error);
        } else {
          RC_ASSERT(!doc.contains("error"));
        }
      },
      FractionOfCases(2, 50));
  RecordPropertyCases(cases);
  fs::remove_all(dir);
}

// --jobs N replays up to N traces at once and prints what one at a time prints: the same stdout, stderr and exit
// status, text and --json alike, whichever trace finishes first and wherever the command stops (a mismatch, a
// malformed or truncated trace, a file that is not there).
TEST(ReplayTracesProps, JobsPrintWhatOneAtATimePrints) {
  const fs::path dir = fs::path(testing::TempDir()) / "replay_jobs_props";
  fs::create_directories(dir);
  const int64_t cases = CheckProperty(
      CurrentTestId(),
      [&] {
        const int k = *rc::gen::inRange(1, 7);
        std::vector<std::string> args = {"replay"};
        for (int i = 0; i < k; ++i) {
          const std::string path = (dir / ("t" + std::to_string(i) + ".jsonl")).string();
          if (*rc::gen::inRange(0, 12) == 0) {  // not there: the command ends at it
            fs::remove(path);
          } else {
            std::ofstream(path, std::ios::binary) << ArbitraryTraceText();
          }
          args.push_back(path);
        }
        if (*rc::gen::arbitrary<bool>()) args.push_back("--keep-going");
        if (*rc::gen::arbitrary<bool>()) args.push_back("--json");
        const Output one = Kvshard(args);
        const int jobs = *rc::gen::inRange(2, 6);
        args.insert(args.end(), {"--jobs", std::to_string(jobs)});
        const Output several = Kvshard(args);
        RC_TAG(k, jobs, one.exit_code);
        RC_ASSERT(several.exit_code == one.exit_code);
        RC_ASSERT(several.out == one.out);
        RC_ASSERT(several.err == one.err);
      },
      FractionOfCases(2, 50));
  RecordPropertyCases(cases);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvshard::props

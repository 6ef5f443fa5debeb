// Runs the bad-input table of docs/RELIABILITY.md: every row of testdata/bad_inputs/cases.tsv gives exactly its
// exit code and its one error line, and the doc's table is the one rendered from the file (regenerate it with
// `KVSHARD_UPDATE_DOCS=1 bazel run //cli:bad_inputs_test`).
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

constexpr char kCases[] = "testdata/bad_inputs/cases.tsv";
constexpr char kDoc[] = "docs/RELIABILITY.md";
constexpr char kBegin[] =
    "<!-- bad-inputs table: rendered from testdata/bad_inputs/cases.tsv by cli/bad_inputs_test.cc; edit the "
    "file, then run KVSHARD_UPDATE_DOCS=1 bazel run //cli:bad_inputs_test -->\n";
constexpr char kEnd[] = "<!-- end of the bad-inputs table -->\n";

// One row: what is hostile, the kvshard arguments, the file standard input reads ("" for none; a directory is
// opened as the process's standard input), the exit code and the message after "kvshard: error: ".
struct Row {
  std::string input, args, stdin_file;
  int exit_code = 0;
  std::string message;
};

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
    fields.push_back(line.substr(start, tab - start));
  }
  fields.push_back(line.substr(start));
  return fields;
}

// The rows of cases.tsv ('#' lines and blank lines skipped); a malformed line is a test failure.
std::vector<Row> ReadRows() {
  std::istringstream lines(ReadRunfile(kCases));
  std::vector<Row> rows;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = SplitTabs(line);
    EXPECT_EQ(f.size(), 5u) << "want 5 tab-separated fields: " << line;
    if (f.size() != 5) continue;
    rows.push_back({f[0], f[1], f[2], std::atoi(f[3].c_str()), f[4]});
  }
  return rows;
}

// A word of the args column with each \xNN turned into its byte (bytes that are not UTF-8 or are control bytes).
std::string Unescape(const std::string& word) {
  std::string out;
  for (size_t i = 0; i < word.size(); ++i) {
    const auto hex = [&](size_t j) { return j < word.size() && std::isxdigit(static_cast<unsigned char>(word[j])); };
    if (word.compare(i, 2, "\\x") == 0 && hex(i + 2) && hex(i + 3)) {
      out += static_cast<char>(std::stoi(word.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += word[i];
    }
  }
  return out;
}

// Runs `kvshard <args>` with the process's standard input (descriptor 0, std::cin) opened on `path` (a directory:
// what `kvshard ... < dir` gets from the shell), then puts the test's own standard input back.
CliResult RunCliWithStandardInput(const std::vector<std::string>& args, const std::string& path) {
  CliResult r;
  const int fd = ::open(path.c_str(), O_RDONLY);
  const int saved = ::dup(0);
  if (fd < 0 || saved < 0 || ::dup2(fd, 0) < 0) {
    ADD_FAILURE() << "cannot open " << path << " as standard input";
    return r;
  }
  ::close(fd);
  std::ostringstream out, err;
  r.exit_code = Dispatch(args, std::cin, out, err);
  r.out = out.str();
  r.err = err.str();
  ::dup2(saved, 0);
  ::close(saved);
  std::clearerr(stdin);
  std::cin.clear();
  return r;
}

// A table cell: '|' escaped for Markdown.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// The Markdown table of the rows, between the markers.
std::string RenderTable(const std::vector<Row>& rows) {
  std::ostringstream out;
  out << kBegin
      << "| # | Hostile input | Command | Exit | Message (after `kvshard: error: `) |\n|---|---|---|---|---|\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::string command = "kvshard" + (r.args.empty() ? "" : " " + r.args);
    if (!r.stdin_file.empty()) command += " < " + r.stdin_file;
    out << "| " << i + 1 << " | " << Cell(r.input) << " | `" << Cell(command) << "` | " << r.exit_code << " | `"
        << Cell(r.message) << "` |\n";
  }
  out << kEnd;
  return out.str();
}

TEST(BadInputsTest, EveryRowGivesItsExitCodeAndExactlyItsMessage) {
  const std::vector<Row> rows = ReadRows();
  std::set<std::string> commands;
  std::set<std::string> seen;
  for (const Row& r : rows) {
    std::vector<std::string> args = Words(r.args);
    for (std::string& a : args) a = Unescape(a);
    const bool directory = !r.stdin_file.empty() && std::filesystem::is_directory(RunfilePath(r.stdin_file));
    const CliResult got = directory ? RunCliWithStandardInput(args, RunfilePath(r.stdin_file))
                                    : RunCli(args, r.stdin_file.empty() ? "" : ReadRunfile(r.stdin_file));
    EXPECT_EQ(got.exit_code, r.exit_code) << r.args << ": " << got.err;
    EXPECT_EQ(got.out, "") << r.args;
    EXPECT_EQ(got.err, "kvshard: error: " + r.message + "\n") << r.args;
    EXPECT_TRUE(seen.insert(r.args + "\t" + r.stdin_file).second) << "row given twice: " << r.args;
    if (!args.empty()) commands.insert(args[0]);
  }
  EXPECT_GE(rows.size(), 60u);
  // Every command of the table has rows (and the top-level usage errors: no command, an unknown one).
  for (const Command& c : CommandTable()) EXPECT_TRUE(commands.count(c.name)) << "no row for " << c.name;
}

TEST(BadInputsTest, TheDocShowsTheTable) {
  const std::string table = RenderTable(ReadRows());
  const char* update = std::getenv("KVSHARD_UPDATE_DOCS");
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string path = update && workspace ? std::string(workspace) + "/" + kDoc : RunfilePath(kDoc);
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string doc = buf.str();
  const size_t begin = doc.find(kBegin), end = doc.find(kEnd);
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos && begin < end)
      << kDoc << " lacks the table's markers:\n"
      << kBegin << kEnd;
  const std::string shown = doc.substr(begin, end + std::string(kEnd).size() - begin);
  if (update && workspace && shown != table) {
    doc.replace(begin, shown.size(), table);
    std::ofstream(path) << doc;
    std::cout << "rewrote the table in " << path << "\n";
    return;
  }
  EXPECT_EQ(shown, table) << kDoc << " is out of date: run KVSHARD_UPDATE_DOCS=1 bazel run //cli:bad_inputs_test";
}

}  // namespace
}  // namespace kvshard::cli

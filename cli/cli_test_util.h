// Test helpers for the command tests: run `kvshard <args>` in process, capture exit status and output, and
// check the one-line error contract.
#ifndef KVSHARD_CLI_CLI_TEST_UTIL_H_
#define KVSHARD_CLI_CLI_TEST_UTIL_H_

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/json.h"
#include "gtest/gtest.h"

namespace kvshard::cli {

// What one in-process `kvshard` run produced.
struct CliResult {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

// Runs `kvshard <args...>` through the dispatcher; `stdin_text` is what "-" reads.
inline CliResult RunCli(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  CliResult r;
  r.exit_code = Dispatch(args, in, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// Runs one command (not from the table) with its arguments through the shared run wrapper.
inline CliResult RunCommandForTest(const Command& command, const std::vector<std::string>& args,
                                   const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  CliResult r;
  r.exit_code = RunCommand(command, args, in, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// Splits a command line at spaces ("split --cp-size 2" -> {"split", "--cp-size", "2"}); '' is an empty word.
inline std::vector<std::string> Words(const std::string& line) {
  std::istringstream is(line);
  std::vector<std::string> words;
  for (std::string w; is >> w;) words.push_back(w == "''" ? "" : w);
  return words;
}

// The lines of `text` (without their newlines).
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `lines` joined, each ended by a newline.
inline std::string Joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

// Path of a workspace file (e.g. "testdata/alloc/x.json") in the test's runfiles.
inline std::string RunfilePath(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return srcdir ? std::string(srcdir) + "/kvshard/" + path : path;
}

// The whole text of a runfile ("" when it cannot be read; the caller's comparison then fails).
inline std::string ReadRunfile(const std::string& path) {
  std::ifstream in(RunfilePath(path));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Runs every line of testdata/cp/golden_commands.txt ("golden file|kvshard arguments") whose arguments start with
// `command`; every key of the SGLang-made golden must equal the CLI's (the CLI may add keys). Returns the count.
// `extra` arguments are appended to every command (e.g. {"--impl", "fast"}).
inline int CheckCpGoldens(const std::string& command, const std::vector<std::string>& extra = {}) {
  std::istringstream lines(ReadRunfile("testdata/cp/golden_commands.txt"));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t bar = line.find('|');
    if (line.empty() || line[0] == '#' || bar == std::string::npos) continue;
    std::vector<std::string> args = Words(line.substr(bar + 1));
    if (args.empty() || args[0] != command) continue;
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << line << ": " << r.err;
    const Json want = Json::parse(ReadRunfile("testdata/cp/" + line.substr(0, bar)));
    const Json got = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    for (const auto& [key, value] : want.items()) {
      EXPECT_EQ(got.contains(key) ? got[key] : Json("<missing>"), value) << line << ": key " << key;
    }
    ++checked;
  }
  return checked;
}

// The error contract: exit `code`, nothing on stdout, exactly one stderr line "kvshard: error: <text>..."
// (`text` is a prefix of what follows "kvshard: error: ").
inline ::testing::AssertionResult FailsWith(const CliResult& r, int code, const std::string& text) {
  const std::string want = "kvshard: error: " + text;
  if (r.exit_code == code && r.out.empty() && std::count(r.err.begin(), r.err.end(), '\n') == 1 &&
      r.err.rfind(want, 0) == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "want exit " << code << " and one line starting '" << want << "'; got exit "
                                       << r.exit_code << ", stdout '" << r.out << "', stderr '" << r.err << "'";
}

// The JSON a successful `kvshard <line>` printed (a test failure, and null, when it failed).
inline Json JsonOf(const std::string& line, const std::string& stdin_text = "") {
  const CliResult r = RunCli(Words(line), stdin_text);
  EXPECT_EQ(r.exit_code, 0) << line << ": " << r.err;
  return Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

// A bad command line, the start of its one error line (after "kvshard: error: ") and its exit status.
struct BadInput {
  std::string line;
  std::string error;
  int exit_code = 2;
};

// Checks FailsWith for every case (`stdin_text` is what "-" reads); with `command`, the lines are that command's
// arguments, run through RunCommandForTest.
inline void ExpectFailures(const std::vector<BadInput>& cases, const std::string& stdin_text = "",
                           const Command* command = nullptr) {
  for (const BadInput& c : cases) {
    const std::vector<std::string> args = Words(c.line);
    const CliResult r = command ? RunCommandForTest(*command, args, stdin_text) : RunCli(args, stdin_text);
    EXPECT_TRUE(FailsWith(r, c.exit_code, c.error)) << c.line;
  }
}

// `line --backend gpu` and `--backend diff` print what the reference prints where a GPU is usable, and
// otherwise exit 3 with one line naming the backend; a binary built with CUDA asked the driver for two hardware queues.
inline void ExpectGpuBackendsMatchReference(const std::string& line) {
  const std::string reference = RunCli(Words(line)).out;
  for (const std::string backend : {"gpu", "diff"}) {
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    const CliResult r = RunCli(Words(line + " --backend " + backend));
    if (GpuBuilt()) {  // the command asked the driver for two hardware queues a context (BackendFlag)
      const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
      EXPECT_STREQ(queues == nullptr ? "<unset>" : queues, "2") << line << " --backend " << backend;
    }
    if (GpuAvailable("--backend").ok()) {
      EXPECT_EQ(r.exit_code, 0) << line << ": " << r.err;
      EXPECT_EQ(r.out, reference) << line << " --backend " << backend;
    } else {
      EXPECT_TRUE(FailsWith(r, 3, "--backend " + backend + ": ")) << line;
    }
  }
}

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_CLI_TEST_UTIL_H_

// Tests of the top-level dispatcher: --help, --version, unknown and missing commands, every command's help.
#include "cli/commands.h"

#include "cli/cli_test_util.h"
#include "cli/cli_util.h"
#include "gtest/gtest.h"

#include <sstream>
#include <string>

namespace kvshard::cli {
namespace {

TEST(FailTest, ControlBytesAreEscapedOntoOneLine) {
  std::ostringstream err;
  EXPECT_EQ(Fail(InvalidArgument("k: '", std::string("a\0b\nc\td\re", 9), "' \xe2\x9c\x93"), err), 2);
  EXPECT_EQ(err.str(), "kvshard: error: k: 'a\\x00b\\nc\\td\\re' \xe2\x9c\x93\n");
}

TEST(FailTest, BytesOutsideWellFormedUtf8AreEscaped) {
  const auto shown = [](const std::string& text) {
    std::ostringstream err;
    Fail(InvalidArgument(text), err);
    return err.str().substr(std::string("kvshard: error: ").size());
  };
  // Well-formed: 2, 3 and 4 bytes, the edges of each range (U+0080, U+07FF, U+0800, U+D7FF, U+E000, U+10FFFF).
  for (const std::string ok : {"\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
                               "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xe2\x80\x94 dash"}) {
    EXPECT_EQ(shown(ok), ok + "\n");
  }
  EXPECT_EQ(shown("1\xbe--cp-rank"), "1\\xbe--cp-rank\n");                 // a lone continuation byte
  EXPECT_EQ(shown("\xc0\x80"), "\\xc0\\x80\n");                            // an overlong NUL
  EXPECT_EQ(shown("\xe0\x9f\xbf"), "\\xe0\\x9f\\xbf\n");                   // an overlong 3-byte form
  EXPECT_EQ(shown("\xed\xa0\x80"), "\\xed\\xa0\\x80\n");                   // a surrogate (U+D800)
  EXPECT_EQ(shown("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80\n");          // past U+10FFFF
  EXPECT_EQ(shown("\xf5\xff"), "\\xf5\\xff\n");                            // never a lead byte
  EXPECT_EQ(shown("a\xe2\x80"), "a\\xe2\\x80\n");                          // cut short at the end
  EXPECT_EQ(shown("\xe2\x80x\xe2\x80\x94"), "\\xe2\\x80x\xe2\x80\x94\n");  // cut short, then well-formed
}

TEST(DispatchTest, VersionPrintsVersionAndBuildMode) {
  CliResult r = RunCli({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.err.empty());
  EXPECT_EQ(r.out, std::string("kvshard ") + kVersion + "\nGPU backend: " + GpuBuildText() + "\n");
  EXPECT_NE(r.out.find(GpuBuilt() ? "GPU backend: built" : "GPU backend: not built"), std::string::npos);
}

TEST(DispatchTest, HelpListsEveryCommandWithItsSynopsis) {
  for (const char* flag : {"--help", "-h", "help"}) {
    CliResult r = RunCli({flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_TRUE(r.err.empty());
    for (const Command& c : CommandTable()) {
      EXPECT_NE(r.out.find("  " + c.name + " "), std::string::npos) << c.name;
      EXPECT_NE(r.out.find(c.summary), std::string::npos) << c.name;
      EXPECT_NE(r.out.find(UsageLines(c, "      ")), std::string::npos) << c.name;
    }
    EXPECT_NE(r.out.find("exit status: 0 ok, 1 verification mismatch, 2 bad input"), std::string::npos);
  }
}

TEST(DispatchTest, EveryUsageLineIsAFormOrItsContinuation) {
  // A synopsis line that starts with spaces continues the form above (split's long forms): it is aligned under that
  // form's flags, and never printed as a form of its own ("kvshard split   [--max-memory BYTES]").
  for (const Command& c : CommandTable()) {
    const std::string lead = "kvshard " + c.name + " ";
    std::istringstream lines(UsageLines(c, ""));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(lead, 0) == 0) {
        EXPECT_NE(line[lead.size()], ' ') << "a continuation printed as a form: " << line;
      } else {
        EXPECT_EQ(line.rfind(std::string(lead.size(), ' ') + "[", 0), 0u) << "a continuation not aligned: " << line;
      }
    }
  }
  EXPECT_NE(UsageLines(SplitCommand(), "")
                .find("\n" + std::string(std::string("kvshard split ").size(), ' ') + "[--max-memory BYTES]"),
            std::string::npos);
}

TEST(DispatchTest, MissingAndUnknownCommandsAreUsageErrors) {
  EXPECT_TRUE(FailsWith(RunCli({}), 2, "command: required"));
  EXPECT_TRUE(FailsWith(RunCli({"nope"}), 2, "unknown command 'nope'"));
  EXPECT_TRUE(FailsWith(RunCli({"--bogus"}), 2, "unknown command '--bogus'"));
}

TEST(DispatchTest, EveryCommandHasTypedHelp) {
  ASSERT_EQ(CommandTable().size(), 10u);
  for (const Command& c : CommandTable()) {
    CliResult r = RunCli({c.name, "--help"});
    EXPECT_EQ(r.exit_code, 0) << c.name;
    EXPECT_TRUE(r.err.empty()) << c.name;
    EXPECT_EQ(r.out.rfind("usage: kvshard " + c.name + " ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(c.name + " flags:"), std::string::npos) << r.out;
    if (c.name != "gen") {  // gen writes a trace
      EXPECT_NE(r.out.find("--json "), std::string::npos) << r.out;
    }
    EXPECT_EQ(r.out.find(" arg"), std::string::npos) << "untyped flag in:\n" << r.out;
  }
}

TEST(DispatchTest, EveryCommandRejectsAnUnknownFlagInOneLine) {
  for (const Command& c : CommandTable()) {
    EXPECT_TRUE(FailsWith(RunCli({c.name, "--bogus"}), 2, c.name + ": unrecognised option '--bogus'"));
  }
}

}  // namespace
}  // namespace kvshard::cli

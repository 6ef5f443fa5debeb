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

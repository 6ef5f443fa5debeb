// Tests of the typed flag values and the shared run wrapper, through a small test command.
#include "cli/flags.h"

#include <stdexcept>

#include "cli/command.h"
#include "cli/cli_test_util.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

void Declare(po::options_description& flags) {
  flags.add_options()("count", Int(1, 10)->default_value(3), "a bounded integer")("any", Int(), "an unbounded integer")(
      "size", Positive(), "a positive integer")("offset", NonNegative(), "a non-negative integer")(
      "bytes", Int(0, int64_t{1} << 34), "a large bound, shown as a power of two")(
      "list", IntList(), "a non-empty list")("maybe-empty", IntList()->AllowEmpty(), "a list that may be empty")(
      "mode", Choice({"in-seq", "round-robin"}, {{"round_robin", "round-robin"}})->default_value("in-seq"), "a choice")(
      "ops", ChoiceList({"all", "gather-rows"}, {{"gather_rows", "gather-rows"}}), "a list of choices")(
      "file", File(), "a file; - reads standard input")("new-name", Int(), "a flag with an old spelling")(
      "throw", po::bool_switch(), "make Run throw")("flag", po::bool_switch(), "a switch");
}

// Prints every given flag as name=value, one a line.
Status Echo(const Flags& flags, std::ostream& out) {
  if (flags.Bool("throw")) throw std::runtime_error("boom");
  if (flags.Has("file")) {
    KVSHARD_ASSIGN_OR_RETURN(std::string text, flags.ReadText("file"));
    out << "file=" << text << "\n";
  }
  out << "count=" << flags.Int("count") << " mode=" << flags.String("mode") << " flag=" << flags.Bool("flag") << "\n";
  for (const char* name : {"any", "size", "offset", "bytes", "new-name"}) {
    if (flags.Has(name)) out << name << "=" << flags.Int(name) << "\n";
  }
  for (const char* name : {"list", "maybe-empty"}) {
    if (flags.Has(name)) out << name << "=" << flags.IntList(name).size() << "\n";
  }
  if (flags.Has("ops")) {
    for (const std::string& op : flags.StringList("ops")) out << "op=" << op << "\n";
  }
  if (flags.Given("count")) out << "count given\n";
  return Status::Ok();
}

const Command kTest = {"t", "a test command", "[--count INT]", Declare, Echo, {{"old-name", "new-name"}}};

CliResult RunT(const std::string& line, const std::string& stdin_text = "") {
  return RunCommandForTest(kTest, Words(line), stdin_text);
}

// ExpectFailures for the test command (lines without the command name).
void ExpectTestFailures(const std::vector<BadInput>& cases) { ExpectFailures(cases, "", &kTest); }

TEST(FlagsTest, DefaultsAndTypedValues) {
  CliResult r = RunT("--any -7 --size 5 --offset 0 --list 1,2,3 --flag");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "count=3 mode=in-seq flag=1\nany=-7\nsize=5\noffset=0\nlist=3\n");
  EXPECT_EQ(RunT("--count=10 --any +4").out, "count=10 mode=in-seq flag=0\nany=4\ncount given\n");
}

TEST(FlagsTest, IntegersAreStrict) {
  ExpectTestFailures({
      {"--any 12abc", "--any: not an integer: '12abc'"},
      {"--any 1.5", "--any: not an integer: '1.5'"},
      {"--any ''", "--any: not an integer: ''"},
      {"--any 99999999999999999999", "--any: integer out of range"},
      {"--any -99999999999999999999", "--any: integer out of range"},
  });
}

TEST(FlagsTest, RangesNameTheFlag) {
  ExpectTestFailures({
      {"--count 0", "--count: must be in [1, 10], got 0"},
      {"--count 11", "--count: must be in [1, 10], got 11"},
      {"--size 0", "--size: must be positive, got 0"},
      {"--offset -1", "--offset: must be non-negative, got -1"},
      {"--bytes 17179869185", "--bytes: must be in [0, 2^34], got 17179869185"},
  });
  EXPECT_EQ(RunT("--bytes 17179869184").exit_code, 0);
}

TEST(FlagsTest, Lists) {
  ExpectTestFailures({
      {"--list 1,x", "--list[1]: not an integer: 'x'"},
      {"--list 1,2,", "--list: trailing comma in '1,2,'"},
      {"--list 1,,2", "--list[1]: not an integer: ''"},
      {"--list 5,99999999999999999999", "--list[1]: integer out of range"},
      {"--list ''", "--list: must list at least one value"},
      {"--maybe-empty 1,", "--maybe-empty: trailing comma"},
  });
  CliResult empty = RunT("--maybe-empty ''");
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_NE(empty.out.find("maybe-empty=0\n"), std::string::npos);
}

TEST(FlagsTest, ChoicesAndOldSpellings) {
  EXPECT_NE(RunT("--mode round-robin").out.find("mode=round-robin"), std::string::npos);
  EXPECT_NE(RunT("--mode round_robin").out.find("mode=round-robin"), std::string::npos);
  EXPECT_EQ(RunT("--ops all,gather_rows").out, "count=3 mode=in-seq flag=0\nop=all\nop=gather-rows\n");
  ExpectTestFailures({
      {"--mode zig", "--mode: must be in-seq or round-robin, got 'zig'"},
      {"--ops all,copy", "--ops[1]: must be all or gather-rows, got 'copy'"},
      {"--ops all,", "--ops: trailing comma"},
  });
}

TEST(FlagsTest, HiddenAliasKeepsWorkingAndErrorsUseTheTypedSpelling) {
  EXPECT_NE(RunT("--old-name 5").out.find("new-name=5"), std::string::npos);
  EXPECT_NE(RunT("--old-name=6").out.find("new-name=6"), std::string::npos);
  EXPECT_EQ(RunT("--help").out.find("old-name"), std::string::npos);
  ExpectTestFailures({
      {"--old-name x", "--old-name: not an integer: 'x'"},
      {"--new-name x", "--new-name: not an integer: 'x'"},
  });
}

TEST(FlagsTest, UsageErrorsAreOneLine) {
  ExpectTestFailures({
      {"--count 2 --count 3", "--count: given more than once"},
      {"--count", "--count: needs a value"},
      {"--count=", "--count: needs a value"},
      {"--bogus 1", "t: unrecognised option '--bogus'"},
      {"--coun 1", "t: unrecognised option '--coun'"},  // no prefix guessing
      {"--throw", "t: boom", 3},
  });
}

TEST(FlagsTest, FilesAndStandardInput) {
  CliResult r = RunT("--file -", "hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("file=hello\n"), std::string::npos);
  ExpectTestFailures({{"--file /does/not/exist", "--file: /does/not/exist: cannot open file"}});
}

TEST(FlagsTest, HelpShowsTypesDefaultsAndRanges) {
  CliResult r = RunT("--count x --help");  // --help wins over a bad value
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.err.empty());
  for (const char* want :
       {"usage: kvshard t [--count INT]", "--count INT in [1, 10] (=3)", "--any INT ", "--size INT>=1",
        "--offset INT>=0", "--bytes INT in [0, 2^34]", "--list INT,...", "--mode in-seq|round-robin (=in-seq)",
        "--ops all|gather-rows,...", "--file FILE", "a test command"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " not in:\n" << r.out;
  }
}

TEST(FlagsTest, JoinChoices) {
  EXPECT_EQ(JoinChoices({"a"}), "a");
  EXPECT_EQ(JoinChoices({"a", "b", "c"}), "a, b or c");
  EXPECT_EQ(JoinChoices({"a", "b"}, " and "), "a and b");
}

}  // namespace
}  // namespace kvshard::cli

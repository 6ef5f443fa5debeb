// Tests of `kvshard place`: JSON and table output, --locs-file (and stdin), the --rank alias, errors, backends.
#include "cli/cli_test_util.h"
#include "core/json.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

constexpr char kSlots[] = "0,16,17,63,64,80,95,359,1040";  // testdata/placement/token_slots.txt

TEST(PlaceCmdTest, JsonOfTheWorkedExample) {
  const Json j = JsonOf("place --shard-size 4 --page-size 16 --shard-rank 1 --locs 0,17,80,359 --json");
  EXPECT_EQ(j["owner"], Json({0, 1, 1, 2}));
  EXPECT_EQ(j["local_index"], Json({0, 1, 16, 87}));
  EXPECT_EQ(j["local_mask"], Json({false, true, true, false}));
  EXPECT_EQ(j["filter_local"], Json({1, 16}));
}

TEST(PlaceCmdTest, Table) {
  CliResult r = RunCli(Words("place --shard-rank 1 --locs 0,17,80"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "shard_size=4 page_size=16 rank=1\n"
            "             loc   owner     local_index   local\n"
            "               0       0               0       -\n"
            "              17       1               1     yes\n"
            "              80       1              16     yes\n"
            "filter_local(rank 1): [1,16]\n");
}

TEST(PlaceCmdTest, OldRankSpellingStillWorks) {
  EXPECT_EQ(JsonOf("place --rank 1 --locs 0,17,80 --json"), JsonOf("place --shard-rank 1 --locs 0,17,80 --json"));
  EXPECT_EQ(JsonOf("place --rank=2 --locs 33 --json"), JsonOf("place --shard-rank 2 --locs 33 --json"));
  ExpectFailures({
      {"place --rank 9 --locs 1", "--rank: must be in [0, 4), got 9"},
      {"place --shard-rank 9 --locs 1", "--shard-rank: must be in [0, 4), got 9"},
      {"place --rank -1 --locs 1", "--rank: must be non-negative, got -1"},
  });
}

TEST(PlaceCmdTest, LocsFileAndStandardInput) {
  const std::string file = RunfilePath("testdata/placement/token_slots.txt");
  const Json want = JsonOf(std::string("place --json --locs ") + kSlots);
  EXPECT_EQ(JsonOf("place --json --locs-file " + file), want);
  EXPECT_EQ(JsonOf("place --json --locs-file -", ReadRunfile("testdata/placement/token_slots.txt")), want);
  ExpectFailures({{"place --locs-file -", "--locs-file: must list at least one value"}}, " \n");
  ExpectFailures({{"place --locs-file -", "--locs-file[1]: not an integer: 'x'"}}, "1 x");
  ExpectFailures({{"place --locs-file -", "--locs-file[1]: must be in [0, 2^48), got -3"}}, "1\n-3\n");
  ExpectFailures({
      {"place --locs-file /no/such/file", "--locs-file: /no/such/file: cannot open file"},
      {"place --locs 1 --locs-file " + file, "--locs: give --locs or --locs-file, not both"},
  });
}

TEST(PlaceCmdTest, StrictInputs) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  ExpectFailures({
      // A directory used to read as an empty list (exit 0).
      {"place --locs-file " + dir, "--locs-file: " + dir + ": is a directory, not a file"},
      {"place --locs-file /dev/zero", "--locs-file: /dev/zero: is a device, not a regular file"},
      {"place --shard-size 18446744073709551615 --locs 1",
       "--shard-size: integer out of range: '18446744073709551615' (must be in [1, 65536])"},
      {"place --locs 18446744073709551615",
       "--locs[0]: integer out of range: '18446744073709551615' (an int64 is in [-9223372036854775808, "
       "9223372036854775807])"},
  });
  // Control bytes of the input are escaped: one line, no raw NUL.
  const CliResult r = RunCli({"place", "--locs", std::string("1,a\0b\nc", 7)});
  EXPECT_TRUE(FailsWith(r, 2, "--locs[1]: not an integer: 'a\\x00b\\nc'")) << r.err;
  EXPECT_EQ(r.err.find('\0'), std::string::npos);
  ExpectFailures({{"place --locs-file -", "--locs-file[1]: not an integer: 'x\\x01\\x7fy\xc3\xa9'"}},
                 std::string("1 x\1\x7fy\xc3\xa9"));  // UTF-8 (é) passes through
}

TEST(PlaceCmdTest, BadInputIsOneLineNamingTheFlag) {
  ExpectFailures({
      {"place --shard-size 0 --locs 1", "--shard-size: must be in [1, 65536], got 0"},
      {"place --shard-size 12abc --locs 1", "--shard-size: not an integer: '12abc'"},
      {"place --page-size -1 --locs 1", "--page-size: must be in [1, 2^20], got -1"},
      {"place --locs 1,x", "--locs[1]: not an integer: 'x'"},
      {"place --locs 1,-3", "--locs[1]: must be in [0, 2^48), got -3"},
      {"place --locs 99999999999999999999", "--locs[0]: integer out of range"},
      {"place --locs 9223372036854775807", "--locs[0]: must be in [0, 2^48)"},
      {"place --locs 1,2,", "--locs: trailing comma in '1,2,'"},
      {"place --locs ''", "--locs: must list at least one value"},
      {"place", "--locs: required"},
      {"place --locs 1 --bogus", "place: unrecognised option '--bogus'"},
      {"place --locs 1 --backend x", "--backend: must be ref, gpu or diff, got 'x'"},
      {"place --shard-rank 9 --locs 1 --backend diff", "--shard-rank: "},  // bad input before any GPU work
  });
}

TEST(PlaceCmdTest, GpuBackends) {
  ExpectGpuBackendsMatchReference(std::string("place --shard-rank 1 --json --locs ") + kSlots);
}

}  // namespace
}  // namespace kvshard::cli

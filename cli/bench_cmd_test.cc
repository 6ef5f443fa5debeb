// Tests of `kvshard bench`'s argument handling (bad input is exit 2 on any machine) and of its exit 3 with one
// clear line where no GPU can run it (the benchmarks themselves need a GPU: see docs/gpu.md).
#include "cli/cli_test_util.h"
#include "cli/cli_util.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

TEST(BenchCmdTest, HelpShowsKebabCaseOpsAndTypedRanges) {
  CliResult r = RunCli(Words("bench --help"));
  ASSERT_EQ(r.exit_code, 0);
  for (const char* want : {"--op OP,... (=all)", "gather-rows", "owner-write", "stage-chunk", "prefix-gather",
                           "--min-bytes INT in [1, 2^34] (=1048576)", "--max-bytes INT in [1, 2^34] (=268435456)",
                           "--row-bytes INT in [4, 2^20] (=1152)", "--batch-size INT in [1, 512] (=256)", "--trace"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " not in:\n" << r.out;
  }
  EXPECT_EQ(r.out.find("gather_rows"), std::string::npos);
}

TEST(BenchCmdTest, BadFlagsAreExit2BeforeAnyGpuWork) {
  ExpectFailures({
      {"bench --op plan,copy", "--op[1]: must be all, plan, rerange, gather-rows, owner-write, stage-chunk, allgather"},
      {"bench --op plan,", "--op: trailing comma in 'plan,'"},
      {"bench --op ''", "--op: must list at least one value"},
      {"bench --min-bytes 0", "--min-bytes: must be in [1, 2^34], got 0"},
      {"bench --max-bytes 17179869185", "--max-bytes: must be in [1, 2^34], got 17179869185"},
      {"bench --min-bytes 4096 --max-bytes 1024", "--max-bytes: must be >= --min-bytes (4096), got 1024"},
      {"bench --factor 1", "--factor: must be in [2, 1024], got 1"},
      {"bench --factor 1099511627776", "--factor: must be in [2, 1024], got 1099511627776"},
      {"bench --row-bytes 1150", "--row-bytes: must be a multiple of 4, got 1150"},
      {"bench --gpus -1", "--gpus: must be in [0, 64], got -1"},
      {"bench --iters 0", "--iters: must be in [1, 100000], got 0"},
      {"bench --warmup 5x", "--warmup: not an integer: '5x'"},
      {"bench --layers 99999999999999999999", "--layers: integer out of range"},
      {"bench --compute-us -5", "--compute-us: must be in [0, 1000000], got -5"},
      {"bench --compute-blocks 65536", "--compute-blocks: must be in [0, 65535], got 65536"},
      {"bench --batch-size 513", "--batch-size: must be in [1, 512], got 513"},
      {"bench --batch 0", "--batch: must be in [1, 512], got 0"},  // the old spelling, named as typed
      {"bench --json --json", "--json: given more than once"},
  });
}

TEST(BenchCmdTest, WithoutAUsableGpuExits3WithOneLine) {
  if (GpuAvailable("bench").ok()) GTEST_SKIP() << "a GPU is visible: bench would run the benchmarks";
  const std::string why = GpuBuilt() ? "bench: no CUDA device visible (" : "bench: GPU support not built";
  ExpectFailures({
      {"bench", why, 3},
      // Valid flags, old spellings included, get as far as the GPU check.
      {"bench --op gather_rows,prefix-gather --batch 8 --min-bytes 1024 --max-bytes 4096 --json", why, 3},
  });
}

}  // namespace
}  // namespace kvshard::cli

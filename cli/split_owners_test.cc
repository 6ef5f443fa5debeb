// Tests of `kvshard split --mode owners`: the page compute owners and one rank's direct-write locs of the
// docs/split-plans.md worked example, and the direct-write reason tags as exit-2 errors naming the flag.
#include "cli/cli_test_util.h"
#include "core/json.h"
#include "gtest/gtest.h"

namespace kvshard::cli {
namespace {

constexpr char kOwners[] =
    "split --mode owners --cp-size 2 --cp-rank 1 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8";
// Extent pages from their compute owner's class: request 0 pages 2,3; request 1 pages 4,6,8,5,7,9,11,13,10,12;
// request 2 page 14 (out_cache_loc = page * 4 + offset for every token).
std::string OwnerLocs() {
  const std::vector<std::pair<std::vector<int>, int>> reqs = {
      {{2, 3}, 5}, {{4, 6, 8, 5, 7, 9, 11, 13, 10, 12}, 37}, {{14}, 3}};
  std::string s;
  for (const auto& [pages, extend] : reqs) {
    for (int t = 0; t < extend; ++t) s += (s.empty() ? "" : ",") + std::to_string(pages[t / 4] * 4 + t % 4);
  }
  return s;
}

TEST(SplitOwnersTest, OwnersAndDirectWriteLocsJson) {
  const Json j = JsonOf(std::string(kOwners) + " --json --out-cache-loc " + OwnerLocs());
  EXPECT_EQ(j["page_owner_plan"], Json::parse("[0,1,0,0,0,1,1,1,1,1,0,0,0]"));
  EXPECT_EQ(j["request_page_compute_owners"][1], Json::parse("[0,0,0,1,1,1,1,1,0,0]"));
  EXPECT_EQ(j["cp_local_out_cache_loc"],
            Json::parse("[12,20,21,22,23,28,29,30,31,36,37,38,39,44,45,46,47,52,53,54,55]"));
  EXPECT_EQ(j["cp_local_physical_out_cache_loc"],
            Json::parse("[4,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27]"));
  EXPECT_FALSE(JsonOf(std::string(kOwners) + " --json").contains("cp_local_out_cache_loc"));
}

TEST(SplitOwnersTest, Table) {
  const CliResult r = RunCli(Words(std::string(kOwners) + " --out-cache-loc " + OwnerLocs()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  req 1: pages [4,14) owners [0,0,0,1,1,1,1,1,0,0]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("direct write (cp_rank 1): 21 locs\n"), std::string::npos) << r.out;
}

TEST(SplitOwnersTest, StaticPaddingAndReasonTags) {
  const std::string locs = OwnerLocs();
  EXPECT_EQ(RunCli(Words(std::string(kOwners) + " --out-cache-loc " + locs + ",0,0 --extend-num-tokens 47")).exit_code,
            0);
  // Cyclic pages 4..13 for request 1: page 5 (owner rank 1) is computed by rank 0, page 8 (rank 0) by rank 1.
  std::string cyclic;
  const std::vector<std::pair<std::vector<int>, int>> reqs = {
      {{2, 3}, 5}, {{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, 37}, {{14}, 3}};
  for (const auto& [pages, extend] : reqs) {
    for (int t = 0; t < extend; ++t) cyclic += (cyclic.empty() ? "" : ",") + std::to_string(pages[t / 4] * 4 + t % 4);
  }
  ExpectFailures({
      {std::string(kOwners) + " --out-cache-loc " + locs + ",0",
       "--out-cache-loc: [CP_SHARED_KV_FAIL_FAST][direct_write] reason=batch_split_out_cache_len_mismatch "
       "split_list tokens=45 out_cache_loc tokens=46 static_padded=None"},
      {std::string(kOwners) + " --out-cache-loc " + locs + ",0,0,0 --extend-num-tokens 47",
       "--out-cache-loc: [CP_SHARED_KV_FAIL_FAST][direct_write] reason=batch_split_out_cache_len_mismatch "
       "split_list tokens=45 out_cache_loc tokens=48 static_padded=47"},
      {std::string(kOwners) + " --out-cache-loc " + cyclic,
       "--out-cache-loc: [CP_SHARED_KV_FAIL_FAST][direct_write] reason=local_loc_owner_mismatch local "
       "out_cache_loc contains pages not owned by this rank: cp_rank=1 cp_size=2 page_size=4 (first foreign loc "
       "32: page 8 is owned by rank 0)"},
      {"split --mode owners --cp-size 2 --page-size 4 --extend-lens 5,0",
       "[CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend] "},
      {"split --mode owners --cp-size 2 --page-size 4 --extend-lens 5 --out-cache-loc 1,x",
       "--out-cache-loc[1]: not an integer: 'x'"},
      {"split --mode owners --cp-size 2 --page-size 4 --extend-lens 5 --extend-num-tokens -1",
       "--extend-num-tokens: must be non-negative, got -1"},
      {"split --mode owners --cp-size 2 --page-size 4 --extend-lens 5 --extend-num-tokens 8",
       "--extend-num-tokens: applies only with --out-cache-loc (it bounds that list's padding)"},
      {"split --mode owners --cp-size 2 --page-size 1 --extend-lens 281474976710656",
       "--extend-lens: the page owner plan would need"},
  });
}

}  // namespace
}  // namespace kvshard::cli

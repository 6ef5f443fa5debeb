// JSON readers: round trips and one error per malformed-input class (missing key, wrong type,
// negative or overflowing number, inconsistent lengths, pages out of pool range, the renamed pool key).
#include "core/pool_json.h"

#include <gtest/gtest.h>

namespace kvshard {
namespace {

Json Batch() {
  return Json::parse(R"({"shard_size":4,"page_size":16,"pages_per_rank":32,"max_prefix_tokens":4096,
    "chunk_tokens":512,"requests":[{"prefix_len":16,"seq_len":40,"pages":[22,23,20]}]})");
}

Json Script() {
  return Json::parse(R"({"shard_size":4,"page_size":16,"pages_per_rank":32,"need_sort":false,
    "ops":[{"op":"alloc","prefix_lens":[0],"seq_lens":[122],"rotation_bases":[null],"last_locs":[0]},
           {"op":"free","locs":[176,177]},{"op":"free_group","frees":[[1],[2,3]]}]})");
}

std::string BatchError(const std::function<void(Json&)>& edit) {
  Json j = Batch();
  edit(j);
  auto b = ExtendBatchFromJson(j);
  return b.ok() ? "ok" : b.status().message();
}

std::string ScriptError(const std::function<void(Json&)>& edit) {
  Json j = Script();
  edit(j);
  auto s = AllocScriptFromJson(j);
  return s.ok() ? "ok" : s.status().message();
}

TEST(PoolJsonTest, UnknownKeysAreRejected) {
  EXPECT_EQ(BatchError([](Json& j) { j["shard_sise"] = 4; }), "shard_sise: unknown key");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"][0]["prefix_lens"] = 16; }), "requests[0].prefix_lens: unknown key");
  EXPECT_EQ(ScriptError([](Json& j) { j["need_srot"] = true; }), "need_srot: unknown key");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][0]["locs"] = {1}; }), "ops[0].locs: unknown key");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][1]["frees"] = Json::array(); }), "ops[1].frees: unknown key");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][2]["locs"] = Json::array(); }), "ops[2].locs: unknown key");
  EXPECT_EQ(ScriptError([](Json& j) { j["need_sort"] = true; }), "ok");
}

TEST(PoolJsonTest, BatchRoundTrip) {
  ExtendBatch b = ExtendBatchFromJson(Batch()).value();
  EXPECT_EQ(b.requests[0].pages, (std::vector<int64_t>{22, 23, 20}));
  EXPECT_EQ(ExtendBatchFromJson(ExtendBatchToJson(b)).value(), b);
}

TEST(PoolJsonTest, BatchErrorsNameTheField) {
  EXPECT_EQ(BatchError([](Json& j) { j.erase("chunk_tokens"); }), "chunk_tokens: missing");
  EXPECT_EQ(BatchError([](Json& j) { j["shard_size"] = "4"; }), "shard_size: must be an integer");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"][0]["seq_len"] = 8; }),
            "requests[0].seq_len: must be >= prefix_len (16), got 8");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"][0]["prefix_len"] = -16; }),
            "requests[0].prefix_len: must be in [0, 281474976710655], got -16");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"][0]["seq_len"] = 18446744073709551615ull; }),
            "requests[0].seq_len: out of range (must be in [0, 281474976710655]), got 18446744073709551615");
  EXPECT_EQ(BatchError([](Json& j) {
              j["requests"][0]["pages"] = {22, 23};
            }),
            "requests[0].pages: must list ceil(seq_len/page_size) = 3 pages, got 2");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"][0]["pages"][1] = 132; }),
            "requests[0].pages[1]: page 132 out of pool range [4, 132) (pages < shard_size are reserved)");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"][0]["pages"][2] = 2; }),
            "requests[0].pages[2]: page 2 out of pool range [4, 132) (pages < shard_size are reserved)");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"][0]["pages"][2] = 1.5; }),
            "requests[0].pages[2]: must be an integer");
  EXPECT_EQ(BatchError([](Json& j) { j["requests"] = Json::array({3}); }), "requests[0]: must be a JSON object");
  EXPECT_EQ(BatchError([](Json& j) { j["max_prefix_tokens"] = 100; }),
            "max_prefix_tokens: must be a non-negative multiple of shard_size*page_size (64) below 2^48, got 100");
  EXPECT_EQ(BatchError([](Json& j) { j = Json::array(); }), "input: must be a JSON object");
}

TEST(PoolJsonTest, BatchRejectsThePreRenamePoolKeySayingWhatChanged) {
  const std::string renamed =
      "pool_pages_per_rank: renamed to pages_per_rank, which excludes the trash page "
      "(pages_per_rank = pool_pages_per_rank - 1)";
  EXPECT_EQ(BatchError([](Json& j) {
              j.erase("pages_per_rank");
              j["pool_pages_per_rank"] = 33;
            }),
            renamed);
  EXPECT_EQ(BatchError([](Json& j) { j["pool_pages_per_rank"] = 33; }), renamed);  // both keys: still rejected
  EXPECT_EQ(BatchError([](Json& j) { j.erase("pages_per_rank"); }), "pages_per_rank: missing");
  EXPECT_EQ(BatchError([](Json& j) { j["pages_per_rank"] = -1; }), "pages_per_rank: must be in [0, 16777215], got -1");
  // page_pos has shard_size*(pages_per_rank+2) entries, at most 2^24: for N = 4, pages_per_rank < 2^22 - 1.
  EXPECT_EQ(BatchError([](Json& j) { j["pages_per_rank"] = (1 << 22) - 2; }), "ok");
  EXPECT_EQ(BatchError([](Json& j) { j["pages_per_rank"] = (1 << 22) - 1; }),
            "pages_per_rank: must be in [0, 4194303) so that page_pos, shard_size*(pages_per_rank+2) entries, stays "
            "<= 2^24, got 4194303");
  EXPECT_TRUE(ExtendBatchToJson(ExtendBatchFromJson(Batch()).value()).contains("pages_per_rank"));
  EXPECT_FALSE(ExtendBatchToJson(ExtendBatchFromJson(Batch()).value()).contains("pool_pages_per_rank"));
}

TEST(PoolJsonTest, ScriptRoundTrip) {
  AllocScript s = AllocScriptFromJson(Script()).value();
  ASSERT_EQ(s.ops.size(), 3u);
  EXPECT_EQ(s.ops[0].alloc.rotation_bases, (std::vector<int64_t>{kNewChain}));
  EXPECT_EQ(s.ops[2].frees, (std::vector<std::vector<int64_t>>{{1}, {2, 3}}));
  EXPECT_EQ(AllocScriptFromJson(AllocScriptToJson(s)).value(), s);
}

TEST(PoolJsonTest, ScriptErrorsNameTheField) {
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][0].erase("last_locs"); }), "ops[0].last_locs: missing");
  EXPECT_EQ(ScriptError([](Json& j) {
              j["ops"][0]["seq_lens"] = {122, 5};
            }),
            "ops[0].seq_lens: has 2 entries, prefix_lens has 1");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][0]["rotation_bases"][0] = 4; }),
            "ops[0].rotation_bases[0]: must be null or in [0, 4), got 4");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][0]["rotation_bases"][0] = "x"; }),
            "ops[0].rotation_bases[0]: must be an integer or null");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][1]["locs"][0] = -1; }),
            "ops[1].locs[0]: must be in [0, 281474976710655], got -1");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][2]["frees"][1][0] = "a"; }), "ops[2].frees[1][0]: must be an integer");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][2]["frees"] = {1}; }), "ops[2].frees[0]: must be an array of integers");
  EXPECT_EQ(ScriptError([](Json& j) { j["ops"][1]["op"] = "drop"; }),
            "ops[1].op: must be \"alloc\", \"free\" or \"free_group\", got \"drop\"");
  EXPECT_EQ(ScriptError([](Json& j) { j["need_sort"] = 1; }), "need_sort: must be true or false");
  EXPECT_EQ(ScriptError([](Json& j) { j["pages_per_rank"] = 1 << 23; }),
            "pages_per_rank: must be in [0, 4194303], got 8388608");
}

TEST(PoolJsonTest, PlanAndResultWritersUseSglangNames) {
  GatherPlan p;
  p.block_pages = 1;
  p.mapped_pages = {5};
  p.mapped_scratch_pages = {0};
  p.ranks = {{0, {1}, {2, 3}}};
  EXPECT_EQ(GatherPlanToJson(p).dump(),
            R"({"block_pages":1,"n_prefix_slots":0,"trash_page":0,"chunk_base_page":0,"page_pos":[[5,0]],)"
            R"("ranks":[{"rank":0,"send_local_pages":[1],"send_rows":[2,3]}]})");
  AllocOpResult r;
  r.ok = false;
  r.class_free_page_counts = {1, 2};
  EXPECT_EQ(AllocOpResultToJson(r).dump(),
            R"({"op":"alloc","ok":false,"class_free_page_counts":[1,2],"available_size":0,"aggregate_free_size":0})");
}

}  // namespace
}  // namespace kvshard

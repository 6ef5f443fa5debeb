// kvshard replay of the pool pipeline's records (begin_shard_extend, set_kv_buffer, get_key_buffer,
// end_shard_extend): reads checked against the unsharded pool, malformed records exit 2, SGLang's begin without an
// end and last_loc = -1, multi-buffer pools; on a GPU, --backend gpu and diff of the checked-in pool traces.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

const char kPool[] = "testdata/traces/pool_pipeline.jsonl";

TEST(ReplayCmdTest, PoolPipelineReadsAreCheckedAgainstTheUnshardedPool) {
  const CliResult r = RunCli({"replay", RunfilePath(kPool), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["rows_compared"], 132);  // (10 + 12 slots) x 3 layers x 2 ranks
  std::vector<std::string> lines = Lines(ReadRunfile(kPool));
  // Reading layer 2 of the second extend before writing it serves layer 0's staged chunk rows.
  ASSERT_NE(lines[21].find("\"set_kv_buffer\", \"layer\": 2"), std::string::npos) << lines[21];
  lines.erase(lines.begin() + 21);
  const CliResult stale = RunCli({"replay", "-"}, Joined(lines));
  EXPECT_EQ(stale.exit_code, 1);
  EXPECT_EQ(stale.err.rfind("kvshard: mismatch: line 22: get_key_buffer: invariant: layer 2 rank 0: the sharded read "
                            "differs from the unsharded pool at locs[8] (slot 16) word 0: got ",
                            0),
            0u)
      << stale.err;
  // An extend over a page the allocator never handed out.
  lines = Lines(ReadRunfile(kPool));
  lines[3].replace(lines[3].find("[2, 3, 4]"), 9, "[2, 3, 6]");
  const CliResult freed = RunCli({"replay", "-"}, Joined(lines));
  EXPECT_EQ(freed.exit_code, 1);
  EXPECT_EQ(freed.err,
            "kvshard: mismatch: line 4: begin_shard_extend: invariant: requests[0].pages[2]: page 6 is free "
            "(the allocator has not handed it out)\n");
}

TEST(ReplayCmdTest, MalformedPipelineAndRadixRecordsExitTwo) {
  const std::string alloc =
      "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, "
      "\"pages_per_rank\": 8, \"need_sort\": false}";
  const std::string pool =
      ", \"pool\": {\"max_prefix_tokens\": 16, \"chunk_tokens\": 24, \"num_layers\": 2, "
      "\"row_words\": 1}}\n";
  const std::string header = alloc + pool;
  const std::string begin =
      "{\"op\": \"alloc\", \"prefix_lens\": [0], \"seq_lens\": [5], \"rotation_bases\": [null], "
      "\"last_locs\": [0]}\n{\"op\": \"begin_shard_extend\", \"requests\": [{\"prefix_len\": 0, "
      "\"seq_len\": 5, \"pages\": [2, 3]}]}\n";
  const std::pair<std::string, std::string> cases[] = {
      {"{\"kvshard_trace\": 1, \"pool\": {}}\n", "line 1: pool: needs the header's \"allocator\""},
      {alloc + ", \"pool\": {\"max_prefix_tokens\": 16, \"chunk_tokens\": 24, \"num_layers\": 2, \"row_words\": 1, "
               "\"shard_size\": 2}}\n",
       "line 1: pool.shard_size: unknown key"},
      {alloc + ", \"pool\": {\"max_prefix_tokens\": 15, \"chunk_tokens\": 24, \"num_layers\": 2, \"row_words\": 1}}\n",
       "line 1: pool.max_prefix_tokens"},
      {alloc + "}\n{\"op\": \"end_shard_extend\"}\n",
       "line 2: end_shard_extend: pipeline records need the header's \"pool\""},
      {header + "{\"op\": \"end_shard_extend\"}\n", "line 2: end_shard_extend: no sharded extend in flight"},
      {header + "{\"op\": \"set_kv_buffer\", \"layer\": 0}\n", "line 2: locs: needed outside an extend"},
      {header + "{\"op\": \"set_kv_buffer\", \"layer\": 2, \"locs\": [8]}\n", "line 2: layer: must be in [0, 2)"},
      {header + "{\"op\": \"set_kv_buffer\", \"layer\": 0, \"locs\": [72]}\n",
       "line 2: locs[0]: must be a slot of the pool"},
      {header + "{\"op\": \"get_key_buffer\", \"layer\": 0}\n", "line 2: get_key_buffer: no sharded extend in flight"},
      {header + begin + "{\"op\": \"get_key_buffer\", \"layer\": 0, \"locs\": [40]}\n",
       "line 4: locs[0]: slot 40 is not a slot of the extend batch"},
      // The first slot that is not the batch's, inside a run of the batch's slots or after one.
      {header + begin + "{\"op\": \"get_key_buffer\", \"layer\": 0, \"locs\": [8, 9, 10, 11, 12, 40, 13]}\n",
       "line 4: locs[5]: slot 40 is not a slot of the extend batch"},
      {header + begin + "{\"op\": \"get_key_buffer\", \"layer\": 0, \"locs\": [12, 13, 14, 15, 16]}\n",
       "line 4: locs[4]: slot 16 is not a slot of the extend batch"},
      {header + begin + "{\"op\": \"get_key_buffer\", \"layer\": 0, \"locs\": [9, 10, 99, 40]}\n",
       "line 4: locs[2]: slot 99 is not a slot of the extend batch"},
      {header + begin + "{\"op\": \"get_key_buffer\", \"layer\": 0, \"locs\": [8, -1]}\n",
       "line 4: locs[1]: slot -1 is not a slot of the extend batch"},
      {header + "{\"op\": \"set_kv_buffer\", \"layer\": 0, \"locs\": [70, 71, 72]}\n",
       "line 2: locs[2]: must be a slot of the pool, in [0, 72), got 72"},
      {header + "{\"op\": \"set_kv_buffer\", \"layer\": 0, \"locs\": [3, 4, 5, -2]}\n",
       "line 2: locs[3]: must be a slot of the pool, in [0, 72), got -2"},
      {header +
           "{\"op\": \"begin_shard_extend\", \"requests\": [{\"prefix_len\": 2, \"seq_len\": 5, \"pages\": [2, 3]}]}\n",
       "line 2: requests[0].prefix_len"},
      {header + "{\"op\": \"begin_shard_extend\", \"requests\": [1]}\n",
       "line 2: requests: must be an array of objects"},
      {header + "{\"op\": \"dec_lock_ref\", \"match\": 0}\n", "line 2: match: no locked match 0"},
      {header + "{\"op\": \"evict\", \"num_pages\": -1}\n", "line 2: num_pages: must be >= 0"},
      {header + "{\"op\": \"insert\", \"tokens\": [1, 2, 3, 4], \"pages\": [99], \"rotation_base\": 0}\n",
       "line 2: pages[0]: must be a logical page"},
      {header + "{\"op\": \"insert\", \"tokens\": [1, 2, 3, 4], \"pages\": [2], \"rotation_base\": 0}\n",
       "line 2: pages[0]: page 2 is not an allocated page"},
      {header + "{\"op\": \"match_prefix\", \"tokens\": [1], \"lock\": 1}\n", "line 2: lock: must be true or false"},
  };
  for (const auto& [text, want] : cases)
    EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, text), 2, "--trace: " + want)) << text;
}

// SGLang's begin_shard_extend has no guard against an extend in flight: the next batch's begin re-plans without an
// end, and reads are then checked against the new batch.
TEST(ReplayCmdTest, BeginWithoutEndReplansLikeSglang) {
  const std::string text =
      "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, \"pages_per_rank\": 8, "
      "\"need_sort\": false}, \"pool\": {\"max_prefix_tokens\": 16, \"chunk_tokens\": 24, \"num_layers\": 2, "
      "\"row_words\": 1}}\n"
      "{\"op\": \"alloc\", \"prefix_lens\": [0], \"seq_lens\": [5], \"rotation_bases\": [null], "
      "\"last_locs\": [-1], \"expect\": {\"pages\": [[2, 3]]}}\n"
      "{\"op\": \"begin_shard_extend\", \"requests\": [{\"prefix_len\": 0, \"seq_len\": 5, \"pages\": [2, 3]}]}\n"
      "{\"op\": \"alloc\", \"prefix_lens\": [0], \"seq_lens\": [6], \"rotation_bases\": [null], "
      "\"last_locs\": [-1], \"expect\": {\"pages\": [[4, 5]]}}\n"
      "{\"op\": \"begin_shard_extend\", \"requests\": [{\"prefix_len\": 0, \"seq_len\": 6, \"pages\": [4, 5]}]}\n"
      "{\"op\": \"set_kv_buffer\", \"layer\": 0}\n"
      "{\"op\": \"get_key_buffer\", \"layer\": 0, \"locs\": [16, 21]}\n"
      "{\"op\": \"end_shard_extend\"}\n";
  const CliResult r = RunCli({"replay", "-"}, text);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A slot of the replaced batch is no longer part of the extend.
  const CliResult stale = RunCli({"replay", "-"}, text.substr(0, text.rfind("{\"op\": \"get_key")) +
                                                      "{\"op\": \"get_key_buffer\", \"layer\": 0, \"locs\": [8]}\n");
  EXPECT_TRUE(FailsWith(stale, 2, "--trace: line 7: locs[0]: slot 8 is not a slot of the extend batch")) << stale.err;
}

// SGLang passes last_loc = -1 for a request without a prefix; an extension still needs its prefix's last slot.
TEST(ReplayCmdTest, LastLocMinusOneOnlyWithoutAPrefix) {
  const std::string header =
      "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, \"pages_per_rank\": 8, "
      "\"need_sort\": false}}\n";
  EXPECT_EQ(RunCli({"replay", "-"}, header + "{\"op\": \"alloc\", \"prefix_lens\": [0, 0], \"seq_lens\": [5, 3], "
                                             "\"rotation_bases\": [null, 1], \"last_locs\": [-1, -1]}\n")
                .exit_code,
            0);
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, header + "{\"op\": \"alloc\", \"prefix_lens\": [0, 4], "
                                                         "\"seq_lens\": [5, 9], \"rotation_bases\": [null, 1], "
                                                         "\"last_locs\": [-1, -1]}\n"),
                        2, "--trace: line 2: last_locs[1]: -1 (no prefix) with prefix_lens[1] = 4"));
  EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, header + "{\"op\": \"alloc\", \"prefix_lens\": [0], "
                                                         "\"seq_lens\": [5], \"rotation_bases\": [null], "
                                                         "\"last_locs\": [-2]}\n"),
                        2, "--trace: line 2: last_locs[0]: must be in [-1, "));
}

TEST(ReplayCmdTest, GpuBackendDiffsThePipelineOrSaysWhyNot) {
  const CliResult r = RunCli({"replay", RunfilePath(kPool), "--backend", "diff"});
  if (r.exit_code == 3) {
    EXPECT_NE(r.err.find("--backend diff: "), std::string::npos) << r.err;
    GTEST_SKIP() << "no GPU here: " << r.err;
  }
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("264 KV rows compared"), std::string::npos) << r.out;  // both paths
  const CliResult g = RunCli({"replay", RunfilePath(kPool), "--backend", "gpu"});
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("132 KV rows compared"), std::string::npos) << g.out;
  // The device thread's set-up, split into the driver's start, device 0's context and the rest (its buffers and
  // streams): the parts add up to the set-up (each printed to 0.01 s). The driver and the context may take no time
  // here: this process started them in its first replay (the one above, or an earlier test's).
  const size_t at = g.out.find("(set-up ");
  ASSERT_NE(at, std::string::npos) << g.out;
  double setup = -1, driver = -1, context = -1, buffers = -1;
  ASSERT_EQ(std::sscanf(g.out.c_str() + at, "(set-up %lf s: driver %lf, context %lf, buffers %lf;", &setup, &driver,
                        &context, &buffers),
            4)
      << g.out;
  EXPECT_GE(driver, 0) << g.out;
  EXPECT_GE(context, 0) << g.out;
  EXPECT_GE(buffers, 0) << g.out;
  EXPECT_NEAR(driver + context + buffers, setup, 0.021) << g.out;
}

// Before its first CUDA call, `--backend gpu|diff` with ranks emulated on one GPU asks the driver for two hardware
// queues a context (a faster context, docs/PERFORMANCE.md), unless the environment sets them; `--gpus N` (NCCL) keeps
// the driver's default. Holds with and without a GPU: the setting comes before the device check.
TEST(ReplayCmdTest, EmulatedRanksAskTheDriverForTwoHardwareQueues) {
#ifndef KVSHARD_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend: no GPU path to prepare";
#else
  const char* kQueues = "CUDA_DEVICE_MAX_CONNECTIONS";
  const auto queues = [&] {
    const char* v = std::getenv(kQueues);
    return std::string(v == nullptr ? "<unset>" : v);
  };
  unsetenv(kQueues);
  RunCli({"replay", RunfilePath(kPool), "--backend", "gpu", "--gpus", "2"});
  EXPECT_EQ(queues(), "<unset>");
  RunCli({"replay", RunfilePath(kPool)});  // --backend ref: no CUDA
  EXPECT_EQ(queues(), "<unset>");
  RunCli({"replay", RunfilePath(kPool), "--backend", "diff"});
  EXPECT_EQ(queues(), "2");
  setenv(kQueues, "8", /*overwrite=*/1);
  RunCli({"replay", RunfilePath(kPool), "--backend", "gpu"});
  EXPECT_EQ(queues(), "8");
  unsetenv(kQueues);
#endif
}

const char kPoolMha[] = "testdata/traces/pool_pipeline_mha.jsonl";

// The header's optional "buffers" (seed 000's MHA K/V, MLA latent, extras): every buffer is written, gathered
// and checked; the one-buffer "row_words" form is still read; set_kv_buffer_prefix_valid is SGLang's rejection.
TEST(ReplayCmdTest, MultiBufferPoolsAreCheckedPerBufferAndHeadersValidated) {
  const CliResult r = RunCli({"replay", RunfilePath(kPoolMha), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out)["rows_compared"], 132);
  std::vector<std::string> lines = Lines(ReadRunfile(kPoolMha));
  ASSERT_NE(lines[22].find("\"set_kv_buffer\", \"layer\": 2"), std::string::npos) << lines[22];
  lines.erase(lines.begin() + 22);  // layer 2 then reads layer 0's staged rows: the first buffer differs
  const CliResult stale = RunCli({"replay", "-"}, Joined(lines));
  EXPECT_EQ(stale.exit_code, 1);
  EXPECT_EQ(stale.err.rfind("kvshard: mismatch: line 23: get_key_buffer: invariant: layer 2 rank 0: the sharded read "
                            "differs from the unsharded pool at locs[8] (slot 16) buffer k byte 0: got ",
                            0),
            0u)
      << stale.err;
  const std::string alloc =
      "{\"kvshard_trace\": 1, \"allocator\": {\"shard_size\": 2, \"page_size\": 4, "
      "\"pages_per_rank\": 8, \"need_sort\": false}, \"pool\": {\"max_prefix_tokens\": 16, "
      "\"chunk_tokens\": 24, \"num_layers\": 2, ";
  const std::pair<std::string, std::string> cases[] = {
      {alloc + "\"row_words\": 1, \"buffers\": [{\"name\": \"k\", \"row_bytes\": 4}]}}\n",
       "line 1: pool.row_words: give either row_words (one buffer) or buffers, not both"},
      {alloc + "\"buffers\": {}}}\n", "line 1: pool.buffers: must be a list"},
      {alloc + "\"buffers\": []}}\n", "line 1: pool.buffers: must hold 1 to 16 buffers, got 0"},
      {alloc + "\"buffers\": [{\"name\": \"k\", \"row_bytes\": 0}]}}\n", "line 1: pool.buffers[0].row_bytes"},
      {alloc + "\"buffers\": [{\"name\": \"k\", \"row_bytes\": 4}, {\"name\": \"k\", \"row_bytes\": 2}]}}\n",
       "line 1: pool.buffers[1].name: duplicate buffer \"k\""},
      {alloc + "\"buffers\": [{\"name\": \"k\", \"row_bytes\": 4, \"dtype\": 1}]}}\n",
       "line 1: pool.buffers[0].dtype: unknown key"},
      {alloc + "\"buffers\": [{\"row_bytes\": 4}]}}\n", "line 1: pool.buffers[0].name: must be a string"},
      {alloc + "\"buffers\": [{\"name\": \"kv\", \"row_bytes\": 3}]}}\n{\"op\": \"set_kv_buffer_prefix_valid\"}\n",
       "line 2: set_kv_buffer_prefix_valid: prefix-valid commit is unsupported under logical-page KV sharding"},
  };
  for (const auto& [text, want] : cases)
    EXPECT_TRUE(FailsWith(RunCli({"replay", "-"}, text), 2, "--trace: " + want)) << text;
}

TEST(ReplayCmdTest, GpuBackendDiffsMultiBufferPoolsOrSaysWhyNot) {
  const CliResult r = RunCli({"replay", RunfilePath(kPoolMha), "--backend", "diff"});
  if (r.exit_code == 3) GTEST_SKIP() << "no GPU here: " << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("264 KV rows compared"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvshard::cli

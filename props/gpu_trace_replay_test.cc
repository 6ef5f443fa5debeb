// Every `kvshard gen` trace with pipeline records replays clean on the GPU backend: `replay --backend diff`
// moves the sharded pool's data on CUDA (N ranks emulated on one GPU) and compares every plan field and KV row
// with the reference; a changed payload byte on the device would be a mismatch at its line.
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "cli/gpu_pool_path.h"
#include "cli/replay.h"
#include "cli/trace_gen.h"
#include "core/trace.h"
#include "props/gpu_test_env.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// Replays `text` with the GPU data path beside the reference; the first mismatch is the status.
Status ReplayOnGpu(const std::string& text, cli::ReplaySummary* summary, int64_t* rows_compared) {
  std::istringstream in(text);
  TraceReader reader(&in);
  KVSHARD_ASSIGN_OR_RETURN(Json header, reader.ReadHeader(cli::TraceHeaderKeys()));
  cli::ReplayOptions options;
  options.backend = cli::Backend::kDiff;
  options.make_device = [](const cli::PoolGeometry& g) { return cli::CreateGpuPoolPath(g, /*gpus=*/1); };
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<cli::Replayer> replayer, cli::Replayer::Create(header, options));
  TraceRecord record;
  while (true) {
    KVSHARD_ASSIGN_OR_RETURN(bool more, reader.Next(&record));
    if (!more) break;
    KVSHARD_RETURN_IF_ERROR(replayer->Replay(record));
  }
  *summary = replayer->summary();
  *rows_compared = replayer->rows_compared();
  return Status::Ok();
}

TEST(GpuTraceReplay, GeneratedTracesReplayCleanOnTheGpuBackend) {
  KVSHARD_REQUIRE_GPUS(1);
  RecordPropertyCases(CheckProperty(
      "GpuTraceReplay/GeneratedTracesReplayCleanOnTheGpuBackend",
      [] {
        cli::TraceGenOptions o;
        o.seed = *rc::gen::arbitrary<uint64_t>();
        o.records = *rc::gen::inRange<int64_t>(1, 150);
        o.shard_size = *rc::gen::element<int64_t>(1, 2, 3, 4, 8);
        o.page_size = *rc::gen::element<int64_t>(1, 2, 3, 16);
        o.pages_per_rank = *rc::gen::inRange<int64_t>(1, 40);
        o.need_sort = *rc::gen::arbitrary<bool>();
        o.batch_size = *rc::gen::inRange<int64_t>(1, 9);
        o.max_len = *rc::gen::element<int64_t>(1, 7, 64, 300);
        o.share_percent = *rc::gen::inRange<int64_t>(0, 101);
        o.edge_heavy = *rc::gen::arbitrary<bool>();
        o.num_layers = *rc::gen::inRange<int64_t>(1, 4);
        o.row_words = *rc::gen::inRange<int64_t>(1, 5);
        o.radix = *rc::gen::arbitrary<bool>();
        std::ostringstream out;
        RC_ASSERT_OK(cli::GenerateTrace(o, out));
        cli::ReplaySummary s;
        int64_t rows = 0;
        RC_ASSERT_OK(ReplayOnGpu(out.str(), &s, &rows));
        RC_ASSERT(s.records == o.records);
        RC_CLASSIFY(rows > 0, "KV rows compared");
      },
      rc::detail::configuration().testParams));
}

}  // namespace
}  // namespace kvshard::props

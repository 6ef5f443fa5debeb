// Every `kvshard gen` trace with pipeline records replays clean on the GPU backend: `replay --backend diff`
// moves the sharded pool's data on CUDA (N ranks emulated on one GPU) and compares every plan field and KV row
// with the reference; a changed payload byte on the device would be a mismatch at its line.
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/gpu_pool_path.h"
#include "props/gpu_test_env.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

TEST(GpuTraceReplay, GeneratedTracesReplayCleanOnTheGpuBackend) {
  KVSHARD_REQUIRE_GPUS(1);
  RecordPropertyCases(CheckProperty(
      "GpuTraceReplay/GeneratedTracesReplayCleanOnTheGpuBackend",
      [] {
        replay::TraceGenOptions o = ArbitraryTraceGenOptions();
        o.records = *rc::gen::inRange<int64_t>(1, 150);
        o.num_layers = *rc::gen::inRange<int64_t>(1, 4);  // pipeline records: data on the device
        std::ostringstream out;
        RC_ASSERT_OK(replay::GenerateTrace(o, out));
        replay::ReplayOptions options;
        options.backend = replay::Backend::kDiff;
        options.make_device = [](const replay::PoolGeometry& g) { return replay::CreateGpuPoolPath(g, /*gpus=*/1); };
        ReplayCounts counts;
        RC_ASSERT_OK(ReplayTraceText(out.str(), options, &counts));
        RC_ASSERT(counts.records == o.records);
        RC_CLASSIFY(counts.rows_compared > 0, "KV rows compared");
      },
      rc::detail::configuration().testParams));
}

}  // namespace
}  // namespace kvshard::props

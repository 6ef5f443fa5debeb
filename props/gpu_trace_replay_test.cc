// Every `kvshard gen` trace with pipeline records replays clean on the GPU backend: `replay --backend diff`
// moves the sharded pool's data on CUDA (N ranks emulated on one GPU) and compares every plan field and KV row
// with the reference; a changed payload byte on the device would be a mismatch at its line. `replay --backend gpu`
// reports on such traces, and on traces with a dropped write or a corrupted expect, what the reference reports.
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

// --backend gpu (rows made and reads checked on the device against each slot's last write) reports what --backend
// ref reports (reads checked against the unsharded pool's rows): the same verdict, texts and counts on generated
// traces with a dropped write (stale scratch rows: "the sharded read differs ... at locs[i] (slot S) ...") or a
// corrupted expect, stopping at the first mismatch and with --keep-going.
TEST(GpuTraceReplay, TheGpuBackendReportsWhatTheReferenceReports) {
  KVSHARD_REQUIRE_GPUS(1);
  RecordPropertyCases(CheckProperty(
      "GpuTraceReplay/TheGpuBackendReportsWhatTheReferenceReports",
      [] {
        // A third of the traces have 17-20 layers: batches of more reads than the device thread leaves pending
        // (kMaxPendingChecks).
        const bool deep = *rc::gen::element(false, false, true);
        std::string text = deep ? ArbitraryPipelineTrace(/*max_records=*/149, /*max_layers=*/20, /*min_layers=*/17)
                                : ArbitraryPipelineTrace(/*max_records=*/149, /*max_layers=*/4);
        if (*rc::gen::arbitrary<bool>()) text = DropOneWrite(text);
        if (*rc::gen::arbitrary<bool>()) text = CorruptOneExpect(text);
        replay::ReplayOptions gpu;
        gpu.backend = replay::Backend::kGpu;
        gpu.device_thread = *rc::gen::arbitrary<bool>();  // the thread's checks wait once per batch
        RC_CLASSIFY(gpu.device_thread, "device thread");
        RC_CLASSIFY(MostReadsInABatch(text) > replay::PoolDataPath::kMaxPendingChecks, "a batch of more than 16 reads");
        gpu.make_device = [](const replay::PoolGeometry& g) { return replay::MakeGpuPoolPath(g, /*gpus=*/1); };
        for (const bool keep_going : {false, true}) {
          const Outcome want = ReplayOutcome(text, replay::ReplayOptions(), keep_going);
          const Outcome got = ReplayOutcome(text, gpu, keep_going);
          RC_CLASSIFY(want.first_mismatch.find(": invariant: layer") != std::string::npos, "a read differs first");
          RC_CLASSIFY(want.mismatches > 0, "mismatches");
          if (!(want == got)) {
            RC_FAIL(StrCat(keep_going ? "--keep-going" : "stop at the first", ": ref:\n", ToString(want), "\ngpu:\n",
                           ToString(got)));
          }
        }
      },
      rc::detail::configuration().testParams));
}

}  // namespace
}  // namespace kvshard::props

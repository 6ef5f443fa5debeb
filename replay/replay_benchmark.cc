// kvshard replay's throughput on the reference backend: records per second for `kvshard gen` traces of each shape
// (allocator records only; allocator and plan records; with the radix cache; the default radix + 2-layer pipeline),
// each trace generated once in memory and replayed whole per iteration (reading, parsing, every check). Two more
// rows price `--backend diff`'s machinery without a GPU: the default trace with the reference pool as the "device"
// (replay/host_pool_path.h), its steps on the device thread or each at its record; one more `--backend gpu`'s (the
// checking thread's share: plans, answers; each slot's last write, rows made and checked on the device thread). Two
// more run `--backend gpu` and `diff` themselves on CUDA (built with the CUDA backend, a GPU visible; they skip
// saying why otherwise): the replay's throughput once the process has its context, without the start-up and exit
// costs a command pays once (docs/PERFORMANCE.md). And the reader side alone (BM_ReadAhead): the default trace read,
// parsed and prepared by 1, 2 and 4 reader threads; and the JSON reader alone on its lines (BM_ParseRecords).
//   bazel run -c opt //replay:replay_benchmark -- --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// On a GPU host it comes in tools/gpu_bundle.sh's bundle: bin/replay_benchmark --benchmark_filter=pipeline_
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/json.h"
#include "core/status.h"
#include "core/trace.h"
#include "core/trace_read_ahead.h"
#include "replay/host_pool_path.h"
#include "replay/replayer.h"
#include "replay/trace_gen.h"
#ifdef KVSHARD_REPLAY_BENCHMARK_GPU
#include "replay/gpu_pool_path.h"
#endif

namespace kvshard::replay {
namespace {

constexpr int64_t kRecords = 20000;

// The trace shapes, as `kvshard gen` flags.
enum Shape { kAllocator, kPlans, kRadix, kPipeline };

const std::string& Trace(Shape shape) {
  static std::string traces[4];
  std::string& text = traces[shape];
  if (text.empty()) {
    TraceGenOptions o;
    o.records = kRecords;
    o.batch_size = 8;
    if (shape != kPipeline) o.num_layers = 0;
    if (shape == kAllocator || shape == kPlans) o.radix = false;
    o.allocator_only = shape == kAllocator;
    std::ostringstream out;
    KVSHARD_CHECK(GenerateTrace(o, out).ok());
    text = out.str();
  }
  return text;
}

// Where the pipeline's second path runs: none (the reference backend), the host path on the device thread, or the
// host path at each record (diff); the host path as --backend gpu's device, on the device thread. The *MakesRows
// ones give the host path the GPU path's contract on one device (it makes its rows and checks its reads itself), so
// the checking thread does what it does beside a GPU: the closest stand-in for `replay --backend diff|gpu` there is
// without one.
// kGpu and kDiff: the backends themselves, ranks emulated on GPU 0.
enum Second {
  kNone,
  kHostOnThread,
  kHostAtRecord,
  kGpuHostOnThread,
  kDiffHostMakesRows,
  kGpuHostMakesRows,
  kGpu,
  kDiff
};

void BM_Replay(benchmark::State& state, Shape shape, Second second = kNone) {
  const std::string& text = Trace(shape);
  ReplayOptions options;
  if (second == kGpu || second == kDiff) {
#ifdef KVSHARD_REPLAY_BENCHMARK_GPU
    PrepareGpuPoolPaths(1);  // before the process's first CUDA call, as the command does (a set value is kept)
    options.backend = second == kGpu ? Backend::kGpu : Backend::kDiff;
    options.make_device = [](const PoolGeometry& g) { return MakeGpuPoolPath(g, 1); };
#else
    state.SkipWithError("built without the CUDA backend: no GPU path");
    return;
#endif
  } else if (second != kNone) {
    options.backend = second == kGpuHostOnThread || second == kGpuHostMakesRows ? Backend::kGpu : Backend::kDiff;
    options.device_thread = second != kHostAtRecord;
    const bool makes_rows = second == kDiffHostMakesRows || second == kGpuHostMakesRows;
    options.make_device = [makes_rows](const PoolGeometry& g) { return CreateHostPoolPath(g, makes_rows); };
  }
  int64_t records = 0, stateless = 0, judged_ahead = 0;
  double checking_cpu = 0;
  for (auto _ : state) {
    std::istringstream in(text);
    ReplayReport report;
    const Status s = ReplayStream(in, options, &report);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    records += report.summary.records;
    stateless += report.stateless_records;
    judged_ahead += report.stateless_judged_ahead;
    checking_cpu += report.checking_cpu_seconds;
  }
  state.SetItemsProcessed(records);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
  state.counters["records/s"] = benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate);
  // The checking thread's CPU seconds a replay (the summary's), and the share of the stateless records the reader
  // threads judged ahead of it (the rest it ran itself: a fast checking thread leaves them more).
  state.counters["checking_cpu_s"] =
      benchmark::Counter(checking_cpu / static_cast<double>(std::max<int64_t>(1, state.iterations())));
  state.counters["judged_ahead"] =
      benchmark::Counter(stateless > 0 ? static_cast<double>(judged_ahead) / static_cast<double>(stateless) : 0.0);
}
// Wall time: the records are parsed on a second thread while the first checks them (CPU time is the first's only).
// gen --allocator-only; --layers 0 --no-radix; --layers 0; the default.
BENCHMARK_CAPTURE(BM_Replay, allocator_only, kAllocator)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, plans, kPlans)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, radix, kRadix)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_default, kPipeline)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_diff_host_on_thread, kPipeline, kHostOnThread)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_diff_host_at_record, kPipeline, kHostAtRecord)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_gpu_host_on_thread, kPipeline, kGpuHostOnThread)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_diff_host_makes_rows, kPipeline, kDiffHostMakesRows)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_gpu_host_makes_rows, kPipeline, kGpuHostMakesRows)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_gpu, kPipeline, kGpu)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, pipeline_diff, kPipeline, kDiff)->UseRealTime()->Unit(benchmark::kMillisecond);

// The reader side alone: the default trace read, parsed and prepared (Replayer::Prepare, stateless records run and
// judged) by Arg reader threads while the caller only takes the records; what the read-ahead can feed a checking
// thread. Its wall time with 1 thread is the floor of every replay's wall.
void BM_ReadAhead(benchmark::State& state) {
  const std::string& text = Trace(kPipeline);
  const int threads = static_cast<int>(state.range(0));
  std::istringstream header_in(text);
  TraceReader header_reader(&header_in);
  StatusOr<Json> header = header_reader.ReadHeader(TraceHeaderKeys());
  KVSHARD_CHECK(header.ok());
  StatusOr<std::unique_ptr<Replayer>> replayer = Replayer::Create(*header);
  KVSHARD_CHECK(replayer.ok());
  const Replayer* prepare = replayer->get();
  int64_t records = 0;
  for (auto _ : state) {
    std::istringstream in(text);
    TraceReader reader(&in);
    KVSHARD_CHECK(reader.ReadHeader(TraceHeaderKeys()).ok());
    TraceReadAhead ahead(
        &reader, [prepare](TraceRecord* record, bool) { prepare->Prepare(record, /*run_stateless=*/true); }, threads);
    TraceRecord record;
    for (StatusOr<bool> more = ahead.Next(&record); more.ok() && *more; more = ahead.Next(&record)) ++records;
  }
  state.SetItemsProcessed(records);
  state.counters["records/s"] = benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadAhead)->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

// The JSON reader alone, as a trace reader thread uses it: each record line of the default trace parsed into a held
// value of the line's own op (the last record of that op, its containers and strings reused). Bytes/s is the parser's.
void BM_ParseRecords(benchmark::State& state) {
  std::vector<std::string> lines;
  std::istringstream in(Trace(kPipeline));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  lines.erase(lines.begin());        // the header
  std::map<std::string, Json> held;  // a value per op, as TraceReadAhead's spares
  int64_t bytes = 0;
  for (auto _ : state) {
    for (const std::string& line : lines) {
      Json& value = held[std::string(TraceReadAhead::LeadingOp(line))];
      KVSHARD_CHECK(ParseJsonStrictInto(line, &value, "record").ok());
      bytes += static_cast<int64_t>(line.size());
    }
  }
  state.SetBytesProcessed(bytes);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(lines.size()));
}
BENCHMARK(BM_ParseRecords)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvshard::replay

// The GPU measurements behind `kvshard bench`: nccl-tests-style rows, each verified against host-computed
// expectations and reported against a limit (device copy, raw NCCL all-gather) measured in the same run.
#ifndef KVSHARD_BENCH_GPU_BENCH_H_
#define KVSHARD_BENCH_GPU_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvshard::bench {

// One benchmark row.
struct BenchRow {
  std::string op;
  int64_t bytes = 0;     // payload size of the row (per rank for collectives)
  double time_us = 0;    // mean time per call
  double algbw_gbs = 0;  // bytes / time
  double busbw_gbs = 0;  // bytes moved (read + written) / time for kernels; NCCL bus bandwidth for collectives
  double pct_limit = 0;  // busbw as % of the limit measured in the same run
  std::string limit;     // which limit: "copy" or "allgather"
  int64_t wrong = -1;    // mismatching rows found by the correctness check (0 = verified)
  std::string note;
};

// Options shared by the GPU benchmarks.
struct BenchOptions {
  std::vector<std::string> ops;
  int64_t min_bytes = 1 << 20;
  int64_t max_bytes = 256 << 20;
  int64_t factor = 4;
  int64_t row_bytes = 1152;
  int gpus = 0;  // 0 = all visible
  int warmup = 5;
  int iters = 20;
  int64_t layers = 32;
  int64_t compute_us = 0;  // 0 = derived from the measured gather time
  int64_t batch = 256;
  bool trace = false;                 // print rank 0's device timeline of one prefix-gather batch
  int compute_blocks = 0;             // blocks of the compute stand-in (0 = one per SM)
  int64_t collective_timeout_ms = 0;  // every collective wait's deadline (0 = $KVSHARD_COLLECTIVE_TIMEOUT_MS or 5 min)
};

// Runs the selected GPU benchmarks and appends their rows; *device describes the GPUs used.
Status RunGpuBench(const BenchOptions& opt, std::vector<BenchRow>* rows, std::string* device);

}  // namespace kvshard::bench

#endif  // KVSHARD_BENCH_GPU_BENCH_H_

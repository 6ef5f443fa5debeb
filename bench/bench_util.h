// Shared parts of the GPU benchmarks: the run's context and same-run limits, self-identifying row patterns
// for verification, nccl-tests-style row construction, and timing across one host thread per GPU.
#ifndef KVSHARD_BENCH_BENCH_UTIL_H_
#define KVSHARD_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/gpu_bench.h"
#include "core/status.h"

namespace kvshard::bench {

// One run's options, its output rows, and the limits measured so far (looked up by later rows).
struct BenchContext {
  const BenchOptions& opt;
  std::vector<BenchRow>* rows;
  std::map<int64_t, double> copy_busbw;         // by payload bytes
  std::map<int64_t, double> allgather_busbw;    // by per-rank bytes
  std::map<int64_t, double> gather_rows_busbw;  // by payload bytes (the rerange's same-run reference)
  int gpus = 1;
};

// `n` rows of `row_bytes` whose 32-bit words encode (tag, row, word), so any misplaced row is detected.
std::vector<uint8_t> PatternRows(int64_t n, int64_t row_bytes, int64_t tag);

// Rows of `row_bytes` that differ between got and want (want's row count, at least 1, when sizes differ).
int64_t CountWrongRows(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int64_t row_bytes);

// A row of `bytes` taking `us` per call: algbw = bytes / time, busbw = moved / time, and busbw as a percentage
// of `limit_busbw` (0 when the limit is 0).
BenchRow MakeRow(const std::string& op, int64_t bytes, double us, double moved, const std::string& limit,
                 double limit_busbw, int64_t wrong);

// Runs fn(i) for i < n on n host threads started together (a barrier before and after) and returns the mean
// wall microseconds of one of `iters` iterations (each thread synchronizes devices[i] before the end barrier).
StatusOr<double> ParallelTimeUs(int n, int warmup, int iters, const std::function<Status(int)>& fn,
                                const std::vector<int>& devices);

}  // namespace kvshard::bench

#endif  // KVSHARD_BENCH_BENCH_UTIL_H_

// Row patterns, verification, row construction and multi-threaded timing shared by the GPU benchmarks.
#include "bench/bench_util.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <thread>

#include <cuda_runtime.h>

namespace kvshard::bench {
namespace {

uint32_t Word(int64_t tag, int64_t row, int64_t w) {
  return static_cast<uint32_t>(tag * 0x01000193u) ^ static_cast<uint32_t>(row * 0x9e3779b1u) ^ static_cast<uint32_t>(w);
}

}  // namespace

std::vector<uint8_t> PatternRows(int64_t n, int64_t row_bytes, int64_t tag) {
  std::vector<uint8_t> out(n * row_bytes);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b + 4 <= row_bytes; b += 4) {
      const uint32_t v = Word(tag, r, b / 4);
      std::memcpy(out.data() + r * row_bytes + b, &v, 4);
    }
  }
  return out;
}

int64_t CountWrongRows(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int64_t row_bytes) {
  if (got.size() != want.size()) return std::max<int64_t>(1, static_cast<int64_t>(want.size()) / row_bytes);
  int64_t wrong = 0;
  for (size_t r = 0; r * row_bytes < got.size(); ++r) {
    wrong += std::memcmp(got.data() + r * row_bytes, want.data() + r * row_bytes, row_bytes) != 0;
  }
  return wrong;
}

BenchRow MakeRow(const std::string& op, int64_t bytes, double us, double moved, const std::string& limit,
                 double limit_busbw, int64_t wrong) {
  BenchRow r;
  r.op = op;
  r.bytes = bytes;
  r.time_us = us;
  r.algbw_gbs = bytes / us / 1e3;
  r.busbw_gbs = moved / us / 1e3;
  r.limit = limit;
  r.pct_limit = limit_busbw > 0 ? 100.0 * r.busbw_gbs / limit_busbw : 0;
  r.wrong = wrong;
  return r;
}

StatusOr<double> ParallelTimeUs(int n, int warmup, int iters, const std::function<Status(int)>& fn,
                                const std::vector<int>& devices) {
  std::vector<Status> status(n);
  std::barrier sync(n);
  std::chrono::steady_clock::time_point t0, t1;
  auto body = [&](int i) {
    Status s;
    if (cudaSetDevice(devices[i]) != cudaSuccess) s = Internal("cudaSetDevice failed");
    for (int k = 0; k < warmup && s.ok(); ++k) s = fn(i);
    if (s.ok() && cudaDeviceSynchronize() != cudaSuccess) s = Internal("warmup sync failed");
    sync.arrive_and_wait();
    if (i == 0) t0 = std::chrono::steady_clock::now();
    sync.arrive_and_wait();
    for (int k = 0; k < iters && s.ok(); ++k) s = fn(i);
    if (s.ok() && cudaDeviceSynchronize() != cudaSuccess) s = Internal("sync failed");
    sync.arrive_and_wait();
    if (i == 0) t1 = std::chrono::steady_clock::now();
    status[i] = s;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
  for (const Status& s : status) KVSHARD_RETURN_IF_ERROR(s);
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

}  // namespace kvshard::bench

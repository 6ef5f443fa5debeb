// Benchmark timing on the device: average time of back-to-back iterations, synchronized on every device used.
#ifndef KVSHARD_GPU_TIMING_H_
#define KVSHARD_GPU_TIMING_H_

#include <functional>
#include <vector>

#include "core/status.h"

namespace kvshard::gpu {

// Runs `enqueue` warmup times, synchronizes `devices`, then times `iters` back-to-back runs (host clock,
// devices synchronized at both ends) and returns the mean microseconds per run.
StatusOr<double> TimeMeanUs(const std::function<Status()>& enqueue, const std::vector<int>& devices, int warmup,
                            int iters);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_TIMING_H_

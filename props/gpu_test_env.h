// GPU test gate: a GPU test skips (visibly, with the reason) when no CUDA device is visible.
#ifndef KVSHARD_PROPS_GPU_TEST_ENV_H_
#define KVSHARD_PROPS_GPU_TEST_ENV_H_

#include <string>

#include <gtest/gtest.h>

#include "gpu/device.h"

// Skips the current test with a clear reason unless at least `min_gpus` devices are visible.
#define KVSHARD_REQUIRE_GPUS(min_gpus)                                                                   \
  do {                                                                                                   \
    std::string kvshard_why_;                                                                            \
    int kvshard_n_ = ::kvshard::gpu::VisibleDeviceCount(&kvshard_why_);                                  \
    if (kvshard_n_ < (min_gpus)) {                                                                       \
      GTEST_SKIP() << "SKIPPED: needs " << (min_gpus) << " CUDA device(s), " << kvshard_n_ << " visible" \
                   << (kvshard_why_.empty() ? "" : " (" + kvshard_why_ + ")");                           \
    }                                                                                                    \
  } while (0)

#endif  // KVSHARD_PROPS_GPU_TEST_ENV_H_

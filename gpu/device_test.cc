// gpu::PreferHardwareQueues: the driver's queue setting is set when the environment has none, and the user's own
// setting is kept. Needs no GPU (it makes no CUDA call).
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "gpu/device.h"

namespace kvshard::gpu {
namespace {

constexpr char kQueues[] = "CUDA_DEVICE_MAX_CONNECTIONS";

std::string Queues() {
  const char* v = std::getenv(kQueues);
  return v == nullptr ? "<unset>" : v;
}

TEST(PreferHardwareQueuesTest, SetsTheQueuesUnlessTheEnvironmentDoes) {
  unsetenv(kQueues);
  PreferHardwareQueues(2);
  EXPECT_EQ(Queues(), "2");
  PreferHardwareQueues(5);  // set now: kept
  EXPECT_EQ(Queues(), "2");
  setenv(kQueues, "8", /*overwrite=*/1);  // the user's
  PreferHardwareQueues(1);
  EXPECT_EQ(Queues(), "8");
  unsetenv(kQueues);
  PreferHardwareQueues(32);
  EXPECT_EQ(Queues(), "32");
  unsetenv(kQueues);
}

}  // namespace
}  // namespace kvshard::gpu

// WaitBackoff's schedules: an eager wait yields for 200 us then naps 10, 20, ... up to 1 ms; a patient one naps from
// its second poll, never longer than 50 us. Nap tightens its own thread's timer slack, no other thread's.
#include "gpu/wait_backoff.h"

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace kvshard::gpu {
namespace {

using std::chrono::microseconds;

// The pauses after polls at `elapsed` (microseconds since the wait began).
std::vector<int64_t> Pauses(WaitStyle style, const std::vector<int64_t>& elapsed) {
  WaitBackoff backoff(style);
  std::vector<int64_t> out;
  for (int64_t e : elapsed) out.push_back(backoff.Next(microseconds(e)).count());
  return out;
}

TEST(WaitBackoffTest, EagerYieldsForTwoHundredMicrosecondsThenDoublesUpToAMillisecond) {
  EXPECT_EQ(Pauses(WaitStyle::kEager, {0, 50, 199, 200}), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(Pauses(WaitStyle::kEager, {0, 201, 300, 400, 500, 600, 700, 800, 900, 1000, 5000}),
            (std::vector<int64_t>{0, 0, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}));
}

TEST(WaitBackoffTest, PatientNapsFromItsSecondPollAndNeverLongerThanFiftyMicroseconds) {
  EXPECT_EQ(Pauses(WaitStyle::kPatient, {1, 2, 3, 4, 5, 6, 100000}), (std::vector<int64_t>{0, 10, 20, 40, 50, 50, 50}));
  // A poll at the wait's very start yields; the next one after any time naps.
  EXPECT_EQ(Pauses(WaitStyle::kPatient, {0, 0, 1, 2}), (std::vector<int64_t>{0, 0, 0, 10}));
}

#ifdef __linux__
TEST(NapTest, TightensItsThreadsTimerSlackOnly) {
  const int caller_before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (caller_before <= static_cast<int>(kNapSlackNs)) {
    GTEST_SKIP() << "this thread's timer slack is already " << caller_before << " ns: a tightening would not show";
  }
  int before = -1, after = -1;
  std::thread napper([&] {
    before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    Nap(microseconds(1));
    after = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  });
  napper.join();
  EXPECT_EQ(before, caller_before);  // inherited from its creator
  EXPECT_EQ(after, static_cast<int>(kNapSlackNs));
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), caller_before);
}
#endif

}  // namespace
}  // namespace kvshard::gpu

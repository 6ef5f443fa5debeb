// The pauses of a polling wait (RankGroup::Synchronize), and the naps between its polls: how a host thread waits for
// the device without a blocking call, which could not keep the group's deadline. Host-only, so its schedule is
// tested without a GPU.
#ifndef KVSHARD_GPU_WAIT_BACKOFF_H_
#define KVSHARD_GPU_WAIT_BACKOFF_H_

#include <algorithm>
#include <chrono>
#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace kvshard::gpu {

// How a group's waits poll. kEager (the default) yields for a wait's first 200 us, then naps from 10 us doubling up
// to 1 ms: a short wait ends as soon as the device does (timed loops, benchmarks). kPatient naps from the second
// poll on, from 10 us up to 50 us: no core spins while the thread waits, and a wait still ends within about 50 us
// of the device (replay's device thread, which runs beside busy host threads; issue 27 measured no change of wall
// time beyond the host's noise, docs/PERFORMANCE.md: it is there so the thread spins no core while it waits).
enum class WaitStyle { kEager, kPatient };

// The pause after each poll that found a wait unfinished: zero means yield once.
class WaitBackoff {
 public:
  explicit WaitBackoff(WaitStyle style)
      : yield_for_(style == WaitStyle::kEager ? std::chrono::microseconds(200) : std::chrono::microseconds(0)),
        longest_(style == WaitStyle::kEager ? std::chrono::microseconds(1000) : std::chrono::microseconds(50)) {}

  // The pause after a poll `elapsed` after the wait began.
  std::chrono::microseconds Next(std::chrono::microseconds elapsed) {
    if (nap_.count() == 0) {
      if (elapsed > yield_for_) nap_ = std::chrono::microseconds(10);
      return std::chrono::microseconds(0);
    }
    const std::chrono::microseconds now = nap_;
    nap_ = std::min(nap_ * 2, longest_);
    return now;
  }

 private:
  std::chrono::microseconds yield_for_, longest_;
  std::chrono::microseconds nap_{0};
};

// The timer slack Nap gives its thread, in nanoseconds.
inline constexpr unsigned long kNapSlackNs = 1000;

// Sleeps for `pause` with this thread's timer slack at kNapSlackNs (set once per thread): Linux's default slack of
// 50 us would stretch each 10-50 us nap of a wait to 60-100 us, and replay's device thread waits about once every
// four batches.
inline void Nap(std::chrono::microseconds pause) {
#ifdef __linux__
  thread_local const bool tightened = prctl(PR_SET_TIMERSLACK, kNapSlackNs, 0, 0, 0) == 0;
  (void)tightened;
#endif
  std::this_thread::sleep_for(pause);
}

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_WAIT_BACKOFF_H_

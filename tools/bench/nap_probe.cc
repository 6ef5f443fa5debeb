// How long a short std::this_thread::sleep_for really sleeps, at Linux's default timer slack and at the 1 us slack
// gpu::Nap sets (gpu/wait_backoff.h): g++ -O2 -o nap_probe tools/bench/nap_probe.cc && ./nap_probe
// (docs/PERFORMANCE.md, issue 27's twenty-second round).
#include <sys/prctl.h>

#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <thread>

int main() {
  for (const bool tight : {false, true}) {
    if (tight && prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) != 0) {
      std::perror("prctl(PR_SET_TIMERSLACK)");
      return 1;
    }
    for (const int us : {10, 20, 50}) {
      constexpr int kNaps = 2000;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kNaps; ++i) std::this_thread::sleep_for(std::chrono::microseconds(us));
      const double each =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kNaps;
      std::printf("slack %s: sleep_for(%d us) took %.1f us\n", tight ? "1 us" : "default", us, each);
    }
  }
  return 0;
}

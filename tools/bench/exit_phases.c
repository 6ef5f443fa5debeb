// Times a command's last phases: loaded as LD_PRELOAD, it prints (to stderr, at exit) CLOCK_MONOTONIC when the
// process was loaded and when its exit handlers were done. This library's destructor runs after the handlers
// registered after it was loaded (the CUDA runtime's among them), so with the moment the summary
// line arrived and the moment the parent's wait returned (tools/bench/exit_phases.py), a replay's wall time splits
// into start-up, replay (with the replayer's own teardown), the exit handlers, and the kernel's cleanup.
//   gcc -O2 -shared -fPIC -o /tmp/exit_phases.so tools/bench/exit_phases.c
//   python3 tools/bench/exit_phases.py /tmp/exit_phases.so kvshard replay /tmp/g.jsonl --backend gpu --timing
#include <stdio.h>
#include <time.h>

static double loaded;

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((constructor)) static void Loaded(void) { loaded = Now(); }

__attribute__((destructor)) static void Exiting(void) {
  fprintf(stderr, "exit_phases: loaded %.6f handlers_done %.6f\n", loaded, Now());
}

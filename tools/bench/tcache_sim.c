// Simulates glibc's per-thread cache (tcache) for a process's main thread (kvshard replay's checking thread): for each
// malloc and free there, whether a cache of 7 chunks a size (glibc's default) and one of 64 would have served it, by
// size class (16-byte steps up to 1,032 bytes), and prints the classes that miss most at exit. A free that finds its
// class full overflows into malloc's slower bins; a malloc that finds it empty takes them. It tells which allocation
// sizes the tunable glibc.malloc.tcache_count helps (docs/PERFORMANCE.md, "GPU: trace replay", twentieth round).
// With TCACHE_SIM_CALLERS=1 it also counts the callers of the mallocs a cache of 7 missed (three return addresses, as
// offsets into the executable: `addr2line -f -C -e kvshard 0xOFFSET` names them; tools/bench/tcache_sim_callers.sh).
//   gcc -O2 -shared -fPIC -o /tmp/tcache_sim.so tools/bench/tcache_sim.c -ldl
//   LD_PRELOAD=/tmp/tcache_sim.so kvshard replay /tmp/g.jsonl --backend ref
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { kClasses = 64, kSmall = 7, kLarge = 64 };

static void* (*real_malloc)(size_t);
static void (*real_free)(void*);
static pid_t main_tid;
static __thread int in_hook;
// Per class: the simulated caches' fill, and counts of calls, mallocs not served, frees overflowing (7 and 64).
static unsigned long fill[2][kClasses], mallocs[kClasses], frees[kClasses], missed[2][kClasses], overflowed[2][kClasses];

// The missed mallocs' callers: three return addresses past malloc and operator new, as executable offsets.
enum { kCallerSlots = 8192, kCallerDepth = 3 };
static struct {
  uintptr_t at[kCallerDepth];
  unsigned long count;
  int chunk;
} callers[kCallerSlots];
static int want_callers = -1;
static uintptr_t exe_base;

static void CountCaller(int chunk) {
  void* frames[8];
  const int n = backtrace(frames, 8);
  uintptr_t at[kCallerDepth] = {0, 0, 0};
  for (int i = 0; i < kCallerDepth && 2 + i < n; ++i) at[i] = (uintptr_t)frames[2 + i] - exe_base;
  uintptr_t h = (at[0] * 31 + at[1]) * 31 + at[2] + (uintptr_t)chunk;
  for (int probe = 0; probe < kCallerSlots; ++probe) {
    const int slot = (int)((h + (uintptr_t)probe) % kCallerSlots);
    if (callers[slot].count == 0) {
      memcpy(callers[slot].at, at, sizeof(at));
      callers[slot].chunk = chunk;
    } else if (memcmp(callers[slot].at, at, sizeof(at)) != 0 || callers[slot].chunk != chunk) {
      continue;
    }
    ++callers[slot].count;
    return;
  }
}

static void Init(void) {
  real_malloc = (void* (*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_free = (void (*)(void*))dlsym(RTLD_NEXT, "free");
  main_tid = getpid();
}

// The first object dl_iterate_phdr reports is the executable: its load address.
static int FirstObjectBase(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  exe_base = (uintptr_t)info->dlpi_addr;
  return 1;
}

static void InitCallers(void) {
  const char* v = getenv("TCACHE_SIM_CALLERS");
  want_callers = v != NULL && v[0] == '1';
  if (want_callers) dl_iterate_phdr(FirstObjectBase, NULL);
}

// glibc's tcache index of a request of n bytes (chunk = n + 8 rounded up to 16, at least 32), or -1 when past it.
static int ClassOf(size_t n) {
  const size_t chunk = n + 8 < 32 ? 32 : (n + 8 + 15) & ~(size_t)15;
  const size_t index = (chunk - 32) / 16;
  return index < kClasses ? (int)index : -1;
}

static int OnMainThread(void) { return !in_hook && syscall(SYS_gettid) == main_tid; }

void* malloc(size_t n) {
  if (!real_malloc) Init();
  void* p = real_malloc(n);
  if (OnMainThread()) {
    const int c = ClassOf(n);
    if (c >= 0) {
      ++mallocs[c];
      if (fill[0][c] == 0) {
        in_hook = 1;
        if (want_callers < 0) InitCallers();
        if (want_callers) CountCaller(32 + 16 * c);
        in_hook = 0;
      }
      for (int k = 0; k < 2; ++k) {
        if (fill[k][c] > 0) --fill[k][c]; else ++missed[k][c];
      }
    }
  }
  return p;
}

void free(void* p) {
  if (!real_free) Init();
  if (p != NULL && OnMainThread()) {
    in_hook = 1;
    const int c = ClassOf(malloc_usable_size(p));  // its chunk less 8: the same class
    in_hook = 0;
    if (c >= 0) {
      ++frees[c];
      const unsigned long cap[2] = {kSmall, kLarge};
      for (int k = 0; k < 2; ++k) {
        if (fill[k][c] < cap[k]) ++fill[k][c]; else ++overflowed[k][c];
      }
    }
  }
  real_free(p);
}

__attribute__((destructor)) static void Report(void) {
  in_hook = 1;
  unsigned long m = 0, f = 0, miss[2] = {0, 0}, over[2] = {0, 0};
  for (int c = 0; c < kClasses; ++c) {
    m += mallocs[c];
    f += frees[c];
    for (int k = 0; k < 2; ++k) {
      miss[k] += missed[k][c];
      over[k] += overflowed[k][c];
    }
  }
  fprintf(stderr, "tcache sim, main thread: %lu mallocs, %lu frees up to 1,032 bytes; cache of 7: %lu mallocs missed, "
          "%lu frees overflowed; cache of 64: %lu missed, %lu overflowed\n", m, f, miss[0], over[0], miss[1], over[1]);
  for (int shown = 0; shown < 8; ++shown) {  // the classes whose frees overflow the cache of 7 most
    int best = -1;
    for (int c = 0; c < kClasses; ++c) {
      if (overflowed[0][c] > 0 && (best < 0 || overflowed[0][c] > overflowed[0][best])) best = c;
    }
    if (best < 0) break;
    fprintf(stderr, "  chunk %d bytes: %lu mallocs, overflowed %lu (7) / %lu (64), missed %lu (7) / %lu (64)\n",
            32 + 16 * best, mallocs[best], overflowed[0][best], overflowed[1][best], missed[0][best], missed[1][best]);
    overflowed[0][best] = 0;
  }
  if (want_callers != 1) return;
  for (int shown = 0; shown < 25; ++shown) {  // the callers whose mallocs missed most
    int best = -1;
    for (int i = 0; i < kCallerSlots; ++i) {
      if (callers[i].count > 0 && (best < 0 || callers[i].count > callers[best].count)) best = i;
    }
    if (best < 0) break;
    fprintf(stderr, "  missed %lu: chunk %d at 0x%lx 0x%lx 0x%lx\n", callers[best].count, callers[best].chunk,
            (unsigned long)callers[best].at[0], (unsigned long)callers[best].at[1], (unsigned long)callers[best].at[2]);
    callers[best].count = 0;
  }
}

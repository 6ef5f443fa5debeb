// Counts a process's malloc and realloc calls (operator new calls malloc, so C++ allocations count too), on its main
// thread (kvshard replay's checking thread) and on all threads, and prints both to stderr at exit: an allocation
// count that does not depend on the machine's speed. It also counts the main thread's calls for more than 1,032 bytes:
// glibc's per-thread cache (tcache) serves nothing larger, so each of those takes malloc's slower path (docs/PERFORMANCE.md, "CPU: trace replay", nineteenth round).
//   gcc -O2 -shared -fPIC -o /tmp/malloc_count.so tools/bench/malloc_count.c -ldl
//   LD_PRELOAD=/tmp/malloc_count.so kvshard replay /tmp/g.jsonl --backend ref
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void* (*real_malloc)(size_t);
static void* (*real_realloc)(void*, size_t);
static unsigned long main_calls, main_large, all_calls;
// The largest request glibc's tcache serves (64 bins of 16 bytes, less the chunk header, on 64-bit).
static const size_t kTcacheMax = 1032;
static pid_t main_tid;
static __thread int in_hook;  // dlsym and stdio may allocate: not counted

static void Init(void) {
  real_malloc = (void* (*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_realloc = (void* (*)(void*, size_t))dlsym(RTLD_NEXT, "realloc");
  main_tid = getpid();
}

static void Count(size_t n) {
  if (in_hook) return;
  in_hook = 1;
  __atomic_add_fetch(&all_calls, 1, __ATOMIC_RELAXED);
  if (syscall(SYS_gettid) == main_tid) {
    ++main_calls;
    if (n > kTcacheMax) ++main_large;
  }
  in_hook = 0;
}

void* malloc(size_t n) {
  if (!real_malloc) Init();
  Count(n);
  return real_malloc(n);
}

void* realloc(void* p, size_t n) {
  if (!real_realloc) Init();
  Count(n);
  return real_realloc(p, n);
}

__attribute__((destructor)) static void Report(void) {
  fprintf(stderr, "malloc calls: main thread %lu (%lu of more than %zu bytes), all threads %lu\n", main_calls, main_large,
          kTcacheMax, all_calls);
}

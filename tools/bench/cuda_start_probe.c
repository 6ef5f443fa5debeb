// What a CUDA process pays to start (cuInit, the primary context) and, with tools/bench/exit_phases.py, to exit,
// under the conditions a replay gives it: other threads faulting fresh memory in while the driver starts (the
// replay's readers and checking thread), device memory held, streams made. The driver API through dlopen, so it
// builds without the toolkit (docs/PERFORMANCE.md, the twenty-eighth round):
//   gcc -O2 -pthread -o /tmp/cuda_start_probe tools/bench/cuda_start_probe.c -ldl
//   python3 tools/bench/exit_phases.py /tmp/exit_phases.so /tmp/cuda_start_probe --fault-threads 4 --alloc-mib 256
// Environment variables the driver reads (CUDA_DEVICE_MAX_CONNECTIONS, CUDA_MODULE_LOADING) apply as set.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef int (*InitFn)(unsigned);
typedef int (*DeviceGetFn)(int*, int);
typedef int (*CtxRetainFn)(void**, int);
typedef int (*CtxSetFn)(void*);
typedef int (*MemAllocFn)(unsigned long long*, size_t);
typedef int (*MemsetFn)(unsigned long long, unsigned char, size_t);
typedef int (*SyncFn)(void);
typedef int (*StreamCreateFn)(void**, unsigned);

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static atomic_int started_up;  // the faulting threads stop once the context is up
static long fault_mib = 64;

// Maps `fault_mib` MiB, touches every page, unmaps, again, until the driver is up: the page faults (and the
// mmap/munmap) of threads that allocate while the device thread starts. Returns the pages touched.
static void* Fault(void* arg) {
  (void)arg;
  long pages = 0;
  const size_t bytes = (size_t)fault_mib << 20;
  while (!atomic_load(&started_up)) {
    char* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) break;
    for (size_t at = 0; at < bytes && !atomic_load(&started_up); at += 4096) {
      p[at] = 1;
      ++pages;
    }
    munmap(p, bytes);
  }
  return (void*)pages;
}

#define CHECK(call)                                                 \
  do {                                                              \
    int rc_ = (call);                                               \
    if (rc_ != 0) {                                                 \
      fprintf(stderr, "cuda_start_probe: %s = %d\n", #call, rc_);   \
      return 1;                                                     \
    }                                                               \
  } while (0)

int main(int argc, char** argv) {
  int fault_threads = 0, streams = 0;
  long alloc_mib = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--fault-threads")) {
      fault_threads = atoi(argv[i + 1]);
    } else if (!strcmp(argv[i], "--fault-mib")) {
      fault_mib = atol(argv[i + 1]);
    } else if (!strcmp(argv[i], "--alloc-mib")) {
      alloc_mib = atol(argv[i + 1]);
    } else if (!strcmp(argv[i], "--streams")) {
      streams = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "cuda_start_probe: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (fault_threads < 0 || fault_threads > 64 || fault_mib <= 0 || alloc_mib < 0 || streams < 0 || streams > 128) {
    fprintf(stderr, "cuda_start_probe: --fault-threads 0..64, --fault-mib > 0, --alloc-mib >= 0, --streams 0..128\n");
    return 2;
  }
  pthread_t threads[64];
  for (int i = 0; i < fault_threads; ++i) pthread_create(&threads[i], NULL, Fault, NULL);
  const double t0 = Now();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "cuda_start_probe: %s\n", dlerror());
    return 1;
  }
  InitFn init = (InitFn)dlsym(lib, "cuInit");
  DeviceGetFn device_get = (DeviceGetFn)dlsym(lib, "cuDeviceGet");
  CtxRetainFn retain = (CtxRetainFn)dlsym(lib, "cuDevicePrimaryCtxRetain");
  CtxSetFn set = (CtxSetFn)dlsym(lib, "cuCtxSetCurrent");
  MemAllocFn alloc = (MemAllocFn)dlsym(lib, "cuMemAlloc_v2");
  MemsetFn memset_d8 = (MemsetFn)dlsym(lib, "cuMemsetD8_v2");
  SyncFn sync = (SyncFn)dlsym(lib, "cuCtxSynchronize");
  StreamCreateFn stream_create = (StreamCreateFn)dlsym(lib, "cuStreamCreate");
  const double t1 = Now();
  CHECK(init(0));
  const double t2 = Now();
  int dev = 0;
  void* ctx = NULL;
  CHECK(device_get(&dev, 0));
  CHECK(retain(&ctx, dev));
  CHECK(set(ctx));
  const double t3 = Now();
  atomic_store(&started_up, 1);
  long touched = 0;
  for (int i = 0; i < fault_threads; ++i) {
    void* pages = NULL;
    pthread_join(threads[i], &pages);
    touched += (long)pages;
  }
  const double t4 = Now();
  for (int i = 0; i < streams; ++i) {
    void* s = NULL;
    CHECK(stream_create(&s, 1));  // CU_STREAM_NON_BLOCKING
  }
  if (alloc_mib > 0) {
    unsigned long long p = 0;
    CHECK(alloc(&p, (size_t)alloc_mib << 20));
    CHECK(memset_d8(p, 0, (size_t)alloc_mib << 20));
  }
  CHECK(sync());
  const double t5 = Now();
  const char* conns = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  printf("dlopen %.1f ms, cuInit %.1f ms, primary context %.1f ms, %d faulting threads touched %ld pages; "
         "%d streams + %ld MiB allocated and set %.1f ms (CUDA_DEVICE_MAX_CONNECTIONS=%s)\n",
         1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2), fault_threads, touched, streams, alloc_mib,
         1e3 * (t5 - t4), conns ? conns : "unset");
  fflush(stdout);
  return 0;
}

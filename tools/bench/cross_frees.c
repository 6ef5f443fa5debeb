// Counts the chunks a reader thread malloc'ed and the main thread (kvshard replay's checking thread) freed, by the
// allocation site (three return addresses, as offsets into the executable); with CROSS_FREES_MAKER=main the other
// way: chunks the main thread made and another thread (the device or plan thread) freed. glibc frees a chunk into the arena of
// the thread that made it, under that arena's lock once the freeing thread's own cache is full, and the maker then
// allocates anew: such frees cost both threads (docs/PERFORMANCE.md, "CPU: trace replay", twenty-fifth round).
//   gcc -O2 -shared -fPIC -o /tmp/cross_frees.so tools/bench/cross_frees.c -ldl
//   LD_PRELOAD=/tmp/cross_frees.so kvshard replay /tmp/g.jsonl --read-threads 2 2> /tmp/cross.txt
//   CROSS_FREES_MAKER=main LD_PRELOAD=/tmp/cross_frees.so kvshard replay /tmp/g.jsonl --backend gpu 2> /tmp/cross.txt
//   sort -k2 -n -r /tmp/cross.txt | head   # then: addr2line -i -f -C -e kvshard OFFSET (a build with -g)
// Sites with at least CROSS_FREES_MIN such frees are listed (default 500).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void* (*real_malloc)(size_t);
static void (*real_free)(void*);
static pid_t main_tid;
static int main_makes;  // CROSS_FREES_MAKER=main: count the main thread's chunks that other threads free
static __thread int in_hook;  // backtrace and stdio may allocate: not counted
static volatile int table_lock;
// Live chunks the counted maker made: pointer -> site (open addressing; 1 marks a freed slot).
#define kChunks (1u << 23)
static void** chunk_ptr;
static unsigned* chunk_site;
#define kSites 8192
static void* site_key[kSites][3];
static unsigned long site_made[kSites], site_crossed[kSites];
static unsigned long exe_base;

static void Lock(void) {
  while (__sync_lock_test_and_set(&table_lock, 1)) {
  }
}
static void Unlock(void) { __sync_lock_release(&table_lock); }
static void Init(void) {
  real_malloc = (void* (*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_free = (void (*)(void*))dlsym(RTLD_NEXT, "free");
  main_tid = getpid();
  const char* maker = getenv("CROSS_FREES_MAKER");
  main_makes = maker != NULL && maker[0] == 'm';
}
static unsigned Slot(void* p) { return (unsigned)(((unsigned long)p >> 4) * 2654435761u) & (kChunks - 1); }

void* malloc(size_t n) {
  if (!real_malloc) Init();
  void* p = real_malloc(n);
  if (p == NULL || in_hook || chunk_ptr == NULL || (syscall(SYS_gettid) == main_tid) != main_makes) return p;
  in_hook = 1;
  void* frames[5];
  const int depth = backtrace(frames, 5);
  void* key[3] = {depth > 2 ? frames[2] : 0, depth > 3 ? frames[3] : 0, depth > 4 ? frames[4] : 0};
  unsigned site = ((unsigned long)key[0] * 31 + (unsigned long)key[1] * 7 + (unsigned long)key[2]) % kSites;
  Lock();
  for (int i = 0; i < kSites; ++i, site = (site + 1) % kSites) {
    if (site_made[site] == 0) {
      site_key[site][0] = key[0], site_key[site][1] = key[1], site_key[site][2] = key[2];
    }
    if (site_key[site][0] == key[0] && site_key[site][1] == key[1] && site_key[site][2] == key[2]) {
      ++site_made[site];
      break;
    }
  }
  unsigned h = Slot(p);
  while (chunk_ptr[h] != NULL && chunk_ptr[h] != (void*)1) h = (h + 1) & (kChunks - 1);
  chunk_ptr[h] = p;
  chunk_site[h] = site;
  Unlock();
  in_hook = 0;
  return p;
}

void free(void* p) {
  if (!real_free) Init();
  if (p != NULL && chunk_ptr != NULL && !in_hook) {
    in_hook = 1;
    const int by_main = syscall(SYS_gettid) == main_tid;
    Lock();
    unsigned h = Slot(p);
    while (chunk_ptr[h] != NULL && chunk_ptr[h] != p) h = (h + 1) & (kChunks - 1);
    if (chunk_ptr[h] == p) {
      if (by_main != main_makes) ++site_crossed[chunk_site[h]];
      chunk_ptr[h] = (void*)1;
    }
    Unlock();
    in_hook = 0;
  }
  real_free(p);
}

static int FirstObject(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size, (void)data;
  exe_base = info->dlpi_addr;
  return 1;
}

__attribute__((constructor)) static void Start(void) {
  Init();
  in_hook = 1;
  chunk_ptr = (void**)calloc(kChunks, sizeof(void*));
  chunk_site = (unsigned*)calloc(kChunks, sizeof(unsigned));
  in_hook = 0;
}

__attribute__((destructor)) static void Report(void) {
  in_hook = 1;
  dl_iterate_phdr(FirstObject, NULL);
  const char* min_env = getenv("CROSS_FREES_MIN");  // the fewest frees a site listed has (default 500)
  const unsigned long min_shown = min_env != NULL ? strtoul(min_env, NULL, 10) : 500;
  unsigned long total = 0;
  for (int i = 0; i < kSites; ++i) total += site_crossed[i];
  fprintf(stderr, main_makes ? "cross_frees: %lu chunks made by the main thread were freed on other threads\n"
                             : "cross_frees: %lu chunks made on other threads were freed by the main thread\n",
          total);
  for (int i = 0; i < kSites; ++i) {
    if (site_crossed[i] < min_shown) continue;
    fprintf(stderr, "  site %lu of %lu at %lx %lx %lx\n", site_crossed[i], site_made[i],
            (unsigned long)site_key[i][0] - exe_base, (unsigned long)site_key[i][1] - exe_base,
            (unsigned long)site_key[i][2] - exe_base);
  }
}

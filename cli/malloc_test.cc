// kvshard's malloc (//third_party:malloc, cc_binary's `malloc`): glibc's, or jemalloc with
// --define=kvshard_malloc=jemalloc outside the sanitizers and libFuzzer. This test links the same malloc the binary
// does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

// jemalloc's control call: defined only where jemalloc is linked (weak: null otherwise).
extern "C" int mallctl(const char* name, void* old_value, size_t* old_size, void* new_value, size_t new_size)
    __attribute__((weak));

namespace kvshard::cli {
namespace {

#if defined(KVSHARD_JEMALLOC_MALLOC) && !defined(KVSHARD_SANITIZER_BUILD) && !defined(KVSHARD_FUZZ_BUILD)
constexpr bool kJemallocExpected = true;
#else
constexpr bool kJemallocExpected = false;
#endif

TEST(MallocTest, TheBuildsMallocIsTheOneItAsksFor) {
  EXPECT_EQ(mallctl != nullptr, kJemallocExpected)
      << "mallctl is " << (mallctl != nullptr ? "linked" : "absent") << "; jemalloc expected: " << kJemallocExpected;
}

TEST(MallocTest, JemallocServesThisThreadsAllocations) {
  if (mallctl == nullptr)
    GTEST_SKIP() << "jemalloc is not this build's malloc (the default; --define=kvshard_malloc=jemalloc)";
  uint64_t* allocated = nullptr;  // jemalloc's running count of this thread's allocated bytes
  size_t size = sizeof(allocated);
  ASSERT_EQ(mallctl("thread.allocatedp", &allocated, &size, nullptr, 0), 0);
  const uint64_t before = *allocated;
  std::unique_ptr<char[]> block(new char[1 << 20]);  // operator new goes to malloc
  block[0] = 1;
  EXPECT_GE(*allocated - before, uint64_t{1} << 20) << "a 1 MiB new did not go through jemalloc";
}

}  // namespace
}  // namespace kvshard::cli

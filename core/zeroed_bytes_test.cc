// ZeroedBytes: reads as zeros, keeps what is written, copies and moves its bytes, and a large one faults in no page
// until written.
#include "core/zeroed_bytes.h"

#include <sys/resource.h>

#include <cstdint>
#include <utility>

#include <gtest/gtest.h>

namespace kvshard {
namespace {

TEST(ZeroedBytes, ReadsAsZerosKeepsWritesAndCopiesThem) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{1} << 20}) {
    ZeroedBytes b(n);
    ASSERT_EQ(b.size(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], 0) << "n=" << n << " i=" << i;
    for (size_t i = 0; i < n; i += 997) b[i] = static_cast<uint8_t>(i * 31 + 7);
    const ZeroedBytes copy = b;
    ZeroedBytes assigned(3);
    assigned = copy;
    const ZeroedBytes moved = std::move(b);
    for (const ZeroedBytes* c : {&copy, static_cast<const ZeroedBytes*>(&assigned), &moved}) {
      ASSERT_EQ(c->size(), n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ((*c)[i], i % 997 == 0 ? static_cast<uint8_t>(i * 31 + 7) : 0) << "n=" << n << " i=" << i;
      }
    }
  }
}

[[maybe_unused]] long MinorFaults() {  // unused where AddressSanitizer skips the test below
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

TEST(ZeroedBytes, ALargeOneFaultsInOnlyThePagesWritten) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator decides how calloc's memory is made: page faults are its own";
#else
  constexpr size_t kBytes = size_t{256} << 20;  // 65,536 pages of 4 KiB, zeroed by a std::vector<uint8_t>(n)
  const long before = MinorFaults();
  ZeroedBytes b(kBytes);
  for (size_t i = 0; i < kBytes; i += kBytes / 16) b[i] = 1;  // 16 pages written
  const long faults = MinorFaults() - before;
  EXPECT_LT(faults, 4096) << "a ZeroedBytes of " << kBytes << " bytes faulted in " << faults << " pages";
  EXPECT_EQ(b[kBytes / 16], 1);
  EXPECT_EQ(b[kBytes - 1], 0);
#endif
}

}  // namespace
}  // namespace kvshard

// ZeroedBytes: reads as zeros, keeps what is written, grows with zeros, and a large one faults in no page until
// written.
#include "core/zeroed_bytes.h"

#include <sys/resource.h>

#include <cstdint>

#include <gtest/gtest.h>

namespace kvshard {
namespace {

TEST(ZeroedBytes, ReadsAsZerosKeepsWritesAndGrowsWithZeros) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{1} << 20}) {
    ZeroedBytes b(n);
    ASSERT_EQ(b.size(), n);
    for (size_t i = 0; i < n; i += 997) ASSERT_EQ(b[i], 0) << "n=" << n << " i=" << i;
    for (size_t i = 0; i < n; i += 997) b[i] = static_cast<uint8_t>(i * 31 + 7);
    ZeroedBytes copy = b;
    copy.resize(n + 5000);
    for (size_t i = 0; i < n; i += 997) ASSERT_EQ(copy[i], static_cast<uint8_t>(i * 31 + 7)) << "n=" << n;
    for (size_t i = n; i < n + 5000; ++i) ASSERT_EQ(copy[i], 0) << "n=" << n << " i=" << i;
  }
  ZeroedBytes filled(100, 9);  // a value given is written as usual
  for (uint8_t x : filled) ASSERT_EQ(x, 9);
}

long MinorFaults() {
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

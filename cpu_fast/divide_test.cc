// The dividers against / and % on edge and random numerators, for small, power-of-two and large divisors.
#include "cpu_fast/divide.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace kvshard::fast {
namespace {

std::vector<int64_t> Divisors() {
  std::vector<int64_t> d = {1, 2, 3, 5, 7, 8, 9, 63, 64, 65, 100, 255, 256, 1000, 4095, 65536, (1 << 20) - 1, 1 << 20};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50; ++i) d.push_back(1 + static_cast<int64_t>(rng() % (1 << 20)));
  return d;
}

// Numerators around multiples of d and around `limit`, plus random ones below it.
std::vector<int64_t> Numerators(int64_t d, int64_t limit) {
  std::vector<int64_t> n = {0, 1, d - 1, d, d + 1, limit - 1, limit - d, limit - d - 1};
  std::mt19937_64 rng(static_cast<uint64_t>(d));
  for (int i = 0; i < 2000; ++i) {
    const int64_t x = static_cast<int64_t>(rng() % static_cast<uint64_t>(limit));
    n.push_back(x);
    n.push_back(x / d * d);
    n.push_back(x / d * d - 1);
  }
  std::vector<int64_t> in_range;
  for (int64_t x : n) {
    if (x >= 0 && x < limit) in_range.push_back(x);
  }
  return in_range;
}

TEST(DivideTest, FastDivModMatchesIntegerDivisionBelowItsLimit) {
  for (int64_t d : Divisors()) {
    const FastDivMod by(static_cast<uint64_t>(d));
    for (int64_t n : Numerators(d, kFastDivLimit)) {
      ASSERT_EQ(by.Div(n), static_cast<uint64_t>(n / d)) << n << " / " << d;
      ASSERT_EQ(by.Mod(n), static_cast<uint64_t>(n % d)) << n << " % " << d;
    }
  }
}

TEST(DivideTest, FastDivModOfAPowerOfTwoTakesAnyNumerator) {
  for (int shift = 0; shift < 40; ++shift) {
    const int64_t d = int64_t{1} << shift;
    const FastDivMod by(static_cast<uint64_t>(d));
    for (int64_t n : Numerators(d, int64_t{1} << 62)) {
      ASSERT_EQ(by.Div(n), static_cast<uint64_t>(n / d)) << n << " / " << d;
      ASSERT_EQ(by.Mod(n), static_cast<uint64_t>(n % d)) << n << " % " << d;
    }
  }
}

TEST(DivideTest, DividerMatchesIntegerDivisionBelowItsLimit) {
  for (int64_t d : Divisors()) {
    const Divider by(d);
    for (int64_t n : Numerators(d, kDividerLimit)) ASSERT_EQ(by.Div(n), n / d) << n << " / " << d;
  }
}

}  // namespace
}  // namespace kvshard::fast

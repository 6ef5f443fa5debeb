// Tests for strict integer parsing.
#include "core/parse.h"

#include <gtest/gtest.h>

namespace kvshard {
namespace {

TEST(ParseTest, Int64) {
  EXPECT_EQ(ParseInt64("42", "x").value(), 42);
  EXPECT_EQ(ParseInt64("-7", "x").value(), -7);
  EXPECT_EQ(ParseInt64("+7", "x").value(), 7);
  EXPECT_FALSE(ParseInt64("", "x").ok());
  EXPECT_FALSE(ParseInt64("4x", "x").ok());
  EXPECT_FALSE(ParseInt64(" 4", "x").ok());
  EXPECT_FALSE(ParseInt64("99999999999999999999", "x").ok());
  EXPECT_EQ(ParseInt64("x", "--rank").status().message(), "--rank: not an integer: 'x'");
  EXPECT_EQ(ParseInt64("18446744073709551615", "--rank").status().message(),
            "--rank: integer out of range: '18446744073709551615' (an int64 is in [-9223372036854775808, "
            "9223372036854775807])");
  EXPECT_TRUE(IsOutOfRange(ParseInt64("-9223372036854775809", "x").status()));
  EXPECT_FALSE(IsOutOfRange(ParseInt64("9223372036854775807x", "x").status()));
}

TEST(ParseTest, List) {
  EXPECT_EQ(ParseInt64List("1,2,3", "l").value(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(ParseInt64List("", "l").value().empty());
  auto bad = ParseInt64List("1,x", "--locs");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--locs[1]: not an integer: 'x'");
  EXPECT_FALSE(ParseInt64List("1,,2", "l").ok());
  EXPECT_FALSE(ParseInt64List("1,", "l").ok());
}

}  // namespace
}  // namespace kvshard

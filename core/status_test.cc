// Tests for Status, StatusOr and the error macros.
#include "core/status.h"

#include <gtest/gtest.h>

namespace kvshard {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("x: must be even, got ", x);
  return x / 2;
}

Status Quarter(int x, int* out) {
  KVSHARD_ASSIGN_OR_RETURN(int h, Half(x));
  KVSHARD_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = InvalidArgument("field: bad ", 3);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "field: bad 3");
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: field: bad 3");
}

TEST(StatusTest, PropagationMacros) {
  int q = 0;
  EXPECT_TRUE(Quarter(8, &q).ok());
  EXPECT_EQ(q, 2);
  Status s = Quarter(6, &q);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x: must be even, got 3");
}

TEST(StatusTest, ExitCodes) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), 0);
  EXPECT_EQ(ExitCodeFor(Mismatch("a")), 1);
  EXPECT_EQ(ExitCodeFor(InvalidArgument("a")), 2);
  EXPECT_EQ(ExitCodeFor(OutOfRange("a")), 2);
  EXPECT_EQ(ExitCodeFor(Unavailable("a")), 3);
}

TEST(StatusTest, AnnotatePrefixesTheMessageAndKeepsTheCode) {
  const Status s = Annotate(OutOfRange("locs[2]: too large"), "frees[", 1, "].");
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "frees[1].locs[2]: too large");
  EXPECT_TRUE(Annotate(Status::Ok(), "line 3: ").ok());
  EXPECT_EQ(Annotate(Mismatch("x"), "line ", 3, ": ").message(), "line 3: x");
}

}  // namespace
}  // namespace kvshard

// Tests for Status, StatusOr and the error macros.
#include "core/status.h"

#include <climits>
#include <iomanip>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

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

// What `std::ostream <<` writes for each of `args`, one after the other (StrCat's contract).
template <typename... Args>
std::string Streamed(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// StrCat appends text and integers without a stream: each kind it writes itself is what a stream writes, at the
// edges of its range too; bools, 1-byte integers and floats keep the stream's form ("1", a character, "0.5"), and a
// manipulator changes the parts after it as in one stream (std::hex, std::setw).
RC_GTEST_PROP(StrCatProps, WritesEachPartAsAStreamDoes, ()) {
  const auto edge64 = rc::gen::element<int64_t>(INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX);
  const int64_t i64 = *rc::gen::oneOf(edge64, rc::gen::arbitrary<int64_t>());
  const uint64_t u64 = *rc::gen::oneOf(rc::gen::element<uint64_t>(0, 1, UINT64_MAX), rc::gen::arbitrary<uint64_t>());
  const int i32 = *rc::gen::oneOf(rc::gen::element<int>(INT_MIN, -1, 0, INT_MAX), rc::gen::arbitrary<int>());
  const auto u16 = *rc::gen::arbitrary<uint16_t>();
  const auto s8 = *rc::gen::arbitrary<int8_t>();
  const auto u8 = *rc::gen::arbitrary<uint8_t>();
  const char c = *rc::gen::inRange<char>(1, 127);
  const bool b = *rc::gen::arbitrary<bool>();
  const double d = *rc::gen::element(0.5, -1.25, 1e300, 3.0);
  const std::string text = *rc::gen::arbitrary<std::string>();
  const std::string_view view(text);
  const size_t size = *rc::gen::arbitrary<size_t>();
  RC_ASSERT(StrCat("requests[", size, "].", i64, u64, i32, u16) ==
            Streamed("requests[", size, "].", i64, u64, i32, u16));
  RC_ASSERT(StrCat(text, view, c, b, s8, u8, d, "") == Streamed(text, view, c, b, s8, u8, d, ""));
  RC_ASSERT(StrCat() == std::string());
  RC_ASSERT(StrCat("got word0 0x", std::hex, u64, " expected 0x", i32) ==
            Streamed("got word0 0x", std::hex, u64, " expected 0x", i32));
  RC_ASSERT(StrCat("[", std::setw(12), i64, "]", u16) == Streamed("[", std::setw(12), i64, "]", u16));
}

TEST(StrCatTest, HexAppliesToTheIntegersAfterIt) {
  EXPECT_EQ(StrCat("0x", std::hex, 255, " 0x", uint32_t{4096}), "0xff 0x1000");
  EXPECT_EQ(StrCat("rows ", 255), "rows 255");
}

TEST(QuoteInputTest, ShortPlainValuesUnchanged) {
  EXPECT_EQ(QuoteInput("split"), "\"split\"");
  EXPECT_EQ(QuoteInput("nope", '\''), "'nope'");
  EXPECT_EQ(QuoteInput("model", '\0'), "model");
  EXPECT_EQ(QuoteInput(""), "\"\"");
  EXPECT_EQ(QuoteInput("日本語 ünïcödé"), "\"日本語 ünïcödé\"");  // visible UTF-8 as is
}

TEST(QuoteInputTest, InvisibleCharactersEscaped) {
  EXPECT_EQ(QuoteInput("\xEF\xBB\xBFsplit"), "\"\\ufeffsplit\"");  // BOM
  EXPECT_EQ(QuoteInput("spl\xE2\x80\x8Bit"), "\"spl\\u200bit\"");  // zero-width space
  EXPECT_EQ(QuoteInput("a\xE2\x80\xAE"
                       "b"),
            "\"a\\u202eb\"");  // right-to-left override
  EXPECT_EQ(QuoteInput("a\xC2\xA0"
                       "b\xC2\xAD"),
            "\"a\\u00a0b\\u00ad\"");  // no-break space, soft hyphen
  EXPECT_EQ(QuoteInput("\xE2\x81\xA0\xE2\x80\xA8"), "\"\\u2060\\u2028\"");
  EXPECT_EQ(QuoteInput("\xF3\xA0\x80\x81"), "\"\\U000e0001\"");  // a tag character
}

TEST(QuoteInputTest, ControlBytesAndInvalidUtf8Escaped) {
  EXPECT_EQ(QuoteInput(std::string("a\0b\n\t\r\x7f", 7)), "\"a\\x00b\\n\\t\\r\\x7f\"");
  EXPECT_EQ(QuoteInput("\xff\xfe"), "\"\\xff\\xfe\"");
  EXPECT_EQ(QuoteInput("\xC0\xAF"), "\"\\xc0\\xaf\"");           // an overlong '/'
  EXPECT_EQ(QuoteInput("\xED\xA0\x80"), "\"\\xed\\xa0\\x80\"");  // a surrogate
  EXPECT_EQ(QuoteInput("\xE2\x80"), "\"\\xe2\\x80\"");           // cut mid-sequence
}

TEST(QuoteInputTest, BackslashAndTheQuoteEscaped) {
  EXPECT_EQ(QuoteInput("a\"b\\c'd"), "\"a\\\"b\\\\c'd\"");
  EXPECT_EQ(QuoteInput("it's", '\''), "'it\\'s'");
  EXPECT_EQ(QuoteInput("a\"\\", '\0'), "a\"\\\\");
}

TEST(QuoteInputTest, LongValuesCutWithTheirLength) {
  const std::string exact(kMaxQuotedChars, 'a');
  EXPECT_EQ(QuoteInput(exact), "\"" + exact + "\"");
  const std::string huge(1 << 20, 'a');
  EXPECT_EQ(QuoteInput(huge), "\"" + exact + "\u2026\" (1048576 bytes)");
  EXPECT_EQ(QuoteInput(huge, '\''), "'" + exact + "\u2026' (1048576 bytes)");
  EXPECT_EQ(QuoteInput(huge, '\0'), exact + "\u2026 (1048576 bytes)");
  // Escapes count their length: the shown part stays within kMaxQuotedChars characters.
  std::string zero_width;
  for (int i = 0; i < 100; ++i) zero_width += "\xE2\x80\x8B";
  std::string want;
  for (size_t i = 0; i < kMaxQuotedChars / 6; ++i) want += "\\u200b";
  EXPECT_EQ(QuoteInput(zero_width), "\"" + want + "\u2026\" (300 bytes)");
  // Multi-byte characters are never split, and count one each.
  std::string wide;
  for (int i = 0; i < 70; ++i) wide += "é";
  std::string wide_shown;
  for (size_t i = 0; i < kMaxQuotedChars; ++i) wide_shown += "é";
  EXPECT_EQ(QuoteInput(wide), "\"" + wide_shown + "\u2026\" (140 bytes)");
}

}  // namespace
}  // namespace kvshard

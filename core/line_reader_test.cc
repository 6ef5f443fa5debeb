// ReadLine: the lines of std::getline, each checked as it grows; examples at the chunk edges and the ends.
#include "core/line_reader.h"

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kvshard {
namespace {

// Every line of `text` through ReadLine (checks recorded in *checks when given).
std::vector<std::string> Lines(const std::string& text, std::vector<int64_t>* checks = nullptr) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  std::string line;
  LineCheck check;
  if (checks)
    check = [checks](int64_t n) {
      checks->push_back(n);
      return Status::Ok();
    };
  while (true) {
    StatusOr<bool> got = ReadLine(in, &line, check);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || !*got) return lines;
    lines.push_back(line);
  }
}

using V = std::vector<std::string>;

// *newline tells a last line cut before its '\n' from a whole one, also at the chunk edges.
TEST(ReadLineTest, SaysWhetherTheLineEndedWithANewline) {
  for (const size_t n : {size_t{0}, size_t{1}, size_t{kLineCheckBytes - 1}, size_t{kLineCheckBytes},
                         size_t{kLineCheckBytes + 1}, size_t{2 * kLineCheckBytes}}) {
    for (const bool cut : {false, true}) {
      const std::string last(n == 0 && cut ? 1 : n, 'x');
      std::istringstream in("a\n" + last + (cut ? "" : "\n"));
      std::string line;
      bool newline = false;
      ASSERT_TRUE(*ReadLine(in, &line, {}, &newline));
      EXPECT_TRUE(newline);
      EXPECT_EQ(line, "a");
      ASSERT_TRUE(*ReadLine(in, &line, {}, &newline));
      EXPECT_EQ(newline, !cut) << n;
      EXPECT_EQ(line, last);
      EXPECT_FALSE(*ReadLine(in, &line, {}, &newline));
    }
  }
}

TEST(ReadLineTest, TheEnds) {
  EXPECT_EQ(Lines(""), V{});
  EXPECT_EQ(Lines("\n"), V{""});
  EXPECT_EQ(Lines("\n\n"), (V{"", ""}));
  EXPECT_EQ(Lines("a"), V{"a"});  // the last line without its '\n'
  EXPECT_EQ(Lines("a\nb"), (V{"a", "b"}));
  EXPECT_EQ(Lines("a\r\nb\n"), (V{"a\r", "b"}));  // '\r' is the caller's (the workload reader drops it)
  EXPECT_EQ(Lines(std::string("a\0b\n", 4)), V{std::string("a\0b", 3)});  // NUL bytes stay
}

TEST(ReadLineTest, LinesAtTheChunkEdges) {
  const int64_t k = kLineCheckBytes;
  for (const int64_t n : {k - 1, k, k + 1, 2 * k - 1, 2 * k, 2 * k + 1, 3 * k + 5}) {
    const std::string a(static_cast<size_t>(n), 'a');
    EXPECT_EQ(Lines(a + "\n" + "b\n"), (V{a, "b"})) << n;
    EXPECT_EQ(Lines(a), V{a}) << n;
    std::vector<int64_t> checks;
    Lines(a + "\n", &checks);
    // Each full chunk the line goes on past, then its end: it never grows by more than a chunk unchecked.
    std::vector<int64_t> want;
    for (int64_t m = k; m < n; m += k) want.push_back(m);
    want.push_back(n);
    EXPECT_EQ(checks, want) << n;
  }
}

TEST(ReadLineTest, ACheckErrorStopsTheReadAsIs) {
  std::istringstream in(std::string(3 * kLineCheckBytes, 'x') + "\nnext\n");
  std::string line;
  int calls = 0;
  const LineCheck at_most_one_chunk = [&](int64_t n) {
    ++calls;
    return n > kLineCheckBytes ? InvalidArgument("record: ", n, " bytes") : Status::Ok();
  };
  const StatusOr<bool> got = ReadLine(in, &line, at_most_one_chunk);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "record: " + std::to_string(2 * kLineCheckBytes) + " bytes");
  EXPECT_EQ(calls, 2);
  EXPECT_LE(line.size(), static_cast<size_t>(2 * kLineCheckBytes));  // never the whole line
}

}  // namespace
}  // namespace kvshard

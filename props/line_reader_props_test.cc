// ReadLine (core/line_reader.h) against std::getline on texts whose lines sit at the 64 KiB chunk edges, and its
// bound: with a limit, the first line past it is the error, and no line grows more than a chunk past the limit.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/line_reader.h"
#include "props/property.h"

namespace kvshard::props {
namespace {

// A line's length: near a chunk edge (0, 1, k-1, k, k+1, 2k, ...) or anywhere in [0, 3k].
rc::Gen<int64_t> LineLength() {
  const int64_t k = kLineCheckBytes;
  return rc::gen::weightedOneOf<int64_t>(
      {{2, rc::gen::elementOf(std::vector<int64_t>{0, 1, k - 1, k, k + 1, 2 * k - 1, 2 * k, 2 * k + 1})},
       {1, rc::gen::inRange<int64_t>(0, 3 * k + 1)},
       {2, rc::gen::inRange<int64_t>(0, 40)}});
}

// A text of lines: byte j of line i from (seed, i, j), any byte but '\n' (NUL, '\r' and bytes >= 0x80 too).
std::string MakeText(const std::vector<int64_t>& lengths, uint64_t seed, bool final_newline) {
  std::string text;
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (int64_t j = 0; j < lengths[i]; ++j) {
      uint64_t x = seed ^ (i * 0x9E3779B97F4A7C15ULL) ^ (static_cast<uint64_t>(j) * 0xBF58476D1CE4E5B9ULL);
      x ^= x >> 31;
      const char c = static_cast<char>(x * 0x94D049BB133111EBULL >> 56);
      text += c == '\n' ? 'n' : c;
    }
    if (i + 1 < lengths.size() || final_newline) text += '\n';
  }
  return text;
}

KVSHARD_PROP(LineReaderProps, ReadsTheLinesOfGetline, ()) {
  const auto lengths = *rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange(0, 6), LineLength());
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const bool final_newline = *rc::gen::arbitrary<bool>();
  const std::string text = MakeText(lengths, seed, final_newline);
  std::istringstream want_in(text), got_in(text);
  std::string want, got;
  for (int64_t n = 0;; ++n) {
    int64_t last_check = -1;
    const LineCheck check = [&](int64_t bytes) {
      RC_ASSERT(bytes >= last_check);  // the line only grows
      last_check = bytes;
      return Status::Ok();
    };
    const StatusOr<bool> more = ReadLine(got_in, &got, check);
    RC_ASSERT(more.ok());
    const bool want_more = static_cast<bool>(std::getline(want_in, want));
    RC_LOG() << "line " << n << ": getline " << want_more << " (" << want.size() << " B), ReadLine " << *more << " ("
             << got.size() << " B)\n";
    RC_ASSERT(*more == want_more);
    if (!want_more) break;
    RC_ASSERT(got == want);
    RC_ASSERT(last_check == static_cast<int64_t>(got.size()));  // checked at the line's end
  }
}

KVSHARD_PROP(LineReaderProps, TheFirstLinePastTheLimitIsTheError, ()) {
  const auto lengths = *rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange(1, 6), LineLength());
  const int64_t limit = *LineLength();
  const std::string text = MakeText(lengths, *rc::gen::arbitrary<uint64_t>(), true);
  std::istringstream in(text);
  std::string line;
  const LineCheck check = [limit](int64_t bytes) {
    return bytes > limit ? InvalidArgument("record: ", bytes, " > ", limit) : Status::Ok();
  };
  for (const int64_t length : lengths) {
    const StatusOr<bool> more = ReadLine(in, &line, check);
    if (length > limit) {
      RC_ASSERT(!more.ok());
      RC_ASSERT(static_cast<int64_t>(line.size()) <= limit + kLineCheckBytes);  // held: at most a chunk past it
      return;
    }
    RC_ASSERT(more.ok() && *more);
    RC_ASSERT(static_cast<int64_t>(line.size()) == length);
  }
}

}  // namespace
}  // namespace kvshard::props

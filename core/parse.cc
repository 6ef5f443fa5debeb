// Strict integer parsing via std::from_chars.
#include "core/parse.h"

#include <charconv>
#include <cstdint>

namespace kvshard {

StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& field) {
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgument(field, ": integer out of range: ", QuoteInput(text, '\''), " (an int64 is in [", INT64_MIN,
                           ", ", INT64_MAX, "])");
  }
  if (ec != std::errc() || ptr != end || begin == end) {
    return InvalidArgument(field, ": not an integer: ", QuoteInput(text, '\''));
  }
  return value;
}

bool IsOutOfRange(const Status& status) {
  return !status.ok() && status.message().find(": integer out of range: '") != std::string::npos;
}

StatusOr<std::vector<int64_t>> ParseInt64List(const std::string& text, const std::string& field) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    KVSHARD_ASSIGN_OR_RETURN(int64_t v, ParseInt64(item, StrCat(field, "[", out.size(), "]")));
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace kvshard

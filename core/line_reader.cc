// ReadLine: std::istream::getline into a fixed chunk, appended until the '\n', checking the line as it grows.
#include "core/line_reader.h"

namespace kvshard {

StatusOr<bool> ReadLine(std::istream& in, std::string* line, const LineCheck& check, bool* newline) {
  line->clear();
  char chunk[kLineCheckBytes + 1];
  bool any = false;
  while (true) {
    in.getline(chunk, sizeof chunk);
    const std::streamsize got = in.gcount();                             // with the '\n' when one was extracted
    const bool full = in.fail() && !in.eof() && got == kLineCheckBytes;  // the line goes on past the chunk
    const bool ended = !in.fail() && !in.eof();                          // stopped at (and extracted) a '\n'
    const std::streamsize stored = ended ? got - 1 : got;
    if (stored > 0) line->append(chunk, static_cast<size_t>(stored));
    any = any || got > 0;
    if (full) {
      in.clear(in.rdstate() & ~std::ios::failbit);
      if (check) KVSHARD_RETURN_IF_ERROR(check(static_cast<int64_t>(line->size())));
      continue;
    }
    if (!any) return false;
    if (newline != nullptr) *newline = ended;
    if (check) KVSHARD_RETURN_IF_ERROR(check(static_cast<int64_t>(line->size())));
    return true;
  }
}

}  // namespace kvshard

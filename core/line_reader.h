// Line-by-line reading with each line's memory bounded: a line past the caller's limit is an error found while
// the line is read, so a file of one 100 GB line never fills memory (the trace and workload readers).
#ifndef KVSHARD_CORE_LINE_READER_H_
#define KVSHARD_CORE_LINE_READER_H_

#include <cstdint>
#include <functional>
#include <istream>
#include <string>

#include "core/status.h"

namespace kvshard {

// The bytes a line grows by between two calls of a LineCheck.
inline constexpr int64_t kLineCheckBytes = int64_t{1} << 16;

// Called with the bytes of the line read so far: each time it goes on past another kLineCheckBytes, and once at
// its end; an error stops the read and is returned as is.
using LineCheck = std::function<Status(int64_t line_bytes)>;

// Reads the next line of `in` into *line, without its '\n' (the last line may lack one); false at the end of the
// input. An empty `check` reads lines of any length. With `newline`, *newline says whether the line read ended with
// a '\n' (false only for a last line without one: a writer cut mid-line leaves such a line).
StatusOr<bool> ReadLine(std::istream& in, std::string* line, const LineCheck& check, bool* newline = nullptr);

}  // namespace kvshard

#endif  // KVSHARD_CORE_LINE_READER_H_

// Strict text-to-number parsing for CLI flags and traces: no silent truncation, overflow or junk.
#ifndef KVSHARD_CORE_PARSE_H_
#define KVSHARD_CORE_PARSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvshard {

// Parses one base-10 int64; `field` names the flag in the error ("<field>: not an integer: 'x'", or for a
// well-formed integer outside int64 "<field>: integer out of range: '...' (an int64 is in [-2^63, 2^63 - 1])"); the
// text is shown as given, through QuoteInput.
StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& field);
// True when `status` is ParseInt64's out-of-range error (the text was an integer, too large for int64).
bool IsOutOfRange(const Status& status);
// Parses "a,b,c" (empty string = empty list); errors name `field[i]`.
StatusOr<std::vector<int64_t>> ParseInt64List(const std::string& text, const std::string& field);

}  // namespace kvshard

#endif  // KVSHARD_CORE_PARSE_H_

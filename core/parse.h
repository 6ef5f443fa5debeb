// Strict text-to-number parsing for CLI flags and traces: no silent truncation, overflow or junk.
#ifndef KVSHARD_CORE_PARSE_H_
#define KVSHARD_CORE_PARSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvshard {

// Parses one base-10 int64; `field` names the flag in the error.
StatusOr<int64_t> ParseInt64(const std::string& text, const std::string& field);
// Parses "a,b,c" (empty string = empty list); errors name `field[i]`.
StatusOr<std::vector<int64_t>> ParseInt64List(const std::string& text, const std::string& field);

}  // namespace kvshard

#endif  // KVSHARD_CORE_PARSE_H_

// JSON I/O on nlohmann::ordered_json (keys keep SGLang's field order), with Status-returning readers.
#ifndef KVSHARD_CORE_JSON_H_
#define KVSHARD_CORE_JSON_H_

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kvshard {

using Json = nlohmann::ordered_json;

// Opens `path` for reading; refuses anything but a readable regular file, naming it: "<path>: is a directory,
// not a file", "<path>: is a FIFO, not a regular file", "<path>: cannot open file".
inline Status OpenInputFile(const std::string& path, std::ifstream* file) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return InvalidArgument(path, ": is a directory, not a file");
    const char* kind = S_ISFIFO(st.st_mode)                           ? "a FIFO"
                       : S_ISSOCK(st.st_mode)                         ? "a socket"
                       : (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? "a device"
                                                                      : "not a regular file";
    return InvalidArgument(path, ": is ", kind, ", not a regular file");
  }
  file->open(path, std::ios::binary);
  if (!*file) return InvalidArgument(path, ": cannot open file");
  return Status::Ok();
}

// The deepest nesting of arrays and objects ParseJsonStrict accepts (kvshard's formats need 5 levels; deeper input
// is refused before anything recursive, such as printing a value, meets it).
inline constexpr size_t kMaxJsonDepth = 128;

// Where the first JSON syntax error of `text` is, as " at line L, column C" (" at column C" for one-line text;
// " (it ends early)" when the text ends inside a value), found by a SAX pass that builds nothing; "" when there is
// none. The column (bytes, from 1) is where the parser stopped: the end of the token it did not expect.
std::string JsonSyntaxErrorPlace(const std::string& text);

// The integral numbers of the JSON text last read on this thread that were too large for int64 and uint64 (nlohmann
// keeps them as doubles), each with its text as written: an error then shows "99999999999999999999", not "1e+20".
std::vector<std::pair<double, std::string>>& OverflowedIntegerTexts();

// True for a double nlohmann made of an integer literal outside [-2^63, 2^64) (integral, at least 2^63 in magnitude).
inline bool IsOverflowedInteger(const Json& v) {
  return v.is_number_float() && std::isfinite(v.get<double>()) && std::trunc(v.get<double>()) == v.get<double>() &&
         std::fabs(v.get<double>()) >= 9223372036854775808.0;
}

// Fills OverflowedIntegerTexts for `text` (`any`: whether its parse met an IsOverflowedInteger value; a SAX pass then
// finds their texts, so a document without one costs nothing).
void RememberOverflowedIntegers(const std::string& text, bool any);

// ParseJsonStrict's fast path (core/json.cc): true, with *out exactly the value nlohmann's parser makes, when `text`
// is one JSON value it reads itself: strings of printable ASCII with the two-character escapes, integers within
// int64/uint64 and finite doubles, no key twice in an object, at most kMaxJsonDepth levels. Anything else (an error,
// \u escapes, other bytes, a number nlohmann keeps as an overflowed double) is false, *out unspecified: the full
// parser then decides and words the error. Whatever *out holds is reused where the new value has a container, a
// string, or a number or boolean of the same type at the same place (fewer allocations and destructions when one
// reader parses values of one shape in turn).
bool TryParseJsonFast(std::string_view text, Json* out);

// Empties `*value` (it becomes an empty array or object, or stays a scalar), children before parents: nlohmann's
// destructor moves every element of a container into a stack of its own first, which costs more than reading the
// value did. Recursion as deep as the value (ParseJsonStrict's values are at most kMaxJsonDepth deep).
void ClearJson(Json* value);

// Parses `text` as JSON and rejects a key given twice in one object (nlohmann keeps the last silently):
// "<path_prefix><requests[0].pages>: duplicate key". A syntax error is "<where>: not valid JSON at line L, column C",
// nesting past kMaxJsonDepth "<where>: nested deeper than 128 arrays and objects" (no "<where>: " when it is empty).
// Memory is linear in the input's size and depth. Valid input takes TryParseJsonFast; the rest nlohmann's parser,
// whose callback keeps each open container's path part, building a full path only for the error.
StatusOr<Json> ParseJsonStrict(const std::string& text, const std::string& where, const std::string& path_prefix = "");
// ParseJsonStrict into `*out`, reusing the containers and strings it holds (a trace reader's last record): the same
// value, or the same error (*out then null), as ParseJsonStrict.
Status ParseJsonStrictInto(const std::string& text, Json* out, const std::string& where,
                           const std::string& path_prefix = "");
// ParseJsonStrict without the fast path: nlohmann's parser decides alone (the reference the fast path is tested
// against).
StatusOr<Json> ParseJsonStrictWithNlohmann(const std::string& text, const std::string& where,
                                           const std::string& path_prefix = "");

// A JSON value from the input as an error message shows it: a string through QuoteInput ("..."), anything else as
// its compact JSON text through QuoteInput unquoted (both cut when long).
inline std::string QuoteJsonInput(const Json& value) {
  if (value.is_string()) return QuoteInput(value.get_ref<const std::string&>());
  return QuoteInput(value.dump(-1, ' ', false, Json::error_handler_t::replace), '\0');
}

// OK iff every key of object `obj` is in `allowed`; else "<where><key>: unknown key" (where: "ops[3]." or "").
inline Status JsonCheckKeys(const Json& obj, std::initializer_list<std::string_view> allowed,
                            const std::string& where) {
  if (!obj.is_object()) return Status::Ok();
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) return InvalidArgument(where, QuoteInput(key, '\0'), ": unknown key");
  }
  return Status::Ok();
}

// Reads and parses a JSON file (strictly, as ParseJsonStrict); errors name the path.
inline StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in;
  KVSHARD_RETURN_IF_ERROR(OpenInputFile(path, &in));
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseJsonStrict(buf.str(), path, path + ": ");
}

// `v` as an int64 when it is an integer within int64's range as written (signed, or unsigned up to INT64_MAX), else
// nullopt: the common case of the readers below, decided without naming the value.
inline std::optional<int64_t> JsonInt64(const Json& v) {
  switch (v.type()) {  // one look at the type (get_ref would look again)
    case Json::value_t::number_integer: return *v.get_ptr<const Json::number_integer_t*>();
    case Json::value_t::number_unsigned: {
      const uint64_t u = *v.get_ptr<const Json::number_unsigned_t*>();
      if (u <= uint64_t{INT64_MAX}) return static_cast<int64_t>(u);
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

// Value `v` (named `name`) as an int64 in [lo, hi]: "must be an integer", "out of range (must be in [lo, hi]),
// got 18446744073709551615" for integers outside int64 (as written, OverflowedIntegerTexts), "must be in [lo, hi],
// got x".
inline StatusOr<int64_t> JsonIntValue(const Json& v, const std::string& name, int64_t lo, int64_t hi) {
  const bool too_big_unsigned = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  if (too_big_unsigned || IsOverflowedInteger(v)) {
    std::string shown = v.dump(), written;
    for (const auto& [value, text] : OverflowedIntegerTexts()) {  // the text, unless two texts made this double
      if (v.is_number_float() && value == v.get<double>()) written = written.empty() || written == text ? text : "?";
    }
    if (!written.empty() && written != "?") shown = QuoteInput(written, '\0');
    return InvalidArgument(name, ": out of range (must be in [", lo, ", ", hi, "]), got ", shown);
  }
  if (!v.is_number_integer()) return InvalidArgument(name, ": must be an integer");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return InvalidArgument(name, ": must be in [", lo, ", ", hi, "], got ", x);
  return x;
}

// Reads obj[key] as an int64 in [lo, hi]; errors name `where.key`.
inline StatusOr<int64_t> JsonInt(const Json& obj, const std::string& key, const std::string& where, int64_t lo,
                                 int64_t hi) {
  if (!obj.is_object()) return InvalidArgument(where, key, ": missing");
  const auto it = obj.find(key);
  if (it == obj.end()) return InvalidArgument(where, key, ": missing");
  if (const std::optional<int64_t> x = JsonInt64(*it); x && *x >= lo && *x <= hi) return *x;  // without naming it
  return JsonIntValue(*it, where + key, lo, hi);
}

// What list.get<std::vector<int64_t>>() returns (and throws), read without nlohmann's per-element type dispatch for
// the integers of an array (a record's shape-checked lists: tokens, pages, locs), into *out (its memory reused).
inline void JsonIntsInto(const Json& list, std::vector<int64_t>* out) {
  if (!list.is_array()) {
    *out = list.get<std::vector<int64_t>>();
    return;
  }
  const Json::array_t& elements = list.get_ref<const Json::array_t&>();
  out->clear();
  out->reserve(elements.size());
  for (const Json& e : elements) {
    if (e.is_number_unsigned()) {
      out->push_back(static_cast<int64_t>(e.get_ref<const Json::number_unsigned_t&>()));
    } else if (e.is_number_integer()) {
      out->push_back(e.get_ref<const Json::number_integer_t&>());
    } else {
      out->push_back(e.get<int64_t>());
    }
  }
}

// JsonIntsInto, as a new list.
inline std::vector<int64_t> JsonInts(const Json& list) {
  std::vector<int64_t> out;
  JsonIntsInto(list, &out);
  return out;
}

// Reads obj[key] as a list of int64 in [lo, hi]; errors name `where.key[i]`.
inline StatusOr<std::vector<int64_t>> JsonIntList(const Json& obj, const std::string& key, const std::string& where,
                                                  int64_t lo, int64_t hi) {
  if (!obj.is_object() || !obj.contains(key)) return InvalidArgument(where, key, ": missing");
  const Json& v = obj.at(key);
  if (!v.is_array()) return InvalidArgument(where, key, ": must be an array of integers");
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    if (const std::optional<int64_t> x = JsonInt64(e); x && *x >= lo && *x <= hi) {  // without naming the element
      out.push_back(*x);
      continue;
    }
    KVSHARD_ASSIGN_OR_RETURN(int64_t x, JsonIntValue(e, StrCat(where, key, "[", i, "]"), lo, hi));
    out.push_back(x);
  }
  return out;
}

}  // namespace kvshard

#endif  // KVSHARD_CORE_JSON_H_

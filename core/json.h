// JSON I/O on nlohmann::ordered_json (keys keep SGLang's field order), with Status-returning readers.
#ifndef KVSHARD_CORE_JSON_H_
#define KVSHARD_CORE_JSON_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kvshard {

using Json = nlohmann::ordered_json;

// Reads and parses a JSON file; errors name the path and the parse position.
inline StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(path, ": cannot open file");
  std::stringstream buf;
  buf << in.rdbuf();
  Json j = Json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path, ": not valid JSON");
  return j;
}

// Reads obj[key] as an int64 in [lo, hi]; errors name `where.key`.
inline StatusOr<int64_t> JsonInt(const Json& obj, const std::string& key, const std::string& where,
                                 int64_t lo, int64_t hi) {
  if (!obj.is_object() || !obj.contains(key)) return InvalidArgument(where, key, ": missing");
  const Json& v = obj.at(key);
  if (!v.is_number_integer()) return InvalidArgument(where, key, ": must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidArgument(where, key, ": out of range");
  }
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return InvalidArgument(where, key, ": must be in [", lo, ", ", hi, "], got ", x);
  return x;
}

// Reads obj[key] as a list of int64 in [lo, hi]; errors name `where.key[i]`.
inline StatusOr<std::vector<int64_t>> JsonIntList(const Json& obj, const std::string& key,
                                                  const std::string& where, int64_t lo, int64_t hi) {
  if (!obj.is_object() || !obj.contains(key)) return InvalidArgument(where, key, ": missing");
  const Json& v = obj.at(key);
  if (!v.is_array()) return InvalidArgument(where, key, ": must be an array of integers");
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    if (!e.is_number_integer() ||
        (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return InvalidArgument(where, key, "[", i, "]: must be an integer");
    }
    int64_t x = e.get<int64_t>();
    if (x < lo || x > hi) return InvalidArgument(where, key, "[", i, "]: must be in [", lo, ", ", hi, "], got ", x);
    out.push_back(x);
  }
  return out;
}

}  // namespace kvshard

#endif  // KVSHARD_CORE_JSON_H_

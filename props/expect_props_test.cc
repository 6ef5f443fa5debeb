// replay's verdict rests on the expect matcher (core/trace.h MatchExpect): on random JSON pairs it agrees with a
// naive recursive definition of "expect is a subset of got" — objects match only objects, every expect key
// present and matching; arrays only arrays of equal length, element by element; scalars by equality (numbers by
// value) — counts the scalars it compared, and names the first mismatch the definition finds, with both values.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/json.h"
#include "core/trace.h"
#include "props/property.h"

namespace kvshard::props {
namespace {

// A random JSON value, at most `depth` containers deep, from a small alphabet so that equal values are common.
Json DrawJson(int depth, bool container = false) {
  const int kind = container ? *rc::gen::inRange(6, 9) : *rc::gen::inRange(0, depth > 0 ? 9 : 6);
  switch (kind) {
    case 0: return nullptr;
    case 1: return *rc::gen::arbitrary<bool>();
    case 2: return *rc::gen::inRange<int64_t>(-2, 3);
    case 3: return *rc::gen::element(0.0, 1.0, 1.5, -2.0);
    case 4: return *rc::gen::element<uint64_t>(0, 1, uint64_t{1} << 63);
    case 5: return std::string(1, *rc::gen::element('a', 'b', '1'));
    case 6: {
      Json a = Json::array();
      const int n = *rc::gen::inRange(0, 4);
      for (int i = 0; i < n; ++i) a.push_back(DrawJson(depth - 1));
      return a;
    }
    default: {
      Json o = Json::object();
      const int n = *rc::gen::inRange(0, 4);
      for (int i = 0; i < n; ++i) o[std::string(1, *rc::gen::element('a', 'b', 'c', 'd'))] = DrawJson(depth - 1);
      return o;
    }
  }
}

// An expect drawn from `got`: a subset of an object's keys, arrays kept, cut or grown, values kept, mutated or
// replaced (by {}, [] or anything), so that matches and near misses are both common.
Json DeriveExpect(const Json& got, int depth) {
  switch (*rc::gen::inRange(0, 30)) {
    case 0: return DrawJson(depth);
    case 1: return Json::object();
    case 2: return Json::array();
    default: break;
  }
  if (got.is_object()) {
    Json e = Json::object();
    for (const auto& [key, value] : got.items()) {
      if (*rc::gen::inRange(0, 4) == 0) continue;  // dropped: still a subset
      e[key] = DeriveExpect(value, depth - 1);
    }
    if (*rc::gen::inRange(0, 3) == 0) e["z"] = DrawJson(depth - 1);  // a key got lacks
    return e;
  }
  if (got.is_array()) {
    Json e = Json::array();
    for (const Json& value : got) e.push_back(DeriveExpect(value, depth - 1));
    const int change = *rc::gen::inRange(0, 6);
    if (change == 0 && !e.empty()) e.erase(e.size() - 1);  // a prefix of got
    if (change == 1) e.push_back(DrawJson(depth - 1));     // longer than got
    return e;
  }
  return got;
}

// Numbers equal by value (integers exactly, otherwise as doubles); other scalars by type and value.
bool ScalarsEqual(const Json& e, const Json& g) {
  if (e.is_number() && g.is_number()) {
    if (e.is_number_float() || g.is_number_float()) return e.get<double>() == g.get<double>();
    const auto wide = [](const Json& v) {
      return v.is_number_unsigned() ? static_cast<__int128>(v.get<uint64_t>())
                                    : static_cast<__int128>(v.get<int64_t>());
    };
    return wide(e) == wide(g);
  }
  if (e.type() != g.type()) return false;
  return e == g;
}

// The first mismatch of the definition, in expect's key order: its path, expect's value there and got's (none
// when the key is absent).
struct Naive {
  std::string path;
  Json expected;
  std::optional<Json> got;
};

std::optional<Naive> NaiveMismatch(const Json& e, const Json& g, const std::string& path, int64_t* scalars) {
  if (e.is_object()) {
    if (!g.is_object()) return Naive{path, e, g};
    for (const auto& [key, value] : e.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (!g.contains(key)) return Naive{at, value, std::nullopt};
      if (auto m = NaiveMismatch(value, g.at(key), at, scalars)) return m;
    }
    return std::nullopt;
  }
  if (e.is_array()) {
    if (!g.is_array() || g.size() != e.size()) return Naive{path, e, g};
    for (size_t i = 0; i < e.size(); ++i) {
      if (auto m = NaiveMismatch(e[i], g[i], path + "[" + std::to_string(i) + "]", scalars)) return m;
    }
    return std::nullopt;
  }
  ++*scalars;
  if (!ScalarsEqual(e, g)) return Naive{path, e, g};
  return std::nullopt;
}

KVSHARD_PROP(ExpectProps, MatcherAgreesWithTheSubsetDefinition, ()) {
  const Json got = DrawJson(*rc::gen::inRange(1, 4), /*container=*/*rc::gen::inRange(0, 4) != 0);
  const Json expect = *rc::gen::inRange(0, 5) == 0 ? DrawJson(3) : DeriveExpect(got, 3);
  RC_LOG() << "expect " << expect.dump() << "\ngot    " << got.dump();
  int64_t scalars = 0, fields = 0;
  const std::optional<Naive> naive = NaiveMismatch(expect, got, "", &scalars);
  const std::optional<ExpectMismatch> m = MatchExpect(expect, got, &fields);
  RC_ASSERT(m.has_value() == naive.has_value());
  RC_CLASSIFY(!naive, "match");
  if (!naive) {
    RC_ASSERT(fields == scalars);  // every scalar of expect compared once
    return;
  }
  RC_ASSERT(m->path == naive->path);
  RC_ASSERT(m->expected == naive->expected);
  RC_ASSERT(m->got.has_value() == naive->got.has_value());
  if (naive->got) RC_ASSERT(*m->got == *naive->got);
  RC_CLASSIFY(!naive->got, "absent key");
  RC_CLASSIFY(naive->expected.is_object() && naive->expected.empty(), "{} against a non-object");
  RC_CLASSIFY(naive->expected.is_array() && naive->got && naive->got->is_array(), "arrays of unequal length");
  RC_CLASSIFY(
      naive->expected.is_array() && naive->got && naive->got->is_array() && naive->expected.size() < naive->got->size(),
      "a shorter expect array");
}

}  // namespace
}  // namespace kvshard::props

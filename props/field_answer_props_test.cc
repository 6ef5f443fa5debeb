// The replayer's typed answers (replay/field_answer.h): SurelyMatches never says more than MatchExpect. On random
// answers and expects made from them (a subset of the keys, also inside lists of objects, values changed, integers
// given as unsigned (also past int64) or as floats, lists cut or nested, unknown keys), whenever SurelyMatches is
// true MatchExpect against ToJson() finds no mismatch and counts the same fields; an unchanged subset is always
// decided without JSON; and the expect typed ahead (TypedExpect) gets the same verdict and count.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/json.h"
#include "core/trace.h"
#include "props/property.h"
#include "replay/field_answer.h"

namespace kvshard::props {
namespace {

using replay::FieldAnswer;

std::vector<int64_t> Ints() {
  return *rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange<size_t>(0, 5), rc::gen::inRange<int64_t>(-3, 40));
}

// A random answer: up to six fields of every kind (lists of lists also kept flat, as rows of one width), keys k0.. in
// order (lists of objects only at the top: `nested`
// is false inside one).
FieldAnswer ArbitraryAnswer(std::vector<std::string>* keys, bool nested = true) {
  static const char* const kKeys[] = {"k0", "k1", "k2", "k3", "k4", "k5"};
  FieldAnswer a;
  const int n = *rc::gen::inRange(0, 7);
  for (int i = 0; i < n; ++i) {
    keys->push_back(kKeys[i]);
    switch (*rc::gen::inRange(0, nested ? 7 : 6)) {
      case 0: a.Add(kKeys[i], *rc::gen::element<std::string>("alloc", "free", "")); break;
      case 1: a.Add(kKeys[i], *rc::gen::arbitrary<bool>()); break;
      case 2: a.Add(kKeys[i], *rc::gen::inRange<int64_t>(-5, 50)); break;
      case 3: a.Add(kKeys[i], Ints()); break;
      case 4: {
        if (*rc::gen::arbitrary<bool>()) {  // rows of one width (a gather plan's page_pos), kept flat
          const int64_t width = *rc::gen::inRange<int64_t>(1, 4);
          std::vector<int64_t> flat = *rc::gen::container<std::vector<int64_t>>(
              static_cast<size_t>(width) * *rc::gen::inRange<size_t>(0, 4), rc::gen::inRange<int64_t>(-3, 40));
          a.AddRows(kKeys[i], std::move(flat), width);
          break;
        }
        std::vector<std::vector<int64_t>> lists(*rc::gen::inRange(0, 4));
        for (auto& l : lists) l = Ints();
        a.Add(kKeys[i], std::move(lists));
        break;
      }
      case 5: a.Add(kKeys[i], Json{{"owned_idx", Ints()}, {"x", *rc::gen::inRange(0, 3)}}); break;
      default: {  // a gather plan's ranks, say
        std::vector<FieldAnswer> objects(*rc::gen::inRange(0, 4));
        for (FieldAnswer& o : objects) {
          std::vector<std::string> inner;
          o = ArbitraryAnswer(&inner, false);
        }
        a.Add(kKeys[i], std::move(objects));
        break;
      }
    }
  }
  return a;
}

// `value` changed the way a wrong or oddly written expect differs: another value of its type, a float or unsigned
// spelling, another type, a list one element shorter or longer (also by a copy of its last element), a nested list,
// an object's member changed or one added.
void Mutate(Json* value) {
  if (value->is_array() && !value->empty() && *rc::gen::inRange(0, 4) == 0) {  // one element more, of the same kind
    value->push_back(value->back());
    return;
  }
  if (value->is_array() && !value->empty() && *rc::gen::arbitrary<bool>()) {
    Mutate(&(*value)[*rc::gen::inRange<size_t>(0, value->size())]);
    return;
  }
  if (value->is_object() && *rc::gen::arbitrary<bool>()) {  // a member changed, or one the answer lacks
    if (value->empty() || *rc::gen::inRange(0, 4) == 0) {
      (*value)["unknown"] = 1;
    } else {
      auto it = value->begin();
      std::advance(it, *rc::gen::inRange<size_t>(0, value->size()));
      Mutate(&it.value());
    }
    return;
  }
  switch (*rc::gen::inRange(0, 7)) {
    case 0:  // another value of the same type
      if (value->is_number_integer()) {
        *value = value->get<int64_t>() + 1;
      } else if (value->is_boolean()) {
        *value = !value->get<bool>();
      } else if (value->is_string()) {
        *value = value->get<std::string>() + "x";
      } else {
        *value = 7;
      }
      break;
    case 1:
      if (value->is_number_integer()) *value = static_cast<double>(value->get<int64_t>());
      break;
    case 2:
      if (value->is_number_integer() && value->get<int64_t>() >= 0) *value = value->get<uint64_t>();
      if (*rc::gen::inRange(0, 4) == 0) *value = (uint64_t{1} << 63) + 1;  // unsigned past int64
      break;
    case 3: *value = "text"; break;
    case 4:
      if (value->is_array()) value->push_back(1);
      break;
    case 5:
      if (value->is_array() && !value->empty()) value->erase(value->size() - 1);
      break;
    default: *value = Json::array({*value}); break;
  }
}

KVSHARD_PROP(FieldAnswerProps, SurelyMatchesOnlyWhatMatchExpectMatches, ()) {
  std::vector<std::string> keys;
  const FieldAnswer answer = ArbitraryAnswer(&keys);
  const Json whole = answer.ToJson();
  Json expect = Json::object();
  // Mostly in the answer's order (as recorded), at times shuffled: the lookup starts after the last key found.
  std::vector<std::string> order = keys;
  if (*rc::gen::inRange(0, 3) == 0) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[*rc::gen::inRange<size_t>(0, i)]);
  }
  for (const std::string& key : order) {
    if (*rc::gen::inRange(0, 3) == 0) continue;
    expect[key] = whole.at(key);
    for (Json& element : expect[key]) {  // a list of objects: each element's expect a subset of its keys
      if (!element.is_object()) continue;
      Json subset = Json::object();
      for (const auto& [k, v] : element.items()) {
        if (*rc::gen::inRange(0, 4) != 0) subset[k] = v;
      }
      element = std::move(subset);
    }
  }
  const bool changed = *rc::gen::arbitrary<bool>();
  if (changed) {
    const int edits = *rc::gen::inRange(1, 3);
    for (int e = 0; e < edits; ++e) {
      if (expect.empty() || *rc::gen::inRange(0, 5) == 0) {
        // An unknown key, at times one that is a known key up to a NUL inside it, with that key's value.
        if (*rc::gen::arbitrary<bool>()) {
          expect["unknown"] = 1;
        } else {
          expect[std::string("k0\0z", 4)] = whole.contains("k0") ? whole.at("k0") : Json(1);
        }
      } else {
        auto it = expect.begin();
        std::advance(it, *rc::gen::inRange<size_t>(0, expect.size()));
        Mutate(&it.value());
      }
    }
  }
  int64_t fast_fields = 0, json_fields = 0, typed_fields = 0;
  const bool sure = answer.SurelyMatches(expect, &fast_fields);
  // The expect typed ahead (as a reader thread makes it) gives the same verdict and count.
  const bool typed_sure = answer.SurelyMatches(replay::TypedExpect(expect), &typed_fields);
  RC_ASSERT(typed_sure == sure);
  RC_ASSERT(typed_fields == fast_fields);
  // The same from a typed expect reused (a reader thread's record is): assigned another expect first, this answer's
  // whole (values that match where the expect was changed) or another answer's, at times one too large for its
  // memory to be kept.
  std::vector<std::string> other_keys;
  Json other = *rc::gen::arbitrary<bool>() ? whole : ArbitraryAnswer(&other_keys).ToJson();
  if (*rc::gen::inRange(0, 6) == 0) other["large"] = Json(std::vector<int64_t>(20000, 7));
  replay::TypedExpect reused(other);
  reused.Assign(expect);
  int64_t reused_fields = 0;
  RC_ASSERT(answer.SurelyMatches(reused, &reused_fields) == sure);
  RC_ASSERT(reused_fields == fast_fields);
  const auto mismatch = MatchExpect(expect, whole, &json_fields);
  RC_LOG() << "expect " << expect.dump() << "\nanswer " << whole.dump() << "\n";
  RC_TAG(sure ? "decided without JSON" : "left to MatchExpect", mismatch ? "mismatch" : "match");
  if (sure) {
    RC_ASSERT(!mismatch);
    RC_ASSERT(fast_fields == json_fields);
  } else {
    RC_ASSERT(fast_fields == 0);
  }
  if (!changed) RC_ASSERT(sure);
}

// Rows kept flat (AddRows) are the nested lists they stand for: the same JSON, and against an expect made from that
// JSON and often changed (a row cut, lengthened or nested, a value changed, the list cut), the same verdicts and
// counts from SurelyMatches on the JSON and on the typed expect.
KVSHARD_PROP(FieldAnswerProps, RowsKeptFlatAreTheirNestedLists, ()) {
  const int64_t width = *rc::gen::inRange<int64_t>(1, 4);
  const std::vector<int64_t> flat = *rc::gen::container<std::vector<int64_t>>(
      static_cast<size_t>(width) * *rc::gen::inRange<size_t>(0, 5), rc::gen::inRange<int64_t>(-3, 40));
  std::vector<std::vector<int64_t>> nested;
  for (size_t at = 0; at < flat.size(); at += static_cast<size_t>(width)) {
    nested.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                        flat.begin() + static_cast<std::ptrdiff_t>(at) + width);
  }
  FieldAnswer rows, lists;
  rows.AddRows("page_pos", flat, width);
  lists.Add("page_pos", nested);
  RC_ASSERT(rows.ToJson() == lists.ToJson());
  Json expect = lists.ToJson();
  const int edits = *rc::gen::inRange(0, 3);
  for (int e = 0; e < edits; ++e) Mutate(&expect["page_pos"]);
  RC_TAG(edits == 0 ? "unchanged" : "changed");
  int64_t rows_fields = 0, lists_fields = 0, rows_typed = 0, lists_typed = 0;
  RC_ASSERT(rows.SurelyMatches(expect, &rows_fields) == lists.SurelyMatches(expect, &lists_fields));
  RC_ASSERT(rows_fields == lists_fields);
  const replay::TypedExpect typed(expect);
  RC_ASSERT(rows.SurelyMatches(typed, &rows_typed) == lists.SurelyMatches(typed, &lists_typed));
  RC_ASSERT(rows_typed == lists_typed);
  RC_ASSERT(rows_typed == rows_fields);
}

}  // namespace
}  // namespace kvshard::props

// The JSON depth limit (core/json.h ParseJsonStrict): a document nested d arrays and objects deep parses iff
// d <= kMaxJsonDepth, whatever mix of arrays and objects, siblings and whitespace; deeper is refused naming the
// limit. Depths are drawn around the limit as often as anywhere else.
#include <algorithm>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/json.h"
#include "props/property.h"

namespace kvshard::props {
namespace {

KVSHARD_PROP(JsonDepthProps, ParsesIffNestedAtMostTheLimit, ()) {
  const int64_t limit = static_cast<int64_t>(kMaxJsonDepth);
  const int64_t depth =
      *rc::gen::oneOf(rc::gen::inRange<int64_t>(0, 2 * limit + 2), rc::gen::inRange<int64_t>(limit - 2, limit + 3));
  std::string open, close;
  for (int64_t d = 0; d < depth; ++d) {
    const bool object = *rc::gen::arbitrary<bool>();
    const bool sibling_before = *rc::gen::inRange(0, 4) == 0, sibling_after = *rc::gen::inRange(0, 4) == 0;
    const std::string ws = *rc::gen::element<std::string>("", " ", "\n");
    if (object) {
      open += "{" + ws + (sibling_before ? "\"s\": [1, {}]," : "") + "\"k\":" + ws;
      close = ws + (sibling_after ? ", \"t\": {\"u\": []}" : "") + "}" + close;
    } else {
      open += "[" + ws + (sibling_before ? "[{}], " : "");
      close = ws + (sibling_after ? ", [[]]" : "") + "]" + close;
    }
  }
  const std::string leaf = *rc::gen::element<std::string>("1", "\"x\"", "null", "true");
  const std::string text = open + leaf + close;
  RC_LOG() << "depth " << depth << ": " << text;
  const StatusOr<Json> parsed = ParseJsonStrict(text, "doc");
  // The document's depth is its deepest container (a sibling nests up to two more below its level).
  int64_t deepest = 0, level = 0;
  bool in_string = false;
  for (char ch : text) {
    if (ch == '"') in_string = !in_string;
    if (in_string) continue;
    if (ch == '[' || ch == '{') deepest = std::max(deepest, ++level);
    if (ch == ']' || ch == '}') --level;
  }
  RC_CLASSIFY(deepest == limit, "at the limit");
  RC_CLASSIFY(deepest == limit + 1, "one past the limit");
  RC_ASSERT(parsed.ok() == (deepest <= limit));
  if (!parsed.ok()) {
    RC_ASSERT(parsed.status().message().find("nested deeper than " + std::to_string(limit)) != std::string::npos);
  }
}

}  // namespace
}  // namespace kvshard::props

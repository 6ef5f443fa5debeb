// The strict JSON reader's fast path (core/json.cc TryParseJsonFast) against nlohmann's parser: on any text, a
// document the fast path reads is one nlohmann reads too, as the same value (types included: unsigned, signed and
// float numbers, the bits of every double) with no key twice and no nesting past the limit; and every document of
// printable ASCII with ordinary numbers is read by the fast path (so it is not declining everything). Texts are
// generated documents (escapes, number edges, duplicate keys, whitespace), half of them mutated byte by byte.
// ClearJson (the fast teardown) is checked on the same values, and ParseJsonStrictInto (the fast path reusing what a
// value held) against fresh parses of documents read one after another into one value.
#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/json.h"
#include "props/property.h"

namespace kvshard::props {
namespace {

// A generated document's text, and whether the fast path must read it (nothing it leaves to nlohmann).
struct Doc {
  std::string text;
  bool fast_readable = true;
};

std::string Space() { return *rc::gen::element<std::string>("", "", "", " ", "\n", "\t ", "\r\n"); }

void AppendString(Doc* doc) {
  doc->text += '"';
  const int length = *rc::gen::inRange(0, 6);
  for (int i = 0; i < length; ++i) {
    switch (*rc::gen::inRange(0, 10)) {
      case 0:
        doc->text += *rc::gen::element<std::string>("\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t");
        break;
      case 1:  // a \u escape, a UTF-8 character or a raw control byte: nlohmann's to read (or refuse)
        doc->text += *rc::gen::element<std::string>("\\u00e9", "\\ud83d\\ude00", "\xc3\xa9", "\x01", "\x7f");
        doc->fast_readable = doc->fast_readable && doc->text.back() == '\x7f';
        break;
      default:
        doc->text += static_cast<char>(*rc::gen::inRange(0x20, 0x7f));
        if (doc->text.back() == '"' || doc->text.back() == '\\') doc->text.back() = 'q';
    }
  }
  doc->text += '"';
}

void AppendNumber(Doc* doc) {
  switch (*rc::gen::inRange(0, 6)) {
    case 0: doc->text += std::to_string(*rc::gen::arbitrary<int64_t>()); break;
    case 1: doc->text += std::to_string(*rc::gen::arbitrary<uint64_t>()); break;
    case 2:  // the edges of int64 and uint64, and one past them (nlohmann's overflowed doubles)
      doc->text += *rc::gen::element<std::string>("0", "-0", "9223372036854775807", "9223372036854775808",
                                                  "-9223372036854775808", "18446744073709551615");
      break;
    case 3:  // integral values past 2^63 in magnitude, however written: overflowed integers to nlohmann's reader
      doc->text += *rc::gen::element<std::string>("18446744073709551616", "-9223372036854775809",
                                                  "99999999999999999999", "1e19", "-1e300", "1e308");
      doc->fast_readable = false;
      break;
    case 4:
      doc->text += *rc::gen::element<std::string>("1.5", "-0.0", "0.1", "2.5e-3", "1E+2", "123.456e7", "-1.7e-300",
                                                  "4.9e-324", "2.2250738585072014e-308");
      break;
    default: {  // out of double's range: nlohmann refuses one, reads the other as 0 or a denormal
      doc->text += *rc::gen::element<std::string>("1e400", "1e-400");
      doc->fast_readable = false;
    }
  }
}

void AppendValue(Doc* doc, int depth) {
  const int kind = depth >= 4 ? *rc::gen::inRange(0, 4) : *rc::gen::inRange(0, 7);
  switch (kind) {
    case 0: AppendNumber(doc); break;
    case 1: AppendString(doc); break;
    case 2: doc->text += *rc::gen::element<std::string>("true", "false", "null"); break;
    case 3: AppendNumber(doc); break;
    case 4:
    case 5: {
      doc->text += "[" + Space();
      const int n = *rc::gen::inRange(0, 5);
      for (int i = 0; i < n; ++i) {
        if (i) doc->text += Space() + "," + Space();
        AppendValue(doc, depth + 1);
      }
      doc->text += Space() + "]";
      break;
    }
    default: {
      doc->text += "{" + Space();
      const int n = *rc::gen::inRange(0, 5);
      std::vector<std::string> keys;
      for (int i = 0; i < n; ++i) {
        if (i) doc->text += Space() + "," + Space();
        const std::string key = *rc::gen::element<std::string>("a", "b", "op", "pages", "expect", "k\\n");
        for (const std::string& k : keys) doc->fast_readable = doc->fast_readable && k != key;  // given twice
        keys.push_back(key);
        doc->text += "\"" + key + "\"" + Space() + ":" + Space();
        AppendValue(doc, depth + 1);
      }
      doc->text += Space() + "}";
    }
  }
}

// The same value with the same types and the same bits of every double.
bool SameJson(const Json& a, const Json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
      if (i.key() != j.key() || !SameJson(*i, *j)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameJson(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

// A generated document, half of them mutated byte by byte (*mutated says which).
Doc GenDocument(bool* mutated) {
  Doc doc;
  doc.text = Space();
  AppendValue(&doc, 0);
  doc.text += Space();
  *mutated = *rc::gen::arbitrary<bool>();
  if (*mutated) {
    const int edits = *rc::gen::inRange(1, 4);
    for (int e = 0; e < edits && !doc.text.empty(); ++e) {
      const size_t at = *rc::gen::inRange<size_t>(0, doc.text.size());
      const char byte =
          *rc::gen::element<char>('{', '}', '[', ']', ',', ':', '"', '\\', '-', '.', 'e', '0', '9', ' ', '\0', '\x80');
      switch (*rc::gen::inRange(0, 3)) {
        case 0: doc.text.erase(at, 1); break;
        case 1: doc.text.insert(at, 1, byte); break;
        default: doc.text[at] = byte;
      }
    }
  }
  return doc;
}

// `text` with its shape kept and other values: every digit redrawn (a record of the same op, other numbers), and
// at times one element of a list dropped or the text cut short.
std::string Reshaped(std::string text) {
  for (char& c : text) {
    if (c >= '0' && c <= '9') c = static_cast<char>('0' + *rc::gen::inRange(0, 10));
  }
  switch (*rc::gen::inRange(0, 4)) {
    case 0:
      if (const size_t comma = text.find(','); comma != std::string::npos) text.erase(comma, 1);
      break;
    case 1: text.resize(*rc::gen::inRange<size_t>(0, text.size() + 1)); break;
    default: break;
  }
  return text;
}

KVSHARD_PROP(JsonFastProps, FastPathReadsWhatNlohmannReadsAsTheSameValue, ()) {
  bool mutate = false;
  const Doc doc = GenDocument(&mutate);
  RC_LOG() << "text: " << doc.text;
  Json fast;
  const bool fast_read = TryParseJsonFast(doc.text, &fast);
  const StatusOr<Json> reference = ParseJsonStrictWithNlohmann(doc.text, "doc");
  RC_CLASSIFY(fast_read, "fast path");
  RC_CLASSIFY(!fast_read && reference.ok(), "left to nlohmann, valid");
  RC_CLASSIFY(!reference.ok(), "invalid");
  if (fast_read) {
    RC_ASSERT(reference.ok());
    RC_ASSERT(SameJson(fast, *reference));
    // ClearJson leaves an empty container of the same kind, or the scalar as it was.
    Json cleared = fast;
    ClearJson(&cleared);
    RC_ASSERT(cleared.type() == fast.type());
    const bool cleared_right = fast.is_structured() ? cleared.empty() : SameJson(cleared, fast);
    RC_ASSERT(cleared_right);
  }
  if (!mutate && doc.fast_readable) RC_ASSERT(fast_read);
  // ParseJsonStrict is the fast path where it reads, nlohmann's verdict and wording elsewhere.
  const StatusOr<Json> strict = ParseJsonStrict(doc.text, "doc");
  RC_ASSERT(strict.ok() == reference.ok());
  if (!strict.ok()) RC_ASSERT(strict.status().message() == reference.status().message());
}

// A value to write as a document: numbers of each kind, strings, literals, lists and objects (distinct keys).
Json GenValue(int depth) {
  switch (*rc::gen::inRange(0, depth >= 3 ? 5 : 8)) {
    case 0: return *rc::gen::arbitrary<int64_t>();
    case 1: return *rc::gen::arbitrary<uint64_t>();
    case 2: return *rc::gen::element<double>(1.5, -0.0, 2.5e-3, -1.7e-300);
    case 3: return *rc::gen::element<std::string>("", "x", "a string longer than fifteen bytes");
    case 4: return *rc::gen::element<Json>(Json(true), Json(false), Json(nullptr));
    case 5:
    case 6: {
      Json list = Json::array();
      const int n = *rc::gen::inRange(0, 5);
      for (int i = 0; i < n; ++i) list.push_back(GenValue(depth + 1));
      return list;
    }
    default: {
      Json object = Json::object();
      const int n = *rc::gen::inRange(0, 5);
      for (int i = 0; i < n; ++i)
        object[*rc::gen::element<std::string>("a", "b", "op", "pages", "expect")] = GenValue(depth + 1);
      return object;
    }
  }
}

// `value` with a few edits of the kinds that make a reader's next record differ from its last: an entry or element
// dropped from the end or the middle, one added, a scalar redrawn (other value or kind), a part replaced.
Json Variant(Json value, int depth = 0) {
  if (value.is_structured() && !value.empty() && *rc::gen::inRange(0, 2) == 0) {
    if (value.is_array()) {
      value.erase(*rc::gen::inRange<size_t>(0, value.size()));
    } else {
      const size_t drop = *rc::gen::inRange<size_t>(0, value.size());
      value.erase(std::next(value.begin(), static_cast<std::ptrdiff_t>(drop)).key());
    }
  }
  if (value.is_array()) {
    for (Json& e : value) e = Variant(std::move(e), depth + 1);
    if (*rc::gen::inRange(0, 4) == 0) value.push_back(GenValue(depth + 1));
  } else if (value.is_object()) {
    for (auto& [key, v] : value.items()) v = Variant(std::move(v), depth + 1);
    if (*rc::gen::inRange(0, 4) == 0) value[*rc::gen::element<std::string>("a", "b", "op", "z")] = GenValue(depth + 1);
  } else if (*rc::gen::inRange(0, 3) == 0) {
    value = GenValue(depth);
  }
  return value;
}

// ParseJsonStrictInto reads a document into whatever its value last held (a value of the same shape with other
// numbers, another value, or what a declined or failed parse left) exactly as ParseJsonStrict reads it fresh: the same
// value with the same types and double bits, or the same error, after which the value is null.
KVSHARD_PROP(JsonFastProps, ParsingIntoAHeldValueIsParsingFresh, ()) {
  bool mutated = false;
  Json value = GenValue(0);
  std::vector<std::string> texts{value.dump()};
  const int more = *rc::gen::inRange(1, 6);
  for (int i = 0; i < more; ++i) {
    switch (*rc::gen::inRange(0, 6)) {
      case 0: texts.push_back(GenDocument(&mutated).text); break;  // another value, or a text the parse refuses
      case 1: texts.push_back(Reshaped(texts[*rc::gen::inRange<size_t>(0, texts.size())])); break;
      default: value = Variant(std::move(value)); texts.push_back(value.dump());
    }
  }
  Json held;
  for (const std::string& text : texts) {
    RC_LOG() << "text: " << text;
    const Status into = ParseJsonStrictInto(text, &held, "doc");
    const StatusOr<Json> fresh = ParseJsonStrict(text, "doc");
    RC_CLASSIFY(fresh.ok(), "valid");
    RC_ASSERT(into.ok() == fresh.ok());
    if (fresh.ok()) {
      RC_ASSERT(SameJson(held, *fresh));
    } else {
      RC_ASSERT(into.message() == fresh.status().message());
      RC_ASSERT(held.is_null());
    }
  }
}

}  // namespace
}  // namespace kvshard::props

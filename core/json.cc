// The strict JSON reader: a fast path for the documents kvshard's formats are made of (core/json.h says which), and
// nlohmann's parser with a checking callback for everything else, which decides every error and words it.
#include "core/json.h"

#include <algorithm>
#include <charconv>
#include <type_traits>

namespace kvshard {
namespace {

// A SAX handler that accepts every event; the probes below override the ones they look at.
struct NoOpSax {
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(Json::number_integer_t) { return true; }
  bool number_unsigned(Json::number_unsigned_t) { return true; }
  bool number_float(Json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(Json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(std::string&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

// The fast path: a recursive-descent reader over the text that builds the nlohmann value directly, into the value it
// is given: containers and strings already there are reused where the new value has one at the same place (a trace
// reader's last record, most often of the same shape), so a record costs few allocations and frees. Every method
// returns false at the first thing it does not read (the full parser then decides).
class FastReader {
 public:
  // Keys an object has room for from the start (a trace record or its expect has up to about this many).
  static constexpr size_t kObjectKeys = 8;

  explicit FastReader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool Document(Json* out) {
    SkipSpace();
    if (!Value(out, 0)) return false;
    SkipSpace();
    return p_ == end_;
  }

 private:
  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\t' || *p_ == '\r')) ++p_;
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  bool Value(Json* out, size_t depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return Object(out, depth + 1);
      case '[': return Array(out, depth + 1);
      case '"': {
        if (out->is_string()) return String(&out->get_ref<std::string&>());  // its storage reused
        std::string s;
        if (!String(&s)) return false;
        *out = std::move(s);
        return true;
      }
      case 't': Set(out, true); return Literal("true");
      case 'f': Set(out, false); return Literal("false");
      case 'n':
        if (!out->is_null()) Scalar(out, nullptr);
        return Literal("null");
      default: return Number(out);
    }
  }

  // *out = value, a container there torn down by ClearJson first (nlohmann's destructor is the slow way).
  template <typename T>
  static void Scalar(Json* out, T value) {
    if (out->is_structured()) ClearJson(out);
    *out = value;
  }

  // *out = value; a value of the same type there is overwritten in place (no copy-and-swap assignment and destroy).
  template <typename T>
  static void Set(Json* out, T value) {
    T* held = out->get_ptr<T*>();  // (nlohmann gives an unsigned's storage for number_integer_t too: not its type)
    if (held != nullptr && (!std::is_same_v<T, Json::number_integer_t> || !out->is_number_unsigned())) {
      *held = value;
    } else {
      Scalar(out, value);
    }
  }

  // Drops the elements of `array` past its first `count`.
  static void KeepElements(Json::array_t* array, size_t count) {
    for (size_t i = count; i < array->size(); ++i) {
      if ((*array)[i].is_structured()) ClearJson(&(*array)[i]);
    }
    array->resize(count);
  }

  // Drops the entries of `object` past its first `count`.
  static void KeepEntries(Json::object_t* object, size_t count) {
    while (object->size() > count) {
      if (object->back().second.is_structured()) ClearJson(&object->back().second);
      object->pop_back();
    }
  }

  bool Object(Json* out, size_t depth) {
    if (depth > kMaxJsonDepth) return false;
    ++p_;  // '{'
    if (!out->is_object()) Scalar(out, Json::object());
    Json::object_t& object = out->get_ref<Json::object_t&>();
    size_t count = 0;  // the keys read so far: the first `count` entries of `object`
    SkipSpace();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      KeepEntries(&object, 0);
      return true;
    }
    object.reserve(kObjectKeys);  // one allocation for a record's or an expect's keys, not four as it grows
    while (true) {
      if (p_ == end_ || *p_ != '"') return false;
      std::string_view key;
      if (!Key(&key)) return false;
      SkipSpace();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      SkipSpace();
      const auto given = [&](size_t n) {  // whether the key is among the first n entries
        return std::any_of(object.begin(), object.begin() + static_cast<std::ptrdiff_t>(n),
                           [&](const auto& entry) { return entry.first == key; });
      };
      // (ordered_map's operator[] takes a key: the entries are reached through iterators)
      if (count < object.size() && object.begin()[static_cast<std::ptrdiff_t>(count)].first == key && !given(count)) {
        // the entry the last value had here, reused
        if (!Value(&object.begin()[static_cast<std::ptrdiff_t>(count)].second, depth)) return false;
      } else {
        KeepEntries(&object, count);
        if (given(count)) return false;                 // a key given twice
        object.emplace_back(std::string(key), Json());  // a copy: Value may read other keys into key_
        if (!Value(&object.back().second, depth)) return false;
      }
      ++count;
      SkipSpace();
      if (p_ == end_) return false;
      if (*p_ == '}') {
        ++p_;
        KeepEntries(&object, count);
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      SkipSpace();
    }
  }

  bool Array(Json* out, size_t depth) {
    if (depth > kMaxJsonDepth) return false;
    ++p_;  // '['
    if (!out->is_array()) Scalar(out, Json::array());
    Json::array_t& array = out->get_ref<Json::array_t&>();
    size_t count = 0;  // the elements read so far: the first `count` of `array`
    SkipSpace();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      KeepElements(&array, 0);
      return true;
    }
    if (array.capacity() == 0) array.reserve(NumberListLength());  // a reused array keeps the room it had
    while (true) {
      if (p_ == end_) return false;
      if (uint64_t small = 0; ReadSmallUnsigned(&small)) {  // most of a trace: row, page and token numbers
        if (count < array.size()) {
          Set(&array[count], small);
        } else {
          array.emplace_back(small);
        }
      } else if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) {  // any other number, read here without a call
        NumberToken number;
        if (!ReadNumber(&number)) return false;
        if (count < array.size()) {
          SetNumber(&array[count], number);
        } else {
          AppendNumber(&array, number);
        }
      } else {
        if (count == array.size()) array.emplace_back();
        if (!Value(&array[count], depth)) return false;  // a list or object reused
      }
      ++count;
      SkipSpace();
      if (p_ == end_) return false;
      if (*p_ == ']') {
        ++p_;
        KeepElements(&array, count);
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      SkipSpace();
    }
  }

  // Printable ASCII and the escapes \" \\ \/ \b \f \n \r \t; \u escapes and other bytes go to the full parser
  // (which also checks UTF-8).
  bool String(std::string* out) {
    ++p_;  // '"'
    const char* start = p_;
    while (p_ != end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20 &&
           static_cast<unsigned char>(*p_) < 0x80) {
      ++p_;
    }
    out->assign(start, p_);
    while (p_ != end_) {
      const unsigned char c = static_cast<unsigned char>(*p_++);
      if (c == '"') return true;
      if (c < 0x20 || c >= 0x80) return false;
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (p_ == end_) return false;
      switch (*p_++) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        default: return false;
      }
    }
    return false;
  }

  // An object's key (p_ at its '"'): a view of the text where it has no escape (most keys: no copy), else read into
  // key_ by String. Valid until the next key is read.
  bool Key(std::string_view* out) {
    const char* start = p_ + 1;
    const char* p = start;
    while (p != end_ && *p != '"' && *p != '\\' && static_cast<unsigned char>(*p) >= 0x20 &&
           static_cast<unsigned char>(*p) < 0x80) {
      ++p;
    }
    if (p != end_ && *p == '"') {
      *out = std::string_view(start, static_cast<size_t>(p - start));
      p_ = p + 1;
      return true;
    }
    if (!String(&key_)) return false;
    *out = key_;
    return true;
  }

  // How many elements an array that holds only numbers has (p_ at its first element), from its commas; 0 (nothing to
  // reserve) when anything else comes before its ']'.
  size_t NumberListLength() const {
    size_t commas = 0;
    for (const char* q = p_; q != end_; ++q) {
      const char c = *q;
      if (c == ']') return commas + 1;
      if (c == ',') {
        ++commas;
      } else if (!((c >= '0' && c <= '9') || c == ' ' || c == '-' || c == '.' || c == 'e' || c == 'E' || c == '+' ||
                   c == '\n' || c == '\t' || c == '\r')) {
        return 0;
      }
    }
    return 0;
  }

  // A number as read, before it becomes a value.
  struct NumberToken {
    enum Kind { kUnsigned, kSigned, kFloat } kind = kUnsigned;
    Json::number_unsigned_t unsigned_value = 0;
    Json::number_integer_t signed_value = 0;
    Json::number_float_t float_value = 0;
  };

  bool Number(Json* out) {
    NumberToken number;
    if (!ReadNumber(&number)) return false;
    SetNumber(out, number);
    return true;
  }

  // Appends the number to `array`, made in place.
  static void AppendNumber(Json::array_t* array, const NumberToken& number) {
    switch (number.kind) {
      case NumberToken::kUnsigned: array->emplace_back(number.unsigned_value); return;
      case NumberToken::kSigned: array->emplace_back(number.signed_value); return;
      case NumberToken::kFloat: array->emplace_back(number.float_value); return;
    }
  }

  // *out = the number (in place where a number of its kind is).
  static void SetNumber(Json* out, const NumberToken& number) {
    switch (number.kind) {
      case NumberToken::kUnsigned: Set(out, number.unsigned_value); return;
      case NumberToken::kSigned: Set(out, number.signed_value); return;
      case NumberToken::kFloat: Set(out, number.float_value); return;
    }
  }

  // The common number, read in one tight loop: 1 to 19 digits without a leading zero, sign, fraction or exponent (so
  // an unsigned that cannot overflow). False, having read nothing, for any other text.
  bool ReadSmallUnsigned(uint64_t* out) {
    const char* p = p_;
    if (p == end_ || *p < '1' || *p > '9') return false;
    uint64_t value = 0;
    const char* last = p + std::min<std::ptrdiff_t>(end_ - p, 19);
    while (p != last && *p >= '0' && *p <= '9') value = value * 10 + static_cast<uint64_t>(*p++ - '0');
    if (p != end_ && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E')) return false;
    p_ = p;
    *out = value;
    return true;
  }

  // JSON's number grammar; an integer is nlohmann's number_unsigned when non-negative, number_integer when
  // negative, and anything it would keep as a double past 2^63 in magnitude is left to it.
  bool ReadNumber(NumberToken* out) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    uint64_t magnitude = 0;
    bool overflow = false;
    if (*p_ == '0') {
      ++p_;
    } else {
      const char* digits = p_;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
        magnitude = magnitude * 10 + static_cast<uint64_t>(*p_ - '0');  // wraps only where `overflow` says so
        ++p_;
      }
      // 19 digits always fit in 64 bits; 20 do up to 2^64 - 1; more never (no leading zeros here)
      constexpr std::string_view kMaxUnsigned = "18446744073709551615";
      const size_t length = static_cast<size_t>(p_ - digits);
      overflow = length > kMaxUnsigned.size() ||
                 (length == kMaxUnsigned.size() && std::string_view(digits, length) > kMaxUnsigned);
    }
    bool integral = true;
    if (p_ != end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (integral) {
      if (overflow) return false;
      if (!negative) {
        out->kind = NumberToken::kUnsigned;
        out->unsigned_value = magnitude;
        return true;
      }
      if (magnitude > uint64_t{1} << 63) return false;
      out->kind = NumberToken::kSigned;
      out->signed_value = static_cast<Json::number_integer_t>(0 - magnitude);
      return true;
    }
    double value = 0;
    const auto [end, error] = std::from_chars(start, p_, value);
    if (error != std::errc() || end != p_ || !std::isfinite(value)) return false;
    // nlohmann keeps an integral double past 2^63 in magnitude as an overflowed integer (IsOverflowedInteger)
    if (std::trunc(value) == value && std::fabs(value) >= 9223372036854775808.0) return false;
    out->kind = NumberToken::kFloat;
    out->float_value = value;
    return true;
  }

  const char* p_;
  const char* end_;
  std::string key_;  // the key being read (its storage kept from key to key)
};

}  // namespace

bool TryParseJsonFast(std::string_view text, Json* out) { return FastReader(text).Document(out); }

void ClearJson(Json* value) {
  if (value->is_array()) {
    Json::array_t& array = value->get_ref<Json::array_t&>();
    for (Json& element : array) {
      if (element.is_structured()) ClearJson(&element);
    }
    array.clear();
  } else if (value->is_object()) {
    Json::object_t& object = value->get_ref<Json::object_t&>();
    for (auto& [key, element] : object) {
      if (element.is_structured()) ClearJson(&element);
    }
    object.clear();
  }
}

std::string JsonSyntaxErrorPlace(const std::string& text) {
  struct Probe : NoOpSax {
    size_t position = 0;
    bool found = false;
    bool parse_error(std::size_t at, const std::string&, const nlohmann::detail::exception&) {
      position = at;
      found = true;
      return false;
    }
  } probe;
  Json::sax_parse(text, &probe);
  if (!probe.found) return "";
  if (probe.position > text.size()) return " (it ends early)";
  const size_t end = std::min(probe.position > 0 ? probe.position - 1 : 0, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') ++line, line_start = i + 1;
  }
  const std::string column = "column " + std::to_string(end - line_start + 1);
  const size_t newline = text.find('\n');
  if (newline == std::string::npos || newline == text.size() - 1) return " at " + column;
  return " at line " + std::to_string(line) + ", " + column;
}

std::vector<std::pair<double, std::string>>& OverflowedIntegerTexts() {
  static thread_local std::vector<std::pair<double, std::string>> texts;
  return texts;
}

void RememberOverflowedIntegers(const std::string& text, bool any) {
  OverflowedIntegerTexts().clear();
  if (!any) return;
  struct Probe : NoOpSax {
    bool number_float(Json::number_float_t value, const std::string& s) {
      if (IsOverflowedInteger(Json(value))) OverflowedIntegerTexts().emplace_back(value, s);
      return true;
    }
  } probe;
  Json::sax_parse(text, &probe);
}

StatusOr<Json> ParseJsonStrict(const std::string& text, const std::string& where, const std::string& path_prefix) {
  Json value;
  KVSHARD_RETURN_IF_ERROR(ParseJsonStrictInto(text, &value, where, path_prefix));
  return value;
}

Status ParseJsonStrictInto(const std::string& text, Json* out, const std::string& where,
                           const std::string& path_prefix) {
  if (TryParseJsonFast(text, out)) {
    OverflowedIntegerTexts().clear();  // a fast parse met none
    return Status::Ok();
  }
  ClearJson(out);  // what a declined fast parse left
  *out = nullptr;
  StatusOr<Json> full = ParseJsonStrictWithNlohmann(text, where, path_prefix);
  if (!full.ok()) return full.status();
  *out = std::move(full).value();
  return Status::Ok();
}

StatusOr<Json> ParseJsonStrictWithNlohmann(const std::string& text, const std::string& where,
                                           const std::string& path_prefix) {
  struct Frame {
    bool array = false;
    size_t next = 0;         // arrays: index of the next element
    std::string key;         // objects: the key being read
    std::string part;        // this container's part of its path: "requests", ".pages", "[0]" ("" at the top)
    bool path_empty = true;  // this container's whole path is ""
    std::unordered_set<std::string> keys;
  };
  std::vector<Frame> stack;
  size_t depth = 0;  // open containers, also those past kMaxJsonDepth (not on the stack)
  bool too_deep = false;
  std::string duplicate;
  bool overflowed = false;
  const auto path_of_top = [&]() {
    std::string path;
    for (const Frame& f : stack) path += f.part;
    return path;
  };
  const Json::parser_callback_t on_event = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        if (++depth > kMaxJsonDepth) {
          too_deep = true;
          return false;  // not kept in the result
        }
        Frame f;
        f.array = event == Json::parse_event_t::array_start;
        if (!stack.empty()) {
          Frame& parent = stack.back();
          if (parent.array) {
            f.part = "[" + std::to_string(parent.next++) + "]";
          } else {
            f.part = (parent.path_empty ? "" : ".") + parent.key;
          }
          f.path_empty = parent.path_empty && f.part.empty();
        }
        stack.push_back(std::move(f));
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (depth-- > kMaxJsonDepth) break;
        if (!stack.empty()) stack.pop_back();
        break;
      case Json::parse_event_t::key:
        if (depth <= kMaxJsonDepth && !stack.empty() && parsed.is_string()) {
          Frame& f = stack.back();
          f.key = parsed.get<std::string>();
          if (!f.keys.insert(f.key).second && duplicate.empty()) {
            duplicate = f.path_empty ? f.key : path_of_top() + "." + f.key;
          }
        }
        break;
      case Json::parse_event_t::value:
        if (depth <= kMaxJsonDepth && !stack.empty() && stack.back().array) ++stack.back().next;
        overflowed = overflowed || IsOverflowedInteger(parsed);
        break;
    }
    return true;
  };
  Json j = Json::parse(text, on_event, /*allow_exceptions=*/false);
  RememberOverflowedIntegers(text, overflowed);
  if (j.is_discarded()) {
    return InvalidArgument(where, where.empty() ? "" : ": ", "not valid JSON", JsonSyntaxErrorPlace(text));
  }
  if (too_deep) {
    return InvalidArgument(where, where.empty() ? "" : ": ", "nested deeper than ", kMaxJsonDepth,
                           " arrays and objects");
  }
  if (!duplicate.empty()) return InvalidArgument(path_prefix, duplicate, ": duplicate key");
  return j;
}

}  // namespace kvshard

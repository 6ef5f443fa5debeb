// Status formatting, input values quoted into messages, and the CLI exit-code mapping.
#include "core/status.h"

#include <cstdint>

namespace kvshard {

namespace {

// The code point of the well-formed UTF-8 sequence of 2-4 bytes at text[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF) and its length in *n; *n = 0 when the bytes there are not one.
char32_t Utf8At(std::string_view text, size_t i, size_t* n) {
  const auto byte = [&](size_t j) { return j < text.size() ? static_cast<unsigned char>(text[j]) : 0; };
  const unsigned char c = byte(i);
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  char32_t cp = 0;
  *n = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    *n = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    *n = 3, cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    *n = 4, cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < *n; ++k) {
    const unsigned char b = byte(i + k);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
      *n = 0;
      return 0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  return cp;
}

// True for a code point that shows as nothing or as a plain space, or changes how text around it shows: C1
// controls, no-break and other odd spaces, soft hyphen, joiners and marks of zero width, bidi controls, variation
// selectors, the BOM, interlinear annotation, tags.
bool Invisible(char32_t c) {
  return (c >= 0x80 && c <= 0xA0) || c == 0xAD || c == 0x34F || c == 0x61C || c == 0x115F || c == 0x1160 ||
         c == 0x17B4 || c == 0x17B5 || (c >= 0x180B && c <= 0x180F) || (c >= 0x2000 && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0x3164 ||
         (c >= 0xFE00 && c <= 0xFE0F) || c == 0xFEFF || c == 0xFFA0 || (c >= 0xFFF0 && c <= 0xFFFB) ||
         (c >= 0x1D173 && c <= 0x1D17A) || (c >= 0xE0000 && c <= 0xE0FFF);
}

// "\x" or "\u" or "\U" and `digits` lowercase hex digits of `value`.
std::string HexEscape(const char* lead, uint32_t value, int digits) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = lead;
  for (int d = digits - 1; d >= 0; --d) out += kHex[(value >> (4 * d)) & 15];
  return out;
}

const char* CodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kMismatch: return "MISMATCH";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}
}  // namespace

std::string QuoteInput(std::string_view text, char quote) {
  std::string out(quote != '\0' ? 1 : 0, quote);
  size_t shown = 0, i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    std::string piece;
    size_t n = 1;
    size_t width = 0;  // columns of a character kept as is; escapes count their length
    if (c == '\\' || (quote != '\0' && c == static_cast<unsigned char>(quote))) {
      piece = {'\\', static_cast<char>(c)};
    } else if (c == '\n') {
      piece = "\\n";
    } else if (c == '\t') {
      piece = "\\t";
    } else if (c == '\r') {
      piece = "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      piece = HexEscape("\\x", c, 2);
    } else if (c < 0x80) {
      piece = std::string(1, static_cast<char>(c));
      width = 1;
    } else if (const char32_t cp = Utf8At(text, i, &n); n == 0) {
      n = 1;
      piece = HexEscape("\\x", c, 2);
    } else if (Invisible(cp)) {
      piece = cp > 0xFFFF ? HexEscape("\\U", cp, 8) : HexEscape("\\u", cp, 4);
    } else {
      piece = std::string(text.substr(i, n));
      width = 1;
    }
    if (width == 0) width = piece.size();
    if (shown + width > kMaxQuotedChars) break;
    out += piece;
    shown += width;
    i += n;
  }
  const bool cut = i < text.size();
  if (cut) out += "\u2026";  // …
  if (quote != '\0') out += quote;
  if (cut) out += StrCat(" (", text.size(), " bytes)");
  return out;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return StrCat(CodeName(code_), ": ", message_);
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kMismatch: return 1;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition: return 2;
    case StatusCode::kUnavailable:
    case StatusCode::kInternal: return 3;
  }
  return 3;
}

}  // namespace kvshard

// Typed flag values: parsing with core/parse.h, range and choice checks, help names; Flags accessors.
#include "cli/flags.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <istream>
#include <sstream>

#include "cli/memory_limit.h"
#include "core/parse.h"

namespace kvshard::cli {
namespace {

// A bound as help and messages print it: powers of two from 2^20 up as "2^k", others in decimal.
std::string BoundText(int64_t v) {
  if (v >= (int64_t{1} << 20) && (v & (v - 1)) == 0) {
    int k = 0;
    while ((int64_t{1} << k) != v) ++k;
    return "2^" + std::to_string(k);
  }
  return std::to_string(v);
}

// "must be positive", "must be in [1, 65536]", ... (the reference model's wording, so both agree).
std::string RangeRule(int64_t lo, int64_t hi) {
  if (hi == kNoMax) {
    if (lo == 0) return "must be non-negative";
    if (lo == 1) return "must be positive";
    return "must be >= " + BoundText(lo);
  }
  if (lo == kNoMin) return "must be at most " + BoundText(hi);
  return "must be in [" + BoundText(lo) + ", " + BoundText(hi) + "]";
}

// Help name of an integer in [lo, hi]: "INT", "INT>=0", "INT<=9", "INT in [1, 65536]".
std::string IntName(int64_t lo, int64_t hi) {
  if (lo == kNoMin && hi == kNoMax) return "INT";
  if (hi == kNoMax) return "INT>=" + BoundText(lo);
  if (lo == kNoMin) return "INT<=" + BoundText(hi);
  return "INT in [" + BoundText(lo) + ", " + BoundText(hi) + "]";
}

// A real bound as help and messages print it ("0", "0.5", "1e+06").
std::string FormatReal(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The single token of a non-repeatable flag (Boost's own checks: given once, one value).
const std::string& SingleToken(const boost::any& store, const std::vector<std::string>& tokens) {
  po::validators::check_first_occurrence(store);
  return po::validators::get_single_string(tokens);
}

// Rejects "" (unless allowed) and a trailing comma; the list's items are checked by the caller.
void CheckListShape(const std::string& text, bool allow_empty) {
  if (text.empty() && !allow_empty) throw FlagValueError(": must list at least one value");
  if (!text.empty() && text.back() == ',') throw FlagValueError(": trailing comma in " + QuoteInput(text, '\''));
}

// Splits "a,b,c" at commas ("" -> no items).
std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  size_t start = 0;
  for (size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1) {
    items.push_back(text.substr(start, comma - start));
  }
  items.push_back(text.substr(start));
  return items;
}

}  // namespace

IntValue::IntValue(int64_t lo, int64_t hi) : po::typed_value<int64_t>(nullptr), lo_(lo), hi_(hi) {
  value_name(IntName(lo, hi));
}

void IntValue::xparse(boost::any& store, const std::vector<std::string>& tokens) const {
  const std::string& text = SingleToken(store, tokens);
  StatusOr<int64_t> v = ParseInt64(text, "");
  if (!v.ok() && IsOutOfRange(v.status()) && !(lo_ == kNoMin && hi_ == kNoMax)) {
    throw FlagValueError(": integer out of range: " + QuoteInput(text, '\'') + " (" + RangeRule(lo_, hi_) + ")");
  }
  if (!v.ok()) throw FlagValueError(v.status().message());
  if (*v < lo_ || *v > hi_) throw FlagValueError(": " + RangeRule(lo_, hi_) + ", got " + std::to_string(*v));
  store = *v;
}

RealValue::RealValue(double lo, double hi, bool lo_open)
    : po::typed_value<double>(nullptr), lo_(lo), hi_(hi), lo_open_(lo_open) {
  value_name("REAL in " + std::string(lo_open ? "(" : "[") + FormatReal(lo) + ", " + FormatReal(hi) + "]");
}

void RealValue::xparse(boost::any& store, const std::vector<std::string>& tokens) const {
  const std::string& text = SingleToken(store, tokens);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  const bool whole = !text.empty() && end == text.c_str() + text.size();
  // A number past the largest double (1e999) is out of range, shown as written, not "not a real number".
  const bool overflow = whole && errno == ERANGE && std::isinf(v);
  if (!overflow && (!whole || !std::isfinite(v))) throw FlagValueError(": not a real number");
  if (overflow || v < lo_ || (lo_open_ && v == lo_) || v > hi_) {
    throw FlagValueError(": must be " + std::string(lo_open_ ? "> " : ">= ") + FormatReal(lo_) +
                         " and <= " + FormatReal(hi_) + ", got " + QuoteInput(text, '\0'));
  }
  store = v;
}

RealValue* Real(double lo, double hi, bool lo_open) { return new RealValue(lo, hi, lo_open); }

IntListValue::IntListValue() : po::typed_value<std::vector<int64_t>>(nullptr) { value_name("INT,..."); }

IntListValue* IntListValue::AllowEmpty() {
  allow_empty_ = true;
  return this;
}

void IntListValue::xparse(boost::any& store, const std::vector<std::string>& tokens) const {
  const std::string& text = SingleToken(store, tokens);
  CheckListShape(text, allow_empty_);
  StatusOr<std::vector<int64_t>> v = ParseInt64List(text, "");
  if (!v.ok()) throw FlagValueError(v.status().message());
  store = *std::move(v);
}

ChoiceValue::ChoiceValue(std::vector<std::string> choices, std::vector<std::pair<std::string, std::string>> aliases)
    : po::typed_value<std::string>(nullptr), choices_(std::move(choices)), aliases_(std::move(aliases)) {
  std::string name;
  for (const std::string& c : choices_) name += (name.empty() ? "" : "|") + c;
  value_name(name);
}

std::string ChoiceValue::Canonical(const std::string& text, const std::string& where) const {
  for (const std::string& c : choices_) {
    if (text == c) return c;
  }
  for (const auto& [old_spelling, choice] : aliases_) {
    if (text == old_spelling) return choice;
  }
  throw FlagValueError(where + ": must be " + JoinChoices(choices_) + ", got " + QuoteInput(text, '\''));
}

void ChoiceValue::xparse(boost::any& store, const std::vector<std::string>& tokens) const {
  store = Canonical(SingleToken(store, tokens), "");
}

ChoiceListValue::ChoiceListValue(std::vector<std::string> choices,
                                 std::vector<std::pair<std::string, std::string>> aliases)
    : po::typed_value<std::vector<std::string>>(nullptr), item_(std::move(choices), std::move(aliases)) {
  value_name(item_.name() + ",...");
}

void ChoiceListValue::xparse(boost::any& store, const std::vector<std::string>& tokens) const {
  const std::string& text = SingleToken(store, tokens);
  CheckListShape(text, /*allow_empty=*/false);
  std::vector<std::string> items = SplitCommas(text);
  for (size_t i = 0; i < items.size(); ++i) items[i] = item_.Canonical(items[i], "[" + std::to_string(i) + "]");
  store = std::move(items);
}

IntValue* Int(int64_t lo, int64_t hi) { return new IntValue(lo, hi); }
IntValue* Positive() { return Int(1, kNoMax); }
IntValue* NonNegative() { return Int(0, kNoMax); }
IntListValue* IntList() { return new IntListValue(); }

ChoiceValue* Choice(std::vector<std::string> choices, std::vector<std::pair<std::string, std::string>> aliases) {
  return new ChoiceValue(std::move(choices), std::move(aliases));
}

ChoiceListValue* ChoiceList(std::vector<std::string> choices,
                            std::vector<std::pair<std::string, std::string>> aliases) {
  return new ChoiceListValue(std::move(choices), std::move(aliases));
}

po::typed_value<std::string>* File() { return po::value<std::string>()->value_name("FILE"); }

std::string JoinChoices(const std::vector<std::string>& choices, const std::string& last_sep) {
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == choices.size() ? last_sep : ", ") + choices[i];
  }
  return s;
}

Status FileError(const std::string& name, const Status& status) {
  const StatusCode c = status.code();
  if (c != StatusCode::kInvalidArgument && c != StatusCode::kOutOfRange && c != StatusCode::kFailedPrecondition) {
    return status;
  }
  if (status.message().rfind("--", 0) == 0) return status;
  return Status(c, StrCat("--", name, ": ", status.message()));
}

Status Flags::Require(const std::vector<std::string>& names) const {
  for (const std::string& name : names) {
    if (!Has(name)) return InvalidArgument("--", name, ": required");
  }
  return Status::Ok();
}

Status Flags::OnlyApplying(const std::vector<std::string>& applies, const std::string& what) const {
  for (const auto& [name, value] : vm_) {
    if (value.defaulted() || std::find(applies.begin(), applies.end(), name) != applies.end()) continue;
    return InvalidArgument("--", name, ": does not apply to ", what);
  }
  return Status::Ok();
}

Status Flags::CheckInputSize(const std::string& name, int64_t bytes, int64_t per_byte, bool so_far) const {
  if (per_byte <= 0 || !Has("max-memory")) return Status::Ok();
  return MemoryBudget(Int("max-memory"))
      .Check("--" + name, "input held in memory", bytes, so_far ? "input bytes (so far)" : "input bytes", per_byte);
}

Status Flags::CheckStandardInput(const std::string& name, int read_errno) const {
  if (&in_ != &std::cin) return Status::Ok();  // a test's stream: no descriptor behind it
  struct stat st;
  if (read_errno == EISDIR || (::fstat(0, &st) == 0 && S_ISDIR(st.st_mode))) {
    return InvalidArgument("--", name, ": standard input: is a directory, not a file");
  }
  if (read_errno != 0) return Internal("--", name, ": standard input: read failed: ", std::strerror(read_errno));
  return Status::Ok();
}

StatusOr<std::string> Flags::ReadText(const std::string& name, int64_t bytes_per_input_byte) const {
  KVSHARD_RETURN_IF_ERROR(Require({name}));
  const std::string& path = String(name);
  std::string text;
  if (path == "-") {
    KVSHARD_RETURN_IF_ERROR(CheckStandardInput(name, 0));
    char chunk[1 << 16];
    errno = 0;
    while (in_.read(chunk, sizeof(chunk)) || in_.gcount() > 0) {
      text.append(chunk, static_cast<size_t>(in_.gcount()));
      KVSHARD_RETURN_IF_ERROR(
          CheckInputSize(name, static_cast<int64_t>(text.size()), bytes_per_input_byte, /*so_far=*/true));
    }
    if (in_.bad()) KVSHARD_RETURN_IF_ERROR(CheckStandardInput(name, errno != 0 ? errno : EIO));
    return text;
  }
  std::ifstream file;
  const Status opened = OpenInputFile(path, &file);
  if (!opened.ok()) return InvalidArgument("--", name, ": ", opened.message());
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  file.seekg(0, std::ios::beg);
  KVSHARD_RETURN_IF_ERROR(CheckInputSize(name, static_cast<int64_t>(size), bytes_per_input_byte, /*so_far=*/false));
  std::stringstream buf;
  buf << file.rdbuf();
  return buf.str();
}

Status Flags::WithInput(const std::string& name, const std::function<Status(std::istream&)>& body) const {
  KVSHARD_RETURN_IF_ERROR(Require({name}));
  return WithInputPath(name, String(name), body);
}

Status Flags::WithInputPath(const std::string& name, const std::string& path,
                            const std::function<Status(std::istream&)>& body) const {
  if (path == "-") {
    KVSHARD_RETURN_IF_ERROR(CheckStandardInput(name, 0));
    return body(in_);
  }
  std::ifstream file;
  const Status opened = OpenInputFile(path, &file);
  if (!opened.ok()) return InvalidArgument("--", name, ": ", opened.message());
  return body(file);
}

StatusOr<Json> Flags::ReadJson(const std::string& name, int64_t bytes_per_input_byte) const {
  KVSHARD_ASSIGN_OR_RETURN(std::string text, ReadText(name, bytes_per_input_byte));
  const std::string& path = String(name);
  return ParseJsonStrict(text, StrCat("--", name, ": ", path == "-" ? "standard input" : path),
                         StrCat("--", name, ": "));
}

}  // namespace kvshard::cli

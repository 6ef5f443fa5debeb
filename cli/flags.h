// Typed flag values for Boost.Program_options (strict integers with ranges, comma lists, choices) and typed
// read access to a parsed command line. A bad value fails at parse time, naming the flag.
#ifndef KVSHARD_CLI_FLAGS_H_
#define KVSHARD_CLI_FLAGS_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "core/json.h"
#include "core/status.h"

namespace kvshard::cli {

namespace po = boost::program_options;

// "No bound" for Int(lo, hi).
inline constexpr int64_t kNoMin = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

// Thrown by the value types below; the run wrapper reports it as "<flag><detail>", e.g. "--locs[1]: ...".
class FlagValueError : public po::error_with_option_name {
 public:
  explicit FlagValueError(std::string detail)
      : po::error_with_option_name("%canonical_option%"), detail_(std::move(detail)) {}
  // What follows the flag's name: "[1]: not an integer: 'x'" or ": must be positive, got 0".
  const std::string& detail() const { return detail_; }

 private:
  std::string detail_;
};

// An int64 flag: strict base-10 (core/parse.h: no "12abc", no overflow), within [lo, hi]; help shows "INT".
class IntValue : public po::typed_value<int64_t> {
 public:
  IntValue(int64_t lo, int64_t hi);
  // Parses the flag's one token; throws FlagValueError on junk, overflow or a value outside [lo, hi].
  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override;

 private:
  int64_t lo_, hi_;
};

// A finite real-number flag in [lo, hi] (help: "REAL in (0, 1e+06]" style names); strict: the whole token must parse.
class RealValue : public po::typed_value<double> {
 public:
  RealValue(double lo, double hi, bool lo_open);
  // Parses the flag's one token; throws FlagValueError on junk, inf/nan or a value outside the range.
  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override;

 private:
  double lo_, hi_;
  bool lo_open_;
};

// A comma-separated int64 list flag ("1,2,3"): strict items, no trailing comma, non-empty unless allowed.
class IntListValue : public po::typed_value<std::vector<int64_t>> {
 public:
  IntListValue();
  // Accepts "" as the empty list (for flags whose emptiness the model reports in its own words).
  IntListValue* AllowEmpty();
  // Parses the flag's one token as a list; throws FlagValueError naming the bad item.
  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override;

 private:
  bool allow_empty_ = false;
};

// A string flag restricted to `choices` (kebab-case); `aliases` map hidden old spellings to a choice.
class ChoiceValue : public po::typed_value<std::string> {
 public:
  ChoiceValue(std::vector<std::string> choices, std::vector<std::pair<std::string, std::string>> aliases);
  // Stores the canonical choice of the flag's one token.
  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override;
  // The choice `text` names (directly or through an alias); else throws FlagValueError "<where>: must be ...".
  std::string Canonical(const std::string& text, const std::string& where) const;

 private:
  std::vector<std::string> choices_;
  std::vector<std::pair<std::string, std::string>> aliases_;
};

// A comma-separated list of choices ("plan,rerange"), each checked as by ChoiceValue.
class ChoiceListValue : public po::typed_value<std::vector<std::string>> {
 public:
  ChoiceListValue(std::vector<std::string> choices, std::vector<std::pair<std::string, std::string>> aliases);
  // Stores the canonical choice of every comma-separated item.
  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override;

 private:
  ChoiceValue item_;
};

// Integer in [lo, hi] (help: "INT", "INT>=1", "INT in [1, 65536]").
IntValue* Int(int64_t lo = kNoMin, int64_t hi = kNoMax);
// Real number in [lo, hi], or (lo, hi] when lo_open.
RealValue* Real(double lo, double hi, bool lo_open = false);
// Integer >= 1.
IntValue* Positive();
// Integer >= 0.
IntValue* NonNegative();
// Comma-separated integers (help: "INT,...").
IntListValue* IntList();
// One of `choices` (help: "a|b|c").
ChoiceValue* Choice(std::vector<std::string> choices, std::vector<std::pair<std::string, std::string>> aliases = {});
// Comma-separated choices (help: "OP,...").
ChoiceListValue* ChoiceList(std::vector<std::string> choices,
                            std::vector<std::pair<std::string, std::string>> aliases = {});
// A file name; "-" reads standard input (help: "FILE").
po::typed_value<std::string>* File();
// "a, b or c": how choices are listed in messages and help.
std::string JoinChoices(const std::vector<std::string>& choices, const std::string& last_sep = " or ");

// `status` as an error of the file named by flag `name`: "--name: " put before a bad-input message that does
// not already start with a flag ("--..."); OK, mismatches and environment errors are returned unchanged.
Status FileError(const std::string& name, const Status& status);

// Typed read access to a command's parsed flags and its standard input. Reading a flag that is neither given
// nor defaulted is a programming error (call Require first).
class Flags {
 public:
  Flags(const po::variables_map& vm, std::istream& in) : vm_(vm), in_(in) {}

  // True when the flag was given or has a default.
  bool Has(const std::string& name) const { return vm_.count(name) > 0; }
  // True when the flag was given on the command line (not only defaulted).
  bool Given(const std::string& name) const { return Has(name) && !vm_[name].defaulted(); }
  // The value of an Int/Positive/NonNegative flag.
  int64_t Int(const std::string& name) const { return Get<int64_t>(name); }
  // The value of a Real flag.
  double Double(const std::string& name) const { return Get<double>(name); }
  // The value of an IntList flag.
  const std::vector<int64_t>& IntList(const std::string& name) const { return Get<std::vector<int64_t>>(name); }
  // The value of a Choice or File flag.
  const std::string& String(const std::string& name) const { return Get<std::string>(name); }
  // The value of a ChoiceList flag (canonical spellings).
  const std::vector<std::string>& StringList(const std::string& name) const {
    return Get<std::vector<std::string>>(name);
  }
  // The value of a po::bool_switch flag.
  bool Bool(const std::string& name) const { return Get<bool>(name); }
  // The parsed value of any present flag, as its value type stored it.
  const boost::any& Any(const std::string& name) const {
    KVSHARD_CHECK(vm_.count(name) > 0);
    return vm_[name].value();
  }
  // OK iff every named flag is present; else "--<first missing>: required".
  Status Require(const std::vector<std::string>& names) const;
  // OK iff every flag given on the command line (defaults do not count) is in `applies`; else InvalidArgument
  // "--<first other flag>: does not apply to <what>" (flags of another mode or backend are refused, not ignored).
  Status OnlyApplying(const std::vector<std::string>& applies, const std::string& what) const;
  // The text of the file named by flag `name` ("-": standard input); errors name --name and the file. With
  // `bytes_per_input_byte` > 0 on a command that declares --max-memory, a file whose size times it (what the
  // command holds per byte read) passes the cap is refused before it is read (standard input: once the bytes
  // read so far pass it).
  StatusOr<std::string> ReadText(const std::string& name, int64_t bytes_per_input_byte = 0) const;
  // ReadText parsed as JSON ("--name: <file>: not valid JSON").
  StatusOr<Json> ReadJson(const std::string& name, int64_t bytes_per_input_byte = 0) const;
  // Runs `body` on the stream of the file named by flag `name` ("-": standard input), without reading it whole.
  Status WithInput(const std::string& name, const std::function<Status(std::istream&)>& body) const;
  // WithInput for `path`, one of the files a list flag named `name` gives; errors name --name and the file.
  Status WithInputPath(const std::string& name, const std::string& path,
                       const std::function<Status(std::istream&)>& body) const;

 private:
  template <typename T>
  const T& Get(const std::string& name) const {
    KVSHARD_CHECK(vm_.count(name) > 0);
    return vm_[name].as<T>();
  }
  // OK unless standard input is a directory ("--name: standard input: is a directory, not a file") or a read of
  // it failed with `read_errno` (0: none); checked only when the command reads the process's std::cin.
  Status CheckStandardInput(const std::string& name, int read_errno) const;
  // OK iff `bytes` of input (all of it, or so far) fit --max-memory at `per_byte` bytes each.
  Status CheckInputSize(const std::string& name, int64_t bytes, int64_t per_byte, bool so_far) const;
  const po::variables_map& vm_;
  std::istream& in_;
};

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_FLAGS_H_

// The run wrapper shared by every kvshard command.
#include "cli/command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <iostream>
#include <istream>
#include <ostream>
#include <string>

namespace kvshard::cli {
namespace {

// The command's declared flags plus --help.
void DeclareAll(const Command& command, po::options_description& desc) {
  command.declare_flags(desc);
  desc.add_options()("help,h", "show this help and exit");
}

// Rewrites hidden old spellings ("--rank", "--rank=9") to the current ones; `used` gets the pairs applied.
std::vector<std::string> SpellCanonically(const Command& command, std::vector<std::string> args,
                                          std::vector<std::pair<std::string, std::string>>* used) {
  for (std::string& arg : args) {
    for (const auto& [old_name, new_name] : command.aliases) {
      const std::string flag = "--" + old_name;
      if (arg == flag || arg.rfind(flag + "=", 0) == 0) {
        arg = "--" + new_name + arg.substr(flag.size());
        used->emplace_back(old_name, new_name);
      }
    }
  }
  return args;
}

// An error naming "--new..." names "--old..." instead when the user typed the old spelling.
Status SpellAsTyped(const Status& status, const std::vector<std::pair<std::string, std::string>>& used) {
  const std::string& m = status.message();
  for (const auto& [old_name, new_name] : used) {
    const std::string flag = "--" + new_name;
    if (m.rfind(flag, 0) == 0 && (m.size() == flag.size() || m[flag.size()] == ':' || m[flag.size()] == '[')) {
      return Status(status.code(), "--" + old_name + m.substr(flag.size()));
    }
  }
  return status;
}

// Parses `args` against `desc`; a bad value names its flag, anything else Boost reports is prefixed with the
// command ("split: unrecognised option '--bogus'").
StatusOr<po::variables_map> Parse(const std::string& command, const po::options_description& desc,
                                  const std::vector<std::string>& args, const std::string& positional,
                                  const std::string& positional_rest) {
  // Boost's error messages substitute the option's name for placeholders such as %canonical_option% in a loop
  // that never ends when the name itself holds one (found by //fuzz:cli_fuzzer): no flag has a '%' in its name,
  // so such an option token is refused here, before Boost sees it.
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') continue;
    const std::string name = a.substr(0, a.find('='));
    if (name.find('%') != std::string::npos) {
      return InvalidArgument(command, ": unrecognised option ", QuoteInput(name, '\''));
    }
  }
  bool has_percent = false;
  for (const std::string& a : args) has_percent |= a.find('%') != std::string::npos;
  po::variables_map vm;
  po::positional_options_description bare;
  if (!positional.empty()) bare.add(positional.c_str(), 1);
  if (!positional_rest.empty()) bare.add(positional_rest.c_str(), -1);
  try {
    po::store(po::command_line_parser(args)
                  .options(desc)
                  .positional(bare)
                  .style(po::command_line_style::unix_style ^ po::command_line_style::allow_guessing)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const FlagValueError& e) {
    return InvalidArgument(e.get_option_name(), e.detail());
  } catch (const po::unknown_option& e) {  // Boost's what() would quote the token whole and raw
    return InvalidArgument(command, ": unrecognised option ", QuoteInput(e.get_option_name(), '\''));
  } catch (const po::multiple_occurrences& e) {
    return InvalidArgument(e.get_option_name(), ": given more than once");
  } catch (const po::invalid_command_line_syntax& e) {
    if (e.kind() == po::invalid_syntax::missing_parameter || e.kind() == po::invalid_syntax::empty_adjacent_parameter) {
      return InvalidArgument(e.get_option_name(), ": needs a value");
    }
    if (has_percent) return InvalidArgument(command, ": invalid option ", QuoteInput(e.get_option_name(), '\''));
    return InvalidArgument(command, ": ", e.what());
  } catch (const po::error_with_option_name& e) {
    // what() substitutes the token into the message template: with a '%' in it the substitution may not end.
    if (has_percent) return InvalidArgument(command, ": invalid option ", QuoteInput(e.get_option_name(), '\''));
    return InvalidArgument(command, ": ", e.what());
  } catch (const po::error& e) {
    return InvalidArgument(command, ": ", e.what());
  }
  return vm;
}

// True when --help or -h is among the arguments (help wins over any other flag, valid or not).
bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

// The length of the well-formed UTF-8 sequence of 2-4 bytes at text[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one.
size_t Utf8SequenceAt(const std::string& text, size_t i) {
  const auto byte = [&](size_t j) { return j < text.size() ? static_cast<unsigned char>(text[j]) : 0; };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string EscapeForOneLine(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      if (const size_t n = Utf8SequenceAt(text, i)) {
        out.append(text, i, n);
        i += n - 1;
        continue;
      }
    } else if (c >= 0x20 && c != 0x7f) {
      out += text[i];
      continue;
    } else if (c == '\n') {
      out += "\\n";
      continue;
    } else if (c == '\t') {
      out += "\\t";
      continue;
    } else if (c == '\r') {
      out += "\\r";
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

int Fail(const Status& status, std::ostream& err) {
  err << (status.code() == StatusCode::kMismatch ? "kvshard: mismatch: " : "kvshard: error: ")
      << EscapeForOneLine(status.message()) << "\n";
  return ExitCodeFor(status);
}

namespace {

char* memory_reserve = nullptr;

constexpr char kOutOfMemory[] =
    "kvshard: error: out of memory: the system refused an allocation under --max-memory's estimates (ulimit -v, "
    "a cgroup or a smaller machine gives less); a lower --max-memory refuses such input before it runs\n";

// The first failure gives the reserve back and operator new retries; a failure after that ends the run with one
// line, exit 3. It never throws: a bad_alloc thrown inside a destructor (nlohmann's JSON allocates a stack as large
// as an array while it destroys it) would be std::terminate.
void ReleaseMemoryReserve() {
  if (memory_reserve != nullptr) {
    delete[] memory_reserve;
    memory_reserve = nullptr;
    return;
  }
  std::fflush(stdout);
  const ssize_t ignored = ::write(STDERR_FILENO, kOutOfMemory, sizeof(kOutOfMemory) - 1);
  (void)ignored;
  ::_exit(3);
}

}  // namespace

void InstallMemoryReserve() {
  if (memory_reserve == nullptr) memory_reserve = new char[size_t{16} << 20];
  std::set_new_handler(ReleaseMemoryReserve);
}

int FinishStandardOutput(int rc, std::ostream& err) {
  errno = 0;
  std::cout.flush();
  bool failed = std::cout.fail();
  int why = errno;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    failed = true;
    why = errno ? errno : why;
  }
  errno = 0;
  if (std::fclose(stdout) != 0 && !(errno == EBADF && !failed)) {
    failed = true;
    why = errno;
  }
  if (!failed) return rc;
  const Status status = Internal("standard output: write failed: ", why ? std::strerror(why) : "unknown error");
  Fail(status, err);
  return rc != 0 ? rc : ExitCodeFor(status);
}

std::string UsageLines(const Command& command, const std::string& indent) {
  const std::string lead = "kvshard " + command.name + " ";
  std::string lines;
  size_t begin = 0;
  while (begin <= command.synopsis.size()) {
    size_t end = command.synopsis.find('\n', begin);
    if (end == std::string::npos) end = command.synopsis.size();
    const std::string form = command.synopsis.substr(begin, end - begin);
    if (begin > 0) lines += "\n" + indent;
    // A line that starts with spaces continues the form above it: aligned under its flags, not a form of its own.
    const size_t text = form.find_first_not_of(' ');
    const bool continues = begin > 0 && text != 0 && text != std::string::npos;
    lines += continues ? std::string(lead.size(), ' ') + form.substr(text) : lead + form;
    begin = end + 1;
  }
  return lines;
}

void PrintCommandHelp(const Command& command, std::ostream& out) {
  po::options_description desc(command.name + " flags", /*line_length=*/100, /*min_description_length=*/50);
  DeclareAll(command, desc);
  out << "usage: " << UsageLines(command, "       ") << "\n\n" << command.summary << "\n\n" << desc << "\n";
}

int RunCommand(const Command& command, const std::vector<std::string>& args, std::istream& in, std::ostream& out,
               std::ostream& err) {
  if (WantsHelp(args)) {
    PrintCommandHelp(command, out);
    return 0;
  }
  std::vector<std::pair<std::string, std::string>> used;
  const std::vector<std::string> canonical = SpellCanonically(command, args, &used);
  po::options_description desc;
  DeclareAll(command, desc);
  Status status;
  StatusOr<po::variables_map> vm = Parse(command.name, desc, canonical, command.positional, command.positional_rest);
  if (!vm.ok()) {
    status = vm.status();
  } else {
    try {
      status = command.run(Flags(*vm, in), out);
    } catch (const std::bad_alloc&) {  // the system gave less than the estimates allowed: one line, exit 3
      status = Internal(command.name,
                        ": out of memory: the system refused an allocation under --max-memory's "
                        "estimates (a lower ulimit -v or a smaller machine); a lower --max-memory "
                        "refuses such input before it runs");
    } catch (const std::exception& e) {  // a library throwing: one line, exit 3
      status = Internal(command.name, ": ", e.what());
    }
  }
  return status.ok() ? 0 : Fail(SpellAsTyped(status, used), err);
}

}  // namespace kvshard::cli

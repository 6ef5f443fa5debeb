// The CLI contract check of the fuzz targets: Dispatch in process, standard output into a counting sink.
#include "fuzz/cli_check.h"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <streambuf>

#include "cli/commands.h"
#include "fuzz/fuzz_util.h"

namespace kvshard::fuzz {
namespace {

// A stream buffer that counts what is written and keeps only the first kKeep bytes.
class SinkBuf : public std::streambuf {
 public:
  static constexpr size_t kKeep = size_t{64} << 10;
  size_t bytes = 0;
  std::string head;

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      ++bytes;
      if (head.size() < kKeep) head.push_back(static_cast<char>(c));
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    bytes += static_cast<size_t>(n);
    const size_t keep = std::min(static_cast<size_t>(n), kKeep - std::min(kKeep, head.size()));
    head.append(s, keep);
    return n;
  }
};

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::string ShowArgs(const std::vector<std::string>& args) {
  std::string line = "kvshard";
  for (const std::string& a : args) {
    line += " '";
    for (const char c : a) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) {
        static const char kHex[] = "0123456789abcdef";
        line += "\\x";
        line += kHex[u >> 4];
        line += kHex[u & 15];
      } else {
        line += c;
      }
    }
    line += "'";
  }
  return line;
}

CliRun RunCliChecked(const std::vector<std::string>& args, const std::string& stdin_text) {
  std::istringstream in(stdin_text);
  SinkBuf sink;
  std::ostream out(&sink);
  std::ostringstream err;
  CliRun r;
  r.exit_code = cli::Dispatch(args, in, out, err);
  r.out_bytes = sink.bytes;
  r.out_head = std::move(sink.head);
  r.err = err.str();
  const std::string where = ShowArgs(args);
  FUZZ_ASSERT(r.exit_code >= 0 && r.exit_code <= 3, where, ": exit ", r.exit_code);
  if (r.exit_code == 0) return r;
  const auto lines = std::count(r.err.begin(), r.err.end(), '\n');
  FUZZ_ASSERT(lines == 1 && r.err.back() == '\n', where, ": exit ", r.exit_code, " with ", lines,
              " stderr lines: ", r.err);
  if (r.exit_code == 1) {
    FUZZ_ASSERT(StartsWith(r.err, "kvshard: mismatch: "), where, ": exit 1 without a mismatch line: ", r.err);
  } else {
    FUZZ_ASSERT(StartsWith(r.err, "kvshard: error: "), where, ": exit ", r.exit_code, " line: ", r.err);
  }
  if (r.exit_code == 3) {
    // In a CPU build only a GPU request may be refused as "environment"; an Internal error (a caught
    // exception, bad_alloc on an unchecked size) is a bug.
    const bool gpu = r.err.find("GPU support not built") != std::string::npos ||
                     r.err.find("GPU backend is not built") != std::string::npos ||
                     r.err.find("no CUDA device visible") != std::string::npos;
    FUZZ_ASSERT(gpu, where, ": exit 3 that is not a missing GPU: ", r.err);
  }
  return r;
}

}  // namespace kvshard::fuzz

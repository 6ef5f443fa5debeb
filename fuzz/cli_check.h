// The CLI's bad-input contract checked on an in-process `kvshard` run (exit 0/1/2, one stderr line on
// failure, exit 3 only for a missing GPU), for the fuzz targets that drive commands.
#ifndef KVSHARD_FUZZ_CLI_CHECK_H_
#define KVSHARD_FUZZ_CLI_CHECK_H_

#include <cstddef>
#include <string>
#include <vector>

namespace kvshard::fuzz {

// What one in-process `kvshard` run produced (standard output is counted, not kept).
struct CliRun {
  int exit_code = -1;
  size_t out_bytes = 0;
  std::string out_head;  // the first 64 KiB of standard output
  std::string err;
};

// Runs `kvshard <args...>` through the dispatcher with `stdin_text` as what "-" reads, and checks the
// contract of docs/RELIABILITY.md: exit 0, 1 (a verification mismatch) or 2 (bad input); on 1 and 2 exactly
// one line on standard error, "kvshard: mismatch: ..." or "kvshard: error: ..."; exit 3 only for a GPU that
// this build or machine lacks. Anything else aborts, printing the command line.
CliRun RunCliChecked(const std::vector<std::string>& args, const std::string& stdin_text);

// True when two runs exited alike and wrote the same bytes (a differential check of --impl fast).
inline bool SameRun(const CliRun& a, const CliRun& b) {
  return a.exit_code == b.exit_code && a.out_bytes == b.out_bytes && a.out_head == b.out_head && a.err == b.err;
}

// The command line as one printable line (for failure messages).
std::string ShowArgs(const std::vector<std::string>& args);

}  // namespace kvshard::fuzz

#endif  // KVSHARD_FUZZ_CLI_CHECK_H_

// An in-process `kvshard <args>` for the properties that check the commands themselves (determinism, several traces
// a replay): its exit status, standard output and standard error.
#ifndef KVSHARD_PROPS_KVSHARD_RUN_H_
#define KVSHARD_PROPS_KVSHARD_RUN_H_

#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace kvshard::props {

// What one in-process `kvshard <args>` printed, and its exit status.
struct Output {
  int exit_code = -1;
  std::string out, err;
  bool operator==(const Output&) const = default;
};

// Runs `kvshard <args>` through the command table; `stdin_text` is what "-" reads.
inline Output Kvshard(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  Output r;
  r.exit_code = cli::Dispatch(args, in, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_KVSHARD_RUN_H_

// Helpers shared by the CP commands (split, rerange): model errors in flag spelling, fail-fast tags kept.
#ifndef KVSHARD_CLI_CP_CLI_UTIL_H_
#define KVSHARD_CLI_CP_CLI_UTIL_H_

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_util.h"

namespace kvshard::cli {

// A model error for the CLI: SGLang fail-fast messages ("[CP_SHARED_KV_FAIL_FAST][tag] ...") unchanged,
// field errors ("cp_size: ...") rewritten to flag spelling ("--cp-size: ...").
inline Status CpModelError(const Status& s) {
  if (s.ok() || s.message().empty() || s.message()[0] == '[') return s;
  return FlagError(s);
}

// Reads an optional comma-separated list flag; absent means `n` zeros.
inline StatusOr<std::vector<int64_t>> IntListFlagOrZeros(const po::variables_map& vm, const std::string& flag,
                                                         size_t n) {
  if (!vm.count(flag)) return std::vector<int64_t>(n, 0);
  return IntListFlag(vm, flag);
}

// "[a,b,c]".
inline std::string ListText(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return os.str();
}

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_CP_CLI_UTIL_H_

// Fuzz target: the kvshard command line (cli/commands.h Dispatch, every command's typed flags, aliases and
// --help) run in process. The bytes before the first NUL are the arguments (split at spaces and newlines), the
// bytes after it are standard input ("-"). Oracle: the bad-input contract of fuzz/fuzz_util.h (exit 0/1/2, one
// error line; exit 3 only for the missing GPU). Excluded so that a run stays in memory and in time: `bench`
// (GPU), the flags that write files or start workers (--out, --timeline, --csv, --plots, --emit-trace,
// --threads), /proc, /sys and /dev/fd paths; split and rerange get --max-memory 64 MiB, --sweep gets
// --threads 1 and at most 4 configurations, gen at most 4096 of anything.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/cli_check.h"
#include "fuzz/fuzz_util.h"

namespace kvshard::fuzz {
namespace {

bool IsFlag(const std::string& word, const char* name) {
  const std::string flag = std::string("--") + name;
  return word == flag || word.rfind(flag + "=", 0) == 0;
}

// The arguments to run, or false when the input is outside what the target runs.
bool Arguments(const std::string& line, std::vector<std::string>* args) {
  std::string word;
  bool in_word = false;
  for (const char c : line + " ") {
    if (c == ' ' || c == '\n') {
      if (in_word) args->push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (!args->empty() && (*args)[0] == "bench") return false;
  const bool gen = !args->empty() && (*args)[0] == "gen";
  bool sweep = false;
  int sweep_commas = 0;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& w = (*args)[i];
    for (const char* banned : {"out", "timeline", "csv", "plots", "emit-trace", "threads"}) {
      if (IsFlag(w, banned)) return false;
    }
    for (const char* path : {"/proc", "/sys", "/dev/fd", "/dev/std"}) {
      if (w.find(path) != std::string::npos) return false;
    }
    if (IsFlag(w, "sweep")) {
      sweep = true;
      const std::string value = w.find('=') != std::string::npos && w.rfind("--sweep=", 0) == 0
                                    ? w.substr(8)
                                    : (i + 1 < args->size() ? (*args)[i + 1] : "");
      for (const char c : value) sweep_commas += c == ',';
    }
    if (gen) {
      char* end = nullptr;
      const long long v = std::strtoll(w.c_str(), &end, 10);
      if (end != w.c_str() && (v > 4096 || v < -4096)) return false;
    }
  }
  if (sweep_commas > 3) return false;
  if (sweep) args->insert(args->end(), {"--threads", "1"});
  if (!args->empty() && ((*args)[0] == "split" || (*args)[0] == "rerange")) {
    args->insert(args->end(), {"--max-memory", "67108864"});
  }
  return true;
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const size_t nul = bytes.find('\0');
  std::vector<std::string> args;
  if (!kvshard::fuzz::Arguments(bytes.substr(0, nul), &args)) return 0;
  kvshard::fuzz::RunCliChecked(args, nul == std::string::npos ? "" : bytes.substr(nul + 1));
  return 0;
}

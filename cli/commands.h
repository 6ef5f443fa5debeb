// The kvshard subcommands: each lives in its own *_cmd.cc and is listed in main.cc's table.
#ifndef KVSHARD_CLI_COMMANDS_H_
#define KVSHARD_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace kvshard::cli {

// Each returns the process exit status (0 ok, 1 mismatch, 2 bad input, 3 GPU/environment failure).
int RunPlace(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
// kvshard split: CP split plans (in-seq batch plan, round-robin q lengths, token-balanced split).
int RunSplit(const std::vector<std::string>& args);
// kvshard rerange: source rows of the CP batch rerange after the padded all-gather.
int RunRerange(const std::vector<std::string>& args);
// kvshard alloc --script FILE [--json]: replays an allocator script (spec §2).
int RunAlloc(const std::vector<std::string>& args);
// kvshard gather-plan --batch FILE [--translate ...] [--json]: the batch's gather plan (spec §3).
int RunGatherPlan(const std::vector<std::string>& args);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_COMMANDS_H_

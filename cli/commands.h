// The kvshard command table and the top-level dispatcher (what main() calls); one *_cmd.cc per command.
#ifndef KVSHARD_CLI_COMMANDS_H_
#define KVSHARD_CLI_COMMANDS_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "cli/command.h"

namespace kvshard::cli {

// kvshard place: the placement bijection of token slots (ref, gpu or diff).
Command PlaceCommand();
// kvshard alloc: replays an allocator script (spec §2).
Command AllocCommand();
// kvshard gather-plan: a batch's owner-major gather plan and translate (spec §3).
Command GatherPlanCommand();
// kvshard split: CP split plans (in-seq batch plan, round-robin q lengths, token-balanced split).
Command SplitCommand();
// kvshard rerange: source rows of the CP batch rerange after the padded all-gather.
Command RerangeCommand();
// kvshard replay: runs a trace through the reference and reports the first mismatch by line and field.
Command ReplayCommand();
// kvshard gen: writes a seeded synthetic trace with expect filled by the reference.
Command GenCommand();
// kvshard simulate (simulate_cmd.cc).
Command SimulateCommand();
// kvshard calibrate: fits the simulator's cost model to measured operation times (calibrate_cmd.cc).
Command CalibrateCommand();
// kvshard bench: GPU benchmarks, each verified and reported against a limit measured in the same run.
Command BenchCommand();

// Every command, in `kvshard --help` order.
const std::vector<Command>& CommandTable();

// This build's version ("0.10.0").
inline constexpr char kVersion[] = "0.10.0";

// Runs `kvshard <args...>` (args exclude the program name): --help, --version, or the named command.
// Returns the exit status; results go to `out`, the one error line to `err`, and "-" reads `in`.
int Dispatch(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_COMMANDS_H_

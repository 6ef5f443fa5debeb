// A kvshard subcommand as a value (name, summary, typed flags, Run) and the one run wrapper every command
// goes through: parsing, --help, hidden old flag spellings, and Status -> stderr line + exit code.
#ifndef KVSHARD_CLI_COMMAND_H_
#define KVSHARD_CLI_COMMAND_H_

#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "cli/flags.h"
#include "core/status.h"

namespace kvshard::cli {

// One subcommand. Flags are declared once, typed (cli/flags.h), with their defaults and ranges; Run gets
// them parsed and writes its result to `out`.
struct Command {
  std::string name;      // "place"
  std::string summary;   // one line for `kvshard --help`
  std::string synopsis;  // usage after "kvshard <name> ", one line per form ("\n" between forms)
  void (*declare_flags)(po::options_description& flags);
  Status (*run)(const Flags& flags, std::ostream& out);
  // Hidden old spellings still accepted, {old, new}: {"rank", "shard-rank"} lets --rank stand for
  // --shard-rank; errors then name the spelling the user typed.
  std::vector<std::pair<std::string, std::string>> aliases = {};
  // The flag a bare argument fills ("trace" lets `kvshard replay FILE` stand for --trace FILE); empty: none.
  std::string positional = {};
  // The list flag the bare arguments after the first fill (`kvshard replay A B C`: B and C); empty: one at most.
  std::string positional_rest = {};
};

// Runs `command` on its arguments (after the command name): exit status 0 ok, 1 mismatch, 2 bad input or
// usage, 3 GPU/environment failure; an error is one line on `err`. `in` is what "-" reads.
int RunCommand(const Command& command, const std::vector<std::string>& args, std::istream& in, std::ostream& out,
               std::ostream& err);

// `text` with control bytes escaped (newline as \\n, NUL as \\x00), so input text quoted into a message stays on one
// line, and each byte outside a well-formed UTF-8 sequence escaped as \\xNN, so the line is valid UTF-8 (a log
// collector or terminal shows it as written); well-formed UTF-8 passes through.
std::string EscapeForOneLine(const std::string& text);

// Prints "kvshard: error: <message>" ("kvshard: mismatch: ..." for kMismatch) on `err`; returns the exit code.
int Fail(const Status& status, std::ostream& err);

// The end of a run: flushes and closes standard output (std::cout and stdio's stdout) and, when a write or the
// close failed (a full disk, a closed descriptor, a broken pipe), reports "standard output: write failed: <why>"
// on `err` and returns 3 unless `rc` already says the run failed. A descriptor closed by the caller is an error
// only when something was written to it (as GNU's close_stdout).
int FinishStandardOutput(int rc, std::ostream& err);

// Out of memory is one line, exit 3, never std::terminate: sets aside a reserve (16 MiB) that the first failed
// allocation releases (std::set_new_handler) so the allocation is retried; a failure after that prints
// "kvshard: error: out of memory: ..." and exits 3 at once (a bad_alloc thrown in a destructor, as nlohmann's
// JSON allocates while destroying an array, would terminate). For the kvshard binary only (main.cc).
void InstallMemoryReserve();

// "kvshard <name> <form>" for each form of the synopsis, the second and later ones after "\n" + `indent`; a synopsis
// line that starts with spaces continues the form above it (aligned under its flags).
std::string UsageLines(const Command& command, const std::string& indent);

// Prints the usage of `command` with its typed flags (what `kvshard <name> --help` shows).
void PrintCommandHelp(const Command& command, std::ostream& out);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_COMMAND_H_

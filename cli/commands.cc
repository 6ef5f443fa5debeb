// The command table, top-level help and --version.
#include "cli/commands.h"

#include <ostream>

#include "cli/cli_util.h"

namespace kvshard::cli {
namespace {

void PrintUsage(std::ostream& os) {
  os << "usage: kvshard <command> [flags]   (kvshard <command> --help: its typed flags and defaults)\n"
     << "       kvshard --version | --help\n\ncommands:\n";
  for (const Command& c : CommandTable()) {
    os << "  " << c.name << std::string(c.name.size() < 13 ? 13 - c.name.size() : 1, ' ') << c.summary << "\n";
    os << "      " << UsageLines(c, "      ") << "\n";
  }
  os << "\nexit status: 0 ok, 1 verification mismatch, 2 bad input or usage, 3 GPU/CUDA/NCCL unavailable or failed\n"
     << "\"-\" as a file name reads standard input. GPU backend: " << GpuBuildText() << "\n";
}

}  // namespace

const std::vector<Command>& CommandTable() {
  static const std::vector<Command> table = {
      PlaceCommand(),  AllocCommand(), GatherPlanCommand(), SplitCommand(),     RerangeCommand(),
      ReplayCommand(), GenCommand(),   SimulateCommand(),   CalibrateCommand(), BenchCommand()};
  return table;
}

int Dispatch(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  if (args.empty()) return Fail(InvalidArgument("command: required (see kvshard --help)"), err);
  const std::string& name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintUsage(out);
    return 0;
  }
  if (name == "--version") {
    out << "kvshard " << kVersion << "\nGPU backend: " << GpuBuildText() << "\n";
    return 0;
  }
  for (const Command& c : CommandTable()) {
    if (name == c.name) return RunCommand(c, std::vector<std::string>(args.begin() + 1, args.end()), in, out, err);
  }
  return Fail(InvalidArgument("unknown command ", QuoteInput(name, '\''), " (see kvshard --help)"), err);
}

}  // namespace kvshard::cli

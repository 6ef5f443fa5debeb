// kvshard: model, simulate and verify KV-cache sharding across GPUs (SGLang page-interleaved KV, CP splits).
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"

namespace kvshard::cli {
namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

const Command kCommands[] = {
    {"place", "map token slots to (owner rank, local row) under page-interleaved sharding", RunPlace},
    {"bench", "GPU benchmarks with correctness checks, against limits measured in the same run", RunBench},
    {"split", "CP split plans: in-seq zigzag batch plan, round-robin q lengths, token-balanced split", RunSplit},
    {"rerange", "where each row of the CP batch rerange comes from in the padded all-gather", RunRerange},
    {"alloc", "replay an allocator script through the rotated owner-classed allocator", RunAlloc},
    {"gather-plan", "build a batch's owner-major gather plan and translate slots to scratch rows", RunGatherPlan},
};

void PrintUsage(std::ostream& os) {
  os << "usage: kvshard <command> [flags]   (kvshard <command> --help for its flags)\n\ncommands:\n";
  for (const Command& c : kCommands) os << "  " << c.name << std::string(14 - std::strlen(c.name), ' ') << c.summary << "\n";
  os << "\nexit status: 0 ok, 1 verification mismatch, 2 bad input or usage, 3 GPU/CUDA/NCCL unavailable or failed\n"
     << "GPU backend: " << (GpuBuilt() ? "built (sm_90)" : "not built (no CUDA toolkit at build time)") << "\n";
}

}  // namespace
}  // namespace kvshard::cli

int main(int argc, char** argv) {
  using namespace kvshard::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    PrintUsage(std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(args);
  }
  return Fail(kvshard::InvalidArgument("unknown command '", name, "' (see kvshard --help)"));
}

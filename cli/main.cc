// kvshard: model, simulate and verify KV-cache sharding across GPUs (SGLang page-interleaved KV, CP splits).
// Dispatches through the command table (cli/commands.h).
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  kvshard::cli::InstallMemoryReserve();
  const int rc =
      kvshard::cli::Dispatch(std::vector<std::string>(argv + 1, argv + argc), std::cin, std::cout, std::cerr);
  return kvshard::cli::FinishStandardOutput(rc, std::cerr);
}

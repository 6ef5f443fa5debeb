// --max-memory: the flag over core/memory_budget.h's checks, and the --calibration file read under it.
#ifndef KVSHARD_CLI_MEMORY_LIMIT_H_
#define KVSHARD_CLI_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "core/memory_budget.h"
#include "core/status.h"
#include "sim/calibration.h"

namespace kvshard::cli {

// Declares --max-memory BYTES on a command (default kDefaultMaxMemory, core/memory_budget.h).
void DeclareMaxMemoryFlag(po::options_description& flags);

// The --max-memory value of a command that declared it.
int64_t MaxMemory(const Flags& flags);

// The file of --calibration, read whole under --max-memory (32 B per byte) and parsed (sim/calibration.h).
StatusOr<sim::Calibration> ReadCalibrationFlag(const Flags& flags);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_MEMORY_LIMIT_H_

// --max-memory: the flag over core/memory_budget.h's checks, and the input files read under it (--calibration,
// --workload).
#ifndef KVSHARD_CLI_MEMORY_LIMIT_H_
#define KVSHARD_CLI_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "core/memory_budget.h"
#include "core/status.h"
#include "core/workload.h"
#include "sim/calibration.h"

namespace kvshard::cli {

// Declares --max-memory BYTES on a command (default kDefaultMaxMemory, core/memory_budget.h).
void DeclareMaxMemoryFlag(po::options_description& flags);

// The --max-memory value of a command that declared it.
int64_t MaxMemory(const Flags& flags);
// The memory budget of --max-memory: what every input-sized table of the command is checked against.
MemoryBudget Budget(const Flags& flags);

// The --calibration value naming the calibration built into kvshard (testdata/calibration/h200.json).
inline constexpr char kBuiltinCalibrationName[] = "h200";
// The value that turns calibration off (simulate's physical limits).
inline constexpr char kNoCalibrationName[] = "none";

// The file of --calibration, read whole under --max-memory (32 B per byte) and parsed (sim/calibration.h); the
// value kBuiltinCalibrationName reads the built-in H200 calibration instead.
StatusOr<sim::Calibration> ReadCalibrationFlag(const Flags& flags);

// The workload of --workload in --format, read under --max-memory (line and held-request limits); errors name
// --workload and the line.
StatusOr<Workload> ReadWorkloadFlag(const Flags& flags);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_MEMORY_LIMIT_H_

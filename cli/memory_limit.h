// --max-memory: the commands that allocate in proportion to their inputs check the bytes an input implies
// against this cap before allocating, so a huge (but in-range) size is exit 2 with one line, never bad_alloc.
#ifndef KVSHARD_CLI_MEMORY_LIMIT_H_
#define KVSHARD_CLI_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "core/line_reader.h"
#include "core/status.h"
#include "core/workload.h"
#include "sim/calibration.h"

namespace kvshard::cli {

// Default --max-memory: 4 GiB.
inline constexpr int64_t kDefaultMaxMemory = int64_t{1} << 32;

// Declares --max-memory BYTES on a command.
void DeclareMaxMemoryFlag(po::options_description& flags);

// "4 GiB", "1.5 MiB", "512 B" (binary units, one decimal unless exact).
std::string FormatBytes(long double bytes);

// OK iff count * bytes_per <= max_memory; else InvalidArgument "<field>: the <what> would need <bytes>
// (<count> <unit> x <bytes_per> B), over --max-memory <max>". Overflow-safe.
Status CheckMemory(const std::string& field, const std::string& what, int64_t count, const std::string& unit,
                   int64_t bytes_per, int64_t max_memory);

// One part of an estimate: `count` `unit` of `bytes_per` bytes each (e.g. 40 segments x 192 B).
struct MemoryTerm {
  int64_t count;
  std::string unit;
  int64_t bytes_per;
};

// OK iff the terms add up to at most max_memory; else InvalidArgument "<field>: the <what> would need <bytes>
// (<count> <unit> x <bytes_per> B + ...), over --max-memory <max>" (terms of count 0 left out). Overflow-safe.
Status CheckMemory(const std::string& field, const std::string& what, const std::vector<MemoryTerm>& terms,
                   int64_t max_memory);

// a * b and a + b for non-negative sizes, saturating at 2^62 (so estimates never overflow).
int64_t SatMul(int64_t a, int64_t b);
int64_t SatAdd(int64_t a, int64_t b);

// The --max-memory value of a command that declared it.
int64_t MaxMemory(const Flags& flags);

// Bytes a line of a JSON Lines or CSV input needs, held and parsed, per byte of the line.
inline constexpr int64_t kLineBytesPerByte = 32;
// Bytes a workload request kept in memory needs (WorkloadRequest), and each of its block hashes.
inline constexpr int64_t kHeldRequestBytes = 48, kHeldHashBytes = 8;

// Holds each line of a trace or workload to max_memory as it is read: "record: the line held in memory would need
// <bytes> (<n> line bytes x 32 B), over --max-memory <max>".
LineCheck LineMemoryCheck(int64_t max_memory);

// The file of --calibration, read whole under --max-memory (32 B per byte) and parsed (sim/calibration.h).
StatusOr<sim::Calibration> ReadCalibrationFlag(const Flags& flags);

// The whole-workload limits under max_memory: each line as above, and the requests kept ("requests: the workload
// held in memory would need ...").
WorkloadLimits WorkloadMemoryLimits(int64_t max_memory);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_MEMORY_LIMIT_H_

// Memory estimates checked before allocating: every path that allocates in proportion to its input (a command's
// tables, a trace's records, a workload's lines) adds up what the input implies and compares it with the cap
// (the CLI's --max-memory), so a huge but in-range size is one clear error, never bad_alloc.
#ifndef KVSHARD_CORE_MEMORY_BUDGET_H_
#define KVSHARD_CORE_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/line_reader.h"
#include "core/status.h"
#include "core/workload.h"

namespace kvshard {

// The default cap: 4 GiB.
inline constexpr int64_t kDefaultMaxMemory = int64_t{1} << 32;

// "4 GiB", "1.5 MiB", "512 B" (binary units, one decimal unless exact).
std::string FormatBytes(long double bytes);

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
// The one-term form: count * bytes_per <= max_memory.
Status CheckMemory(const std::string& field, const std::string& what, int64_t count, const std::string& unit,
                   int64_t bytes_per, int64_t max_memory);

// a * b and a + b for non-negative sizes, saturating at 2^62 (so estimates never overflow).
int64_t SatMul(int64_t a, int64_t b);
int64_t SatAdd(int64_t a, int64_t b);

// Bytes a line of a JSON Lines or CSV input needs, held and parsed, per byte of the line.
inline constexpr int64_t kLineBytesPerByte = 32;
// Bytes a workload request kept in memory needs (WorkloadRequest), and each of its block hashes.
inline constexpr int64_t kHeldRequestBytes = 48, kHeldHashBytes = 8;

// Holds each line of a trace or workload to max_memory as it is read: "record: the line held in memory would need
// <bytes> (<n> line bytes x 32 B), over --max-memory <max>".
LineCheck LineMemoryCheck(int64_t max_memory);

// The whole-workload limits under max_memory: each line as above, and the requests kept ("requests: the workload
// held in memory would need ...").
WorkloadLimits WorkloadMemoryLimits(int64_t max_memory);

}  // namespace kvshard

#endif  // KVSHARD_CORE_MEMORY_BUDGET_H_

// Memory estimates checked before allocating: every path that allocates in proportion to its input (a command's
// tables, a trace's records, a workload's lines) adds up what the input implies and compares it with the cap
// (the CLI's --max-memory), so a huge but in-range size is one clear error, never bad_alloc.
#ifndef KVSHARD_CORE_MEMORY_BUDGET_H_
#define KVSHARD_CORE_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/gather_plan.h"
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
// (<count> <unit> x <bytes_per> B + ...), over --max-memory <max>" (terms of count 0 left out; `cap`, where given,
// names the cap instead of "--max-memory <max>"). Overflow-safe.
Status CheckMemory(std::string_view field, std::string_view what, const std::vector<MemoryTerm>& terms,
                   int64_t max_memory, std::string_view cap = {});
// The one-term form: count * bytes_per <= max_memory.
Status CheckMemory(std::string_view field, std::string_view what, int64_t count, std::string_view unit,
                   int64_t bytes_per, int64_t max_memory, std::string_view cap = {});

// a * b and a + b for non-negative sizes, saturating at 2^62 (so estimates never overflow).
int64_t SatMul(int64_t a, int64_t b);
int64_t SatAdd(int64_t a, int64_t b);

// Bytes a line of a JSON Lines or CSV input needs, held and parsed, per byte of the line.
inline constexpr int64_t kLineBytesPerByte = 32;
// Bytes a workload request kept in memory needs (WorkloadRequest), and each of its block hashes.
inline constexpr int64_t kHeldRequestBytes = 48, kHeldHashBytes = 8;

// Holds each line of a trace or workload to max_memory as it is read: "record: the line held in memory would need
// <bytes> (<n> line bytes x 32 B), over --max-memory <max>".
LineCheck LineMemoryCheck(int64_t max_memory, std::string cap = {});

// The whole-workload limits under max_memory: each line as above, and the requests kept ("requests: the workload
// held in memory would need ...").
WorkloadLimits WorkloadMemoryLimits(int64_t max_memory, std::string cap = {});

// The --max-memory cap and the estimate of every table an input sizes: the CLI commands and the replay records that
// mirror them consult one object, with one figure per kind of table, before allocating. Each check is OK or
// InvalidArgument "<field>: the <what> would need <bytes> (<terms>), over --max-memory <max>".
class MemoryBudget {
 public:
  MemoryBudget() = default;  // kDefaultMaxMemory
  explicit MemoryBudget(int64_t max_memory) : max_memory_(max_memory) {}

  // The cap in bytes.
  int64_t max_memory() const { return max_memory_; }

  // A `parts`-th of this cap, for one of `parts` tasks that run at once (each checks against its share, so together
  // they stay within the cap); its refusals name the split: "over --max-memory 4 GiB / --jobs 4 = 1 GiB" (`by`
  // "--jobs"). One part is this budget.
  MemoryBudget Share(int parts, std::string_view by) const;

  // The terms against the cap.
  Status Check(const std::string& field, const std::string& what, const std::vector<MemoryTerm>& terms) const;
  Status Check(const std::string& field, const std::string& what, int64_t count, const std::string& unit,
               int64_t bytes_per) const;

  // The in-seq split plan of `batch` requests over cp_size ranks (2 * cp_size segments each), with its JSON when
  // `json` ("split plan and its JSON").
  Status SplitPlan(const std::string& field, int64_t batch, int64_t cp_size, bool json) const;
  // The split plan of `batch` requests and their page compute owners (`pages` extent pages: TotalPages).
  Status PageOwners(const std::string& field, int64_t batch, int64_t pages, int64_t cp_size) const;
  // The direct-write locs of `rows` out_cache_loc rows (split copies and their JSON).
  Status DirectWriteLocs(const std::string& field, int64_t rows) const;
  // The round-robin split of `tokens` tokens (TotalTokens): one bs_idx row per token of one rank.
  Status RoundRobinSplit(const std::string& field, int64_t tokens, int64_t cp_size) const;
  // The rerange plan of `batch` requests of `tokens` tokens; with `source_rows`, its source rows as a list and JSON
  // (replay's answer), and with `device_rows`, the GPU path's row buffers.
  Status Rerange(const std::string& field, int64_t batch, int64_t tokens, int64_t page_size, int64_t cp_size,
                 bool source_rows, bool device_rows) const;
  // The gather plan of a batch the model accepts (a batch it refuses without allocating is left to its error),
  // with a device copy when `device` and its JSON when `json`.
  Status GatherPlan(const std::string& field, const ExtendBatch& batch, bool device, bool json) const;
  // The placement of `slots` slots, with their JSON when `json`.
  Status Placement(const std::string& field, int64_t slots, bool json) const;
  // `values` int64 values computed into a list and answered as JSON (a padded or selected tensor).
  Status ValueList(const std::string& field, const std::string& what, int64_t values) const;

  // Bounds each line of a trace or workload as it is read ("record: the line held in memory would need ...").
  LineCheck Lines() const;
  // The whole-workload limits: each line as Lines(), and the requests kept.
  WorkloadLimits Workload() const;

 private:
  int64_t max_memory_ = kDefaultMaxMemory;
  std::string cap_;  // how a refusal names the cap (Share); empty: "--max-memory <max_memory_>"
};

// The sum of the positive lengths and the pages they span (ceil per length), saturating at 2^62.
int64_t TotalTokens(const std::vector<int64_t>& lens);
int64_t TotalPages(const std::vector<int64_t>& lens, int64_t page_size);
// batch * 2 * cp_size: the segments of a CP plan, saturating.
int64_t CpSegments(int64_t batch, int64_t cp_size);

}  // namespace kvshard

#endif  // KVSHARD_CORE_MEMORY_BUDGET_H_

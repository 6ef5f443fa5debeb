// Readers for recorded serving workloads (docs/workloads.md): Mooncake and Qwen/Bailian JSON Lines, the Azure LLM
// inference and BurstGPT CSVs. Every line is validated; errors are "line N: <field>: <what>" (InvalidArgument).
#ifndef KVSHARD_CORE_WORKLOAD_H_
#define KVSHARD_CORE_WORKLOAD_H_

#include <cstdint>
#include <iosfwd>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/line_reader.h"
#include "core/status.h"

namespace kvshard {

// The file formats; kAuto detects one from the first non-blank line.
enum class WorkloadFormat { kAuto, kMooncake, kAzure, kBurstGpt, kQwen };

// Parses "mooncake", "azure", "burstgpt", "qwen" or "auto".
StatusOr<WorkloadFormat> ParseWorkloadFormat(const std::string& name);
// The name ParseWorkloadFormat reads back.
const char* WorkloadFormatName(WorkloadFormat format);

// Tokens per hash id of the formats that carry prefix blocks.
inline constexpr int64_t kMooncakeBlockTokens = 512;
inline constexpr int64_t kQwenBlockTokens = 16;
// Largest input or output length accepted, in tokens (2^31).
inline constexpr int64_t kMaxWorkloadTokens = int64_t{1} << 31;
// Largest arrival time accepted, in microseconds after the first request (10^15 us, about 31.7 years).
inline constexpr int64_t kMaxWorkloadArrivalUs = 1'000'000'000'000'000;

// One request: when it arrives, how long its prompt and answer are, and its prompt's prefix blocks.
struct WorkloadRequest {
  int64_t arrival_us = 0;     // microseconds after the first request (non-decreasing)
  int64_t input_tokens = 0;   // prompt length, in [1, kMaxWorkloadTokens] (a reader refuses 0)
  int64_t output_tokens = 0;  // generated length, in [0, kMaxWorkloadTokens]
  // One id per block of block_tokens prompt tokens (the last may be partial); equal ids are the same content.
  // Empty for formats without prefix information.
  std::vector<int64_t> block_hashes;
};

// A whole workload in memory.
struct Workload {
  WorkloadFormat format = WorkloadFormat::kAuto;  // the format read (never kAuto)
  int64_t block_tokens = 0;                       // 512 (Mooncake), 16 (Qwen), 0 (no prefix information)
  std::vector<WorkloadRequest> requests;          // in arrival order, at least one
};

// Reads a workload one request at a time (memory flat in workload length); blank lines are skipped.
class WorkloadReader {
 public:
  // Reads up to the first non-blank line: detects the format for kAuto and checks a CSV header. `in` must
  // outlive the reader; `check` bounds each line as it is read (an error there is "line N: ...").
  static StatusOr<WorkloadReader> Open(std::istream* in, WorkloadFormat format, LineCheck check = {});

  // The format being read (never kAuto).
  WorkloadFormat format() const { return format_; }
  // Tokens per block hash: kMooncakeBlockTokens, kQwenBlockTokens, or 0 when the format has no prefix blocks.
  int64_t block_tokens() const;
  // The 1-based line of the last request read (or of the header).
  int64_t line() const { return line_; }

  // Reads the next request into *request; false after the last one. A workload without any request is an
  // error. After an error, every later call returns the same error.
  StatusOr<bool> Next(WorkloadRequest* request);

 private:
  WorkloadReader(std::istream* in, WorkloadFormat format, LineCheck check)
      : in_(in), format_(format), check_(std::move(check)) {}
  StatusOr<bool> NextLine();
  Status ParseJsonRecord(WorkloadRequest* request);
  Status ParseCsvRecord(WorkloadRequest* request);
  Status SetArrival(int64_t time_us, const std::string& field, const std::string& as_written, WorkloadRequest* request);

  std::istream* in_;
  WorkloadFormat format_;
  LineCheck check_;
  int64_t line_ = 0;
  std::string text_;
  bool pending_ = false;  // text_ holds a record that Open read but Next has not parsed yet
  int64_t requests_ = 0;
  int64_t first_us_ = 0;
  int64_t previous_us_ = 0;
  std::string previous_as_written_;  // the previous request's timestamp as the file writes it
  Status error_;
};

// Bounds on what reading a whole workload holds in memory.
struct WorkloadLimits {
  LineCheck line;  // each line as it is read (core/line_reader.h)
  // The requests kept so far and their block hashes, checked each kHeldCheckRequests requests and at the end.
  std::function<Status(int64_t requests, int64_t block_hashes)> held;
};

// The requests ReadWorkload keeps between two calls of WorkloadLimits::held.
inline constexpr int64_t kHeldCheckRequests = 4096;

// Reads a whole workload (kAuto: detected from the first non-blank line); a limit's error is "line N: ...".
StatusOr<Workload> ReadWorkload(std::istream& in, WorkloadFormat format, const WorkloadLimits& limits = {});

}  // namespace kvshard

#endif  // KVSHARD_CORE_WORKLOAD_H_

// Fuzz target: the workload readers (core/workload.h): byte 0 picks the format (auto, mooncake, azure,
// burstgpt, qwen), the rest is the file. Oracle: no crash or sanitizer report; an accepted workload keeps the
// documented limits (arrivals from 0, never decreasing, <= 10^15 us; lengths in [0, 2^31]; one hash per block);
// an error names its line, stays one line and repeats on the next call; small accepted workloads go through
// `kvshard simulate`, which keeps the bad-input contract.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/workload.h"
#include "fuzz/cli_check.h"
#include "fuzz/fuzz_util.h"

namespace kvshard::fuzz {
namespace {

constexpr WorkloadFormat kFormats[] = {WorkloadFormat::kAuto, WorkloadFormat::kMooncake, WorkloadFormat::kAzure,
                                       WorkloadFormat::kBurstGpt, WorkloadFormat::kQwen};

void CheckError(const Status& status) {
  const std::string& m = status.message();
  FUZZ_ASSERT(status.code() == StatusCode::kInvalidArgument, "workload error code: ", status.ToString());
  FUZZ_ASSERT(m.rfind("line ", 0) == 0, "workload error without its line: ", m);
  for (const char c : m) FUZZ_ASSERT(static_cast<unsigned char>(c) >= 0x20, "control byte in the message: ", m);
}

void Check(WorkloadFormat format, const std::string& text) {
  std::istringstream in(text);
  StatusOr<WorkloadReader> reader = WorkloadReader::Open(&in, format);
  if (!reader.ok()) {
    CheckError(reader.status());
    return;
  }
  FUZZ_ASSERT(reader->format() != WorkloadFormat::kAuto, "the detected format is never auto");
  FUZZ_ASSERT(format == WorkloadFormat::kAuto || reader->format() == format, "the format asked for is read");
  const int64_t block = reader->block_tokens();
  WorkloadRequest r;
  int64_t requests = 0, previous = 0, tokens = 0;
  while (true) {
    const StatusOr<bool> more = reader->Next(&r);
    if (!more.ok()) {
      CheckError(more.status());
      const StatusOr<bool> again = reader->Next(&r);
      FUZZ_ASSERT(!again.ok() && again.status().message() == more.status().message(), "an error repeats");
      return;
    }
    if (!*more) break;
    FUZZ_ASSERT(requests > 0 || r.arrival_us == 0, "the first request arrives at 0, got ", r.arrival_us);
    FUZZ_ASSERT(r.arrival_us >= previous && r.arrival_us <= kMaxWorkloadArrivalUs, "arrival ", r.arrival_us, " after ",
                previous);
    FUZZ_ASSERT(r.input_tokens >= 0 && r.input_tokens <= kMaxWorkloadTokens, "input_tokens ", r.input_tokens);
    FUZZ_ASSERT(r.output_tokens >= 0 && r.output_tokens <= kMaxWorkloadTokens, "output_tokens ", r.output_tokens);
    if (block == 0) {
      FUZZ_ASSERT(r.block_hashes.empty(), "hashes in a format without prefix blocks");
    } else {
      FUZZ_ASSERT(static_cast<int64_t>(r.block_hashes.size()) == (r.input_tokens + block - 1) / block,
                  r.block_hashes.size(), " hashes for ", r.input_tokens, " tokens");
    }
    previous = r.arrival_us;
    tokens += r.input_tokens + r.output_tokens;
    ++requests;
  }
  FUZZ_ASSERT(requests > 0, "an empty workload is an error");
  // The simulator on small workloads (its time grows with the tokens).
  if (requests <= 64 && tokens <= (int64_t{1} << 20)) {
    RunCliChecked({"simulate", "-", "--format", WorkloadFormatName(format), "--json", "--quiet", "--shard-size", "4",
                   "--page-size", "16", "--cache-tokens", "4096", "--layers", "2"},
                  text);
  }
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  kvshard::fuzz::Check(kvshard::fuzz::kFormats[data[0] % 5],
                       std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}

// --max-memory and the one-line refusal the size checks print.
#include "cli/memory_limit.h"

#include <sstream>
#include <utility>

namespace kvshard::cli {

void DeclareMaxMemoryFlag(po::options_description& flags) {
  flags.add_options()("max-memory", Int(1, int64_t{1} << 50)->default_value(kDefaultMaxMemory),
                      "bytes this command may allocate for its input-sized tables (default 4 GiB); larger inputs "
                      "are refused (exit 2) before anything is allocated");
}

int64_t MaxMemory(const Flags& flags) { return flags.Int("max-memory"); }

MemoryBudget Budget(const Flags& flags) { return MemoryBudget(MaxMemory(flags)); }

extern const char kBuiltinH200Calibration[];  // builtin_calibration.cc, generated (cli/BUILD.bazel)

StatusOr<sim::Calibration> ReadCalibrationFlag(const Flags& flags) {
  std::string text;
  if (flags.String("calibration") == kBuiltinCalibrationName) {
    text = kBuiltinH200Calibration;
  } else {
    KVSHARD_ASSIGN_OR_RETURN(text, flags.ReadText("calibration", kLineBytesPerByte));
  }
  std::istringstream in(text);
  StatusOr<sim::Calibration> read = sim::ReadCalibration(in);
  if (!read.ok()) return InvalidArgument("--calibration: ", read.status().message());
  return read;
}

StatusOr<Workload> ReadWorkloadFlag(const Flags& flags) {
  KVSHARD_ASSIGN_OR_RETURN(const WorkloadFormat format, ParseWorkloadFormat(flags.String("format")));
  Workload workload;
  KVSHARD_RETURN_IF_ERROR(flags.WithInput("workload", [&](std::istream& in) -> Status {
    StatusOr<Workload> w = ReadWorkload(in, format, Budget(flags).Workload());
    if (!w.ok()) return InvalidArgument("--workload: ", w.status().message());
    workload = std::move(*w);
    return Status::Ok();
  }));
  return workload;
}

}  // namespace kvshard::cli

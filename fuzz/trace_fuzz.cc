// Fuzz target: the trace reader (core/trace.h) and `kvshard replay` on the trace. Oracle: no crash or sanitizer
// report; record line numbers increase and a reader error names its line; replay keeps the bad-input
// contract, and --impl fast (cpu_fast/'s planners) prints and exits exactly as the reference does.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "replay/replayer.h"
#include "core/trace.h"
#include "fuzz/cli_check.h"
#include "fuzz/fuzz_util.h"

namespace kvshard::fuzz {
namespace {

void CheckReader(const std::string& text) {
  std::istringstream in(text);
  TraceReader reader(&in);
  if (!reader.ReadHeader(replay::TraceHeaderKeys()).ok()) return;
  TraceRecord record;
  int64_t line = 1;
  for (int records = 0; records < 100000; ++records) {
    const StatusOr<bool> more = reader.Next(&record);
    if (!more.ok()) {
      FUZZ_ASSERT(more.status().message().rfind("line ", 0) == 0,
                  "reader error without its line: ", more.status().message());
      return;
    }
    if (!*more) return;
    FUZZ_ASSERT(record.line > line, "record line ", record.line, " after line ", line);
    FUZZ_ASSERT(record.json.is_object() && record.json.contains("op"), "a record is an object with op");
    line = record.line;
  }
}

void Check(const std::string& text) {
  CheckReader(text);
  const CliRun ref = RunCliChecked({"replay", "-", "--json"}, text);
  const CliRun fast = RunCliChecked({"replay", "-", "--json", "--impl", "fast"}, text);
  FUZZ_ASSERT(SameRun(ref, fast), "replay --impl fast differs from ref: exit ", ref.exit_code, " vs ", fast.exit_code,
              ": ", ref.err, " / ", fast.err);
  RunCliChecked({"replay", "-", "--keep-going"}, text);
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvshard::fuzz::Check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
